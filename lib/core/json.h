/*
 * json.h - a small, strict JSON reader and a tiny writer helper.
 *
 * Why: tunebench reads Google Benchmark's JSON output (bench/harness/gb_results.c),
 * and several modules write JSON (results, traces, fingerprints). Debian has
 * JSON libraries, but the reading side needs little, and a strict reader that
 * says where a file is broken is worth more than features.
 *
 * Reader: tb_json_parse() turns a whole document into a tree. Strict RFC 8259:
 * no comments, no trailing commas, no leading zeros, no control characters in
 * strings, escapes (\uXXXX with surrogate pairs) decoded to UTF-8, nothing but
 * whitespace after the value. A malformed document fails with TB_ERR_DATA and
 * a message "json: line L, column C: ..." (both 1-based; columns count bytes).
 * One extension, off unless asked for: TB_JSON_ALLOW_NONFINITE accepts the
 * bare words NaN, Infinity and -Infinity, which Google Benchmark's JSON
 * reporter writes for non-finite counters.
 * Numbers are converted with strtod, which reads the decimal point of the
 * C locale; tunebench never calls setlocale.
 *
 * Writer: tb_json_write_string() and tb_json_write_number() put one escaped
 * string or one number on a stdio stream; callers write the punctuation.
 *
 * Tests: lib/core/json_test.c (bazel test //lib/core:json_test).
 */
#ifndef TB_JSON_H
#define TB_JSON_H

#include <stddef.h>
#include <stdio.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_json_type {
    TB_JSON_NULL = 0,
    TB_JSON_BOOL = 1,
    TB_JSON_NUMBER = 2,
    TB_JSON_STRING = 3,
    TB_JSON_ARRAY = 4,
    TB_JSON_OBJECT = 5,
} tb_json_type;

typedef struct tb_json tb_json;
struct tb_json {
    tb_json_type type;
    int boolean;         /* BOOL: 0 or 1 */
    double number;       /* NUMBER */
    char *string;        /* STRING: UTF-8, NUL-terminated (len excludes the NUL) */
    size_t len;          /* STRING: bytes; ARRAY, OBJECT: number of items */
    tb_json *items;      /* ARRAY, OBJECT: (len) values, in document order */
    char **keys;         /* OBJECT: (len) keys; keys[i] names items[i] */
};

/* Parse flags. */
#define TB_JSON_ALLOW_NONFINITE 1u /* accept NaN, Infinity, -Infinity as numbers */

/* Parses text[0..len) (need not be NUL-terminated) into *out.
 * REQUIRES: text != NULL or len == 0; out != NULL.
 * On failure *out is NULL and the error chain says where (TB_ERR_DATA), or
 * TB_ERR_NOMEM. Free the tree with tb_json_free. */
int tb_json_parse(const char *text, size_t len, unsigned flags, tb_json **out);

/* Reads and parses a whole file. TB_ERR_IO when it cannot be read; parse
 * errors name the file. */
int tb_json_parse_file(const char *path, unsigned flags, tb_json **out);

/* Frees a tree from tb_json_parse*. NULL is fine. */
void tb_json_free(tb_json *root);

/* Value for key in an object, or NULL when obj is not an object or has no
 * such key. With duplicate keys the first one wins. */
const tb_json *tb_json_get(const tb_json *obj, const char *key);

/* Item i of an array, or NULL when arr is not an array or i is out of range. */
const tb_json *tb_json_at(const tb_json *arr, size_t i);

/* Typed lookups for flat records: the member's value when obj has key with
 * the right type, otherwise dflt. */
double tb_json_get_number(const tb_json *obj, const char *key, double dflt);
const char *tb_json_get_string(const tb_json *obj, const char *key, const char *dflt);
int tb_json_get_bool(const tb_json *obj, const char *key, int dflt);

/* "null", "bool", ... for messages. */
const char *tb_json_type_name(tb_json_type t);

/* Writes s as a quoted JSON string: escapes " \ and control characters
 * (\n \t ... or \u00XX); other bytes, UTF-8 included, are copied as they are.
 * Returns TB_OK or TB_ERR_IO. */
int tb_json_write_string(FILE *f, const char *s);

/* Writes a number that reads back to the same double (%.17g); NaN and
 * infinities, which JSON cannot express, are written as null. */
int tb_json_write_number(FILE *f, double v);

/* Writes v as compact JSON (objects, arrays, strings, numbers as
 * tb_json_write_number does, booleans, null). Returns TB_OK or TB_ERR_IO. */
int tb_json_write_value(FILE *f, const tb_json *v);

/* Escapes s into dst as a quoted JSON string, snprintf-style: writes at most
 * cap bytes including the NUL and returns the length the whole string needs. */
size_t tb_json_escape(char *dst, size_t cap, const char *s);

#ifdef __cplusplus
}
#endif
#endif
