/*
 * html.h - the HTML writer of the document model (doc_blocks.h): one
 * self-contained page, CSS inline and figures embedded. Private to
 * lib/report.
 */
#ifndef TB_REPORT_HTML_H
#define TB_REPORT_HTML_H

#include <stdio.h>

#include "lib/report/doc_blocks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes d as one HTML page titled title. */
int tb_html_write(const doc *d, const char *title, FILE *f);

/* The base64 of a file (RFC 4648, no line breaks) in *out (malloc'ed). */
int tb_report_base64_file(const char *path, char **out);

/* Writes s with &, <, >, " escaped. */
void tb_report_html_escape(FILE *f, const char *s);

/* The HTML head (title, inline CSS) and tail every tunebench page shares. */
void tb_report_html_begin(FILE *f, const char *title);
void tb_report_html_end(FILE *f);

#ifdef __cplusplus
}
#endif
#endif
