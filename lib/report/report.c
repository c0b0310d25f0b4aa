/*
 * report.c - REPORT.md, REPORT.html, summary.md and summary.tex for one
 * results folder; see report.h for the contents and the summary rule.
 *
 * The report is built once as a list of blocks (headings, paragraphs,
 * tables, figures) and then written twice, as Markdown and as HTML, so the
 * two cannot drift apart. Text may use `code` and **bold**; the HTML writer
 * turns those into tags.
 *
 * Test: bazel test //lib/report:report_test
 */
#define _GNU_SOURCE
#include "lib/report/report.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- numbers ---- */

void tb_report_num(char *buf, size_t cap, double v)
{
    double a = fabs(v);
    if (isnan(v) || isinf(v))
        snprintf(buf, cap, "n/a");
    else if (a == 0)
        snprintf(buf, cap, "0");
    else if (a >= 1e6 || a < 1e-3)
        snprintf(buf, cap, "%.3g", v);
    else if (a >= 100)
        snprintf(buf, cap, "%.0f", v);
    else if (a >= 10)
        snprintf(buf, cap, "%.1f", v);
    else if (a >= 1)
        snprintf(buf, cap, "%.2f", v);
    else {
        int digits = 2 - (int)floor(log10(a)); /* 3 significant digits */
        snprintf(buf, cap, "%.*f", digits, v);
    }
}

static void num_interval(char *buf, size_t cap, double v, double lo, double hi, const char *unit,
                         const char *sep)
{
    char a[32], b[32], c[32];
    tb_report_num(a, sizeof a, v);
    if (isnan(lo) || isnan(hi)) {
        snprintf(buf, cap, "%s%s%s [interval n/a: too few repetitions]", a, sep, unit);
        return;
    }
    tb_report_num(b, sizeof b, lo);
    tb_report_num(c, sizeof c, hi);
    snprintf(buf, cap, "%s%s%s [%s, %s]", a, sep, unit, b, c);
}

void tb_report_speedup(char *buf, size_t cap, const tb_result_row *r)
{
    if (isnan(r->speedup)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    num_interval(buf, cap, r->speedup, r->speedup_ci_low, r->speedup_ci_high, "×", "");
}

void tb_report_time(char *buf, size_t cap, const tb_result_row *r)
{
    if (isnan(r->median)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    num_interval(buf, cap, r->median, r->ci_low, r->ci_high, r->unit, " ");
}

void tb_report_na(char *buf, size_t cap, const char *prefix, const char *note)
{
    /* Some binaries write their note as "n/a on the CPU backend: why"; drop
     * that leading "n/a" so the cell does not say it twice. */
    if (note && !strncmp(note, "n/a", 3)) {
        note += 3;
        while (*note == ':' || *note == ' ')
            note++;
    }
    if (!note || !note[0])
        note = "no reason recorded (a bug in the technique that wrote the row)";
    snprintf(buf, cap, "%s%sn/a: %s", prefix ? prefix : "", prefix && prefix[0] ? ": " : "", note);
}

/* The rate's interval follows from the time's: rate = work / time. */
static void rate_str(char *buf, size_t cap, const tb_result_row *r)
{
    if (isnan(r->rate)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    double lo = NAN, hi = NAN;
    if (!isnan(r->ci_low) && !isnan(r->ci_high) && r->ci_low > 0) {
        lo = r->rate * r->median / r->ci_high;
        hi = r->rate * r->median / r->ci_low;
    }
    num_interval(buf, cap, r->rate, lo, hi, r->rate_unit, " ");
}

static void ceiling_str(char *buf, size_t cap, const tb_result_row *r)
{
    if (!r->ceiling_name[0] || isnan(r->fraction_of_ceiling)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    char c[32], pct[32];
    tb_report_num(c, sizeof c, r->ceiling_rate);
    tb_report_num(pct, sizeof pct, 100.0 * r->fraction_of_ceiling);
    snprintf(buf, cap, "%s%% of %s (%s %s)", pct, r->ceiling_name, c, r->rate_unit);
}

static void verdict_str(char *buf, size_t cap, const tb_result_row *r)
{
    char pct[32];
    tb_report_num(pct, sizeof pct, 100.0 * r->noise_floor);
    if (r->timing_verdict == TB_TIMING_WITHIN_NOISE && !isnan(r->noise_floor) &&
        r->noise_floor > 0.5)
        snprintf(buf, cap, "within noise (noise floor ±%s%%: too noisy to tell; rerun on an "
                 "idle machine)", pct);
    else if (r->timing_verdict == TB_TIMING_WITHIN_NOISE && !isnan(r->noise_floor))
        snprintf(buf, cap, "within noise (noise floor ±%s%%)", pct);
    else if (r->timing_verdict == TB_TIMING_NA)
        snprintf(buf, cap, "no verdict (no baseline, or too few repetitions for an interval)");
    else
        snprintf(buf, cap, "%s", tb_timing_verdict_name(r->timing_verdict));
}

static void correctness_str(char *buf, size_t cap, const tb_result_row *r)
{
    char e[32], t[32];
    tb_report_num(e, sizeof e, r->max_rel_err);
    tb_report_num(t, sizeof t, r->tolerance);
    const char *against = r->checked_against[0] ? r->checked_against : "baseline";
    switch (r->correctness) {
    case TB_CORRECT_EXACT: snprintf(buf, cap, "exact (bitwise, vs %s)", against); break;
    case TB_CORRECT_WITHIN_TOL:
        snprintf(buf, cap, "within tolerance (max rel err %s ≤ %s, vs %s)", e, t, against);
        break;
    case TB_CORRECT_DIFFERS:
        snprintf(buf, cap, "DIFFERS (max rel err %s > %s, vs %s)", e, t, against);
        break;
    default: snprintf(buf, cap, "not checked"); break;
    }
}

static void point_str(char *buf, size_t cap, const tb_result_row *r)
{
    char v[32];
    if (!r->param_name[0] || isnan(r->param_value)) {
        snprintf(buf, cap, "(no sweep)");
        return;
    }
    if (r->param_value == floor(r->param_value) && fabs(r->param_value) < 1e15)
        snprintf(v, sizeof v, "%.0f", r->param_value);
    else
        tb_report_num(v, sizeof v, r->param_value);
    snprintf(buf, cap, "%s = %s", r->param_name, v);
}

/* ---- the summary rule ---- */

static int is_timed(const tb_result_row *r) { return !isnan(r->median); }

static int same_point(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* The larger of two points; NaN (no sweep) ranks below any value. */
static int point_above(double a, double b)
{
    if (isnan(a))
        return 0;
    return isnan(b) || a > b;
}

static const char *pick_metric(const tb_results *res, const char *technique)
{
    const char *first = NULL;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (strcmp(r->technique, technique) != 0 || !is_timed(r) || !r->is_baseline)
            continue;
        if (!strcmp(r->metric, "step time"))
            return r->metric;
        if (!first)
            first = r->metric;
    }
    return first;
}

void tb_report_pick_best(const tb_results *res, const char *technique, tb_report_pick *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->technique, sizeof out->technique, "%s", technique);
    for (size_t i = 0; i < res->n && !out->na; i++)
        if (!strcmp(res->rows[i].technique, technique) && !is_timed(&res->rows[i]))
            out->na = &res->rows[i];
    const char *metric = pick_metric(res, technique);
    if (!metric)
        return;
    /* The largest point with a baseline and a non-baseline speedup. */
    double point = NAN;
    int found = 0;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (strcmp(r->technique, technique) || strcmp(r->metric, metric) || r->is_baseline ||
            isnan(r->speedup))
            continue;
        if (!found || point_above(r->param_value, point)) {
            point = r->param_value;
            found = 1;
        }
    }
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (strcmp(r->technique, technique) || strcmp(r->metric, metric) || !is_timed(r))
            continue;
        if (found && !same_point(r->param_value, point))
            continue;
        if (r->is_baseline && !out->baseline)
            out->baseline = r;
        else if (!r->is_baseline && !isnan(r->speedup) &&
                 (!out->best || r->speedup > out->best->speedup))
            out->best = r;
    }
    if (found && !out->baseline) {
        /* A sweep of settings (workers=0,1,2.., "no bias"), each its own point,
         * compared with a baseline at another point: the best over all of
         * them, beside the baseline they were compared with. */
        out->best = NULL;
        for (size_t i = 0; i < res->n; i++) {
            const tb_result_row *r = &res->rows[i];
            if (strcmp(r->technique, technique) || strcmp(r->metric, metric) || !is_timed(r))
                continue;
            if (!r->is_baseline && !isnan(r->speedup) &&
                (!out->best || r->speedup > out->best->speedup))
                out->best = r;
        }
        /* Several baselines (per-tensor SGD and per-tensor AdamW): the one
         * the best was compared with is the one whose median its speedup
         * implies (speedup = baseline median / its median). */
        double want = out->best ? out->best->median * out->best->speedup : NAN, gap = INFINITY;
        for (size_t i = 0; i < res->n; i++) {
            const tb_result_row *r = &res->rows[i];
            if (strcmp(r->technique, technique) || strcmp(r->metric, metric) || !is_timed(r) ||
                !r->is_baseline)
                continue;
            double g = isnan(want) ? 0 : fabs(r->median - want);
            if (!out->baseline || g < gap) {
                out->baseline = r;
                gap = g;
            }
        }
    }
    if (!found) /* baseline timed, nothing compared with it: show the largest point */
        for (size_t i = 0; i < res->n; i++) {
            const tb_result_row *r = &res->rows[i];
            if (!strcmp(r->technique, technique) && !strcmp(r->metric, metric) &&
                r->is_baseline && is_timed(r) &&
                (out->baseline == r || point_above(r->param_value, out->baseline->param_value)))
                out->baseline = r;
        }
    for (size_t i = 0; out->baseline && i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!strcmp(r->technique, technique) && !strcmp(r->metric, metric) && r->is_baseline &&
            is_timed(r) && !same_point(r->param_value, out->baseline->param_value))
            out->swept = 1;
    }
}

