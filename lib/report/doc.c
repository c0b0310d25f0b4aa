/*
 * doc.c - the document model: a page built once as a list of blocks
 * (headings, paragraphs, tables, figures), then written by the Markdown
 * and HTML writers (markdown.c, html.c); see doc.h.
 *
 * Test: bazel test //lib/report:report_test //lib/report:compare_test
 */
#define _GNU_SOURCE
#include "lib/report/doc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/atomic_file.h"
#include "lib/core/grow.h"
#include "lib/report/doc_blocks.h"
#include "lib/report/html.h"
#include "lib/report/markdown.h"

static block *doc_add(doc *d, block_kind kind)
{
    block *p = tb_grow(d->b, &d->cap, d->n, sizeof *p, 64);
    if (!p) {
        d->oom = 1;
        return NULL;
    }
    d->b = p;
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

void tb_doc_text(doc *d, block_kind kind, const char *fmt, ...)
{
    block *b = doc_add(d, kind);
    if (!b)
        return;
    va_list ap;
    va_start(ap, fmt);
    b->text = vfmt(d, fmt, ap);
    va_end(ap);
}

void tb_doc_table(tb_doc *d, int ncols, const char *const *header)
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
void tb_doc_row(tb_doc *d, const char *const *cells)
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
        if (!(p[(size_t)(b->nrows + 1) * (size_t)b->ncols + (size_t)c] =
                  strdup(cells[c] ? cells[c] : "")))
            d->oom = 1;
    b->nrows++;
}

void tb_doc_figure(tb_doc *d, const char *png, const char *md_src, const char *alt,
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

void tb_doc_clear(doc *d)
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

tb_doc *tb_doc_new(void) { return calloc(1, sizeof(tb_doc)); }

void tb_doc_heading(tb_doc *d, int level, const char *text)
{
    tb_doc_text(d, level <= 1 ? BK_H1 : level == 2 ? BK_H2 : BK_H3, "%s", text);
}

void tb_doc_para(tb_doc *d, const char *text) { tb_doc_text(d, BK_P, "%s", text); }

/* A page to save: the doc, and its title when written as HTML. */
typedef struct page {
    const tb_doc *d;
    const char *title;
    int html;
} page;

static int write_page(const void *arg, FILE *f)
{
    const page *p = arg;
    return p->html ? tb_html_write(p->d, p->title, f) : tb_md_write(p->d, f);
}

static int save_doc(const char *path, const tb_doc *d, const char *title, int html)
{
    if (d->oom)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory building %s", path);
    page p = {d, title, html};
    return tb_atomic_write_with(path, write_page, &p);
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
    tb_doc_clear(d);
    free(d);
}
