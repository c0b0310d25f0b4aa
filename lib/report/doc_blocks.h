/*
 * doc_blocks.h - inside the document model (doc.h): the blocks a page is
 * made of, for the writers (markdown.c, html.c) and for the report's own
 * sections (report.c, summary.c), which also use the lead paragraph and
 * formatted text. Private to lib/report.
 */
#ifndef TB_REPORT_DOC_BLOCKS_H
#define TB_REPORT_DOC_BLOCKS_H

#include <stddef.h>

#include "lib/report/doc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* BK_COL starts a column (the first one also the row of columns that
 * holds it), BK_COLS_END closes the row: side by side in HTML (the
 * findings beside the forest plot, so both are on the first screen),
 * one after the other in Markdown. */
typedef enum block_kind {
    BK_H1, BK_H2, BK_H3, BK_P, BK_LEAD, BK_TABLE, BK_IMG, BK_COL, BK_COLS_END
} block_kind;

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

/* Appends a block of text (a heading, a paragraph, the lead) made from a
 * printf format. */
void tb_doc_text(doc *d, block_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Frees the blocks of d, not d itself (a doc on the stack). */
void tb_doc_clear(doc *d);

#ifdef __cplusplus
}
#endif
#endif
