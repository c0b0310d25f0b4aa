/*
 * flags_fuzz.c - fuzz target for the flag parser (lib/core/flags.h).
 *
 * The input is a command line: arguments separated by NUL bytes, parsed
 * against a table holding one flag of every kind, some with a range. A crash, a sanitizer
 * report, or a broken contract aborts:
 *   - on success argv is compacted, argc did not grow, argv[argc] is NULL,
 *     and every value is within its flag's range (doubles finite);
 *   - every flag's value, printed by tb_flag_value_str and set again with
 *     tb_flag_set, reads back to the same value (except doubles, printed
 *     with %g, and strings, which point into argv);
 *   - on failure the error chain holds a message.
 * Fuzz: tools/fuzz.sh flags. Replayed on its corpus and past crashes by
 * bazel test //fuzz:flags_replay_test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/flags.h"
#include "lib/core/status.h"

#define MAX_ARGS 64

static const char *const colors[] = {"red", "green", "blue", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "flags_fuzz: broken contract: %s\n", what);
        abort();
    }
}

/* f's value printed and parsed again must equal itself. */
static void check_round_trip(const tb_flag *f)
{
    union {
        int i;
        long long ll;
        size_t z;
    } copy;
    char text[512];
    if (f->kind == TB_FLAG_DOUBLE || f->kind == TB_FLAG_DOUBLE_AUTO || f->kind == TB_FLAG_STRING)
        return;
    tb_flag_value_str(f, text, sizeof text);
    tb_flag again = *f;
    again.value = &copy;
    memset(&copy, 0, sizeof copy);
    must(tb_flag_set(&again, text) == TB_OK, "a printed value does not parse");
    switch (f->kind) {
    case TB_FLAG_LONG: must(copy.ll == *(long long *)f->value, "long round trip"); break;
    case TB_FLAG_SIZE: must(copy.z == *(size_t *)f->value, "size round trip"); break;
    default: must(copy.i == *(int *)f->value, "int-like round trip"); break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int b = 0, i = 3, ranged = 4, auto_b = TB_FLAG_AUTO, color = 0, help = 0;
    long long l = 7;
    double d = 0.5, lr = TB_FLAG_UNSET, p = 0.5;
    const char *s = "x";
    size_t z = 1024, mem = 0;
    const tb_flag flags[] = {
        {"bool", TB_FLAG_BOOL, &b, "a boolean", NULL, NULL},
        {"int", TB_FLAG_INT, &i, "an int", NULL, NULL},
        {"threads", TB_FLAG_INT, &ranged, "an int in a range", NULL, TB_RANGE(0, 1024)},
        {"long", TB_FLAG_LONG, &l, "a long long", NULL, NULL},
        {"double", TB_FLAG_DOUBLE, &d, "a double", NULL, NULL},
        {"dropout", TB_FLAG_DOUBLE, &p, "a double in [0, 1)", NULL, TB_RANGE_HALF_OPEN(0, 1)},
        {"lr", TB_FLAG_DOUBLE_AUTO, &lr, "a number > 0 or auto", NULL, TB_RANGE_ABOVE(0)},
        {"string", TB_FLAG_STRING, &s, "a string", NULL, NULL},
        {"bucket-size", TB_FLAG_SIZE, &z, "a size", NULL, NULL},
        {"mem-limit", TB_FLAG_SIZE, &mem, "a size up to 1T", NULL, TB_RANGE(0, 1099511627776.0)},
        {"color", TB_FLAG_CHOICE, &color, "a choice", colors, NULL},
        {"auto", TB_FLAG_BOOL_AUTO, &auto_b, "true, false or auto", NULL, NULL},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];

    /* The arguments, each NUL-terminated, in one copy of the input. */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "fuzz";
    for (char *p = text; argc <= MAX_ARGS && p <= text + size; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;

    int in = argc;
    tb_error_clear();
    int rc = tb_flags_parse(flags, nflags, &argc, argv, "benchmark_", &help);
    if (rc == TB_OK) {
        must(argc >= 1 && argc <= in && argv[argc] == NULL, "argv compacted");
        for (size_t k = 0; k < nflags; k++) {
            check_round_trip(&flags[k]);
            must(tb_flag_check(&flags[k]) == TB_OK, "a parsed value is within its range");
        }
        must(d - d == 0 && p >= 0 && p < 1 && (tb_flag_unset(lr) || lr > 0),
             "doubles are finite and within their ranges");
        must(ranged >= 0 && ranged <= 1024 && mem <= 1099511627776ull, "ranges hold");
        static FILE *devnull;
        if (!devnull)
            devnull = fopen("/dev/null", "w");
        if (devnull)
            tb_flags_usage(devnull, "fuzz", "flags_fuzz", flags, nflags);
    } else {
        must(tb_error_message()[0] != '\0', "a failure says why");
    }
    tb_error_clear();
    free(text);
    return 0;
}
