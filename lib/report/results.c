/*
 * results.c - the technique CSV/JSON writer and the CSV reader.
 *
 * The schema is one table (columns[] below): name, kind, and where the
 * value lives in tb_result_row. Writer, JSON writer and reader all walk that
 * table, so a column cannot be added to one and forgotten in another.
 *
 * Test: bazel test //lib/report:results_test
 */
#define _GNU_SOURCE
#include "lib/report/results.h"

#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/atomic_file.h"
#include "lib/core/grow.h"
#include "lib/core/json.h"

typedef enum col_kind { COL_STR, COL_NUM, COL_INT, COL_BOOL, COL_TIMING, COL_CORRECT } col_kind;

typedef struct col_def {
    const char *name;
    col_kind kind;
    size_t offset;
    size_t size;              /* of the string field; 0 otherwise */
    /* 1: a CSV without this column still loads (the field keeps
     * tb_result_row_init's value). Columns added after schema 1 are
     * optional, because bench:compare merges folders written by older
     * builds, on other machines. */
    int optional;
} col_def;

#define STR(f) {#f, COL_STR, offsetof(tb_result_row, f), sizeof(((tb_result_row *)0)->f), 0}
#define NUM(f) {#f, COL_NUM, offsetof(tb_result_row, f), 0, 0}
#define INT(f) {#f, COL_INT, offsetof(tb_result_row, f), 0, 0}
#define BOOL(f) {#f, COL_BOOL, offsetof(tb_result_row, f), 0, 0}
/* The same, for a column added later (optional when reading). */
#define NUM2(f) {#f, COL_NUM, offsetof(tb_result_row, f), 0, 1}
#define INT2(f) {#f, COL_INT, offsetof(tb_result_row, f), 0, 1}
#define BOOL2(f) {#f, COL_BOOL, offsetof(tb_result_row, f), 0, 1}
#define STR2(f) {#f, COL_STR, offsetof(tb_result_row, f), sizeof(((tb_result_row *)0)->f), 1}

/* The schema. Order is the CSV column order; results/README.md and the
 * golden file follow it. New columns go at the end, so that readers that
 * take columns by position (old scripts) keep working. */
static const col_def columns[] = {
    STR(technique),
    STR(backend),
    STR(device),
    STR(setting),
    BOOL(is_baseline),
    STR(param_name),
    NUM(param_value),
    STR(metric),
    STR(unit),
    INT(reps),
    NUM(median),
    NUM(ci_low),
    NUM(ci_high),
    NUM(min),
    NUM(max),
    NUM(noise_floor),
    NUM(speedup),
    NUM(speedup_ci_low),
    NUM(speedup_ci_high),
    {"timing_verdict", COL_TIMING, offsetof(tb_result_row, timing_verdict), 0, 0},
    {"correctness", COL_CORRECT, offsetof(tb_result_row, correctness), 0, 0},
    STR(checked_against),
    NUM(tolerance),
    NUM(max_rel_err),
    NUM(rate),
    STR(rate_unit),
    STR(ceiling_name),
    NUM(ceiling_rate),
    NUM(fraction_of_ceiling),
    NUM(memory_bytes),
    STR(note),
    /* schema 2: the interleaved, paired measurement (bench/harness/rounds.h) */
    INT2(rounds),
    NUM2(mde),
    STR2(stopped_by),
    BOOL2(unreliable),
    BOOL2(busy),
    NUM2(load_avg),
    /* schema 3: the workload and the model FLOP rate against the GEMM
     * ceiling (issue 15) */
    STR2(workload),
    NUM2(model_gflops),
    NUM2(gemm_ceiling),
    NUM2(mfu),
    /* schema 4: the core-to-core round trip the rounds ran at (rounds.h) */
    NUM2(xcore_ns),
};
#define NCOLS (sizeof columns / sizeof columns[0])

