/*
 * folder.h - what loading a results folder (folder.c) shares with the
 * report's sections (report.c). Private to lib/report.
 */
#ifndef TB_REPORT_FOLDER_H
#define TB_REPORT_FOLDER_H

#include <stddef.h>

#include "lib/report/report.h"

#ifdef __cplusplus
extern "C" {
#endif

/* s ends with suf. */
int tb_report_has_suffix(const char *s, const char *suf);

/* <root>/results/<slug> -> <root>/plots/<slug>, in out (cap bytes). */
void tb_report_sibling_plots_dir(const char *results_dir, const char *slug, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