/* ---- the document model ---- */

typedef enum block_kind { BK_H1, BK_H2, BK_H3, BK_P, BK_LEAD, BK_TABLE, BK_IMG } block_kind;

typedef struct block {
    block_kind kind;
    char *text;                /* heading, paragraph, figure caption */
    char **cells;              /* table: (nrows + 1) * ncols, header first */
    int ncols, nrows;
    char *png;                 /* figure: the PNG's path (embedded in HTML) */
    char *md_src;              /* figure: its path relative to REPORT.md */
    char *alt;                 /* figure: short alternative text */
} block;

struct tb_doc {
    block *b;
    size_t n, cap;
    int oom;
};
typedef struct tb_doc doc;

static block *doc_add(doc *d, block_kind kind)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        block *p = realloc(d->b, cap * sizeof *p);
        if (!p) {
            d->oom = 1;
            return NULL;
        }
        d->b = p;
        d->cap = cap;
    }
    block *b = &d->b[d->n++];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    return b;
}

static char *vfmt(doc *d, const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) {
        d->oom = 1;
        return NULL;
    }
    return s;
}

static void doc_text(doc *d, block_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void doc_text(doc *d, block_kind kind, const char *fmt, ...)
{
    block *b = doc_add(d, kind);
    if (!b)
        return;
    va_list ap;
    va_start(ap, fmt);
    b->text = vfmt(d, fmt, ap);
    va_end(ap);
}

static void doc_table(doc *d, int ncols, const char *const *header)
{
    block *b = doc_add(d, BK_TABLE);
    if (!b)
        return;
    b->ncols = ncols;
    b->cells = calloc((size_t)ncols, sizeof *b->cells);
    if (!b->cells) {
        d->oom = 1;
        return;
    }
    for (int c = 0; c < ncols; c++)
        if (!(b->cells[c] = strdup(header[c])))
            d->oom = 1;
}

/* Appends a row to the last block, which must be a table. */
static void doc_row(doc *d, const char *const *cells)
{
    block *b = d->n ? &d->b[d->n - 1] : NULL;
    if (!b || b->kind != BK_TABLE || !b->cells)
        return;
    size_t k = (size_t)(b->nrows + 2) * (size_t)b->ncols;
    char **p = realloc(b->cells, k * sizeof *p);
    if (!p) {
        d->oom = 1;
        return;
    }
    b->cells = p;
    for (int c = 0; c < b->ncols; c++)
        if (!(p[(size_t)(b->nrows + 1) * (size_t)b->ncols + (size_t)c] = strdup(cells[c] ? cells[c] : "")))
            d->oom = 1;
    b->nrows++;
}

static void doc_img(doc *d, const char *png, const char *md_src, const char *alt,
                    const char *caption)
{
    block *b = doc_add(d, BK_IMG);
    if (!b)
        return;
    b->png = strdup(png);
    b->md_src = strdup(md_src);
    b->alt = strdup(alt);
    b->text = strdup(caption);
    if (!b->png || !b->md_src || !b->alt || !b->text)
        d->oom = 1;
}

static void doc_free(doc *d)
{
    for (size_t i = 0; i < d->n; i++) {
        block *b = &d->b[i];
        free(b->text);
        free(b->png);
        free(b->md_src);
        free(b->alt);
        if (b->cells)
            for (int k = 0; k < (b->nrows + 1) * b->ncols; k++)
                free(b->cells[k]);
        free(b->cells);
    }
    free(d->b);
}

/* ---- Markdown writer ---- */

static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '\n')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

static void md_table(FILE *f, const block *b)
{
    for (int r = 0; r <= b->nrows; r++) {
        fputs("|", f);
        for (int c = 0; c < b->ncols; c++) {
            fputc(' ', f);
            md_cell(f, b->cells[r * b->ncols + c]);
            fputs(" |", f);
        }
        fputc('\n', f);
        if (r == 0) {
            fputs("|", f);
            for (int c = 0; c < b->ncols; c++)
                fputs(" --- |", f);
            fputc('\n', f);
        }
    }
    fputc('\n', f);
}

static int write_md(const doc *d, FILE *f)
{
    for (size_t i = 0; i < d->n; i++) {
        const block *b = &d->b[i];
        switch (b->kind) {
        case BK_H1: fprintf(f, "# %s\n\n", b->text); break;
        case BK_H2: fprintf(f, "## %s\n\n", b->text); break;
        case BK_H3: fprintf(f, "### %s\n\n", b->text); break;
        case BK_P: fprintf(f, "%s\n\n", b->text); break;
        case BK_LEAD: fprintf(f, "> %s\n\n", b->text); break;
        case BK_TABLE: md_table(f, b); break;
        case BK_IMG: fprintf(f, "![%s](%s)\n\n*%s*\n\n", b->alt, b->md_src, b->text); break;
        }
    }
    return ferror(f) ? TB_FAIL(TB_ERR_IO, "cannot write the Markdown report") : TB_OK;
}

/* ---- HTML writer ---- */

void tb_report_html_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Text with `code` and **bold** turned into tags, the rest escaped. */
static void html_inline(FILE *f, const char *s)
{
    int code = 0, bold = 0;
    char one[2] = {0, 0};
    for (; *s; s++) {
        if (*s == '`') {
            fputs(code ? "</code>" : "<code>", f);
            code = !code;
        } else if (!code && s[0] == '*' && s[1] == '*') {
            fputs(bold ? "</b>" : "<b>", f);
            bold = !bold;
            s++;
        } else {
            one[0] = *s;
            tb_report_html_escape(f, one);
        }
    }
    if (code)
        fputs("</code>", f);
    if (bold)
        fputs("</b>", f);
}

