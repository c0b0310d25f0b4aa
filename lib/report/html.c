/*
 * html.c - the HTML writer of the document model (doc_blocks.h): a
 * self-contained page (REPORT.html, COMPARE.html), its CSS inline and
 * every figure embedded as a base64 data: URI.
 *
 * Test: bazel test //lib/report:report_test
 */
#include "lib/report/html.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    /* a flags cell (cells.h): a biased harness is worse than a wide interval */
    if (!strncmp(s, "unreliable", 10) || strstr(s, "; unreliable"))
        return "bad";
    if (!strncmp(s, "stopped by budget", 17) || !strncmp(s, "stopped at the round cap", 24) ||
        !strncmp(s, "busy machine", 12) || !strncmp(s, "imprecise", 9))
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

/* A figure the run did not draw (no gnuplot where it ran: TB_GNUPLOT=none,
 * as the GPU kit does) is named, with how to draw it, instead of failing the
 * whole report; any other unreadable PNG is an error. */
static void html_img_missing(FILE *f, const block *b)
{
    fputs("<figure><p><em>Figure not drawn where this run took place (no gnuplot): ", f);
    tb_report_html_escape(f, b->png);
    fputs(" is made by its gnuplot script beside it (<code>gnuplot NAME.gp</code> in the plots "
          "folder); the report's tables hold the same numbers.</em></p><figcaption>", f);
    html_inline(f, b->text);
    fputs("</figcaption></figure>\n", f);
}

static int html_img(FILE *f, const block *b)
{
    char *b64 = NULL;
    if (access(b->png, F_OK) != 0 && errno == ENOENT) {
        html_img_missing(f, b);
        return TB_OK;
    }
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
          "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1360px;"
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
          ".cols{display:flex;gap:1.6em;align-items:flex-start}.col{flex:1 1 0;min-width:0}\n"
          ".col:first-child{flex:0 0 34%}.col figure{margin:0}"
          ".col figure img{width:auto;max-height:78vh}h1+p+h2{margin-top:1em}\n"
          "</style>\n</head>\n<body>\n", f);
}

void tb_report_html_end(FILE *f) { fputs("</body>\n</html>\n", f); }

int tb_html_write(const doc *d, const char *title, FILE *f)
{
    int in_cols = 0;
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
        case BK_COL:
            fputs(in_cols ? "</div>\n<div class=\"col\">\n" : "<div class=\"cols\">\n<div class=\"col\">\n", f);
            in_cols = 1;
            break;
        case BK_COLS_END:
            if (in_cols)
                fputs("</div>\n</div>\n", f);
            in_cols = 0;
            break;
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
