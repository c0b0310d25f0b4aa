/*
 * json_test.c - checks the strict JSON reader on valid and malformed
 * documents (including the line/column of errors) and the writer helpers.
 * Run: bazel test //lib/core:json_test
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream, mkstemp, fdopen */

#include "lib/core/json.h"
#include "lib/core/testing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tb_json *parse_ok(const char *text, unsigned flags)
{
    tb_json *v = NULL;
    tb_error_clear();
    int rc = tb_json_parse(text, strlen(text), flags, &v);
    if (rc != TB_OK) {
        CHECK(0, "expected %s to parse", text);
        tb_error_print(stdout);
    }
    return v;
}

/* Expects text to fail and the message to contain want (e.g. "line 2, column 5"). */
static void parse_bad(const char *text, unsigned flags, const char *want)
{
    tb_json *v = (tb_json *)1;
    tb_error_clear();
    int rc = tb_json_parse(text, strlen(text), flags, &v);
    CHECK(rc == TB_ERR_DATA, "expected %s to fail with TB_ERR_DATA, got %d", text, rc);
    CHECK(v == NULL, "out not NULL after failure on %s", text);
    const char *msg = tb_error_message();
    CHECK(strstr(msg, want) != NULL, "error for %s is \"%s\", wanted \"%s\"", text, msg, want);
    printf("  malformed %-26s -> %s\n", text, msg);
}

static void test_valid(void)
{
    printf("valid documents: scalars, nesting, lookups\n");
    const char *doc =
        "{\n"
        "  \"name\": \"BM_x/manual_time\",\n"
        "  \"n\": -12.5e-1,\n"
        "  \"zero\": 0,\n"
        "  \"ok\": true, \"bad\": false, \"none\": null,\n"
        "  \"list\": [1, [2, 3], {\"k\": \"v\"}, []],\n"
        "  \"empty\": {}\n"
        "}\n";
    tb_json *v = parse_ok(doc, 0);
    if (!v)
        return;
    CHECK(v->type == TB_JSON_OBJECT && v->len == 8, "root is an object of 8, got %s of %zu",
          tb_json_type_name(v->type), v->len);
    CHECK(strcmp(tb_json_get_string(v, "name", ""), "BM_x/manual_time") == 0, "name");
    CHECK(tb_json_get_number(v, "n", 0) == -1.25, "n = %g", tb_json_get_number(v, "n", 0));
    CHECK(tb_json_get_number(v, "zero", 7) == 0, "zero");
    CHECK(tb_json_get_bool(v, "ok", 0) == 1 && tb_json_get_bool(v, "bad", 1) == 0, "bools");
    CHECK(tb_json_get(v, "none")->type == TB_JSON_NULL, "null");
    CHECK(tb_json_get(v, "missing") == NULL, "missing key gives NULL");
    CHECK(tb_json_get_number(v, "name", 42) == 42, "wrong type gives the default");
    const tb_json *list = tb_json_get(v, "list");
    CHECK(list && list->type == TB_JSON_ARRAY && list->len == 4, "list of 4");
    CHECK(tb_json_at(list, 0)->number == 1, "list[0]");
    CHECK(tb_json_at(tb_json_at(list, 1), 1)->number == 3, "list[1][1]");
    CHECK(strcmp(tb_json_get_string(tb_json_at(list, 2), "k", ""), "v") == 0, "list[2].k");
    CHECK(tb_json_at(list, 3)->len == 0 && tb_json_at(list, 4) == NULL, "empty array, out of range");
    CHECK(tb_json_get(v, "empty")->type == TB_JSON_OBJECT && tb_json_get(v, "empty")->len == 0,
          "empty object");
    tb_json_free(v);

    v = parse_ok("  42  ", 0);
    CHECK(v && v->type == TB_JSON_NUMBER && v->number == 42, "bare number with whitespace");
    tb_json_free(v);
    v = parse_ok("1.5E+3", 0);
    CHECK(v && v->number == 1500, "exponent with sign");
    tb_json_free(v);
}

static void test_strings(void)
{
    printf("strings: escapes, \\u, surrogate pairs, UTF-8 passthrough\n");
    tb_json *v = parse_ok("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20ac\\ud83d\\ude00 \xc3\xa9\"", 0);
    if (!v)
        return;
    const char *want = "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \xc3\xa9";
    CHECK(v->type == TB_JSON_STRING && strcmp(v->string, want) == 0, "decoded string");
    CHECK(v->len == strlen(want), "string length %zu vs %zu", v->len, strlen(want));
    tb_json_free(v);
}

