/*
 * doc.h - the document model the report is built with, for other pages
 * too (bench:compare): headings, paragraphs (`code` and **bold**
 * allowed), tables, figures; written as Markdown or as self-contained HTML
 * (figures embedded), atomically. Out of memory is reported at save.
 *
 * Test: bazel test //lib/report:report_test //lib/report:compare_test
 */
#ifndef TB_REPORT_DOC_H
#define TB_REPORT_DOC_H

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_doc tb_doc;
tb_doc *tb_doc_new(void);
void tb_doc_heading(tb_doc *d, int level, const char *text);
void tb_doc_para(tb_doc *d, const char *text);
void tb_doc_table(tb_doc *d, int ncols, const char *const *header);
/* Appends a row (ncols cells) to the table added last. */
void tb_doc_row(tb_doc *d, const char *const *cells);
void tb_doc_figure(tb_doc *d, const char *png, const char *md_src, const char *alt,
                   const char *caption);
int tb_doc_save_md(const tb_doc *d, const char *path);
int tb_doc_save_html(const tb_doc *d, const char *title, const char *path);
void tb_doc_free(tb_doc *d);

#ifdef __cplusplus
}
#endif
#endif
