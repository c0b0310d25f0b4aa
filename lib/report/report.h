/*
 * report.h - the report a newcomer reads: results/<device>/REPORT.md, a
 * self-contained REPORT.html, and the summary table as summary.md and
 * summary.tex (LaTeX, booktabs).
 *
 * Input is a results folder as the technique binaries leave it
 * (results/README.md): every <technique>.csv, fingerprint.json, and when
 * present ceilings.csv (bench:ceilings), waterfall.csv and
 * time_to_accuracy.csv (bench:waterfall), telemetry.json (bench:all), plus
 * the PNGs in the sibling plots/<device>/. Sections whose input is missing
 * say "not measured in this run" and how to measure it.
 *
 * The summary rule (tb_report_pick; stated in the report too): one row per
 * technique. Its metric is "step time" when the technique measures the
 * whole training step, else the first metric its baseline rows list; its
 * point is the largest swept value where the baseline and another setting
 * were both timed (the size closest to real training); its setting is the
 * non-baseline setting with the largest median speedup there (first in the
 * file on a tie).
 *
 * REPORT.html embeds every PNG as a data: URI (base64) and its CSS inline:
 * it references nothing outside itself, so it can be mailed or archived.
 * Every file is written atomically (lib/core/atomic_file.h).
 *
 * Run: bazel run //bench:report -- [--out-dir=DIR] [RESULTS_DIR]
 * Test: bazel test //lib/report:report_test
 */
#ifndef TB_REPORT_H
#define TB_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "lib/core/atomic_file.h"
#include "lib/report/fingerprint.h"
#include "lib/core/json.h"
#include "lib/core/outdir.h"
#include "lib/report/results.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_REPORT_MAX_TECH 64
#define TB_REPORT_MAX_PLOTS 256

/* Special CSVs in a results folder: not techniques. Their rows use the
 * standard schema; their meaning is documented in results/README.md. */
#define TB_REPORT_CEILINGS "ceilings"
#define TB_REPORT_WATERFALL "waterfall"
#define TB_REPORT_TTA "time_to_accuracy"

/* What the summary shows for one technique. Pointers point into the
 * tb_results the pick was made from. */
typedef struct tb_report_pick {
    char technique[32];
    const tb_result_row *baseline; /* baseline row at the chosen point; NULL if none timed */
    const tb_result_row *best;     /* best non-baseline row there; NULL if none has a speedup */
    const tb_result_row *na;       /* the first n/a row, if any (its note is the reason) */
    int swept;                     /* the baseline was timed at more than one point */
} tb_report_pick;

/* Applies the summary rule above to one technique's rows. Never fails; a
 * technique with no timed rows gets baseline = best = NULL and na set (or
 * NULL when it has no rows at all). */
void tb_report_pick_best(const tb_results *rows, const char *technique, tb_report_pick *out);

/* A results folder, loaded. */
typedef struct tb_report_folder {
    char results_dir[PATH_MAX];
    char plots_dir[PATH_MAX];
    char slug[128];             /* basename of results_dir */
    int ntech;
    char tech[TB_REPORT_MAX_TECH][32]; /* technique ids, sorted */
    tb_results rows[TB_REPORT_MAX_TECH];
    tb_results ceilings, waterfall, tta;
    int have_ceilings, have_waterfall, have_tta;
    tb_fingerprint fp;
    int have_fp;
    tb_json *telemetry;         /* NULL when telemetry.json is absent */
    int nplots;
    char plots[TB_REPORT_MAX_PLOTS][128]; /* PNG names without ".png", sorted */
} tb_report_folder;

/* Loads results_dir. plots_dir NULL: the sibling <root>/plots/<slug> of
 * <root>/results/<slug>. A missing plots folder means no figures.
 * Allocates *out (free with tb_report_folder_free). */
int tb_report_load(const char *results_dir, const char *plots_dir, tb_report_folder **out);
void tb_report_folder_free(tb_report_folder *f);

/* The summary table alone: picks[n] as a Markdown table (with the rule as
 * a sentence above it) and as a LaTeX booktabs table (a complete
 * table environment; needs \usepackage{booktabs}). */
int tb_report_summary_md(const tb_report_pick *picks, size_t n, FILE *f);
int tb_report_summary_tex(const tb_report_pick *picks, size_t n, const char *device, FILE *f);

/* Writes REPORT.md, REPORT.html, summary.md and summary.tex into
 * f->results_dir, each atomically. */
int tb_report_write(const tb_report_folder *f);

/* Loads and writes in one call (what bench:all and bench:report do). */
int tb_report_write_dir(const char *results_dir, const char *plots_dir);

/* ---- helpers shared with lib/report/compare.c ---- */

/* A number as the report prints it: 3 significant digits, no exponent
 * between 1e-3 and 1e6 ("0.0123", "12.3", "1234"), "%.3g" outside. */
void tb_report_num(char *buf, size_t cap, double v);

/* "1.93× [1.50, 2.08]" from a row's speedup columns; "" when absent. */
void tb_report_speedup(char *buf, size_t cap, const tb_result_row *r);

/* "setting: n/a: why" (prefix NULL: "n/a: why") from an n/a row's note;
 * a note that itself begins with "n/a" is not repeated, an empty one is
 * reported as a bug of whatever wrote the row. */
void tb_report_na(char *buf, size_t cap, const char *prefix, const char *note);

/* "12.3 us [11.9, 13.0]" from a row's median and interval. */
void tb_report_time(char *buf, size_t cap, const tb_result_row *r);

/* The base64 of a file (RFC 4648, no line breaks) in *out (malloc'ed). */
int tb_report_base64_file(const char *path, char **out);

/* Writes s with &, <, >, " escaped. */
void tb_report_html_escape(FILE *f, const char *s);

/* The HTML head (title, inline CSS) and tail every tunebench page shares. */
void tb_report_html_begin(FILE *f, const char *title);
void tb_report_html_end(FILE *f);

/* The document model the report is built with, for other pages
 * (bench:compare): headings, paragraphs (`code` and **bold** allowed),
 * tables, figures; written as Markdown or as self-contained HTML
 * (figures embedded), atomically. Out of memory is reported at save. */
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