/* Colours for verdict cells, so a reader's eye finds them. */
static const char *cell_class(const char *s)
{
    if (!strncmp(s, "faster", 6))
        return "good";
    if (!strncmp(s, "slower", 6) || !strncmp(s, "DIFFERS", 7) || strstr(s, "THROTTLED") ||
        !strncmp(s, "BUSY", 4) || strstr(s, "too noisy"))
        return "bad";
    if (!strncmp(s, "within noise", 12))
        return "meh";
    if (!strncmp(s, "n/a", 3) || strstr(s, ": n/a: ")) /* "setting: n/a: why" too */
        return "na";
    return NULL;
}

static void html_table(FILE *f, const block *b)
{
    fputs("<table>\n<thead><tr>", f);
    for (int c = 0; c < b->ncols; c++) {
        fputs("<th>", f);
        html_inline(f, b->cells[c]);
        fputs("</th>", f);
    }
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int r = 1; r <= b->nrows; r++) {
        fputs("<tr>", f);
        for (int c = 0; c < b->ncols; c++) {
            const char *s = b->cells[r * b->ncols + c];
            const char *cls = cell_class(s);
            if (cls)
                fprintf(f, "<td class=\"%s\">", cls);
            else
                fputs("<td>", f);
            html_inline(f, s);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static int html_img(FILE *f, const block *b)
{
    char *b64 = NULL;
    TB_TRY(tb_report_base64_file(b->png, &b64));
    fputs("<figure><img alt=\"", f);
    tb_report_html_escape(f, b->alt);
    fprintf(f, "\" src=\"data:image/png;base64,%s\"><figcaption>", b64);
    html_inline(f, b->text);
    fputs("</figcaption></figure>\n", f);
    free(b64);
    return TB_OK;
}

void tb_report_html_begin(FILE *f, const char *title)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>", f);
    tb_report_html_escape(f, title);
    fputs("</title>\n<style>\n"
          "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1180px;"
          "margin:2em auto;padding:0 1.2em;color:#1d1d1f;line-height:1.5;font-size:15px}\n"
          "h1{font-size:1.9em;margin-bottom:.2em}h2{margin-top:2.2em;border-bottom:2px solid #ddd;"
          "padding-bottom:.2em}h3{margin-top:1.6em}\n"
          "table{border-collapse:collapse;margin:.8em 0 1.4em;font-size:.9em;width:100%}\n"
          "th,td{border:1px solid #ccc;padding:.35em .6em;text-align:left;vertical-align:top}\n"
          "th{background:#f0f2f5}tbody tr:nth-child(even){background:#fafafa}\n"
          "td.good{background:#e3f6e5;color:#0b5d1e;font-weight:600}"
          "td.bad{background:#fde7e7;color:#8a1010;font-weight:600}"
          "td.meh{background:#fff7e0}td.na{color:#666}\n"
          "code{background:#f2f2f2;padding:0 .25em;border-radius:3px;font-size:.92em}\n"
          "figure{margin:1em 0 2em}figure img{max-width:100%;width:960px;border:1px solid #ddd}\n"
          "figcaption{color:#555;font-size:.9em}\n"
          ".lead{background:#f4f8ff;border-left:4px solid #4a7bd0;padding:.8em 1em}\n"
          "</style>\n</head>\n<body>\n", f);
}

void tb_report_html_end(FILE *f) { fputs("</body>\n</html>\n", f); }

static int write_html(const doc *d, const char *title, FILE *f)
{
    tb_report_html_begin(f, title);
    for (size_t i = 0; i < d->n; i++) {
        const block *b = &d->b[i];
        switch (b->kind) {
        case BK_H1: fputs("<h1>", f); html_inline(f, b->text); fputs("</h1>\n", f); break;
        case BK_H2: fputs("<h2>", f); html_inline(f, b->text); fputs("</h2>\n", f); break;
        case BK_H3: fputs("<h3>", f); html_inline(f, b->text); fputs("</h3>\n", f); break;
        case BK_P:
        case BK_LEAD:
            fputs(b->kind == BK_LEAD ? "<p class=\"lead\">" : "<p>", f);
            html_inline(f, b->text);
            fputs("</p>\n", f);
            break;
        case BK_TABLE: html_table(f, b); break;
        case BK_IMG: TB_TRY(html_img(f, b)); break;
        }
    }
    tb_report_html_end(f);
    return ferror(f) ? TB_FAIL(TB_ERR_IO, "cannot write the HTML report") : TB_OK;
}

/* ---- base64 ---- */

int tb_report_base64_file(const char *path, char **out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot open %s", path);
    int rc = TB_OK;
    unsigned char *data = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        rc = tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot stat %s", path);
        goto out_close;
    }
    size_t n = (size_t)st.st_size;
    data = malloc(n ? n : 1);
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    if (!data || !s) {
        free(s);
        rc = TB_FAIL(TB_ERR_NOMEM, "out of memory embedding %s", path);
        goto out_close;
    }
    if (fread(data, 1, n, f) != n) {
        free(s);
        rc = TB_FAIL(TB_ERR_IO, "cannot read %s", path);
        goto out_close;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)data[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)data[i + 1] << 8;
        if (i + 2 < n)
            v |= data[i + 2];
        s[k++] = tab[(v >> 18) & 63];
        s[k++] = tab[(v >> 12) & 63];
        s[k++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        s[k++] = i + 2 < n ? tab[v & 63] : '=';
    }
    s[k] = '\0';
    *out = s;
out_close:
    free(data);
    fclose(f);
    return rc;
}

/* ---- loading a folder ---- */

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

static int load_csv(tb_report_folder *f, const char *name)
{
    char path[PATH_MAX + 160], id[160];
    snprintf(id, sizeof id, "%.*s", (int)(strlen(name) - 4), name);
    TB_TRY(tb_outdir_join(f->results_dir, name, path, sizeof path));
    tb_results *dst;
    if (!strcmp(id, TB_REPORT_CEILINGS))
        dst = &f->ceilings, f->have_ceilings = 1;
    else if (!strcmp(id, TB_REPORT_WATERFALL))
        dst = &f->waterfall, f->have_waterfall = 1;
    else if (!strcmp(id, TB_REPORT_TTA))
        dst = &f->tta, f->have_tta = 1;
    else if (f->ntech < TB_REPORT_MAX_TECH && strlen(id) < sizeof f->tech[0]) {
        snprintf(f->tech[f->ntech], sizeof f->tech[0], "%s", id);
        dst = &f->rows[f->ntech++];
    } else
        return TB_FAIL(TB_ERR_DATA, "%s: too many technique CSVs (or a name over 31 bytes)", path);
    return tb_results_read_csv(path, dst);
}

static int list_dir(const char *dir, const char *suffix, char (*names)[160], int max, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return TB_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !has_suffix(e->d_name, suffix) || strstr(e->d_name, ".tmp."))
            continue;
        if (*n < max && strlen(e->d_name) < 160)
            snprintf(names[(*n)++], 160, "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, 160, cmp_name);
    return TB_OK;
}

/* <root>/results/<slug> -> <root>/plots/<slug> */
static void sibling_plots_dir(const char *results_dir, const char *slug, char *out, size_t cap)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", results_dir);
    char *slash = strrchr(tmp, '/');
    if (slash)
        *slash = '\0';
    char *parent = strrchr(tmp, '/');
    const char *root = tmp;
    if (parent) {
        *parent = '\0';
        if (!tmp[0])
            root = "/";
    } else {
        root = slash ? "." : "..";
    }
    snprintf(out, cap, "%s/plots/%s", root, slug);
}