#undef STR
#undef NUM
#undef INT
#undef BOOL
#undef NUM2
#undef INT2
#undef BOOL2
#undef STR2

const char *tb_results_column(size_t i)
{
    return i < NCOLS ? columns[i].name : NULL;
}

size_t tb_results_ncolumns(void) { return NCOLS; }

static const char *const timing_names[] = {"n/a", "baseline", "faster", "slower", "within noise"};
static const char *const correct_names[] = {"n/a", "exact", "within tolerance", "DIFFERS"};
#define NTIMING (sizeof timing_names / sizeof timing_names[0])
#define NCORRECT (sizeof correct_names / sizeof correct_names[0])

const char *tb_timing_verdict_name(tb_timing_verdict v)
{
    return (unsigned)v < NTIMING ? timing_names[v] : "n/a";
}

const char *tb_correctness_name(tb_correctness c)
{
    return (unsigned)c < NCORRECT ? correct_names[c] : "n/a";
}

void tb_result_row_init(tb_result_row *row)
{
    memset(row, 0, sizeof *row);
    for (size_t i = 0; i < NCOLS; i++) {
        if (columns[i].kind == COL_NUM)
            *(double *)((char *)row + columns[i].offset) = NAN;
    }
}

void tb_results_init(tb_results *res)
{
    res->rows = NULL;
    res->n = res->cap = 0;
}

void tb_results_free(tb_results *res)
{
    free(res->rows);
    tb_results_init(res);
}

int tb_results_add(tb_results *res, const tb_result_row *row)
{
    tb_result_row *rows = tb_grow(res->rows, &res->cap, res->n, sizeof *rows, 16);
    if (!rows)
        return TB_FAIL(TB_ERR_NOMEM, "cannot grow results beyond %zu rows", res->cap);
    res->rows = rows;
    res->rows[res->n++] = *row;
    return TB_OK;
}

int tb_results_add_na(tb_results *res, const char *technique, const char *backend,
                      const char *device, const char *setting, const char *metric,
                      const char *reason)
{
    tb_result_row row;
    if (!reason || !reason[0])
        return TB_FAIL(TB_ERR_INVALID, "an n/a row for %s needs a reason", technique);
    tb_result_row_init(&row);
    snprintf(row.technique, sizeof row.technique, "%s", technique);
    snprintf(row.backend, sizeof row.backend, "%s", backend);
    snprintf(row.device, sizeof row.device, "%s", device);
    snprintf(row.setting, sizeof row.setting, "%s", setting);
    snprintf(row.metric, sizeof row.metric, "%s", metric);
    snprintf(row.note, sizeof row.note, "%s", reason);
    return tb_results_add(res, &row);
}

/* ---- numbers, locale-independent ---- */

/* The "C" numeric locale, made once per thread: a caller that ran
 * setlocale(LC_ALL, "") (e.g. de_DE, decimal comma) must not change files. */
static locale_t c_locale(void)
{
    static _Thread_local locale_t loc;
    if (!loc)
        loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    return loc;
}

/* Exactly representable integer: every integer below 2^53 is a double. */
static int is_int53(double v)
{
    return fabs(v) < 9007199254740992.0 && v == (double)(long long)v;
}

void tb_format_number(char *buf, size_t cap, double v)
{
    if (!isfinite(v)) {
        buf[0] = '\0';
        return;
    }
    if (v == 0)
        v = 0; /* no "-0" */
    locale_t old = uselocale(c_locale());
    /* Integers print exactly (2^24 elements must not become 1.67772e+07).
     * A non-integer whose 6 digits round to an integer prints as that
     * integer, so that formatting what was read back gives the same text:
     * resume and rewrite keep files byte-identical. */
    snprintf(buf, cap, "%.6g", v);
    double rounded = strtod(buf, NULL);
    if (is_int53(v))
        snprintf(buf, cap, "%lld", (long long)v);
    else if (is_int53(rounded))
        snprintf(buf, cap, "%lld", (long long)rounded);
    uselocale(old);
}