static void test_malformed(void)
{
    printf("malformed documents fail with line and column\n");
    parse_bad("", 0, "line 1, column 1: expected a value, got end of input");
    parse_bad("{\"a\": 1,}", 0, "trailing comma");
    parse_bad("[1, 2,]", 0, "line 1, column 7: trailing comma");
    parse_bad("{\n  \"a\": 01\n}", 0, "line 2, column 8: leading zero");
    parse_bad("{\n  \"a\" 1\n}", 0, "line 2, column 7: expected ':'");
    parse_bad("{\"a\": 1 \"b\": 2}", 0, "expected ',' or '}'");
    parse_bad("[1 2]", 0, "expected ',' or ']'");
    parse_bad("{a: 1}", 0, "expected a key string");
    parse_bad("\"abc", 0, "unterminated string");
    parse_bad("\"a\tb\"", 0, "control character 0x09");
    parse_bad("\"\\x\"", 0, "bad escape");
    parse_bad("\"\\u12g4\"", 0, "bad hex digit");
    parse_bad("\"\\ud83d\"", 0, "high surrogate");
    parse_bad("\"\\ude00\"", 0, "unpaired low surrogate");
    parse_bad("1.", 0, "expected a digit after '.'");
    parse_bad("1e", 0, "expected a digit in exponent");
    parse_bad("-", 0, "expected a digit");
    parse_bad("tru", 0, "expected true?");
    parse_bad("nul", 0, "expected null?");
    parse_bad("{} x", 0, "line 1, column 4: unexpected 'x' after the document");
    parse_bad("// c\n1", 0, "expected a value");
    parse_bad("NaN", 0, "expected a value");
    parse_bad("[1, Infinity]", 0, "expected a value");
    parse_bad("[[[[", 0, "end of input");
}

static void test_nonfinite(void)
{
    printf("NaN/Infinity accepted only with TB_JSON_ALLOW_NONFINITE\n");
    tb_json *v = parse_ok("[NaN, Infinity, -Infinity, -1]", TB_JSON_ALLOW_NONFINITE);
    if (!v)
        return;
    CHECK(isnan(tb_json_at(v, 0)->number), "NaN");
    CHECK(tb_json_at(v, 1)->number == INFINITY && tb_json_at(v, 2)->number == -INFINITY, "inf");
    CHECK(tb_json_at(v, 3)->number == -1, "-1 still parses");
    tb_json_free(v);
    parse_bad("-NaN", TB_JSON_ALLOW_NONFINITE, "unexpected 'N'");
}

static void test_deep(void)
{
    printf("very deep nesting is refused, not a stack overflow\n");
    size_t n = 100000;
    char *s = malloc(n + 1);
    memset(s, '[', n);
    s[n] = '\0';
    tb_json *v = NULL;
    tb_error_clear();
    int rc = tb_json_parse(s, n, 0, &v);
    CHECK(rc == TB_ERR_DATA && strstr(tb_error_message(), "nesting deeper"), "deep nesting: %s",
          tb_error_message());
    free(s);
}

static void test_writer(void)
{
    printf("writer: escape and round trip through the reader\n");
    const char *raw = "q\"b\\ n\n t\t c\x01 \xc3\xa9";
    char buf[128];
    size_t need = tb_json_escape(buf, sizeof buf, raw);
    CHECK(strcmp(buf, "\"q\\\"b\\\\ n\\n t\\t c\\u0001 \xc3\xa9\"") == 0, "escaped: %s", buf);
    CHECK(need == strlen(buf), "length %zu vs %zu", need, strlen(buf));
    char small[5];
    CHECK(tb_json_escape(small, sizeof small, raw) == need && strcmp(small, "\"q\\\"") == 0,
          "truncation: \"%s\"", small);

    tb_json *v = parse_ok(buf, 0);
    CHECK(v && strcmp(v->string, raw) == 0, "round trip");
    tb_json_free(v);

    char *mem = NULL;
    size_t mem_len = 0;
    FILE *f = open_memstream(&mem, &mem_len);
    int rc = tb_json_write_string(f, raw);
    rc |= fputc(',', f) == EOF;
    rc |= tb_json_write_number(f, 0.1);
    rc |= fputc(',', f) == EOF;
    rc |= tb_json_write_number(f, NAN);
    fclose(f);
    CHECK(rc == 0, "writes succeed");
    snprintf(buf, sizeof buf, "[%s]", mem);
    free(mem);
    v = parse_ok(buf, 0);
    CHECK(v && v->len == 3, "written array has 3 items: %s", buf);
    if (v) {
        CHECK(strcmp(tb_json_at(v, 0)->string, raw) == 0, "string back");
        CHECK(tb_json_at(v, 1)->number == 0.1, "0.1 reads back exactly");
        CHECK(tb_json_at(v, 2)->type == TB_JSON_NULL, "NaN written as null");
    }
    tb_json_free(v);
}

static void test_file(void)
{
    printf("files: parse errors name the file; a missing file is TB_ERR_IO\n");
    tb_json *v = NULL;
    tb_error_clear();
    CHECK(tb_json_parse_file("/nonexistent/x.json", 0, &v) == TB_ERR_IO, "missing file");
    char path[] = "/tmp/json_test_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("{\"a\": [1,\n 2,,]}", f);
    fclose(f);
    tb_error_clear();
    CHECK(tb_json_parse_file(path, 0, &v) == TB_ERR_DATA, "bad file");
    CHECK(strstr(tb_error_message(), path) != NULL, "names the file: %s", tb_error_message());
    tb_error_print(stdout);
    remove(path);
}

int main(void)
{
    test_valid();
    test_strings();
    test_malformed();
    test_nonfinite();
    test_deep();
    test_writer();
    test_file();
    if (failures) {
        printf("json_test: %d FAILED\n", failures);
        return 1;
    }
    printf("json_test: all passed\n");
    return 0;
}
