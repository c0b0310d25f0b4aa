/*
 * markdown.h - the Markdown writer of the document model (doc_blocks.h).
 * Private to lib/report.
 */
#ifndef TB_REPORT_MARKDOWN_H
#define TB_REPORT_MARKDOWN_H

#include <stdio.h>

#include "lib/report/doc_blocks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes d as Markdown (tables as pipe tables, figures as links). */
int tb_md_write(const doc *d, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