static int parse_number(const char *s, double *out)
{
    if (!s[0]) {
        *out = NAN;
        return 0;
    }
    char *end = NULL;
    locale_t old = uselocale(c_locale());
    errno = 0;
    *out = strtod(s, &end);
    uselocale(old);
    return (*end != '\0' || errno == ERANGE || !isfinite(*out)) ? -1 : 0;
}

/* ---- writing ---- */

/* RFC 4180: quote a field that holds a comma, quote, CR or LF; double the
 * quotes inside. Leading/trailing spaces are quoted too, since some readers
 * strip them. */
void tb_results_put_csv_string(FILE *f, const char *s)
{
    size_t len = strlen(s);
    int quote = strpbrk(s, ",\"\r\n") != NULL ||
                (len && (s[0] == ' ' || s[len - 1] == ' '));
    if (!quote) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The text of one field, as CSV and JSON share it: returns a string for
 * string-like columns, or fills num for numbers ("" when missing). */
static const char *field_text(const tb_result_row *row, const col_def *c, char *num, size_t cap)
{
    const char *base = (const char *)row + c->offset;
    switch (c->kind) {
    case COL_STR:
        return base;
    case COL_NUM:
        tb_format_number(num, cap, *(const double *)base);
        return num;
    case COL_INT: {
        int v = *(const int *)base;
        if (v > 0)
            snprintf(num, cap, "%d", v);
        else
            num[0] = '\0';
        return num;
    }
    case COL_BOOL:
        return *(const int *)base ? "1" : "0";
    case COL_TIMING:
        return tb_timing_verdict_name(*(const tb_timing_verdict *)base);
    case COL_CORRECT:
        return tb_correctness_name(*(const tb_correctness *)base);
    }
    return "";
}

int tb_results_write_csv(const tb_results *res, FILE *f)
{
    char num[64];
    for (size_t i = 0; i < NCOLS; i++)
        fprintf(f, "%s%s", i ? "," : "", columns[i].name);
    fputc('\n', f);
    for (size_t r = 0; r < res->n; r++) {
        for (size_t i = 0; i < NCOLS; i++) {
            if (i)
                fputc(',', f);
            tb_results_put_csv_string(f, field_text(&res->rows[r], &columns[i], num, sizeof num));
        }
        fputc('\n', f);
    }
    if (ferror(f))
        return TB_FAIL(TB_ERR_IO, "cannot write results CSV");
    return TB_OK;
}

int tb_results_write_json(const tb_results *res, FILE *f)
{
    return tb_results_write_json_headline(res, NULL, NULL, f);
}

int tb_results_write_json_headline(const tb_results *res, const char *headline,
                                   const char *metric, FILE *f)
{
    char num[64];
    fprintf(f, "{\n  \"schema\": \"%s\",\n", TB_RESULTS_SCHEMA);
    if (headline && headline[0]) {
        fputs("  \"headline\": ", f);
        tb_json_write_string(f, headline);
        fputs(",\n", f);
    }
    if (metric && metric[0]) {
        fputs("  \"headline_metric\": ", f);
        tb_json_write_string(f, metric);
        fputs(",\n", f);
    }
    fputs("  \"rows\": [", f);
    for (size_t r = 0; r < res->n; r++) {
        const tb_result_row *row = &res->rows[r];
        fprintf(f, "%s\n    {", r ? "," : "");
        for (size_t i = 0; i < NCOLS; i++) {
            const col_def *c = &columns[i];
            const char *text = field_text(row, c, num, sizeof num);
            fprintf(f, "%s\"%s\": ", i ? ", " : "", c->name);
            if (c->kind == COL_BOOL)
                fputs(text[0] == '1' ? "true" : "false", f);
            else if (c->kind == COL_NUM || c->kind == COL_INT)
                fputs(text[0] ? text : "null", f);
            else
                tb_json_write_string(f, text);
        }
        fputc('}', f);
    }
    fputs(res->n ? "\n  ]\n}\n" : "]\n}\n", f);
    if (ferror(f))
        return TB_FAIL(TB_ERR_IO, "cannot write results JSON");
    return TB_OK;
}

static int write_csv(const void *res, FILE *f) { return tb_results_write_csv(res, f); }

typedef struct json_src {
    const tb_results *res;
    const char *headline, *metric;
} json_src;

static int write_json(const void *arg, FILE *f)
{
    const json_src *s = arg;
    return tb_results_write_json_headline(s->res, s->headline, s->metric, f);
}

int tb_results_save_csv(const tb_results *res, const char *path)
{
    return tb_atomic_write_with(path, write_csv, res);
}

int tb_results_save_json(const tb_results *res, const char *path)
{
    return tb_results_save_json_headline(res, NULL, NULL, path);
}

int tb_results_save_json_headline(const tb_results *res, const char *headline,
                                  const char *metric, const char *path)
{
    json_src s = {res, headline, metric};
    return tb_atomic_write_with(path, write_json, &s);
}

/* ---- reading ---- */

/* A CSV cursor over a whole file held in memory. */
typedef struct csv_reader {
    const char *p, *end;
    const char *name;
    int line;                 /* 1-based line of the record being read */
} csv_reader;

/* Reads one field into out (cap bytes, truncated); *eol set when the field
 * ended its record. Returns -1 on a malformed quoted field. */
static int csv_field(csv_reader *r, char *out, size_t cap, int *eol)
{
    size_t n = 0;
    int quoted = r->p < r->end && *r->p == '"';
    if (quoted)
        r->p++;
    for (;;) {
        if (r->p >= r->end) {
            if (quoted)
                return -1; /* unterminated quote */
            *eol = 1;
            break;
        }
        char ch = *r->p++;
        if (quoted && ch == '"') {
            if (r->p < r->end && *r->p == '"') {
                r->p++;
            } else {
                quoted = 0;
                continue;
            }
        } else if (!quoted && ch == ',') {
            *eol = 0;
            break;
        } else if (!quoted && (ch == '\n' || ch == '\r')) {
            if (ch == '\r' && r->p < r->end && *r->p == '\n')
                r->p++;
            *eol = 1;
            break;
        } else if (ch == '\n') {
            r->line++; /* a newline inside a quoted note */
        }
        if (n + 1 < cap)
            out[n++] = ch;
    }
    out[n] = '\0';
    return 0;
}

static int lookup(const char *const *names, size_t count, const char *s)
{
    for (size_t i = 0; i < count; i++) {
        if (strcmp(names[i], s) == 0)
            return (int)i;
    }
    return -1;
}

static int column_index(const char *name)
{
    for (size_t i = 0; i < NCOLS; i++) {
        if (strcmp(columns[i].name, name) == 0)
            return (int)i;
    }
    return -1;
}

/* Stores text into row's column c. */
static int set_field(tb_result_row *row, const col_def *c, const char *text)
{
    char *base = (char *)row + c->offset;
    double v;
    int idx;
    switch (c->kind) {
    case COL_STR:
        snprintf(base, c->size, "%s", text);
        return 0;
    case COL_NUM:
        return parse_number(text, (double *)base);
    case COL_INT:
        /* A count (reps, rounds): beyond an int it is no count of ours, and
         * converting it would be undefined. */
        if (parse_number(text, &v) != 0 || v < INT_MIN || v > INT_MAX)
            return -1;
        *(int *)base = isnan(v) ? 0 : (int)v;
        return 0;
    case COL_BOOL:
        if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0)
            return -1;
        *(int *)base = text[0] == '1';
        return 0;
    case COL_TIMING:
        idx = lookup(timing_names, NTIMING, text);
        *(tb_timing_verdict *)base = (tb_timing_verdict)(idx < 0 ? 0 : idx);
        return idx < 0 ? -1 : 0;
    case COL_CORRECT:
        idx = lookup(correct_names, NCORRECT, text);
        *(tb_correctness *)base = (tb_correctness)(idx < 0 ? 0 : idx);
        return idx < 0 ? -1 : 0;
    }
    return -1;
}