int tb_report_load(const char *results_dir, const char *plots_dir, tb_report_folder **out)
{
    *out = NULL;
    tb_report_folder *f = calloc(1, sizeof *f);
    char (*names)[160] = calloc(TB_REPORT_MAX_PLOTS, 160);
    int rc = TB_OK, n = 0;
    if (!f || !names) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of memory loading %s", results_dir);
        goto out_fail;
    }
    snprintf(f->results_dir, sizeof f->results_dir, "%s", results_dir);
    size_t len = strlen(f->results_dir);
    while (len > 1 && f->results_dir[len - 1] == '/')
        f->results_dir[--len] = '\0';
    const char *base = strrchr(f->results_dir, '/');
    snprintf(f->slug, sizeof f->slug, "%s", base ? base + 1 : f->results_dir);
    if (plots_dir)
        snprintf(f->plots_dir, sizeof f->plots_dir, "%s", plots_dir);
    else
        sibling_plots_dir(f->results_dir, f->slug, f->plots_dir, sizeof f->plots_dir);
    struct stat st;
    if (stat(f->results_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = TB_FAIL(TB_ERR_IO, "%s is not a results folder (it does not exist)", results_dir);
        goto out_fail;
    }
    TB_TRY_GOTO(rc, list_dir(f->results_dir, ".csv", names, TB_REPORT_MAX_PLOTS, &n), out_fail);
    for (int i = 0; i < n; i++)
        TB_TRY_GOTO(rc, load_csv(f, names[i]), out_fail);
    char path[PATH_MAX + 64];
    TB_TRY_GOTO(rc, tb_outdir_join(f->results_dir, "fingerprint.json", path, sizeof path), out_fail);
    if (access(path, R_OK) == 0) {
        TB_TRY_GOTO(rc, tb_fingerprint_load(path, &f->fp), out_fail);
        f->have_fp = 1;
    }
    TB_TRY_GOTO(rc, tb_outdir_join(f->results_dir, "telemetry.json", path, sizeof path), out_fail);
    if (access(path, R_OK) == 0)
        TB_TRY_GOTO(rc, tb_json_parse_file(path, 0, &f->telemetry), out_fail);
    TB_TRY_GOTO(rc, list_dir(f->plots_dir, ".png", names, TB_REPORT_MAX_PLOTS, &n), out_fail);
    for (int i = 0; i < n; i++)
        snprintf(f->plots[f->nplots++], sizeof f->plots[0], "%.*s", (int)(strlen(names[i]) - 4),
                 names[i]);
    free(names);
    *out = f;
    return TB_OK;
out_fail:
    free(names);
    tb_report_folder_free(f);
    return rc;
}

void tb_report_folder_free(tb_report_folder *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->ntech; i++)
        tb_results_free(&f->rows[i]);
    tb_results_free(&f->ceilings);
    tb_results_free(&f->waterfall);
    tb_results_free(&f->tta);
    tb_json_free(f->telemetry);
    free(f);
}

/* ---- summary table ---- */

static const char *summary_rule =
    "One row per technique. **Measurement**: the whole training step (`step time`) when the "
    "technique measures it, otherwise the first metric it lists. **Point**: the largest swept "
    "size where the baseline and another setting were both timed, the one closest to real "
    "training. **Best setting**: the setting with the largest median speedup there. Every other "
    "setting and size is in the technique's section below and in its CSV.";

/* The summary cells of one pick: technique, measured at, baseline, best,
 * speedup, verdict, correctness. */
enum { SUM_COLS = 7 };

/* "step time, elements = 4096": where the summary compares. A baseline
 * and best setting at different points (a setting that is its own point,
 * tf32 = 0 against tf32 = 1) show both; with nothing compared, the point
 * is shown only when the baseline was timed at several (a lone "on = 0"
 * says nothing). */
static void summary_point(const tb_report_pick *p, char *buf, size_t cap)
{
    const tb_result_row *b = p->baseline, *x = p->best;
    char pt[96], pt2[96];
    point_str(pt, sizeof pt, b);
    if (x && !same_point(b->param_value, x->param_value)) {
        point_str(pt2, sizeof pt2, x);
        snprintf(buf, cap, "%s, %s vs %s", b->metric, pt, pt2);
    } else if (x || p->swept) {
        snprintf(buf, cap, "%s, %s", b->metric, pt);
    } else {
        snprintf(buf, cap, "%s", b->metric);
    }
}

static void summary_cells(const tb_report_pick *p, char cells[SUM_COLS][320])
{
    char bt[96], best[160];
    static const char *not_timed = "n/a: nothing was timed";
    static const char *nothing = "n/a: nothing timed to compare with";
    for (int c = 0; c < SUM_COLS; c++)
        cells[c][0] = '\0';
    snprintf(cells[0], 320, "%s", p->technique);
    if (!p->baseline) {
        snprintf(cells[1], 320, "%s", p->na ? p->na->metric : "");
        snprintf(cells[2], 320, "%s", not_timed);
        if (p->na)
            tb_report_na(cells[3], 320, p->na->setting, p->na->note);
        else
            snprintf(cells[3], 320, "n/a: the CSV has no rows");
        for (int c = 4; c < SUM_COLS; c++)
            snprintf(cells[c], 320, "%s", not_timed);
        return;
    }
    const tb_result_row *b = p->baseline;
    summary_point(p, cells[1], 320);
    tb_report_time(bt, sizeof bt, b);
    snprintf(cells[2], 320, "%s: %s", b->setting, bt);
    if (!p->best) {
        /* The other settings have no meaning here (pinned memory on the
         * CPU): their reason, not a blank. */
        if (p->na)
            tb_report_na(cells[3], 320, p->na->setting, p->na->note);
        else
            snprintf(cells[3], 320, "n/a: no other setting was timed against the baseline");
        snprintf(cells[4], 320, "%s", nothing);
        snprintf(cells[5], 320, "%s", nothing);
        correctness_str(cells[6], 320, b);
        return;
    }
    tb_report_time(bt, sizeof bt, p->best);
    snprintf(best, sizeof best, "%s: %s", p->best->setting, bt);
    snprintf(cells[3], 320, "%s", best);
    tb_report_speedup(cells[4], 320, p->best);
    verdict_str(cells[5], 320, p->best);
    correctness_str(cells[6], 320, p->best);
}

static const char *const summary_header[SUM_COLS] = {
    "technique", "measured at", "baseline: median [95% CI]", "best setting: median [95% CI]",
    "speedup [95% CI]", "verdict", "correctness (tolerance)"};

static void doc_summary(doc *d, const tb_report_pick *picks, size_t n)
{
    doc_text(d, BK_P, "%s", summary_rule);
    doc_table(d, SUM_COLS, summary_header);
    for (size_t i = 0; i < n; i++) {
        char cells[SUM_COLS][320];
        const char *row[SUM_COLS];
        summary_cells(&picks[i], cells);
        for (int c = 0; c < SUM_COLS; c++)
            row[c] = cells[c];
        doc_row(d, row);
    }
}

int tb_report_summary_md(const tb_report_pick *picks, size_t n, FILE *f)
{
    doc d = {0};
    doc_summary(&d, picks, n);
    int rc = d.oom ? TB_FAIL(TB_ERR_NOMEM, "out of memory building the summary") : write_md(&d, f);
    doc_free(&d);
    return rc;
}

static void tex_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': case '%': case '$': case '#': case '_': case '{': case '}':
            fputc('\\', f);
            fputc(*s, f);
            break;
        case '<': fputs("$<$", f); break;
        case '>': fputs("$>$", f); break;
        case '~': fputs("\\textasciitilde{}", f); break;
        case '^': fputs("\\textasciicircum{}", f); break;
        case '\\': fputs("\\textbackslash{}", f); break;
        default:
            if (!strncmp(s, "×", strlen("×"))) {
                fputs("$\\times$", f);
                s += strlen("×") - 1;
            } else if (!strncmp(s, "≤", strlen("≤"))) {
                fputs("$\\le$", f);
                s += strlen("≤") - 1;
            } else if (!strncmp(s, "±", strlen("±"))) {
                fputs("$\\pm$", f);
                s += strlen("±") - 1;
            } else {
                fputc(*s, f);
            }
        }
    }
}

