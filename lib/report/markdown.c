/*
 * markdown.c - the Markdown writer of the document model (doc_blocks.h):
 * REPORT.md, summary.md, COMPARE.md.
 *
 * Test: bazel test //lib/report:report_test
 */
#include "lib/report/markdown.h"

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

int tb_md_write(const doc *d, FILE *f)
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
        case BK_COL:
        case BK_COLS_END: break; /* columns are for the screen; Markdown reads top down */
        }
    }
    return ferror(f) ? TB_FAIL(TB_ERR_IO, "cannot write the Markdown report") : TB_OK;
}
