/*
 * summary.h - the summary: one row per technique, picked by the summary
 * rule (stated in report.h and in the report itself), as a Markdown table
 * (summary.c) and as a LaTeX booktabs table (latex.c). A step technique
 * measured on several workloads (issue 15) has a row per workload
 * (tb_report_pick_workload), and the Markdown adds a "Per workload" table:
 * a row per such technique, a column per workload.
 *
 * Test: bazel test //lib/report:report_test (goldens:
 * testdata/report_summary_golden.md and .tex)
 */
#ifndef TB_REPORT_SUMMARY_H
#define TB_REPORT_SUMMARY_H

#include <stddef.h>
#include <stdio.h>

#include "lib/report/cells.h"
#include "lib/report/doc.h"
#include "lib/report/results.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many of a technique's timed rows carry each flag (cells.h,
 * TB_FLAG_*). */
typedef struct tb_report_flag_counts {
    int rows;                 /* timed rows */
    int flagged;              /* rows with at least one flag */
    int budget, cap, busy, unreliable, imprecise;
    double max_load;          /* largest load_avg of a busy row; NaN when none */
    double xcore_lo, xcore_hi; /* least and largest xcore_ns of its timed rows (the
                                  machine state, results/README.md); NaN when none */
} tb_report_flag_counts;

/* What the summary shows for one technique. Pointers point into the
 * tb_results the pick was made from. */
typedef struct tb_report_pick {
    char technique[32];
    const tb_result_row *baseline; /* baseline row at the chosen point; NULL if none timed */
    const tb_result_row *best;     /* best non-baseline row there; NULL if none has a speedup */
    const tb_result_row *na;       /* the first n/a row, if any (its note is the reason) */
    const tb_result_row *differs;  /* the first compared row whose result DIFFERS, if any
                                      (the findings put it first, headline or not) */
    int swept;                     /* the baseline was timed at more than one point */
    int headline;                  /* 1: best is the headline setting the technique
                                      declares; 0: none declared (or not timed), best
                                      is the fastest of the settings */
    tb_report_flag_counts flags;   /* over all the technique's rows */
    char workload[96];             /* what it ran on ("ResNet-50", "small CNN"); "" unknown */
    /* The workload column the pick is limited to ("gpt2-reduced-synthetic"):
     * a step technique measured on several workloads has one pick for each
     * (tb_report_pick_workload); "": all the technique's rows. */
    char of_workload[48];
    /* "": measured by the run the folder holds; else why not, as a phrase
     * ("its CSV written 2026-11-29 21:04 UTC, before this run began"; a
     * run with --only leaves the other techniques' earlier results in
     * place): tb_report_folder's earlier */
    char earlier[96];
    /* The least xcore_ns over every technique's rows of the run (0: not
     * known): a shown row measured at 3x that or more was measured in the
     * other machine state (the CPUs apart), and its flags say so */
    double xcore_least;
} tb_report_pick;

/* A round trip this many times the run's least one is the other machine
 * state (the EPYC VM's: 55-80 ns sharing a cache, 315-570 ns apart); the
 * factor of bench/harness/machine_probe.h's TB_MACHINE_XCORE_STATES. */
#define TB_REPORT_XCORE_STATES 3.0

/* 1 when row r of pick p was measured in the other machine state: its
 * xcore_ns TB_REPORT_XCORE_STATES times the run's least or more. */
int tb_report_pick_apart(const tb_report_pick *p, const tb_result_row *r);

/* When row r of p was measured in the other machine state, appends to buf
 * ("; " first when buf is not empty) lead and "CPUs apart (core-to-core N
 * ns, the run's least M)"; else leaves buf as it is. */
void tb_report_append_apart(const tb_report_pick *p, const tb_result_row *r, const char *lead,
                            char *buf, size_t cap);

/* "" when no setting of p other than the shown one DIFFERS; else
 * "setting 'fp16' DIFFERS (max rel err 0.072 > 0.02)": the summary shows
 * one setting, and a reader must not take its verdict for the
 * technique's (the H200 run's bf16 "within tolerance" beside fp16's
 * DIFFERS). */