int tb_report_summary_tex(const tb_report_pick *picks, size_t n, const char *device, FILE *f)
{
    fputs("% tunebench summary table, written by bench:report (lib/report/report.c).\n"
          "% Needs \\usepackage{booktabs}. One row per technique; the rule is in REPORT.md.\n"
          "% table* spans both columns of a two-column paper; use table in one column.\n"
          "\\begin{table*}[t]\n\\centering\n\\small\n", f);
    fputs("\\caption{Speedup of each technique over its baseline on ", f);
    tex_escape(f, device);
    fputs(" (median of the repetitions, 95\\% bootstrap interval).}\n"
          "\\label{tab:tunebench-summary}\n"
          "\\begin{tabular}{@{}l p{2.3cm} p{2.6cm} p{2.6cm} p{2.2cm} p{2.1cm} p{3.4cm}@{}}\n"
          "\\toprule\n", f);
    static const char *const tex_header[SUM_COLS] = {
        "Technique", "Measured at", "Baseline", "Best setting", "Speedup [95\\% CI]", "Verdict",
        "Correctness"};
    for (int c = 0; c < SUM_COLS; c++)
        fprintf(f, "%s%s", tex_header[c], c + 1 < SUM_COLS ? " & " : " \\\\\n\\midrule\n");
    for (size_t i = 0; i < n; i++) {
        char cells[SUM_COLS][320];
        summary_cells(&picks[i], cells);
        for (int c = 0; c < SUM_COLS; c++) {
            tex_escape(f, cells[c]);
            fputs(c + 1 < SUM_COLS ? " & " : " \\\\\n", f);
        }
    }
    fputs("\\bottomrule\n\\end{tabular}\n\\end{table*}\n", f);
    return ferror(f) ? TB_FAIL(TB_ERR_IO, "cannot write the LaTeX table") : TB_OK;
}

/* ---- the report's sections ---- */

static const char *newcomer =
    "Each technique was timed on this machine with and without it. The "
    "**baseline** is the technique switched off (for example unfused GELU). A time is the "
    "**median** of at least 5 repetitions after warm-up; the brackets after a number hold its "
    "**95% interval** (a bootstrap over the repetitions): repeat the run and the value would "
    "land there 95 times in 100. **Speedup** is baseline time divided by the technique's time: "
    "2× is twice as fast, below 1× is slower. The **noise floor** is how far the baseline "
    "differs from itself when timed twice in the same run; a speedup whose interval reaches "
    "into it is called **within noise**, not faster or slower. **Correctness** compares the "
    "technique's output with the baseline's or with a float64 reference: **exact** (bitwise "
    "equal), **within tolerance** (largest relative error at most the stated tolerance, which "
    "depends on the number format), or **DIFFERS**. **Ceilings** are the fastest this device "
    "can go (peak arithmetic rate, memory bandwidth), measured in the same run, so a rate can "
    "be read as a fraction of what is possible. Units: s, ms (milliseconds) and us "
    "(microseconds) for times; GB/s (10^9 bytes per second), GFLOP/s (10^9 floating-point "
    "operations per second) and samples/s for rates. "
    "**n/a: reason** marks a setting that has no "
    "meaning on this device; the reason is always given and no number is ever made up.";

static const char *fp_get(const tb_report_folder *f, const char *key, const char *dflt)
{
    const char *v = f->have_fp ? tb_fingerprint_get(&f->fp, key) : NULL;
    return v && v[0] ? v : dflt;
}

static const char *device_name(const tb_report_folder *f)
{
    const char *n = fp_get(f, "device.name", NULL);
    if (n)
        return n;
    for (int i = 0; i < f->ntech; i++)
        if (f->rows[i].n)
            return f->rows[i].rows[0].device;
    return f->slug;
}

static void sec_header(doc *d, const tb_report_folder *f)
{
    doc_text(d, BK_H1, "tunebench report: %s", device_name(f));
    doc_text(d, BK_P,
             "Measured on host `%s` at %s (UTC), git revision `%s`, %s backend with %s threads. "
             "Results in `results/%s/`, figures in `plots/%s/`.",
             fp_get(f, "run.host", "unknown"), fp_get(f, "run.time_utc", "an unrecorded time"),
             fp_get(f, "git.revision", "unknown"), fp_get(f, "device.backend", "unknown"),
             fp_get(f, "device.threads", "an unrecorded number of"), f->slug, f->slug);
    doc_text(d, BK_H2, "How to read this report");
    doc_text(d, BK_LEAD, "%s", newcomer);
}

static int plot_owner(const tb_report_folder *f, const char *plot)
{
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; i < f->ntech; i++) {
        size_t n = strlen(f->tech[i]);
        if (!strncmp(plot, f->tech[i], n) && (plot[n] == '\0' || plot[n] == '_') && n > best_len)
            best = i, best_len = n;
    }
    return best;
}

static void add_figure(doc *d, const tb_report_folder *f, const char *name)
{
    char png[PATH_MAX + 200], md[PATH_MAX + 200], cap[600];
    snprintf(png, sizeof png, "%s/%s.png", f->plots_dir, name);
    char sibling[PATH_MAX];
    /* Relative path when plots/ is the sibling of results/, else absolute. */
    sibling_plots_dir(f->results_dir, f->slug, sibling, sizeof sibling);
    if (!strcmp(sibling, f->plots_dir))
        snprintf(md, sizeof md, "../../plots/%s/%s.png", f->slug, name);
    else
        snprintf(md, sizeof md, "%s", png);
    snprintf(cap, sizeof cap,
             "Figure `%s`: also `%s.svg` (documentation) and `%s.pdf` (papers) in "
             "`plots/%s/`, with the gnuplot script `%s.gp` to restyle it.",
             name, name, name, f->slug, name);
    char alt[200];
    snprintf(alt, sizeof alt, "figure %s", name);
    doc_img(d, png, md, alt, cap);
}

static const char *const tech_header[7] = {
    "setting", "metric", "median [95% CI]", "speedup [95% CI]", "verdict",
    "correctness (tolerance)", "rate [95% CI], share of ceiling"};

static void tech_row_cells(const tb_result_row *r, char cells[7][320])
{
    char rate[160], ceil[200];
    snprintf(cells[0], 320, "%s%s", r->setting, r->is_baseline ? " (baseline)" : "");
    snprintf(cells[1], 320, "%s", r->metric);
    tb_report_time(cells[2], 320, r);
    tb_report_speedup(cells[3], 320, r);
    if (r->is_baseline)
        snprintf(cells[3], 320, "1× (reference)");
    else if (!cells[3][0])
        snprintf(cells[3], 320, "not compared (not a setting of the technique)");
    verdict_str(cells[4], 320, r);
    if (r->timing_verdict == TB_TIMING_NA && r->note[0])
        snprintf(cells[4], 320, "not compared: %s", r->note);
    correctness_str(cells[5], 320, r);
    rate_str(rate, sizeof rate, r);
    ceiling_str(ceil, sizeof ceil, r);
    snprintf(cells[6], 320, "%s%s%s", rate[0] ? rate : "no rate for this metric",
             ceil[0] ? "; " : "", ceil);
}

/* The n/a settings of a technique, each with its reason, under its table. */
static void technique_na(doc *d, const tb_results *res)
{
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (is_timed(r))
            continue;
        char why[400];
        tb_report_na(why, sizeof why, NULL, r->note);
        doc_text(d, BK_P, "Not timed: **%s** (%s), %s.", r->setting, r->metric, why);
    }
}