#define MAX_FILE_COLS 128

/* Reads the header; map[i] = our column index for file column i, or -1. */
static int read_header(csv_reader *r, int *map, int *nmap)
{
    char field[256];
    int eol = 0, seen[NCOLS] = {0};
    *nmap = 0;
    while (!eol) {
        if (csv_field(r, field, sizeof field, &eol) != 0)
            return TB_FAIL(TB_ERR_DATA, "%s:1: malformed header", r->name);
        if (*nmap == MAX_FILE_COLS)
            return TB_FAIL(TB_ERR_DATA, "%s:1: more than %d columns", r->name, MAX_FILE_COLS);
        int idx = column_index(field);
        map[(*nmap)++] = idx;
        if (idx >= 0)
            seen[idx] = 1;
    }
    for (size_t i = 0; i < NCOLS; i++) {
        if (!seen[i] && !columns[i].optional)
            return TB_FAIL(TB_ERR_DATA, "%s: column %s missing: not a tunebench results CSV?",
                           r->name, columns[i].name);
    }
    return TB_OK;
}

static int read_record(csv_reader *r, const int *map, int nmap, tb_result_row *row)
{
    char field[512];
    int eol = 0, i = 0;
    tb_result_row_init(row);
    for (; !eol; i++) {
        if (csv_field(r, field, sizeof field, &eol) != 0)
            return TB_FAIL(TB_ERR_DATA, "%s:%d: unterminated quoted field", r->name, r->line);
        if (i >= nmap)
            return TB_FAIL(TB_ERR_DATA, "%s:%d: more fields than the header's %d",
                           r->name, r->line, nmap);
        if (map[i] >= 0 && set_field(row, &columns[map[i]], field) != 0)
            return TB_FAIL(TB_ERR_DATA, "%s:%d: bad %s value '%s'", r->name, r->line,
                           columns[map[i]].name, field);
    }
    if (i != nmap)
        return TB_FAIL(TB_ERR_DATA, "%s:%d: %d fields, header has %d", r->name, r->line, i,
                       nmap);
    return TB_OK;
}

