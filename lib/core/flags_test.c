/* flags_test.c - flag parsing: every kind, errors, pass-through.
 * bazel test //lib/core:flags_test */
#include <stdio.h>
#include <string.h>

#include "lib/core/flags.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"

static const char *const colors[] = {"red", "green", NULL};

int main(void)
{
    int b = 0, i = 5, color = 0, help = 0;
    long long l = 0;
    double d = 1.5;
    const char *s = "x";
    size_t sz = 0;
    tb_flag flags[] = {
        {"pin", TB_FLAG_BOOL, &b, "pin", NULL},
        {"workers", TB_FLAG_INT, &i, "w", NULL},
        {"steps", TB_FLAG_LONG, &l, "s", NULL},
        {"lr", TB_FLAG_DOUBLE, &d, "lr", NULL},
        {"out-dir", TB_FLAG_STRING, &s, "dir", NULL},
        {"mem-limit", TB_FLAG_SIZE, &sz, "m", NULL},
        {"color", TB_FLAG_CHOICE, &color, "c", colors},
    };
    size_t n = sizeof flags / sizeof flags[0];
    char *argv1[] = {"prog", "--pin", "--workers=3", "--steps", "12", "--lr=0.25", "pos",
                     "--out-dir=/tmp/x", "--mem-limit=2G", "--color=green",
                     "--benchmark_filter=abc", NULL};
    int argc = 11;
    CHECK(tb_flags_parse(flags, n, &argc, argv1, "benchmark_", &help) == TB_OK, "parse");
    CHECK(b == 1 && i == 3 && l == 12 && d == 0.25 && !strcmp(s, "/tmp/x"), "values");
    CHECK(sz == 2ull << 30, "size %zu", sz);
    CHECK(color == 1, "choice");
    CHECK(argc == 3 && !strcmp(argv1[1], "pos") && !strcmp(argv1[2], "--benchmark_filter=abc"),
          "left over argc %d", argc);
    CHECK(!help, "no help");

    char *argv2[] = {"prog", "--no-pin", "--help", NULL};
    argc = 3;
    CHECK(tb_flags_parse(flags, n, &argc, argv2, NULL, &help) == TB_OK && b == 0 && help,
          "--no-pin and --help");

    char *bad[][3] = {
        {"prog", "--wokers=2", NULL}, {"prog", "--workers=two", NULL},
        {"prog", "--color=blue", NULL}, {"prog", "--mem-limit=lots", NULL},
        {"prog", "--workers", NULL}, {"prog", "--pin=maybe", NULL},
    };
    const char *want[] = {"unknown flag '--wokers=2'", "--workers", "one of red green",
                          "size", "needs a value", "true or false"};
    for (int k = 0; k < 6; k++) {
        argc = 2;
        int rc = tb_flags_parse(flags, n, &argc, bad[k], NULL, &help);
        CHECK(rc == TB_ERR_INVALID, "case %d refused", k);
        CHECK(strstr(tb_error_message(), want[k]) != NULL, "case %d message: %s", k,
              tb_error_message());
        tb_error_clear();
    }
    /* a boolean that may be left to "auto" (--conv-bias): every spelling */
    int tri = TB_FLAG_AUTO;
    tb_flag tf[] = {{"bias", TB_FLAG_BOOL_AUTO, &tri, "bias", NULL}};
    char val[16];
    tb_flag_value_str(&tf[0], val, sizeof val);
    CHECK(!strcmp(val, "auto"), "auto default shows as %s", val);
    const char *spell[] = {"--bias", "--no-bias", "--bias=auto", "--bias=false", "--bias=true"};
    const int want_tri[] = {1, 0, TB_FLAG_AUTO, 0, 1};
    for (int k = 0; k < 5; k++) {
        char *av[] = {"prog", (char *)spell[k], NULL};
        argc = 2;
        tri = k % 2 ? 1 : TB_FLAG_AUTO;
        CHECK(tb_flags_parse(tf, 1, &argc, av, NULL, &help) == TB_OK && tri == want_tri[k],
              "%s gives %d", spell[k], tri);
    }
    tb_flag_value_str(&tf[0], val, sizeof val);
    CHECK(!strcmp(val, "true"), "true shows as %s", val);
    char *av_bad[] = {"prog", "--bias=maybe", NULL};
    argc = 2;
    CHECK(tb_flags_parse(tf, 1, &argc, av_bad, NULL, &help) == TB_ERR_INVALID &&
              strstr(tb_error_message(), "true, false or auto"),
          "--bias=maybe: %s", tb_error_message());
    tb_error_clear();

    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    tb_flags_usage(f, "prog", "does things", flags, n);
    fclose(f);
    CHECK(strstr(buf, "--workers") && strstr(buf, "one of red green"), "usage lists flags");
    printf("%s\n", failures ? "FAILED" : "all flags checks passed");
    return failures != 0;
}