static void sec_technique(doc *d, const tb_report_folder *f, int t, const tb_report_pick *p)
{
    const tb_results *res = &f->rows[t];
    doc_text(d, BK_H3, "%s", f->tech[t]);
    if (!p->baseline) {
        if (!res->n)
            doc_text(d, BK_P, "n/a: the CSV has no rows");
        technique_na(d, res);
    } else {
        const tb_result_row *b = p->baseline;
        /* Settings that are their own point (workers = 0, 1, 2; tf32 = 0
         * against 1): every point of the summary's metric, not only the
         * baseline's. */
        int own_points = p->best && !same_point(b->param_value, p->best->param_value);
        char pt[96];
        point_str(pt, sizeof pt, b);
        size_t timed = 0;
        for (size_t i = 0; i < res->n; i++)
            timed += is_timed(&res->rows[i]);
        if (!p->best && !p->swept)
            doc_text(d, BK_P,
                     "Every timed setting (one point only). The full run, %zu timed row%s, is "
                     "in `%s.csv`.",
                     timed, timed == 1 ? "" : "s", f->tech[t]);
        else if (own_points)
            doc_text(d, BK_P,
                     "Every setting measured as %s, each at its own `%s`. The full sweep, %zu "
                     "timed row%s, is in `%s.csv` and in the figures.",
                     b->metric, b->param_name, timed, timed == 1 ? "" : "s", f->tech[t]);
        else
            doc_text(d, BK_P,
                     "Every setting at %s (the summary's point). The full sweep, %zu timed "
                     "row%s, is in `%s.csv` and in the figures.",
                     pt, timed, timed == 1 ? "" : "s", f->tech[t]);
        doc_table(d, 7, tech_header);
        for (size_t i = 0; i < res->n; i++) {
            const tb_result_row *r = &res->rows[i];
            if (!is_timed(r))
                continue;
            if (own_points ? strcmp(r->metric, b->metric) != 0
                           : !same_point(r->param_value, b->param_value))
                continue;
            char cells[7][320];
            const char *row[7];
            tech_row_cells(r, cells);
            for (int c = 0; c < 7; c++)
                row[c] = cells[c];
            doc_row(d, row);
        }
        technique_na(d, res);
    }
    for (int i = 0; i < f->nplots; i++)
        if (plot_owner(f, f->plots[i]) == t)
            add_figure(d, f, f->plots[i]);
}

/* The row of ceilings.csv named like r's ceiling, as "2.96 GB/s [2.78,
 * 3.19] (bytes = 16777216)"; it may differ from the technique's own (a
 * small copy fits in cache). */
static void ceilings_match(const tb_report_folder *f, const tb_result_row *r, char *buf, size_t cap)
{
    snprintf(buf, cap, "not measured by bench:ceilings");
    for (size_t i = 0; i < f->ceilings.n; i++) {
        const tb_result_row *c = &f->ceilings.rows[i];
        if (strcmp(c->setting, r->ceiling_name) != 0)
            continue;
        if (!is_timed(c)) {
            tb_report_na(buf, cap, NULL, c->note);
            return;
        }
        char rate[160], pt[96];
        rate_str(rate, sizeof rate, c);
        point_str(pt, sizeof pt, c);
        snprintf(buf, cap, "%s (at %s)", rate, pt);
        return;
    }
}

static void sec_ceilings(doc *d, const tb_report_folder *f, const tb_report_pick *picks)
{
    doc_text(d, BK_H2, "Ceilings: the fastest this device goes");
    if (!f->have_ceilings) {
        doc_text(d, BK_P,
                 "Not measured in this run: `ceilings.csv` is absent. `bazel run //bench:all` "
                 "measures them first; alone: `bazel run //bench:ceilings`.");
        return;
    }
    static const char *const h[5] = {"ceiling", "measured at", "rate [95% CI]",
                                     "time per call: median [95% CI]", "how it was measured, or why not"};
    doc_text(d, BK_P, "Measured in the same run, on the same device, with the same threads.");
    doc_table(d, 5, h);
    for (size_t i = 0; i < f->ceilings.n; i++) {
        const tb_result_row *r = &f->ceilings.rows[i];
        char pt[96], rate[160], tm[160], note[300];
        point_str(pt, sizeof pt, r);
        rate_str(rate, sizeof rate, r);
        tb_report_time(tm, sizeof tm, r);
        if (!is_timed(r)) {
            snprintf(rate, sizeof rate, "n/a");
            snprintf(tm, sizeof tm, "n/a");
            snprintf(pt, sizeof pt, "n/a");
            tb_report_na(note, sizeof note, NULL, r->note);
        } else {
            snprintf(note, sizeof note, "%s", r->note);
        }
        const char *row[5] = {r->setting, pt, rate, tm, note};
        doc_row(d, row);
    }
    static const char *const h2[6] = {"technique", "setting", "metric", "rate [95% CI]",
                                      "share of its ceiling (as the technique measured it)",
                                      "the same ceiling in bench:ceilings"};
    int any = 0;
    for (int t = 0; t < f->ntech; t++) {
        const tb_result_row *rs[2] = {picks[t].baseline, picks[t].best};
        for (int k = 0; k < 2; k++) {
            const tb_result_row *r = rs[k];
            if (!r || !r->ceiling_name[0] || isnan(r->fraction_of_ceiling))
                continue;
            if (!any++) {
                doc_text(d, BK_P, "Each technique's rate at its summary point beside the ceiling "
                                  "it is bounded by, as the technique measured it at the same "
                                  "size (a small copy runs from cache), and as bench:ceilings "
                                  "measured it at its large size.");
                doc_table(d, 6, h2);
            }
            char rate[160], ceil[200], other[200];
            rate_str(rate, sizeof rate, r);
            ceiling_str(ceil, sizeof ceil, r);
            ceilings_match(f, r, other, sizeof other);
            const char *row[6] = {f->tech[t], r->setting, r->metric, rate, ceil, other};
            doc_row(d, row);
        }
    }
}

/* Rows of a waterfall or time-to-accuracy CSV with param_name == kind
 * (NULL: all), as a table. */
static void step_table(doc *d, const tb_results *res, const char *kind, const char *first_col,
                       const char *speedup_col)
{
    const char *h[6] = {first_col, "median [95% CI]", speedup_col, "verdict",
                        "correctness (tolerance)", "note"};
    doc_table(d, 6, h);
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (kind && strcmp(r->param_name, kind) != 0)
            continue;
        char tm[160], sp[160], v[320], c[320], note[300];
        if (!is_timed(r)) {
            tb_report_na(note, sizeof note, NULL, r->note);
            const char *row[6] = {r->setting, "n/a", "n/a", "n/a", "n/a", note};
            doc_row(d, row);
            continue;
        }
        tb_report_time(tm, sizeof tm, r);
        tb_report_speedup(sp, sizeof sp, r);
        if (r->is_baseline)
            snprintf(sp, sizeof sp, "1× (reference)");
        verdict_str(v, sizeof v, r);
        correctness_str(c, sizeof c, r);
        snprintf(note, sizeof note, "%s", r->note);
        const char *row[6] = {r->setting, tm, sp, v, c, note};
        doc_row(d, row);
    }
}

static void sec_waterfall(doc *d, const tb_report_folder *f)
{
    doc_text(d, BK_H2, "Waterfall: techniques switched on one after another");
    if (!f->have_waterfall) {
        doc_text(d, BK_P,
                 "Not measured in this run: `waterfall.csv` is absent. It comes from "
                 "`bazel run //bench:waterfall`, which times the training step with the "
                 "techniques switched on one after another (cumulative speedup) and with all on "
                 "but one (leave-one-out, to show which matter and which interact).");
        return;
    }
    doc_text(d, BK_P, "Each row adds one technique to all the rows above it; the speedup is "
                      "cumulative, against the training step with every technique off. "
                      "Techniques this device gives no meaning to (on the CPU: tensors and "
                      "augmentation made on the device, pinned memory, CUDA graphs) are left out of every "
                      "row here, \"all on\" included; their rows are under \"Not applicable "
                      "on this device\" with the reason.");
    step_table(d, &f->waterfall, "stage", "switched on (cumulative)", "cumulative speedup [95% CI]");
    doc_text(d, BK_P, "Leave-one-out: every technique on except the one named. A technique "
                      "whose removal costs little matters little here; one whose removal costs "
                      "more than its own step above interacts with the others.");
    step_table(d, &f->waterfall, "leave-one-out", "configuration", "speedup over all off [95% CI]");
    for (int i = 0; i < f->nplots; i++)
        if (!strncmp(f->plots[i], TB_REPORT_WATERFALL, strlen(TB_REPORT_WATERFALL)))
            add_figure(d, f, f->plots[i]);
}