void tb_report_other_differs(const tb_report_pick *p, char *buf, size_t cap);

/* The summary's groups, in the order the report shows them. */
typedef enum tb_report_group {
    TB_GROUP_FASTER = 0,           /* the shown setting's verdict is faster */
    TB_GROUP_NO_EFFECT,            /* within noise, or no verdict */
    TB_GROUP_SLOWER,
    TB_GROUP_NA,                   /* nothing compared here; the n/a reason says why */
    TB_GROUP_COUNT
} tb_report_group;

/* Counts the flags of res's rows of technique into *out. */
void tb_report_count_flags(const tb_results *res, const char *technique,
                           tb_report_flag_counts *out);

/* Applies the summary rule to one technique's rows. Never fails; a
 * technique with no timed rows gets baseline = best = NULL and na set (or
 * NULL when it has no rows at all). */
void tb_report_pick_best(const tb_results *rows, const char *technique, tb_report_pick *out);

/* As tb_report_pick_best, but the shown setting is `headline` (the one the
 * technique declares in its home, bench/techniques/<name>.c) at the same
 * point, when it was timed there; headline NULL or "" or not timed: the
 * fastest, with out->headline = 0 so the report can say so (the best of
 * several noisy settings is biased upward). metric: the one the technique
 * declares its headline is read on (technique.h: headline_metric), when
 * a timed baseline has it; NULL, "" or not timed: "step time" when timed,
 * else the first metric its rows list. */
void tb_report_pick_headline(const tb_results *rows, const char *technique, const char *headline,
                             const char *metric, tb_report_pick *out);

/* As tb_report_pick_headline over the technique's rows whose workload
 * column is `workload` only (NULL or "": all its rows), with
 * out->of_workload set to it: one summary row per (technique, workload),
 * so that a tip helping GPT-2 and doing nothing for ResNet-50 shows both. */
void tb_report_pick_workload(const tb_results *rows, const char *technique, const char *headline,
                             const char *metric, const char *workload, tb_report_pick *out);

/* The distinct non-empty workload columns of the technique's rows, in the
 * order they first appear, into names[0..max); returns how many (at most
 * max). */
size_t tb_report_workloads(const tb_results *rows, const char *technique, char names[][48],
                           size_t max);

tb_report_group tb_report_pick_group(const tb_report_pick *p);
/* "faster", "no detectable effect", "slower", "not applicable here". */
const char *tb_report_group_name(tb_report_group g);

/* The summary's order: faster (largest speedup first), no detectable
 * effect (largest first), slower (largest slowdown first), not applicable
 * (by name). Writes n indices into order. */
void tb_report_order(const tb_report_pick *picks, size_t n, size_t *order);

/* The summary table alone: picks[n] as a Markdown table (with the rule as
 * a sentence above it) and as LaTeX booktabs tables (one complete
 * table* per verdict group, compact cells, \textwidth wide; needs
 * \usepackage{booktabs,tabularx}). */
int tb_report_summary_md(const tb_report_pick *picks, size_t n, FILE *f);
int tb_report_summary_tex(const tb_report_pick *picks, size_t n, const char *device, FILE *f);

/* ---- for the writers in lib/report ---- */

/* The summary cells of one pick: technique, measured at, baseline, best,
 * speedup, verdict, correctness, flags (the shown row's, and a busy
 * machine for the technique as a whole). */
enum { SUM_COLS = 8 };
void tb_report_summary_cells(const tb_report_pick *p, char cells[SUM_COLS][TB_REPORT_CELL]);

/* The rule as a paragraph, then one table per group (tb_report_order; the
 * not-applicable group as technique and reason), then the flag counts over
 * every row of every technique, appended to d. */
void tb_report_summary_doc(tb_doc *d, const tb_report_pick *picks, size_t n);

#ifdef __cplusplus
}
#endif
#endif
