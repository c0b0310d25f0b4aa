/*
 * report.h - the report a newcomer reads: results/<device>/REPORT.md, a
 * self-contained REPORT.html, and the summary table as summary.md and
 * summary.tex (LaTeX: booktabs, tabularx).
 *
 * Input is a results folder as the technique binaries leave it
 * (results/README.md): every <technique>.csv, fingerprint.json, and when
 * present ceilings.csv (bench:ceilings), waterfall.csv and
 * time_to_accuracy.csv (bench:waterfall), telemetry.json and budget.json
 * (bench:all), plus
 * the PNGs in the sibling plots/<device>/. Sections whose input is missing
 * say "not measured in this run" and how to measure it.
 *
 * The summary rule (tb_report_pick_best, summary.h; stated in the report
 * too): one row per technique. Its metric is the one the technique declares
 * its headline is read on (technique.h: headline_metric) where its rows
 * have it, else "step time" when the technique measures the whole
 * training step, else the first metric its baseline rows list; its point is the largest swept value where the
 * baseline and another setting were both timed (the size closest to real
 * training); its setting is the headline the technique declares
 * (bench/harness/technique.h, carried by its JSON sidecar), else the
 * non-baseline setting with the largest median speedup there (first in the
 * file on a tie), said as such. The summary is grouped faster / no
 * detectable effect / slower / not applicable and sorted by effect.
 *
 * The report opens with the findings (findings.h) beside the forest plot
 * (forest.h, plots/<device>/forest.*), then the summary; the waterfall and
 * leave-one-out are drawn as labeled bars (bars.h). Every figure has a
 * caption saying what was measured, on what, with how many rounds.
 *
 * Flags (cells.h, TB_FLAG_*; the table is in results/README.md): beside
 * every row, in the summary (where a busy machine is said once per
 * technique), counted under the summary, and listed under "Flagged rows":
 * stopped by the budget or the round cap (with the width reached), a busy
 * machine (its load), an unreliable A/A, and "imprecise" for an interval
 * half-width or noise floor above 10% that nothing else explains. A
 * technique with a busy row says so above its table. "Time budgets" shows
 * budget.json: the profile limit that applied.
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
#include "lib/report/summary.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_REPORT_MAX_TECH 64
#define TB_REPORT_MAX_PLOTS 256
/* bench:all's record of the machine's state before each technique
 * (bench/harness/machine_probe.h): a CSV of its own schema in the results
 * folder, which the report does not read as a technique's. */
#define TB_REPORT_MACHINE_PROBE_CSV "machine_probe.csv"

/* Special CSVs in a results folder: not techniques. Their rows use the
 * standard schema; their meaning is documented in results/README.md. */
#define TB_REPORT_CEILINGS "ceilings"
#define TB_REPORT_WATERFALL "waterfall"
#define TB_REPORT_TTA "time_to_accuracy"

/* A results folder, loaded. */
typedef struct tb_report_folder {
    char results_dir[PATH_MAX];
    char plots_dir[PATH_MAX];
    char slug[128];             /* basename of results_dir */
    int ntech;
    char tech[TB_REPORT_MAX_TECH][32]; /* technique ids, sorted */
    tb_results rows[TB_REPORT_MAX_TECH];
    /* From each <technique>.json beside the CSV: the headline setting the
     * technique declares ("headline") and the metric it is read on
     * ("headline_metric"), and the workload its rows name (a "workload"
     * column, when results carry one); "" when absent. */
    char headline[TB_REPORT_MAX_TECH][64];
    char headline_metric[TB_REPORT_MAX_TECH][96];
    /* Why technique t's rows are not the run's the folder holds, as a
     * phrase ("its CSV written 2026-11-29 21:04 UTC, before this run
     * began"); "" when they are its. With run_state.json and a budget.json
     * naming each technique's CSV, a CSV is this run's when the technique
     * that writes it is among the run's finished ones; else (older folders)
     * when it was written after the run began (run_state.fingerprint.json's
     * run.time_utc: bench:all's start, kept across --resume). */
    char earlier[TB_REPORT_MAX_TECH][96];
    /* When the bench:all run the folder holds began (run.time_utc of
     * run_state.fingerprint.json); "" without one */
    char run_started[32];
    /* The same for ceilings.csv, waterfall.csv and time_to_accuracy.csv */
    char earlier_ceilings[96], earlier_waterfall[96], earlier_tta[96];
    /* From run_state.json: have_state when it was read; complete when the
     * run finished every technique it planned; unfinished, the planned
     * techniques (budget.json) it did not finish, as "a (no results), b
     * (an earlier run's rows)", and how many ("" and 0: none) */
    int have_state, complete, nunfinished;
    char unfinished[1024];
    /* "gelu (Intel Xeon 8480C), ...": techniques whose rows name another
     * device than fingerprint.json's; "" when none */
    char other_device[512];
    char workload[TB_REPORT_MAX_TECH][96];
    tb_results ceilings, waterfall, tta;
    int have_ceilings, have_waterfall, have_tta;
    tb_fingerprint fp;
    int have_fp;
    tb_json *telemetry;         /* NULL when telemetry.json is absent */
    tb_json *budget;            /* budget.json (bench:all's plan: the profile, its
                                   limit, each technique's budget); NULL when absent */
    int nplots;
    char plots[TB_REPORT_MAX_PLOTS][128]; /* PNG names without ".png", sorted */
} tb_report_folder;

/* Loads results_dir. plots_dir NULL: the sibling <root>/plots/<slug> of
 * <root>/results/<slug>. A missing plots folder means no figures.
 * Allocates *out (free with tb_report_folder_free). */
int tb_report_load(const char *results_dir, const char *plots_dir, tb_report_folder **out);
void tb_report_folder_free(tb_report_folder *f);

/* Writes REPORT.md, REPORT.html, summary.md and summary.tex into
 * f->results_dir, each atomically. */
int tb_report_write(const tb_report_folder *f);

/* The results folders that dir names, the way users give one: dir itself
 * when it is one (it holds fingerprint.json or a CSV); else the device
 * folders (each holding fingerprint.json) of dir/results/ (dir is a root,
 * as bench:all's --out-dir); else those of dir (dir is results/ itself).
 * At most max paths, in name order, into out (max strings of cap bytes,
 * one after another); their count into *n (at most max: TB_ERR_INVALID
 * past it). TB_ERR_IO naming dir and the three forms when there is none. */
int tb_report_results_folders(const char *dir, char *out, size_t cap, int max, int *n);

/* Loads and writes in one call (what bench:all and bench:report do). */
int tb_report_write_dir(const char *results_dir, const char *plots_dir);

/* The report's findings (findings.h) for a loaded folder, one a line after
 * prefix, without Markdown: the closing lines of bench:all and bench:report
 * (from the folder their report was written from: loading it again would
 * say its warnings twice). */
int tb_report_print_findings(const tb_report_folder *f, const char *prefix, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