static void sec_tta(doc *d, const tb_report_folder *f)
{
    doc_text(d, BK_H2, "Time to 85%% test accuracy (Fashion-MNIST)");
    if (!f->have_tta) {
        doc_text(d, BK_P,
                 "Not measured in this run: `time_to_accuracy.csv` is absent. It comes from "
                 "`bazel run //bench:waterfall`: wall time until the test accuracy first reaches "
                 "85%%, for the baseline and all techniques together (default profile) and for "
                 "each technique alone (full profile). Unlike step time it cannot be gamed: a "
                 "technique that speeds up steps but slows learning shows here.");
        return;
    }
    doc_text(d, BK_P, "Wall time from the start of training until the test accuracy first "
                      "reaches the target; the speedup is against the baseline (every "
                      "technique off).");
    step_table(d, &f->tta, NULL, "configuration", "speedup [95% CI]");
    for (int i = 0; i < f->nplots; i++)
        if (!strncmp(f->plots[i], TB_REPORT_TTA, strlen(TB_REPORT_TTA)))
            add_figure(d, f, f->plots[i]);
}

static void add_na_rows(doc *d, const tb_results *res, int *any)
{
    static const char *const h[4] = {"technique", "setting", "metric", "reason"};
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (is_timed(r))
            continue;
        if (!(*any)++)
            doc_table(d, 4, h);
        char why[300];
        tb_report_na(why, sizeof why, NULL, r->note);
        const char *row[4] = {r->technique, r->setting, r->metric, why};
        doc_row(d, row);
    }
}

static void sec_na(doc *d, const tb_report_folder *f)
{
    doc_text(d, BK_H2, "Not applicable on this device");
    doc_text(d, BK_P, "Settings that have no meaning here, each with its reason. They carry no "
                      "number: nothing is estimated or made up.");
    int any = 0;
    for (int t = 0; t < f->ntech; t++)
        add_na_rows(d, &f->rows[t], &any);
    add_na_rows(d, &f->ceilings, &any);
    add_na_rows(d, &f->waterfall, &any);
    add_na_rows(d, &f->tta, &any);
    if (!any)
        doc_text(d, BK_P, "Every setting was measured.");
}

static void fmt_opt(char *buf, size_t cap, double v, const char *unit)
{
    if (isnan(v)) {
        snprintf(buf, cap, "n/a: not recorded");
        return;
    }
    char n[32];
    tb_report_num(n, sizeof n, v);
    snprintf(buf, cap, "%s%s", n, unit);
}

/* One segment; GPU columns only when the run had a GPU. cpus: logical
 * CPUs, to flag a machine that was busy with something else. */
static void telemetry_row(doc *d, const tb_json *s, int gpu, double cpus)
{
    char dur[64], load[96], util[96], sm[96], temp[64], pw[64], thr[96], note[160];
    double nan_ = NAN;
    fmt_opt(dur, sizeof dur, tb_json_get_number(s, "seconds", nan_), " s");
    char a[40], b[40];
    double before = tb_json_get_number(s, "loadavg_before", nan_);
    fmt_opt(a, sizeof a, before, "");
    fmt_opt(b, sizeof b, tb_json_get_number(s, "loadavg_after", nan_), "");
    snprintf(load, sizeof load, "%s → %s", a, b);
    double um = tb_json_get_number(s, "cpu_util_mean", nan_);
    double ux = tb_json_get_number(s, "cpu_util_max", nan_);
    fmt_opt(a, sizeof a, um * 100, " %");
    fmt_opt(b, sizeof b, ux * 100, " %");
    snprintf(util, sizeof util, "%s (max %s)", a, b);
    snprintf(note, sizeof note, "%s", "");
    if (!isnan(before) && cpus > 0 && before > cpus)
        snprintf(note, sizeof note, "BUSY: load %.1f on %.0f CPUs before it started; other jobs "
                 "shared the machine", before, cpus);
    if (!gpu) {
        const char *row[5] = {tb_json_get_string(s, "label", "?"), dur, load, util, note};
        doc_row(d, row);
        return;
    }
    double gs = tb_json_get_number(s, "gpu_samples", 0);
    fmt_opt(a, sizeof a, tb_json_get_number(s, "gpu_sm_clock_mhz_min", nan_), " MHz");
    fmt_opt(b, sizeof b, tb_json_get_number(s, "gpu_sm_clock_mhz_max", nan_), " MHz");
    snprintf(sm, sizeof sm, "%s to %s", a, b);
    fmt_opt(temp, sizeof temp, tb_json_get_number(s, "gpu_temp_c_max", nan_), " °C");
    fmt_opt(pw, sizeof pw, tb_json_get_number(s, "gpu_power_w_max", nan_), " W");
    double th = tb_json_get_number(s, "throttled_samples", 0);
    if (th > 0)
        snprintf(thr, sizeof thr, "THROTTLED in %.0f of %.0f samples", th, gs);
    else
        snprintf(thr, sizeof thr, "none of %.0f samples", gs);
    const char *row[9] = {tb_json_get_string(s, "label", "?"), dur, load, util, sm, temp, pw,
                          thr, note};
    doc_row(d, row);
}

static void sec_telemetry(doc *d, const tb_report_folder *f)
{
    doc_text(d, BK_H2, "What the machine was doing (telemetry)");
    const tb_json *t = f->telemetry;
    if (!t) {
        doc_text(d, BK_P, "Not recorded in this run: `telemetry.json` is absent (bench:all "
                          "records it; a technique binary run alone does not).");
        return;
    }
    const tb_json *segs = tb_json_get(t, "segments");
    int gpu = 0;
    for (size_t i = 0; segs && i < segs->len; i++)
        gpu |= tb_json_get_number(tb_json_at(segs, i), "gpu_samples", 0) > 0;
    doc_text(d, BK_P,
             "Sampled every %.0f ms while each technique ran. CPU frequency: %s. GPU: %s.%s "
             "A load average above the number of CPUs means other jobs shared the machine: read "
             "those numbers with care.",
             tb_json_get_number(t, "period_ms", NAN), tb_json_get_string(t, "cpu_frequency", "?"),
             tb_json_get_string(t, "gpu", "unknown"),
             gpu ? " A GPU sample counts as throttled when NVML reports a power or thermal reason."
                 : "");
    static const char *const h[9] = {"segment", "duration", "load average (1 min) before → after",
                                     "CPU busy (all cores)", "GPU SM clock", "GPU temperature max",
                                     "GPU power max", "throttled samples", "warning"};
    static const char *const hcpu[5] = {"segment", "duration",
                                        "load average (1 min) before → after",
                                        "CPU busy (all cores)", "warning"};
    if (gpu)
        doc_table(d, 9, h);
    else
        doc_table(d, 5, hcpu);
    const char *cpus_s = fp_get(f, "cpu.logical_cpus", "0");
    double cpus = atof(cpus_s);
    for (size_t i = 0; segs && i < segs->len; i++) {
        const tb_json *s = tb_json_at(segs, i);
        if (tb_json_get_number(s, "samples", 0) == 0)
            continue; /* a boundary with nothing measured in it */
        telemetry_row(d, s, gpu, cpus);
    }
}

