/*
 * json_fuzz.c - fuzz target for the JSON reader (lib/core/json.h) and the
 * fingerprint loader built on it (lib/report/fingerprint.h), which read
 * what bench:compare, the report and --resume are given.
 *
 * The input is a document, parsed strictly and with TB_JSON_ALLOW_NONFINITE,
 * and loaded as a fingerprint.json. A crash, a sanitizer report, or a broken
 * contract aborts:
 *   - on success every string and key, escaped by tb_json_escape and parsed
 *     again, gives the same bytes; every finite number written by
 *     tb_json_write_number reads back to the same double; an array's or
 *     object's items are all reachable by tb_json_at / tb_json_get;
 *   - on failure the tree is NULL and the error chain says why.
 * Fuzz: tools/fuzz.sh json. Replayed on its corpus and past crashes by
 * bazel test //fuzz:json_replay_test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_files.h"
#include "lib/core/json.h"
#include "lib/core/status.h"
#include "lib/report/fingerprint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "json_fuzz: broken contract: %s\n", what);
        abort();
    }
}

/* s (len bytes, may hold NULs) escaped and parsed again is s. Escaping
 * stops at the first NUL: only that prefix is compared. */
static void check_string(const char *s, size_t len)
{
    size_t n = strnlen(s, len);
    size_t need = tb_json_escape(NULL, 0, s);
    char *quoted = malloc(need + 1);
    must(quoted != NULL, "memory for the escaped string");
    tb_json_escape(quoted, need + 1, s);
    tb_json *back = NULL;
    must(tb_json_parse(quoted, need, 0, &back) == TB_OK, "an escaped string parses");
    must(back->type == TB_JSON_STRING && back->len == n && !memcmp(back->string, s, n),
         "an escaped string reads back to the same bytes");
    tb_json_free(back);
    free(quoted);
}

static void check_number(double v)
{
    if (v != v || v - v != 0) /* NaN, infinities: written as null */
        return;
    char buf[64];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    must(f != NULL && tb_json_write_number(f, v) == TB_OK, "writing a number");
    long n = ftell(f);
    fclose(f);
    tb_json *back = NULL;
    must(tb_json_parse(buf, (size_t)n, 0, &back) == TB_OK, "a written number parses");
    must(back->type == TB_JSON_NUMBER && back->number == v, "a number reads back the same");
    tb_json_free(back);
}

static void walk(const tb_json *v, int depth)
{
    must(depth < 100000, "depth bounded");
    switch (v->type) {
    case TB_JSON_STRING: check_string(v->string, v->len); break;
    case TB_JSON_NUMBER: check_number(v->number); break;
    case TB_JSON_ARRAY:
        for (size_t i = 0; i < v->len; i++) {
            must(tb_json_at(v, i) == &v->items[i], "tb_json_at finds item i");
            walk(&v->items[i], depth + 1);
        }
        must(tb_json_at(v, v->len) == NULL, "tb_json_at past the end is NULL");
        break;
    case TB_JSON_OBJECT:
        for (size_t i = 0; i < v->len; i++) {
            const tb_json *first = tb_json_get(v, v->keys[i]);
            must(first != NULL && first->type == tb_json_get(v, v->keys[i])->type,
                 "tb_json_get finds every key");
            check_string(v->keys[i], strlen(v->keys[i]));
            walk(&v->items[i], depth + 1);
        }
        break;
    default: break;
    }
}

static void parse_one(const uint8_t *data, size_t size, unsigned flags)
{
    tb_json *root = (tb_json *)1;
    tb_error_clear();
    int rc = tb_json_parse((const char *)data, size, flags, &root);
    if (rc != TB_OK) {
        must(root == NULL, "a failed parse gives NULL");
        must(tb_error_message()[0] != '\0', "a failure says why");
        tb_error_clear();
        return;
    }
    walk(root, 0);
    tb_json_free(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_one(data, size, 0);
    parse_one(data, size, TB_JSON_ALLOW_NONFINITE);
    static tb_fingerprint fp;
    tb_error_clear();
    if (tb_fingerprint_load(tb_fuzz_write("fingerprint.json", data, size), &fp) == TB_OK) {
        must(fp.n >= 0 && fp.n <= TB_FP_MAX_ENTRIES, "entry count within the table");
        for (int i = 0; i < fp.n; i++)
            must(tb_fingerprint_get(&fp, fp.entries[i].key) != NULL, "every key found");
    }
    tb_error_clear();
    return 0;
}
