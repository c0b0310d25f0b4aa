/*
 * cells.h - a result row's numbers as text, the way the tables of the
 * report (report.c, summary.c) and of the comparison (compare.c) print
 * them: times, speedups and rates with their 95% intervals, verdicts,
 * correctness, the sweep point, and the reason of an n/a row.
 * Private to lib/report.
 *
 * Test: bazel test //lib/report:report_test
 */
#ifndef TB_REPORT_CELLS_H
#define TB_REPORT_CELLS_H

#include <math.h>
#include <stddef.h>

#include "lib/report/results.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The room of one table cell: an n/a reason is a row's whole note (512
 * bytes) behind a setting's name, and must not be cut mid-word. */
#define TB_REPORT_CELL 640

/* A number as the report prints it: 3 significant digits, no exponent
 * between 1e-3 and 1e6 ("0.0123", "12.3", "1234"), "%.3g" outside. */
void tb_report_num(char *buf, size_t cap, double v);

/* buf holds v as a table prints it; when v is on one side of 1 and the
 * text reads as 1 or beyond (a faster row's lower end 1.0034 as "1.00"),
 * v is printed again with as many decimals as it takes (up to 6), so that
 * an interval that excludes 1 never reads as holding it. Returns the
 * decimals used, 0 when buf was left as it was. */
int tb_report_num_off_one(char *buf, size_t cap, double v);

/* "1.93× [1.50, 2.08]" from a row's speedup columns; "" when absent. An
 * end of an interval that excludes 1 keeps its side (tb_report_num_off_one),
 * and the estimate then has as many decimals. */
void tb_report_speedup(char *buf, size_t cap, const tb_result_row *r);

/* "setting: n/a: why" (prefix NULL: "n/a: why") from an n/a row's note;
 * a note that itself begins with "n/a" is not repeated, an empty one is
 * reported as a bug of whatever wrote the row. */
void tb_report_na(char *buf, size_t cap, const char *prefix, const char *note);

/* "12.3 us [11.9, 13.0]" from a row's median and interval. */
void tb_report_time(char *buf, size_t cap, const tb_result_row *r);

/* "812 samples/s [790, 830]": the rate, its interval derived from the
 * time's; "" when the row has no rate. */
void tb_report_rate(char *buf, size_t cap, const tb_result_row *r);

/* "41.2% of dram_read (12.3 GB/s)"; "" when the row names no ceiling. */
void tb_report_ceiling(char *buf, size_t cap, const tb_result_row *r);

/* faster / slower / within noise (with the noise floor) / no verdict. */
void tb_report_verdict(char *buf, size_t cap, const tb_result_row *r);

/* 1 when the row's note says its loss check was weak (step_harness.c:
 * weak_check): the baseline's loss so near a model that predicts nothing
 * that such a model passes too, and the first update judged beside it. */
int tb_report_weak_check(const tb_result_row *r);

/* exact / within tolerance / DIFFERS (with the error, the tolerance and
 * what the row was checked against) / not checked. */
void tb_report_correctness(char *buf, size_t cap, const tb_result_row *r);

/* The test accuracy a row's note gives ("test accuracy 58.8% ..."): 1 and
 * *pct, or 0. */
int tb_report_note_accuracy(const tb_result_row *r, double *pct);

/* 1, with both accuracies, where r is a setting compared by accuracy, not
 * loss (correctness n/a: another trajectory) and the notes of r and of its
 * baseline give test accuracies; 0 otherwise. */
int tb_report_accuracy_pair(const tb_result_row *r, const tb_result_row *base, double *mine,
                            double *theirs);

/* As tb_report_correctness, but a setting its technique cannot compare by
 * loss (another batch size or optimizer: another trajectory) whose note and
 * its baseline's give test accuracies says them, not a bare "not checked":
 * batch 64 was 1.06x faster per sample with 58.8% against 70.1% (run 52). */
void tb_report_correctness_vs(char *buf, size_t cap, const tb_result_row *r,
                              const tb_result_row *base);

/* "batch = 64" (an integer value without decimals), or "(no sweep)". */
void tb_report_point(char *buf, size_t cap, const tb_result_row *r);

/* ---- flags beside a row (issue 14: a row the report cannot vouch for
 * says why, instead of passing as precise) ---- */

/* An interval half-width or noise floor above this is "imprecise" unless
 * the row says why (stopped by the budget, or a busy machine). */
#define TB_REPORT_IMPRECISE 0.10

enum {
    TB_FLAG_BUDGET = 1 << 0,     /* the rounds stopped on the time budget */
    TB_FLAG_CAP = 1 << 1,        /* the rounds stopped on the round cap */
    TB_FLAG_BUSY = 1 << 2,       /* measured on a busy machine */
    TB_FLAG_UNRELIABLE = 1 << 3, /* its baseline's A/A interval excludes 1 */
    TB_FLAG_IMPRECISE = 1 << 4,  /* wide, and neither BUDGET nor BUSY says why */
};

/* The relative half-width of a row's speedup interval,
 * max(hi / speedup - 1, 1 - lo / speedup); NaN for a baseline row or a
 * row without an interval. */
double tb_report_half_width(const tb_result_row *r);

/* The TB_FLAG_* bits of a timed row (0 for an n/a row). */
int tb_report_row_flags(const tb_result_row *r);

/* The flags of r among `which` (a mask of TB_FLAG_*) as text joined by
 * "; ", e.g. "stopped by budget after 40 rounds (interval ±4.2%); busy
 * machine (load 3.50)"; "" when none. */
void tb_report_flags_text(char *buf, size_t cap, const tb_result_row *r, int which);

/* A row with a median was timed; an n/a row was not. */
static inline int is_timed(const tb_result_row *r) { return !isnan(r->median); }

/* Two sweep points are the same; NaN (no sweep) equals NaN. */
static inline int same_point(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

#ifdef __cplusplus
}
#endif
#endif