static void sec_fingerprint(doc *d, const tb_report_folder *f)
{
    doc_text(d, BK_H2, "Environment fingerprint");
    if (!f->have_fp) {
        doc_text(d, BK_P, "Not recorded: `fingerprint.json` is absent.");
        return;
    }
    doc_text(d, BK_P, "From `fingerprint.json`: what these numbers were measured with. A value "
                      "the machine does not expose reads \"n/a (the reason)\".");
    static const char *const h[2] = {"key", "value"};
    doc_table(d, 2, h);
    for (int i = 0; i < f->fp.n; i++) {
        const tb_fp_entry *e = &f->fp.entries[i];
        if (!strchr(e->key, '.'))
            continue; /* the schema line */
        char val[sizeof e->value + 48];
        snprintf(val, sizeof val, "%s", e->value[0] ? e->value : "(empty: not applicable)");
        if (has_suffix(e->key, "_bytes") && atof(e->value) >= 1 << 30) /* readable size too */
            snprintf(val, sizeof val, "%s (%.1f GiB)", e->value, atof(e->value) / (1 << 30));
        const char *row[2] = {e->key, val};
        doc_row(d, row);
    }
}

static void sec_files(doc *d, const tb_report_folder *f)
{
    doc_text(d, BK_H2, "Files");
    doc_text(d, BK_P,
             "In `results/%s/`: `<technique>.csv` and `.json` (every row; columns in "
             "results/README.md), `<technique>.gbench.json` (Google Benchmark's own output: "
             "its `tools/compare.py benchmarks A.gbench.json B.gbench.json` compares two runs), "
             "`fingerprint.json`, `telemetry.json`, `summary.tex` (this summary as a LaTeX "
             "booktabs table) and `summary.md`. In `plots/%s/`: every figure as PNG, SVG and "
             "PDF with its gnuplot script. To compare machines: `bazel run //bench:compare -- "
             "DIR1 DIR2`.",
             f->slug, f->slug);
}

static void build_doc(doc *d, const tb_report_folder *f, const tb_report_pick *picks)
{
    sec_header(d, f);
    doc_text(d, BK_H2, "Summary");
    doc_summary(d, picks, (size_t)f->ntech);
    sec_ceilings(d, f, picks);
    sec_waterfall(d, f);
    sec_tta(d, f);
    doc_text(d, BK_H2, "Techniques one by one");
    for (int t = 0; t < f->ntech; t++)
        sec_technique(d, f, t, &picks[t]);
    int other = 0;
    for (int i = 0; i < f->nplots; i++) {
        const char *p = f->plots[i];
        if (plot_owner(f, p) >= 0 || !strncmp(p, TB_REPORT_WATERFALL, strlen(TB_REPORT_WATERFALL)) ||
            !strncmp(p, TB_REPORT_TTA, strlen(TB_REPORT_TTA)))
            continue;
        if (!other++)
            doc_text(d, BK_H2, "Other figures");
        add_figure(d, f, p);
    }
    sec_na(d, f);
    sec_telemetry(d, f);
    sec_fingerprint(d, f);
    sec_files(d, f);
}

/* ---- writing ---- */

typedef int (*doc_writer)(const doc *d, const tb_report_folder *f, const tb_report_pick *p, FILE *out);

static int w_md(const doc *d, const tb_report_folder *f, const tb_report_pick *p, FILE *out)
{
    (void)f, (void)p;
    return write_md(d, out);
}

static int w_html(const doc *d, const tb_report_folder *f, const tb_report_pick *p, FILE *out)
{
    (void)p;
    char title[256];
    snprintf(title, sizeof title, "tunebench report: %s", device_name(f));
    return write_html(d, title, out);
}

static int w_sum_md(const doc *d, const tb_report_folder *f, const tb_report_pick *p, FILE *out)
{
    (void)d;
    fprintf(out, "# tunebench summary: %s\n\n", device_name(f));
    return tb_report_summary_md(p, (size_t)f->ntech, out);
}

static int w_sum_tex(const doc *d, const tb_report_folder *f, const tb_report_pick *p, FILE *out)
{
    (void)d;
    return tb_report_summary_tex(p, (size_t)f->ntech, device_name(f), out);
}

static int write_one(const doc *d, const tb_report_folder *f, const tb_report_pick *p,
                     const char *name, doc_writer w)
{
    char path[PATH_MAX + 64];
    tb_atomic_file af;
    int rc;
    TB_TRY(tb_outdir_join(f->results_dir, name, path, sizeof path));
    TB_TRY(tb_atomic_open(&af, path));
    TB_TRY_GOTO(rc, w(d, f, p, af.fp), out_abort);
    TB_TRY_GOTO(rc, tb_atomic_commit(&af), out_fail);
    return TB_OK;
out_abort:
    tb_atomic_abort(&af);
out_fail:
    return TB_FAIL(rc, "cannot write %s", path);
}

int tb_report_write(const tb_report_folder *f)
{
    tb_report_pick picks[TB_REPORT_MAX_TECH];
    for (int t = 0; t < f->ntech; t++)
        tb_report_pick_best(&f->rows[t], f->tech[t], &picks[t]);
    doc d = {0};
    int rc = TB_OK;
    build_doc(&d, f, picks);
    if (d.oom) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of memory building the report");
        goto out_free;
    }
    TB_TRY_GOTO(rc, write_one(&d, f, picks, "REPORT.md", w_md), out_free);
    TB_TRY_GOTO(rc, write_one(&d, f, picks, "REPORT.html", w_html), out_free);
    TB_TRY_GOTO(rc, write_one(&d, f, picks, "summary.md", w_sum_md), out_free);
    TB_TRY_GOTO(rc, write_one(&d, f, picks, "summary.tex", w_sum_tex), out_free);
out_free:
    doc_free(&d);
    return rc;
}

int tb_report_write_dir(const char *results_dir, const char *plots_dir)
{
    tb_report_folder *f = NULL;
    TB_TRY(tb_report_load(results_dir, plots_dir, &f));
    int rc = tb_report_write(f);
    tb_report_folder_free(f);
    return rc;
}

/* ---- the document model, for other pages (lib/report/compare.c) ---- */

tb_doc *tb_doc_new(void) { return calloc(1, sizeof(tb_doc)); }

void tb_doc_heading(tb_doc *d, int level, const char *text)
{
    doc_text(d, level <= 1 ? BK_H1 : level == 2 ? BK_H2 : BK_H3, "%s", text);
}

void tb_doc_para(tb_doc *d, const char *text) { doc_text(d, BK_P, "%s", text); }

void tb_doc_table(tb_doc *d, int ncols, const char *const *header) { doc_table(d, ncols, header); }

void tb_doc_row(tb_doc *d, const char *const *cells) { doc_row(d, cells); }

void tb_doc_figure(tb_doc *d, const char *png, const char *md_src, const char *alt,
                   const char *caption)
{
    doc_img(d, png, md_src, alt, caption);
}

static int save_doc(const char *path, const tb_doc *d, const char *title, int html)
{
    if (d->oom)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory building %s", path);
    tb_atomic_file af;
    int rc;
    TB_TRY(tb_atomic_open(&af, path));
    TB_TRY_GOTO(rc, html ? write_html(d, title, af.fp) : write_md(d, af.fp), out_abort);
    TB_TRY_GOTO(rc, tb_atomic_commit(&af), out_fail);
    return TB_OK;
out_abort:
    tb_atomic_abort(&af);
out_fail:
    return TB_FAIL(rc, "cannot write %s", path);
}

int tb_doc_save_md(const tb_doc *d, const char *path) { return save_doc(path, d, NULL, 0); }

int tb_doc_save_html(const tb_doc *d, const char *title, const char *path)
{
    return save_doc(path, d, title, 1);
}

void tb_doc_free(tb_doc *d)
{
    if (!d)
        return;
    doc_free(d);
    free(d);
}