static int parse_buffer(csv_reader *r, tb_results *res)
{
    int map[MAX_FILE_COLS], nmap = 0;
    tb_result_row row;
    TB_TRY(read_header(r, map, &nmap));
    for (r->line = 2; r->p < r->end; r->line++) {
        if (*r->p == '\n' || *r->p == '\r') { /* a blank line (trailing) */
            r->p++;
            continue;
        }
        TB_TRY(read_record(r, map, nmap, &row));
        TB_TRY(tb_results_add(res, &row));
    }
    return TB_OK;
}

int tb_results_parse_csv(FILE *f, const char *name, tb_results *res)
{
    int rc = TB_OK;
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    if (!buf)
        return TB_FAIL(TB_ERR_NOMEM, "cannot read %s", name);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len < cap)
            continue;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            rc = TB_FAIL(TB_ERR_NOMEM, "cannot read %s", name);
            goto out_free_buf;
        }
        buf = bigger;
        cap *= 2;
    }
    if (ferror(f)) {
        rc = tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot read %s", name);
        goto out_free_buf;
    }
    csv_reader r = {buf, buf + len, name, 1};
    rc = parse_buffer(&r, res);

out_free_buf:
    free(buf);
    return rc;
}

int tb_results_read_csv(const char *path, tb_results *res)
{
    FILE *f = fopen(path, "rb");
    TB_CHECK_IO(!f, "cannot open %s", path);
    int rc = tb_results_parse_csv(f, path, res);
    fclose(f);
    return rc;
}
