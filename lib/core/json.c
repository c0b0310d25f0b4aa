/*
 * json.c - strict recursive-descent JSON reader and writer helpers; see json.h.
 * Tests: bazel test //lib/core:json_test
 */
#include "lib/core/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Deeper nesting than this is refused rather than risking the C stack. */
#define JSON_MAX_DEPTH 512

typedef struct json_parser {
    const char *s;
    size_t len, pos;
    unsigned flags;
    int depth;
} json_parser;

static int json_fail(const json_parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records "json: line L, column C: what" for byte offset at. */
static int json_fail(const json_parser *p, size_t at, const char *fmt, ...)
{
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return TB_FAIL(TB_ERR_DATA, "json: line %d, column %d: %s", line, col, what);
}

/* Describes the byte at pos for messages: 'x', "end of input" or a hex code. */
static const char *json_describe(const json_parser *p, size_t pos, char buf[16])
{
    if (pos >= p->len)
        return "end of input";
    unsigned char c = (unsigned char)p->s[pos];
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02x", c);
    return buf;
}

static void json_skip_ws(json_parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static int json_peek(const json_parser *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }

static int json_literal_at(const json_parser *p, const char *word)
{
    size_t n = strlen(word);
    return p->len - p->pos >= n && memcmp(p->s + p->pos, word, n) == 0;
}

/* Frees what v owns, not v itself. */
static void json_free_contents(tb_json *v)
{
    if (v->type == TB_JSON_STRING) {
        free(v->string);
    } else if (v->type == TB_JSON_ARRAY || v->type == TB_JSON_OBJECT) {
        for (size_t i = 0; i < v->len; i++) {
            json_free_contents(&v->items[i]);
            if (v->keys)
                free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof *v);
}

static int json_parse_value(json_parser *p, tb_json *v);

/* ---- strings ---- */

static int json_hex4(json_parser *p, unsigned *out)
{
    if (p->len - p->pos < 4)
        return json_fail(p, p->pos, "truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos + (size_t)i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return json_fail(p, p->pos + (size_t)i, "bad hex digit in \\u escape");
        u = u * 16 + d;
    }
    p->pos += 4;
    *out = u;
    return TB_OK;
}

static size_t json_utf8_put(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xc0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xe0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        dst[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    dst[0] = (char)(0xf0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    dst[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Decodes one escape after the backslash into dst; *n gets the byte count. */
static int json_unescape(json_parser *p, char *dst, size_t *n)
{
    size_t at = p->pos - 1;
    if (p->pos >= p->len)
        return json_fail(p, at, "unterminated string");
    char c = p->s[p->pos++];
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        dst[0] = to[hit - from];
        *n = 1;
        return TB_OK;
    }
    if (c != 'u')
        return json_fail(p, at, "bad escape '\\%c'", c);
    unsigned cp;
    TB_TRY(json_hex4(p, &cp));
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return json_fail(p, at, "unpaired low surrogate \\u%04x", cp);
    if (cp >= 0xd800 && cp <= 0xdbff) {
        unsigned lo;
        if (!json_literal_at(p, "\\u"))
            return json_fail(p, at, "high surrogate \\u%04x without a low one", cp);
        p->pos += 2;
        TB_TRY(json_hex4(p, &lo));
        if (lo < 0xdc00 || lo > 0xdfff)
            return json_fail(p, at, "high surrogate \\u%04x without a low one", cp);
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    if (cp == 0)
        return json_fail(p, at, "\\u0000 is not supported (strings are NUL-terminated)");
    *n = json_utf8_put(dst, cp);
    return TB_OK;
}

/* REQUIRES: p at the opening quote. *out is malloc'd, NUL-terminated. */
static int json_parse_string(json_parser *p, char **out, size_t *out_len)
{
    size_t start = p->pos++;
    /* The decoded string is never longer than its source. */
    size_t end = p->pos;
    while (end < p->len && p->s[end] != '"')
        end += p->s[end] == '\\' ? 2 : 1;
    size_t cap = (end < p->len ? end : p->len) - start + 1;
    char *buf = malloc(cap);
    if (!buf)
        return TB_FAIL(TB_ERR_NOMEM, "json: string of %zu bytes", cap);
    size_t n = 0;
    int rc;
    for (;;) {
        if (p->pos >= p->len) {
            rc = json_fail(p, start, "unterminated string");
            goto out_free_buf;
        }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"')
            break;
        if (c < 0x20) {
            rc = json_fail(p, p->pos, "control character 0x%02x in string (escape it)", c);
            goto out_free_buf;
        }
        p->pos++;
        if (c != '\\') {
            buf[n++] = (char)c;
            continue;
        }
        size_t k = 0;
        TB_TRY_GOTO(rc, json_unescape(p, buf + n, &k), out_free_buf);
        n += k;
    }
    p->pos++; /* closing quote */
    buf[n] = '\0';
    *out = buf;
    if (out_len)
        *out_len = n;
    return TB_OK;

out_free_buf:
    free(buf);
    return rc;
}

/* ---- numbers ---- */

static size_t json_digits(const json_parser *p, size_t i)
{
    while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9')
        i++;
    return i;
}

static int json_parse_nonfinite(json_parser *p, tb_json *v)
{
    int neg = json_peek(p) == '-';
    size_t at = p->pos;
    p->pos += (size_t)neg;
    if (!neg && json_literal_at(p, "NaN")) {
        p->pos += 3;
        v->number = NAN;
    } else if (json_literal_at(p, "Infinity")) {
        p->pos += 8;
        v->number = neg ? -INFINITY : INFINITY;
    } else {
        char buf[16];
        p->pos = at;
        return json_fail(p, at + (size_t)neg, "unexpected %s", json_describe(p, at + (size_t)neg, buf));
    }
    v->type = TB_JSON_NUMBER;
    return TB_OK;
}

/* Grammar: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static int json_parse_number(json_parser *p, tb_json *v)
{
    size_t start = p->pos, i = p->pos;
    char buf[16];
    if (i < p->len && p->s[i] == '-')
        i++;
    if ((p->flags & TB_JSON_ALLOW_NONFINITE) && i < p->len && (p->s[i] == 'I' || p->s[i] == 'N'))
        return json_parse_nonfinite(p, v);
    if (i >= p->len || p->s[i] < '0' || p->s[i] > '9')
        return json_fail(p, i, "expected a digit, got %s", json_describe(p, i, buf));
    if (p->s[i] == '0') {
        i++;
        if (i < p->len && p->s[i] >= '0' && p->s[i] <= '9')
            return json_fail(p, start, "leading zero in number");
    } else {
        i = json_digits(p, i);
    }
    if (i < p->len && p->s[i] == '.') {
        size_t f = json_digits(p, i + 1);
        if (f == i + 1)
            return json_fail(p, i + 1, "expected a digit after '.', got %s", json_describe(p, i + 1, buf));
        i = f;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-'))
            i++;
        size_t e = json_digits(p, i);
        if (e == i)
            return json_fail(p, i, "expected a digit in exponent, got %s", json_describe(p, i, buf));
        i = e;
    }
    /* strtod needs a NUL-terminated copy: the input need not have one. */
    char num[64], *tmp = num;
    size_t n = i - start;
    if (n >= sizeof num && !(tmp = malloc(n + 1)))
        return TB_FAIL(TB_ERR_NOMEM, "json: number of %zu bytes", n);
    memcpy(tmp, p->s + start, n);
    tmp[n] = '\0';
    v->number = strtod(tmp, NULL); /* overflow gives +-HUGE_VAL, as JSON readers usually do */
    if (tmp != num)
        free(tmp);
    v->type = TB_JSON_NUMBER;
    p->pos = i;
    return TB_OK;
}

/* ---- arrays and objects ---- */

/* Grows v->items (and v->keys for objects) to hold one more item. */
static int json_grow(tb_json *v, size_t *cap)
{
    if (v->len < *cap)
        return TB_OK;
    size_t ncap = *cap ? *cap * 2 : 4;
    tb_json *items = realloc(v->items, ncap * sizeof *items);
    if (!items)
        return TB_FAIL(TB_ERR_NOMEM, "json: %zu items", ncap);
    v->items = items;
    if (v->type == TB_JSON_OBJECT) {
        char **keys = realloc(v->keys, ncap * sizeof *keys);
        if (!keys)
            return TB_FAIL(TB_ERR_NOMEM, "json: %zu keys", ncap);
        v->keys = keys;
    }
    *cap = ncap;
    return TB_OK;
}

/* Parses "[ v, v ]" or "{ "k": v, ... }"; close is ']' or '}'. */
static int json_parse_container(json_parser *p, tb_json *v, tb_json_type type, char close)
{
    char buf[16];
    size_t cap = 0, open = p->pos++;
    int rc;
    v->type = type;
    if (++p->depth > JSON_MAX_DEPTH)
        return json_fail(p, open, "nesting deeper than %d", JSON_MAX_DEPTH);
    json_skip_ws(p);
    if (json_peek(p) == close) {
        p->pos++;
        p->depth--;
        return TB_OK;
    }
    for (;;) {
        TB_TRY_GOTO(rc, json_grow(v, &cap), out_free_items);
        tb_json *item = &v->items[v->len];
        memset(item, 0, sizeof *item);
        if (type == TB_JSON_OBJECT) {
            json_skip_ws(p);
            if (json_peek(p) != '"') {
                rc = json_fail(p, p->pos, "expected a key string, got %s", json_describe(p, p->pos, buf));
                goto out_free_items;
            }
            TB_TRY_GOTO(rc, json_parse_string(p, &v->keys[v->len], NULL), out_free_items);
            json_skip_ws(p);
            if (json_peek(p) != ':') {
                free(v->keys[v->len]);
                rc = json_fail(p, p->pos, "expected ':' after key, got %s", json_describe(p, p->pos, buf));
                goto out_free_items;
            }
            p->pos++;
        }
        rc = json_parse_value(p, item);
        if (rc != TB_OK) {
            if (type == TB_JSON_OBJECT)
                free(v->keys[v->len]);
            goto out_free_items;
        }
        v->len++;
        json_skip_ws(p);
        int c = json_peek(p);
        if (c == close)
            break;
        if (c != ',') {
            rc = json_fail(p, p->pos, "expected ',' or '%c', got %s", close, json_describe(p, p->pos, buf));
            goto out_free_items;
        }
        p->pos++;
        json_skip_ws(p);
        if (json_peek(p) == close) {
            rc = json_fail(p, p->pos, "trailing comma before '%c'", close);
            goto out_free_items;
        }
    }
    p->pos++;
    p->depth--;
    return TB_OK;

out_free_items:
    json_free_contents(v);
    return rc;
}

static int json_parse_value(json_parser *p, tb_json *v)
{
    char buf[16];
    json_skip_ws(p);
    int c = json_peek(p);
    switch (c) {
    case '{':
        return json_parse_container(p, v, TB_JSON_OBJECT, '}');
    case '[':
        return json_parse_container(p, v, TB_JSON_ARRAY, ']');
    case '"':
        v->type = TB_JSON_STRING;
        return json_parse_string(p, &v->string, &v->len);
    case 't':
    case 'f':
    case 'n': {
        const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
        if (!json_literal_at(p, word))
            return json_fail(p, p->pos, "unexpected %s (expected %s?)", json_describe(p, p->pos, buf), word);
        p->pos += strlen(word);
        v->type = c == 'n' ? TB_JSON_NULL : TB_JSON_BOOL;
        v->boolean = c == 't';
        return TB_OK;
    }
    default:
        if (c == '-' || (c >= '0' && c <= '9') ||
            ((p->flags & TB_JSON_ALLOW_NONFINITE) && (c == 'N' || c == 'I')))
            return json_parse_number(p, v);
        return json_fail(p, p->pos, "expected a value, got %s", json_describe(p, p->pos, buf));
    }
}

int tb_json_parse(const char *text, size_t len, unsigned flags, tb_json **out)
{
    *out = NULL;
    json_parser p = {.s = text, .len = len, .flags = flags};
    tb_json *root = calloc(1, sizeof *root);
    if (!root)
        return TB_FAIL(TB_ERR_NOMEM, "json: root node");
    int rc;
    TB_TRY_GOTO(rc, json_parse_value(&p, root), out_free_root);
    json_skip_ws(&p);
    if (p.pos != p.len) {
        char buf[16];
        rc = json_fail(&p, p.pos, "unexpected %s after the document", json_describe(&p, p.pos, buf));
        goto out_free_root;
    }
    *out = root;
    return TB_OK;

out_free_root:
    tb_json_free(root);
    return rc;
}

int tb_json_parse_file(const char *path, unsigned flags, tb_json **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    TB_CHECK_IO(!f, "cannot open %s", path);
    int rc = TB_OK;
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            char *t = realloc(text, cap);
            if (!t) {
                rc = TB_FAIL(TB_ERR_NOMEM, "reading %s", path);
                goto out_close;
            }
            text = t;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        rc = tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "reading %s", path);
        goto out_close;
    }
    rc = tb_json_parse(text, len, flags, out);
    if (rc != TB_OK)
        TB_FAIL(rc, "parsing %s", path);
out_close:
    free(text);
    fclose(f);
    return rc;
}

void tb_json_free(tb_json *root)
{
    if (!root)
        return;
    json_free_contents(root);
    free(root);
}

const tb_json *tb_json_get(const tb_json *obj, const char *key)
{
    if (!obj || obj->type != TB_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->len; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

const tb_json *tb_json_at(const tb_json *arr, size_t i)
{
    if (!arr || arr->type != TB_JSON_ARRAY || i >= arr->len)
        return NULL;
    return &arr->items[i];
}

double tb_json_get_number(const tb_json *obj, const char *key, double dflt)
{
    const tb_json *v = tb_json_get(obj, key);
    return v && v->type == TB_JSON_NUMBER ? v->number : dflt;
}

const char *tb_json_get_string(const tb_json *obj, const char *key, const char *dflt)
{
    const tb_json *v = tb_json_get(obj, key);
    return v && v->type == TB_JSON_STRING ? v->string : dflt;
}

int tb_json_get_bool(const tb_json *obj, const char *key, int dflt)
{
    const tb_json *v = tb_json_get(obj, key);
    return v && v->type == TB_JSON_BOOL ? v->boolean : dflt;
}

const char *tb_json_type_name(tb_json_type t)
{
    static const char *names[] = {"null", "bool", "number", "string", "array", "object"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* ---- writer ---- */

/* The escape for byte c, or NULL when c is written as it is. */
static const char *json_escape_of(unsigned char c, char buf[8])
{
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default:
        if (c >= 0x20)
            return NULL;
        snprintf(buf, 8, "\\u%04x", c);
        return buf;
    }
}

size_t tb_json_escape(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    char buf[8];
#define JSON_PUT(ch)              \
    do {                          \
        if (n + 1 < cap)          \
            dst[n] = (ch);        \
        n++;                      \
    } while (0)
    JSON_PUT('"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *e = json_escape_of(*c, buf);
        if (!e) {
            JSON_PUT((char)*c);
            continue;
        }
        for (; *e; e++)
            JSON_PUT(*e);
    }
    JSON_PUT('"');
#undef JSON_PUT
    if (cap)
        dst[n < cap ? n : cap - 1] = '\0';
    return n;
}

int tb_json_write_string(FILE *f, const char *s)
{
    char buf[8];
    TB_CHECK_IO(fputc('"', f) == EOF, "writing JSON");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *e = json_escape_of(*c, buf);
        int bad = e ? fputs(e, f) == EOF : fputc(*c, f) == EOF;
        TB_CHECK_IO(bad, "writing JSON");
    }
    TB_CHECK_IO(fputc('"', f) == EOF, "writing JSON");
    return TB_OK;
}

int tb_json_write_number(FILE *f, double v)
{
    int n = isfinite(v) ? fprintf(f, "%.17g", v) : fputs("null", f);
    TB_CHECK_IO(n < 0, "writing JSON");
    return TB_OK;
}

int tb_json_write_value(FILE *f, const tb_json *v)
{
    switch (v->type) {
    case TB_JSON_NULL:
        TB_CHECK_IO(fputs("null", f) < 0, "writing JSON");
        return TB_OK;
    case TB_JSON_BOOL:
        TB_CHECK_IO(fputs(v->boolean ? "true" : "false", f) < 0, "writing JSON");
        return TB_OK;
    case TB_JSON_NUMBER:
        return tb_json_write_number(f, v->number);
    case TB_JSON_STRING:
        return tb_json_write_string(f, v->string);
    case TB_JSON_ARRAY:
    case TB_JSON_OBJECT: {
        int obj = v->type == TB_JSON_OBJECT;
        TB_CHECK_IO(fputc(obj ? '{' : '[', f) == EOF, "writing JSON");
        for (size_t i = 0; i < v->len; i++) {
            if (i)
                TB_CHECK_IO(fputs(", ", f) < 0, "writing JSON");
            if (obj) {
                TB_TRY(tb_json_write_string(f, v->keys[i]));
                TB_CHECK_IO(fputs(": ", f) < 0, "writing JSON");
            }
            TB_TRY(tb_json_write_value(f, &v->items[i]));
        }
        TB_CHECK_IO(fputc(obj ? '}' : ']', f) == EOF, "writing JSON");
        return TB_OK;
    }
    }
    return TB_FAIL(TB_ERR_INVALID, "JSON value of unknown type %d", (int)v->type);
}
