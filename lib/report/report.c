/*
 * report.c - REPORT.md, REPORT.html, summary.md and summary.tex for one
 * results folder; see report.h for the contents and the summary rule.
 *
 * The report is built once in the document model (doc_blocks.h) from its
 * sections below, and then written twice, as Markdown and as HTML, so the
 * two cannot drift apart. Text may use `code` and **bold**; the HTML writer
 * turns those into tags. The summary (summary.c, latex.c), the cells
 * (cells.c), loading a folder (folder.c) and the writers (markdown.c,
 * html.c) each have their own file.
 *
 * Test: bazel test //lib/report:report_test
 */
#include "lib/report/report.h"

#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "lib/report/bars.h"
#include "lib/report/cells.h"
#include "lib/report/doc_blocks.h"
#include "lib/report/findings.h"
#include "lib/report/folder.h"
#include "lib/report/forest.h"
#include "lib/report/html.h"
#include "lib/report/markdown.h"

/* ---- the report's sections ---- */

/* The summary's rows: a technique measured on several workloads (at most
 * REPORT_MAX_WL) has one per workload. */
#define REPORT_MAX_WL 4
#define REPORT_MAX_PICKS (TB_REPORT_MAX_TECH * REPORT_MAX_WL)

typedef struct report_picks {
    tb_report_pick tech[TB_REPORT_MAX_TECH]; /* per technique: its own section */
    tb_report_pick wl[REPORT_MAX_PICKS];     /* summary, findings, forest plot */
    size_t nwl;
} report_picks;

static const char *newcomer =
    "Each technique was timed on this machine with and without it. The "
    "**baseline** is the technique switched off (for example unfused GELU). Settings are timed "
    "in **rounds**: each round times the baseline and every setting once, in an order shuffled "
    "per round from a recorded seed, so a drift in the machine's speed hits them all alike. A "
    "time is the **median** of its repetitions after warm-up; the brackets after a number hold "
    "its **95% interval**: repeat the run and the value would land there 95 times in 100. "
    "**Speedup** is baseline time divided by the technique's time: 2× is twice as fast, below "
    "1× is slower; for a paired row its interval comes from the per-round ratios. A speedup is "
    "**faster** when its whole interval is above 1×, **slower** when it is below, **within "
    "noise** otherwise. The **noise floor** is how far the baseline timed against a copy of "
    "itself (the A/A pair) strays from 1×; when that interval excludes 1× the row is flagged "
    "**unreliable**. The **smallest detectable effect** is the speedup the rounds could have "
    "told from none. Rounds stop when the interval is within the target width or the "
    "technique's time budget is spent; **flags** say when a number is less certain than it "
    "looks. **Correctness** compares the "
    "technique's output with the baseline's or with a float64 reference: **exact** (bitwise "
    "equal), **within tolerance** (largest relative error at most the stated tolerance, which "
    "depends on the number format), or **DIFFERS**. **Ceilings** are the fastest this device "
    "can go (peak arithmetic rate, memory bandwidth), measured in the same run, so a rate can "
    "be read as a fraction of what is possible. Units: s, ms (milliseconds) and us "
    "(microseconds) for times; GB/s (10^9 bytes per second), GFLOP/s (10^9 floating-point "
    "operations per second) and samples/s for rates. "
    "**n/a: reason** marks a setting that has no "
    "meaning on this device; the reason is always given and no number is ever made up.";

static const char *fp_get(const tb_report_folder *f, const char *key, const char *dflt)
{
    const char *v = f->have_fp ? tb_fingerprint_get(&f->fp, key) : NULL;
    return v && v[0] ? v : dflt;
}

static const char *device_name(const tb_report_folder *f)
{
    const char *n = fp_get(f, "device.name", NULL);
    if (n)
        return n;
    for (int i = 0; i < f->ntech; i++)
        if (f->rows[i].n)
            return f->rows[i].rows[0].device;
    return f->slug;
}

/* The machine as a table in a paper must name it: "AMD EPYC (cpu backend,
 * 2 threads; git 5a4ee6d; 2026-11-30T01:47:31Z)" (a 2-vCPU slice is not a
 * whole EPYC); the device name alone without a fingerprint. */
static void device_label(const tb_report_folder *f, char *buf, size_t cap)
{
    if (!f->have_fp) {
        snprintf(buf, cap, "%s", device_name(f));
        return;
    }
    const char *backend = fp_get(f, "device.backend", "unknown");
    char what[64];
    if (!strcmp(backend, "cpu"))
        snprintf(what, sizeof what, "%s threads", fp_get(f, "device.threads", "?"));
    else
        snprintf(what, sizeof what, "%.1f GiB",
                 atof(fp_get(f, "device.total_mem_bytes", "0")) / 1073741824.0);
    snprintf(buf, cap, "%s (%s backend, %s; git %s; %s)", device_name(f), backend, what,
             fp_get(f, "git.revision", "unknown"),
             f->run_started[0] ? f->run_started : fp_get(f, "run.time_utc", "undated"));
}

static void sec_header(doc *d, const tb_report_folder *f)
{
    tb_doc_text(d, BK_H1, "tunebench report: %s", device_name(f));
    tb_doc_text(d, BK_P,
                "Measured on host `%s` %s %s (UTC), git revision `%s`, %s backend with %s threads. "
                "Results in `results/%s/`, figures in `plots/%s/`.",
                fp_get(f, "run.host", "unknown"),
                f->run_started[0] ? "in the run begun at" : "at",
                f->run_started[0] ? f->run_started : fp_get(f, "run.time_utc", "an unrecorded time"),
                fp_get(f, "git.revision", "unknown"), fp_get(f, "device.backend", "unknown"),
                fp_get(f, "device.threads", "an unrecorded number of"), f->slug, f->slug);
    if (f->other_device[0])
        tb_doc_text(d, BK_P, "**ROWS FROM ANOTHER MACHINE**: the rows of %s name another device "
                    "than this folder's (`fingerprint.json`: %s): they are not this machine's "
                    "numbers. Keep each machine's results in its own folder and compare them "
                    "with `bench:compare`.", f->other_device, fp_get(f, "device.name", "?"));
}

static void sec_how_to_read(doc *d)
{
    tb_doc_text(d, BK_H2, "How to read this report");
    tb_doc_text(d, BK_LEAD, "%s", newcomer);
}

/* A section's heading, then, when its input is absent, the paragraph that
 * says so and how to measure it. Returns whether the input is there. */
static int sec_begin(doc *d, const char *heading, int have, const char *absent)
{
    tb_doc_text(d, BK_H2, "%s", heading);
    if (!have)
        tb_doc_text(d, BK_P, "%s", absent);
    return have;
}

static int has_prefix(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

static int plot_owner(const tb_report_folder *f, const char *plot)
{
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; i < f->ntech; i++) {
        size_t n = strlen(f->tech[i]);
        if (!strncmp(plot, f->tech[i], n) && (plot[n] == '\0' || plot[n] == '_') && n > best_len)
            best = i, best_len = n;
    }
    return best;
}

static void rounds_text(const tb_results *res, size_t nres, char *buf, size_t cap);
static void add_own_figure(doc *d, const tb_report_folder *f, const char *name, const char *alt,
                           const char *caption);

/* What a figure of res measured: its metrics (up to three), the sweep
 * parameter, what it ran on and how many rounds, for the caption. */
static void measured_text(const tb_report_folder *f, const tb_results *res, char *buf, size_t cap)
{
    char metrics[200] = "", rounds[96], param[64] = "";
    const char *seen[3];
    size_t len = 0;
    int k = 0;
    for (size_t i = 0; i < res->n && k < 3; i++) {
        const tb_result_row *r = &res->rows[i];
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= !strcmp(seen[j], r->metric);
        if (!is_timed(r) || dup)
            continue;
        seen[k] = r->metric;
        len += (size_t)snprintf(metrics + len, len < sizeof metrics ? sizeof metrics - len : 0,
                                "%s%s", k++ ? ", " : "", r->metric);
        if (!param[0] && r->param_name[0])
            snprintf(param, sizeof param, " against %s", r->param_name);
    }
    rounds_text(res, 1, rounds, sizeof rounds);
    snprintf(buf, cap, "Measured: %s%s, every setting of the technique beside its baseline, on "
             "%s; %s. ", k ? metrics : "nothing timed", param, device_name(f), rounds);
}

/* Where figure `name` is (png) and how REPORT.md, in the results folder,
 * links it (md): relative when plots/ is the sibling of results/ (a
 * tunebench output tree) or lies inside the results folder (a run kept in
 * the repository, results/<run>/run/plots/), else absolute. */
static void figure_paths(const tb_report_folder *f, const char *name, char *png, size_t png_cap,
                         char *md, size_t md_cap)
{
    snprintf(png, png_cap, "%s/%s.png", f->plots_dir, name);
    char sibling[PATH_MAX];
    size_t n = strlen(f->results_dir);
    tb_report_sibling_plots_dir(f->results_dir, f->slug, sibling, sizeof sibling);
    if (!strcmp(sibling, f->plots_dir))
        snprintf(md, md_cap, "../../plots/%s/%s.png", f->slug, name);
    else if (!strncmp(f->plots_dir, f->results_dir, n) && f->plots_dir[n] == '/')
        snprintf(md, md_cap, "%s/%s.png", f->plots_dir + n + 1, name);
    else
        snprintf(md, md_cap, "%s", png);
}

/* A figure with its caption: what it measured (res; NULL: not known to the
 * report) and where its other formats and script are. */
static void add_figure(doc *d, const tb_report_folder *f, const char *name, const tb_results *res)
{
    char png[PATH_MAX + 200], md[PATH_MAX + 200], cap[1000], what[500] = "";
    figure_paths(f, name, png, sizeof png, md, sizeof md);
    if (res)
        measured_text(f, res, what, sizeof what);
    snprintf(cap, sizeof cap,
             "%sFigure `%s`: also `%s.svg` (documentation) and `%s.pdf` (papers) in "
             "`plots/%s/`, with the gnuplot script `%s.gp` to restyle it.",
             what, name, name, name, f->slug, name);
    char alt[200];
    snprintf(alt, sizeof alt, "figure %s", name);
    tb_doc_figure(d, png, md, alt, cap);
}

/* Every figure whose name begins with prefix (waterfall_*, time_to_accuracy_*). */
static void add_figures_named(doc *d, const tb_report_folder *f, const char *prefix,
                              const tb_results *res)
{
    for (int i = 0; i < f->nplots; i++)
        if (has_prefix(f->plots[i], prefix))
            add_figure(d, f, f->plots[i], res);
}

enum { TECH_COLS = 8 };

static const char *const tech_header[TECH_COLS] = {
    "setting", "metric", "median [95% CI]", "speedup [95% CI]", "verdict",
    "correctness (tolerance)", "rate [95% CI], share of ceiling", "flags"};

/* A row's cells; with several workloads in the table (multi), the setting
 * cell names the row's workload (two "(baseline)" rows told apart only by
 * their rates' units before), and at (NULL: none) its point where the same
 * setting stands at several (ddp's "DP threads" at ranks 1 and 2). */
static void tech_row_cells(const tb_result_row *r, int multi, const char *at,
                           char cells[TECH_COLS][TB_REPORT_CELL])
{
    char rate[160], ceil[200];
    snprintf(cells[0], TB_REPORT_CELL, "%s%s%s%s%s%s", r->setting,
             r->is_baseline ? " (baseline)" : "", multi && r->workload[0] ? ", on " : "",
             multi ? r->workload : "", at ? ", " : "", at ? at : "");
    snprintf(cells[1], TB_REPORT_CELL, "%s", r->metric);
    tb_report_time(cells[2], TB_REPORT_CELL, r);
    tb_report_speedup(cells[3], TB_REPORT_CELL, r);
    if (r->is_baseline)
        snprintf(cells[3], TB_REPORT_CELL, "1× (reference)");
    else if (!cells[3][0])
        snprintf(cells[3], TB_REPORT_CELL, "not compared (not a setting of the technique)");
    tb_report_verdict(cells[4], TB_REPORT_CELL, r);
    if (r->timing_verdict == TB_TIMING_NA && r->note[0])
        snprintf(cells[4], TB_REPORT_CELL, "not compared: %s", r->note);
    tb_report_correctness(cells[5], TB_REPORT_CELL, r);
    tb_report_rate(rate, sizeof rate, r);
    tb_report_ceiling(ceil, sizeof ceil, r);
    snprintf(cells[6], TB_REPORT_CELL, "%s%s%s", rate[0] ? rate : "no rate for this metric",
             ceil[0] ? "; " : "", ceil);
    tb_report_flags_text(cells[7], TB_REPORT_CELL, r, ~0);
}

/* "peak 812 MiB (-41% against its baseline's 1.35 GiB)": the memory a
 * row's check measured, beside its baseline's where both are known; ""
 * when not measured. */
static void memory_text(const tb_result_row *r, const tb_results *res, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!(r->memory_bytes > 0))
        return;
    const tb_result_row *b = NULL;
    for (size_t i = 0; i < res->n && !r->is_baseline; i++) {
        const tb_result_row *x = &res->rows[i];
        if (x->is_baseline && is_timed(x) && !strcmp(x->metric, r->metric) &&
            !strcmp(x->workload, r->workload) && x->memory_bytes > 0 &&
            (!b || same_point(x->param_value, r->param_value)))
            b = x;
    }
    char mine[32], theirs[32];
    tb_report_num(mine, sizeof mine, r->memory_bytes / 1048576.0);
    if (!b) {
        snprintf(buf, cap, "peak %s MiB", mine);
        return;
    }
    tb_report_num(theirs, sizeof theirs, b->memory_bytes / 1048576.0);
    snprintf(buf, cap, "peak %s MiB (%+.0f%% against its baseline's %s MiB)", mine,
             100.0 * (r->memory_bytes / b->memory_bytes - 1), theirs);
}

/* Under a technique's table, each row's note and peak memory: what a
 * setting did and what its number rests on (checkpointing's memory saved,
 * "no host-device sync on the CPU", the kernels that ran), which the
 * table's cells have no room for. */
static void technique_notes(doc *d, const tb_results *res, const tb_result_row *const *shown,
                            size_t n)
{
    int any = 0;
    for (size_t k = 0; k < n; k++) {
        const tb_result_row *r = shown[k];
        char mem[160];
        memory_text(r, res, mem, sizeof mem);
        if (!r->note[0] && !mem[0])
            continue;
        if (!any++)
            tb_doc_text(d, BK_P, "What each row rests on (its note and the peak memory its "
                        "check measured):");
        tb_doc_text(d, BK_P, "**%s%s**%s%s: %s%s%s", r->setting,
                    r->is_baseline ? " (baseline)" : "", r->workload[0] ? ", on " : "",
                    r->workload, mem, mem[0] && r->note[0] ? "; " : "", r->note);
    }
}

/* The n/a settings of a technique, each with its reason, under its table. */
static void technique_na(doc *d, const tb_results *res)
{
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (is_timed(r))
            continue;
        char why[TB_REPORT_CELL];
        tb_report_na(why, sizeof why, NULL, r->note);
        tb_doc_text(d, BK_P, "Not timed: **%s** (%s), %s.", r->setting, r->metric, why);
    }
}

/* A technique measured (in part) on a busy machine says so above its
 * table, not only in a cell: every number below it is suspect. */
static void technique_busy(doc *d, const tb_report_pick *p)
{
    char load[32];
    if (!p->flags.busy)
        return;
    tb_report_num(load, sizeof load, p->flags.max_load);
    tb_doc_text(d, BK_P,
                "**Busy machine**: %d of its %d timed rows were measured while other work "
                "shared the machine (1-minute load average up to %s; the rule is in "
                "results/README.md). Read them with care, or rerun on an idle machine.",
                p->flags.busy, p->flags.rows, load);
}

/* 1 when no setting of metric was timed at two points: each point holds
 * configurations of its own (channels_last's fp32 and bf16 pairs,
 * checkpointing's batch and 4x-batch pairs), not a size swept over the
 * same settings, so one point's rows would hide the others'. */
static int each_setting_once(const tb_results *res, const char *metric)
{
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *a = &res->rows[i];
        if (!is_timed(a) || strcmp(a->metric, metric) != 0)
            continue;
        for (size_t j = i + 1; j < res->n; j++) {
            const tb_result_row *b = &res->rows[j];
            if (is_timed(b) && !strcmp(b->metric, metric) && !strcmp(a->setting, b->setting) &&
                !strcmp(a->workload, b->workload) && !same_point(a->param_value, b->param_value))
                return 0;
        }
    }
    return 1;
}

static void sec_technique(doc *d, const tb_report_folder *f, int t, const tb_report_pick *p)
{
    const tb_results *res = &f->rows[t];
    tb_doc_text(d, BK_H3, "%s", f->tech[t]);
    technique_busy(d, p);
    if (!p->baseline) {
        if (!res->n)
            tb_doc_text(d, BK_P, "n/a: the CSV has no rows");
        technique_na(d, res);
    } else {
        const tb_result_row *b = p->baseline;
        /* Settings that are their own point (workers = 0, 1, 2; tf32 = 0
         * against 1), or points of their own settings: every point of the
         * summary's metric, not only the baseline's. */
        int own_points = p->best && (!same_point(b->param_value, p->best->param_value) ||
                                     each_setting_once(res, b->metric));
        char pt[96];
        tb_report_point(pt, sizeof pt, b);
        size_t timed = 0;
        for (size_t i = 0; i < res->n; i++)
            timed += is_timed(&res->rows[i]);
        if (!p->best && !p->swept)
            tb_doc_text(d, BK_P,
                        "Every timed setting (one point only). The full run, %zu timed row%s, is "
                        "in `%s.csv`.",
                        timed, timed == 1 ? "" : "s", f->tech[t]);
        else if (own_points)
            tb_doc_text(d, BK_P,
                        "Every setting measured as %s, each at its own `%s`. The full sweep, %zu "
                        "timed row%s, is in `%s.csv` and in the figures.",
                        b->metric, b->param_name, timed, timed == 1 ? "" : "s", f->tech[t]);
        else
            tb_doc_text(d, BK_P,
                        "Every setting at %s (the summary's point). The full sweep, %zu timed "
                        "row%s, is in `%s.csv` and in the figures.",
                        pt, timed, timed == 1 ? "" : "s", f->tech[t]);
        tb_doc_table(d, TECH_COLS, tech_header);
        const tb_result_row **shown = calloc(res->n ? res->n : 1, sizeof *shown);
        size_t nshown = 0;
        int multi = 0;
        for (size_t i = 0; i < res->n && !multi; i++)
            multi = is_timed(&res->rows[i]) && strcmp(res->rows[i].workload, b->workload) != 0;
        for (size_t i = 0; i < res->n; i++) {
            const tb_result_row *r = &res->rows[i];
            if (!is_timed(r))
                continue;
            if (own_points ? strcmp(r->metric, b->metric) != 0
                           : !same_point(r->param_value, b->param_value))
                continue;
            char cells[TECH_COLS][TB_REPORT_CELL], at[96];
            const char *row[TECH_COLS];
            int again = 0; /* the same setting at another point of this table */
            for (size_t j = 0; own_points && j < res->n && !again; j++)
                again = j != i && is_timed(&res->rows[j]) &&
                        !strcmp(res->rows[j].metric, r->metric) &&
                        !strcmp(res->rows[j].setting, r->setting) &&
                        !strcmp(res->rows[j].workload, r->workload) &&
                        !same_point(res->rows[j].param_value, r->param_value);
            if (again)
                tb_report_point(at, sizeof at, r);
            tech_row_cells(r, multi, again ? at : NULL, cells);
            for (int c = 0; c < TECH_COLS; c++)
                row[c] = cells[c];
            tb_doc_row(d, row);
            if (shown)
                shown[nshown++] = r;
        }
        technique_notes(d, res, shown, nshown);
        free(shown);
        technique_na(d, res);
    }
    for (int i = 0; i < f->nplots; i++)
        if (plot_owner(f, f->plots[i]) == t)
            add_figure(d, f, f->plots[i], res);
}

/* The row of ceilings.csv named like r's ceiling, as "2.96 GB/s [2.78,
 * 3.19] (bytes = 16777216)"; it may differ from the technique's own (a
 * small copy fits in cache). */
static void ceilings_match(const tb_report_folder *f, const tb_result_row *r, char *buf, size_t cap)
{
    snprintf(buf, cap, "not measured by bench:ceilings");
    for (size_t i = 0; i < f->ceilings.n; i++) {
        const tb_result_row *c = &f->ceilings.rows[i];
        if (strcmp(c->setting, r->ceiling_name) != 0)
            continue;
        if (!is_timed(c)) {
            tb_report_na(buf, cap, NULL, c->note);
            return;
        }
        char rate[160], pt[96];
        tb_report_rate(rate, sizeof rate, c);
        tb_report_point(pt, sizeof pt, c);
        snprintf(buf, cap, "%s (at %s)", rate, pt);
        return;
    }
}

/* "**From an earlier run**: ..." where a section's CSV predates the run
 * the folder holds (folder.c: mark_earlier). */
static void earlier_note(doc *d, const char *why, const char *csv)
{
    if (why[0])
        tb_doc_text(d, BK_P, "**FROM AN EARLIER RUN**: `%s` is not the bench:all run's this "
                    "folder holds (%s); its numbers are not this run's.", csv, why);
}

static void sec_ceilings(doc *d, const tb_report_folder *f, const tb_report_pick *picks)
{
    if (!sec_begin(d, "Ceilings: the fastest this device goes", f->have_ceilings,
                   "Not measured in this run: `ceilings.csv` is absent. `bazel run //bench:all` "
                   "measures them first; alone: `bazel run //bench:ceilings`."))
        return;
    static const char *const h[5] = {"ceiling", "measured at", "rate [95% CI]",
                                     "time per call: median [95% CI]", "how it was measured, or why not"};
    earlier_note(d, f->earlier_ceilings, "ceilings.csv");
    tb_doc_text(d, BK_P, "Measured in the same run, on the same device, with the same threads.");
    tb_doc_table(d, 5, h);
    for (size_t i = 0; i < f->ceilings.n; i++) {
        const tb_result_row *r = &f->ceilings.rows[i];
        char pt[96], rate[160], tm[160], note[TB_REPORT_CELL];
        tb_report_point(pt, sizeof pt, r);
        tb_report_rate(rate, sizeof rate, r);
        tb_report_time(tm, sizeof tm, r);
        if (!is_timed(r)) {
            snprintf(rate, sizeof rate, "n/a");
            snprintf(tm, sizeof tm, "n/a");
            snprintf(pt, sizeof pt, "n/a");
            tb_report_na(note, sizeof note, NULL, r->note);
        } else {
            snprintf(note, sizeof note, "%s", r->note);
        }
        const char *row[5] = {r->setting, pt, rate, tm, note};
        tb_doc_row(d, row);
    }
    static const char *const h2[6] = {"technique", "setting", "metric", "rate [95% CI]",
                                      "share of its ceiling (as the technique measured it)",
                                      "the same ceiling in bench:ceilings"};
    int any = 0;
    for (int t = 0; t < f->ntech; t++) {
        const tb_result_row *rs[2] = {picks[t].baseline, picks[t].best};
        for (int k = 0; k < 2; k++) {
            const tb_result_row *r = rs[k];
            if (!r || !r->ceiling_name[0] || isnan(r->fraction_of_ceiling))
                continue;
            if (!any++) {
                tb_doc_text(d, BK_P, "Each technique's rate at its summary point beside the ceiling "
                                  "it is bounded by, as the technique measured it at the same "
                                  "size (a small copy runs from cache), and as bench:ceilings "
                                  "measured it at its large size.");
                tb_doc_table(d, 6, h2);
            }
            char rate[160], ceil[200], other[TB_REPORT_CELL];
            tb_report_rate(rate, sizeof rate, r);
            tb_report_ceiling(ceil, sizeof ceil, r);
            ceilings_match(f, r, other, sizeof other);
            const char *row[6] = {f->tech[t], r->setting, r->metric, rate, ceil, other};
            tb_doc_row(d, row);
        }
    }
}

/* Rows of a waterfall or time-to-accuracy CSV with param_name == kind
 * (NULL: all) on workload wl (NULL: every one), as a table. */
static void step_table(doc *d, const tb_results *res, const char *kind, const char *wl,
                       const char *first_col, const char *speedup_col)
{
    const char *h[6] = {first_col, "median [95% CI]", speedup_col, "verdict",
                        "correctness (tolerance)", "note"};
    tb_doc_table(d, 6, h);
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if ((kind && strcmp(r->param_name, kind) != 0) || (wl && strcmp(r->workload, wl) != 0))
            continue;
        char tm[160], sp[160], v[320], c[320], note[900];
        if (!is_timed(r)) {
            tb_report_na(note, sizeof note, NULL, r->note);
            const char *row[6] = {r->setting, "n/a", "n/a", "n/a", "n/a", note};
            tb_doc_row(d, row);
            continue;
        }
        tb_report_time(tm, sizeof tm, r);
        tb_report_speedup(sp, sizeof sp, r);
        if (r->is_baseline)
            snprintf(sp, sizeof sp, "1× (reference)");
        tb_report_verdict(v, sizeof v, r);
        tb_report_correctness(c, sizeof c, r);
        char flags[300];
        tb_report_flags_text(flags, sizeof flags, r, ~0);
        snprintf(note, sizeof note, "%s%s%s", r->note, r->note[0] && flags[0] ? "; " : "",
                 flags);
        const char *row[6] = {r->setting, tm, sp, v, c, note};
        tb_doc_row(d, row);
    }
}

/* The waterfall's rows of one kind on workload wl (NULL: the only one) as
 * labeled bars: cumulative speedup (stage) or speedup over all off
 * (leave-one-out), the median step time above each bar, the baseline drawn
 * too; a stage n/a on the workload gets no bar. Several workloads: one
 * figure each, named after its model (waterfall_stages_gpt2). */
static void waterfall_figure(doc *d, const tb_report_folder *f, const char *kind, const char *wl)
{
    tb_bar bars[64];
    size_t n = 0;
    double all_on = NAN;
    int stages = !strcmp(kind, "stage");
    for (size_t i = 0; i < f->waterfall.n && n < 64; i++) {
        const tb_result_row *r = &f->waterfall.rows[i];
        if (strcmp(r->param_name, kind) != 0 || (wl && strcmp(r->workload, wl) != 0) ||
            (wl && !is_timed(r)))
            continue;
        tb_bar *b = &bars[n++];
        memset(b, 0, sizeof *b);
        snprintf(b->label, sizeof b->label, "%s", r->setting);
        b->y = r->is_baseline ? 1 : r->speedup;
        b->lo = r->is_baseline ? NAN : r->speedup_ci_low;
        b->hi = r->is_baseline ? NAN : r->speedup_ci_high;
        if (!isnan(r->median)) {
            char t[32];
            tb_report_num(t, sizeof t, r->median);
            snprintf(b->text, sizeof b->text, "%s %s", t, r->unit);
        }
        b->color = r->is_baseline ? 5 : stages ? 0 : !strcmp(r->setting, "all on") ? 0 : 1;
        if (!stages && !strcmp(r->setting, "all on"))
            all_on = r->speedup;
    }
    if (!n)
        return;
    char name[96], cap[1400], what[500], model[48] = "", title[160];
    if (wl)
        snprintf(model, sizeof model, "%.*s", (int)strcspn(wl, "-"), wl);
    snprintf(name, sizeof name, "%s_%s%s%s", TB_REPORT_WATERFALL,
             stages ? "stages" : "leave_one_out", model[0] ? "_" : "", model);
    snprintf(title, sizeof title, "%s%s%s", stages ? "Techniques switched on one after another "
             "(cumulative)" : "Every technique on but one (leave-one-out)", wl ? ", on " : "",
             wl ? wl : "");
    tb_bars b = {title,
                 stages ? "cumulative speedup over all off (×)" : "speedup over all off (×)",
                 stages ? "configuration: each adds one technique to the ones left of it"
                        : "configuration: the technique named is left off",
                 bars, n, stages ? 1 : all_on, stages ? "1× (all off)" : "all on"};
    if (tb_bars_render(&b, f->plots_dir, name) != TB_OK) {
        tb_doc_text(d, BK_P, "The %s figure was not drawn: %s.", kind, tb_error_message());
        fprintf(stderr, "report: the %s figure was not drawn: %s\n", kind, tb_error_message());
        tb_error_clear();
        return;
    }
    measured_text(f, &f->waterfall, what, sizeof what);
    snprintf(cap, sizeof cap, "%sBars: %s%s%s, with the 95%% interval; above each bar the "
             "median step time. Also `%s.svg` and `%s.pdf` in `plots/%s/`.", what,
             stages ? "cumulative speedup of each configuration over every technique off"
                    : "speedup over every technique off; the dashed line is all on",
             wl ? " on " : "", wl ? wl : "", name, name, f->slug);
    add_own_figure(d, f, name, stages ? "waterfall: cumulative speedup, bar per technique"
                                      : "leave-one-out: speedup with all on but one", cap);
}

/* The waterfall's two tables and figures on workload wl (NULL: the only
 * one). */
static void waterfall_tables(doc *d, const tb_report_folder *f, const char *wl)
{
    step_table(d, &f->waterfall, "stage", wl, "switched on (cumulative)",
               "cumulative speedup [95% CI]");
    tb_doc_text(d, BK_P, "Leave-one-out: every technique on except the one named. A technique "
                      "whose removal costs little matters little here; one whose removal costs "
                      "more than its own step above interacts with the others.");
    step_table(d, &f->waterfall, "leave-one-out", wl, "configuration",
               "speedup over all off [95% CI]");
    waterfall_figure(d, f, "stage", wl);
    waterfall_figure(d, f, "leave-one-out", wl);
}

static void sec_waterfall(doc *d, const tb_report_folder *f)
{
    if (!sec_begin(d, "Waterfall: techniques switched on one after another", f->have_waterfall,
                   "Not measured in this run: `waterfall.csv` is absent. It comes from "
                   "`bazel run //bench:waterfall`, which times the training step with the "
                   "techniques switched on one after another (cumulative speedup) and with all "
                   "on but one (leave-one-out, to show which matter and which interact)."))
        return;
    earlier_note(d, f->earlier_waterfall, "waterfall.csv");
    tb_doc_text(d, BK_P, "Each row adds one technique to all the rows above it; the speedup is "
                      "cumulative, against the training step with every technique off. "
                      "Techniques this device gives no meaning to (on the CPU: tensors and "
                      "augmentation made on the device, pinned memory, CUDA graphs) are left out of every "
                      "row here, \"all on\" included; their rows are under \"Not applicable "
                      "on this device\" with the reason.");
    char wls[REPORT_MAX_WL][48];
    size_t nwl = tb_report_workloads(&f->waterfall, TB_REPORT_WATERFALL, wls, REPORT_MAX_WL);
    if (nwl <= 1) {
        waterfall_tables(d, f, NULL);
        return;
    }
    tb_doc_text(d, BK_P, "It ran on %d workloads, each against its own step with every "
                "technique off: a technique that helps one model may do nothing for another. "
                "A technique whose model has nothing for it to act on (GELU in ResNet-50, "
                "convolutions in GPT-2, layer norm and attention in the CNNs) is n/a on that "
                "workload and left out of its \"all on\".", (int)nwl);
    for (size_t k = 0; k < nwl; k++) {
        tb_doc_text(d, BK_H3, "Waterfall on %s", wls[k]);
        waterfall_tables(d, f, wls[k]);
    }
}

static void sec_tta(doc *d, const tb_report_folder *f)
{
    if (!sec_begin(d, "Time to 85% test accuracy (Fashion-MNIST)", f->have_tta,
                   "Not measured in this run: `time_to_accuracy.csv` is absent. It comes from "
                   "`bazel run //bench:waterfall`: wall time until the test accuracy first "
                   "reaches 85%, for the baseline and all step techniques together (default profile) "
                   "and for each technique alone (full profile). Unlike step time it cannot be "
                   "gamed: a technique that speeds up steps but slows learning shows here."))
        return;
    earlier_note(d, f->earlier_tta, "time_to_accuracy.csv");
    tb_doc_text(d, BK_P, "Wall time from the start of training until the test accuracy first "
                      "reaches the target; the speedup is against the baseline (every "
                      "technique off), paired by seed, with an interval from 5 seeds (the "
                      "full profile); with fewer, each row's note gives the ratio.");
    step_table(d, &f->tta, NULL, NULL, "configuration", "speedup [95% CI]");
    add_figures_named(d, f, TB_REPORT_TTA, &f->tta);
}

/* Every flagged row of res, as rows of the "Flagged rows" table (its
 * header added before the first). */
static void add_flagged_rows(doc *d, const tb_results *res, int *any)
{
    static const char *const h[8] = {"technique", "workload", "setting", "metric", "point",
                                     "speedup [95% CI]", "rounds", "flags"};
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!tb_report_row_flags(r))
            continue;
        if (!(*any)++)
            tb_doc_table(d, 8, h);
        char pt[96], sp[160], rounds[32], flags[320];
        tb_report_point(pt, sizeof pt, r);
        tb_report_speedup(sp, sizeof sp, r);
        if (r->is_baseline)
            snprintf(sp, sizeof sp, "1× (reference)");
        else if (!sp[0])
            snprintf(sp, sizeof sp, "not compared");
        if (r->rounds > 0)
            snprintf(rounds, sizeof rounds, "%d", r->rounds);
        else
            snprintf(rounds, sizeof rounds, "not paired");
        tb_report_flags_text(flags, sizeof flags, r, ~0);
        const char *row[8] = {r->technique, r->workload[0] ? r->workload : "--", r->setting,
                              r->metric, pt, sp, rounds, flags};
        tb_doc_row(d, row);
    }
}

/* Which rows stopped on the budget, ran on a busy machine, failed their
 * A/A check or are wider than ±10%: listed, not only counted. */
static void sec_flagged(doc *d, const tb_report_folder *f)
{
    tb_doc_text(d, BK_H2, "Flagged rows");
    tb_doc_text(d, BK_P,
                "Rows whose number is less certain than it looks, each with why: **stopped by "
                "budget** (the rounds ran out of time before the interval reached its target "
                "width; the width it reached is given), **stopped at the round cap**, **busy "
                "machine** (other work shared the machine; its load average), **unreliable** "
                "(the baseline against a copy of itself gave an interval that excludes 1, so "
                "the harness is biased; the verdict is kept), **imprecise** (interval "
                "half-width or noise floor above ±10%% with neither the budget nor a busy "
                "machine to explain it).");
    int any = 0;
    for (int t = 0; t < f->ntech; t++)
        add_flagged_rows(d, &f->rows[t], &any);
    add_flagged_rows(d, &f->waterfall, &any);
    add_flagged_rows(d, &f->tta, &any);
    if (!any)
        tb_doc_text(d, BK_P, "None: every timed row is unflagged.");
}

static void add_na_rows(doc *d, const tb_results *res, int *any)
{
    static const char *const h[4] = {"technique", "setting", "metric", "reason"};
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (is_timed(r))
            continue;
        if (!(*any)++)
            tb_doc_table(d, 4, h);
        char why[TB_REPORT_CELL];
        tb_report_na(why, sizeof why, NULL, r->note);
        const char *row[4] = {r->technique, r->setting, r->metric, why};
        tb_doc_row(d, row);
    }
}

static void sec_na(doc *d, const tb_report_folder *f)
{
    tb_doc_text(d, BK_H2, "Not applicable on this device");
    tb_doc_text(d, BK_P, "Settings that have no meaning here, each with its reason. They carry no "
                      "number: nothing is estimated or made up.");
    int any = 0;
    for (int t = 0; t < f->ntech; t++)
        add_na_rows(d, &f->rows[t], &any);
    add_na_rows(d, &f->ceilings, &any);
    add_na_rows(d, &f->waterfall, &any);
    add_na_rows(d, &f->tta, &any);
    if (!any)
        tb_doc_text(d, BK_P, "Every setting was measured.");
}

static void fmt_opt(char *buf, size_t cap, double v, const char *unit)
{
    if (isnan(v)) {
        snprintf(buf, cap, "n/a: not recorded");
        return;
    }
    char n[32];
    tb_report_num(n, sizeof n, v);
    snprintf(buf, cap, "%s%s", n, unit);
}

/* One segment; GPU columns only when the run had a GPU. cpus: logical
 * CPUs, to flag a machine that was busy with something else. */
static void telemetry_row(doc *d, const tb_json *s, int gpu, double cpus)
{
    char dur[64], load[96], util[96], sm[96], temp[64], pw[64], thr[96], note[160];
    double nan_ = NAN;
    fmt_opt(dur, sizeof dur, tb_json_get_number(s, "seconds", nan_), " s");
    char a[40], b[40];
    double before = tb_json_get_number(s, "loadavg_before", nan_);
    fmt_opt(a, sizeof a, before, "");
    fmt_opt(b, sizeof b, tb_json_get_number(s, "loadavg_after", nan_), "");
    snprintf(load, sizeof load, "%s → %s", a, b);
    double um = tb_json_get_number(s, "cpu_util_mean", nan_);
    double ux = tb_json_get_number(s, "cpu_util_max", nan_);
    fmt_opt(a, sizeof a, um * 100, " %");
    fmt_opt(b, sizeof b, ux * 100, " %");
    snprintf(util, sizeof util, "%s (max %s)", a, b);
    snprintf(note, sizeof note, "%s", "");
    if (!isnan(before) && cpus > 0 && before > cpus)
        snprintf(note, sizeof note, "BUSY: load %.1f on %.0f CPUs before it started; other jobs "
                 "shared the machine", before, cpus);
    if (!gpu) {
        const char *row[5] = {tb_json_get_string(s, "label", "?"), dur, load, util, note};
        tb_doc_row(d, row);
        return;
    }
    double gs = tb_json_get_number(s, "gpu_samples", 0);
    fmt_opt(a, sizeof a, tb_json_get_number(s, "gpu_sm_clock_mhz_min", nan_), " MHz");
    fmt_opt(b, sizeof b, tb_json_get_number(s, "gpu_sm_clock_mhz_max", nan_), " MHz");
    snprintf(sm, sizeof sm, "%s to %s", a, b);
    fmt_opt(temp, sizeof temp, tb_json_get_number(s, "gpu_temp_c_max", nan_), " °C");
    fmt_opt(pw, sizeof pw, tb_json_get_number(s, "gpu_power_w_max", nan_), " W");
    double th = tb_json_get_number(s, "throttled_samples", 0);
    if (th > 0)
        snprintf(thr, sizeof thr, "THROTTLED in %.0f of %.0f samples", th, gs);
    else
        snprintf(thr, sizeof thr, "none of %.0f samples", gs);
    const char *row[9] = {tb_json_get_string(s, "label", "?"), dur, load, util, sm, temp, pw,
                          thr, note};
    tb_doc_row(d, row);
}

static void sec_telemetry(doc *d, const tb_report_folder *f)
{
    const tb_json *t = f->telemetry;
    if (!sec_begin(d, "What the machine was doing (telemetry)", t != NULL,
                   "Not recorded in this run: `telemetry.json` is absent (bench:all records it; "
                   "a technique binary run alone does not)."))
        return;
    const tb_json *segs = tb_json_get(t, "segments");
    int gpu = 0;
    for (size_t i = 0; segs && i < segs->len; i++)
        gpu |= tb_json_get_number(tb_json_at(segs, i), "gpu_samples", 0) > 0;
    tb_doc_text(d, BK_P,
                "Sampled every %.0f ms while each technique ran. CPU frequency: %s. GPU: %s.%s "
                "A load average above the number of CPUs means other jobs shared the machine: "
                "read those numbers with care.",
                tb_json_get_number(t, "period_ms", NAN),
                tb_json_get_string(t, "cpu_frequency", "?"),
                tb_json_get_string(t, "gpu", "unknown"),
                gpu ? " A GPU sample counts as throttled when NVML reports a power or thermal "
                      "reason."
                    : "");
    static const char *const h[9] = {"segment", "duration", "load average (1 min) before → after",
                                     "CPU busy (all cores)", "GPU SM clock", "GPU temperature max",
                                     "GPU power max", "throttled samples", "warning"};
    static const char *const hcpu[5] = {"segment", "duration",
                                        "load average (1 min) before → after",
                                        "CPU busy (all cores)", "warning"};
    if (gpu)
        tb_doc_table(d, 9, h);
    else
        tb_doc_table(d, 5, hcpu);
    const char *cpus_s = fp_get(f, "cpu.logical_cpus", "0");
    double cpus = atof(cpus_s);
    for (size_t i = 0; segs && i < segs->len; i++) {
        const tb_json *s = tb_json_at(segs, i);
        if (tb_json_get_number(s, "samples", 0) == 0)
            continue; /* a boundary with nothing measured in it */
        telemetry_row(d, s, gpu, cpus);
    }
}

/* Which profile limit applied, and what each technique was allowed: the
 * reader of a "stopped by budget" flag sees how much time it had. */
static void sec_budget(doc *d, const tb_report_folder *f)
{
    const tb_json *b = f->budget;
    if (!sec_begin(d, "Time budgets", b != NULL,
                   "Not recorded in this run: `budget.json` is absent (bench:all writes it; a "
                   "technique binary run alone does not)."))
        return;
    char lim[32], tot[32], est[32];
    tb_report_num(lim, sizeof lim, tb_json_get_number(b, "limit_s", NAN));
    tb_report_num(tot, sizeof tot, tb_json_get_number(b, "budget_s", NAN));
    tb_report_num(est, sizeof est, tb_json_get_number(b, "est_s", NAN));
    int over = tb_json_get_bool(b, "over", 0);
    int undeclared = (int)tb_json_get_number(b, "undeclared", 0);
    tb_doc_text(d, BK_P,
                "Profile `%s`, limit %s s: each technique's rounds stop when their intervals are "
                "narrow enough or its budget below is spent; the budgets of the techniques this "
                "run planned add up to %s s (estimated run time with set-up: %s s). While it "
                "ran, bench:all's time keeper cut the budgets still to run when the run fell "
                "behind its limit and raised them when the techniques before had left time "
                "unused; its stderr says which, and by how much.%s%s",
                tb_json_get_string(b, "profile", "?"), lim, tot, est,
                over ? " **Over the limit**: the run was started with `--allow-over-budget`." : "",
                undeclared ? " Techniques with budget \"harness default\" declare none for this "
                             "profile and are not in the sum." : "");
    if (!strcmp(tb_json_get_string(b, "profile", ""), "gpu"))
        tb_doc_text(d, BK_P, "**The gpu profile**%s: the real ResNet-50 (224 x 224, batch 64) and "
                    "GPT-2 (12 layers, d 768, context 1024, vocabulary 50,257, batch 4), sized "
                    "so that each technique's trainers live together on one 80 GB GPU (a batch that does not fit is halved until it does, and "
                    "its rows say so); every other size as in the full profile. %s",
                    tb_json_get_bool(b, "profile_auto", 0)
                        ? ", chosen by default because the CUDA backend was active" : "",
                    strcmp(fp_get(f, "device.backend", ""), "cuda")
                        ? "This run was not on a GPU: its times say nothing about the budgets, "
                          "which are for one H100." : "");
    static const char *const h[3] = {"technique", "budget (s)", "estimated run time (s)"};
    tb_doc_table(d, 3, h);
    const tb_json *techs = tb_json_get(b, "techniques");
    for (size_t i = 0; techs && i < techs->len; i++) {
        const tb_json *t = tb_json_at(techs, i);
        char bs[48], es[32];
        double bv = tb_json_get_number(t, "budget_s", 0);
        if (bv > 0)
            tb_report_num(bs, sizeof bs, bv);
        else
            snprintf(bs, sizeof bs, "harness default");
        tb_report_num(es, sizeof es, tb_json_get_number(t, "est_s", NAN));
        const char *row[3] = {tb_json_get_string(t, "name", "?"), bs, es};
        tb_doc_row(d, row);
    }
}

static void sec_fingerprint(doc *d, const tb_report_folder *f)
{
    if (!sec_begin(d, "Environment fingerprint", f->have_fp,
                   "Not recorded: `fingerprint.json` is absent."))
        return;
    tb_doc_text(d, BK_P, "From `fingerprint.json`: what these numbers were measured with. A value "
                      "the machine does not expose reads \"n/a (the reason)\".");
    static const char *const h[2] = {"key", "value"};
    tb_doc_table(d, 2, h);
    for (int i = 0; i < f->fp.n; i++) {
        const tb_fp_entry *e = &f->fp.entries[i];
        if (!strchr(e->key, '.'))
            continue; /* the schema line */
        char val[sizeof e->value + 48];
        snprintf(val, sizeof val, "%s", e->value[0] ? e->value : "(empty: not applicable)");
        if (tb_report_has_suffix(e->key, "_bytes") && atof(e->value) >= 1 << 30) /* readable size too */
            snprintf(val, sizeof val, "%s (%.1f GiB)", e->value, atof(e->value) / (1 << 30));
        const char *row[2] = {e->key, val};
        tb_doc_row(d, row);
    }
}

static void sec_files(doc *d, const tb_report_folder *f)
{
    tb_doc_text(d, BK_H2, "Files");
    tb_doc_text(d, BK_P,
                "In `results/%s/`: `<technique>.csv` and `.json` (every row; columns in "
                "results/README.md), `<technique>.gbench.json` (Google Benchmark's own output: "
                "its `tools/compare.py benchmarks A.gbench.json B.gbench.json` compares two runs), "
                "`fingerprint.json`, `telemetry.json`, `summary.tex` (this summary as a LaTeX "
                "booktabs table) and `summary.md`. In `plots/%s/`: every figure as PNG, SVG and "
                "PDF with its gnuplot script. To compare machines: `bazel run //bench:compare -- "
                "DIR1 DIR2`.",
                f->slug, f->slug);
}

/* Rounds (or, unpaired, repetitions) behind the timed rows of res, as
 * "5 to 40 interleaved rounds a row". */
static void rounds_text(const tb_results *res, size_t nres, char *buf, size_t cap)
{
    int rlo = 0, rhi = 0, plo = 0, phi = 0;
    for (size_t k = 0; k < nres; k++)
        for (size_t i = 0; i < res[k].n; i++) {
            const tb_result_row *r = &res[k].rows[i];
            if (!is_timed(r))
                continue;
            int paired = r->rounds > 0, v = paired ? r->rounds : r->reps;
            int *lo = paired ? &rlo : &plo, *hi = paired ? &rhi : &phi;
            if (!*lo || v < *lo)
                *lo = v;
            if (v > *hi)
                *hi = v;
        }
    char span[48];
    if (rhi || phi) {
        int lo = rhi ? rlo : plo, hi = rhi ? rhi : phi;
        if (lo == hi)
            snprintf(span, sizeof span, "%d", lo);
        else
            snprintf(span, sizeof span, "%d to %d", lo, hi);
    }
    if (rhi)
        snprintf(buf, cap, "%s interleaved rounds a row", span);
    else if (phi)
        snprintf(buf, cap, "%s repetitions a row, not paired in rounds", span);
    else
        snprintf(buf, cap, "no timed rows");
}

/* The forest plot's rows: every technique whose shown setting has a
 * speedup, in the summary's order, labeled with what it ran on. */
static size_t forest_rows(const report_picks *ps, tb_forest_row *rows)
{
    const tb_report_pick *picks = ps->wl;
    size_t order[REPORT_MAX_PICKS], n = 0;
    tb_report_order(picks, ps->nwl, order);
    for (size_t i = 0; i < ps->nwl; i++) {
        const tb_report_pick *p = &picks[order[i]];
        if (!p->best || isnan(p->best->speedup))
            continue;
        tb_forest_row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->label, sizeof r->label, "%s: %s (%s)", p->technique, p->best->setting,
                 p->workload[0] ? p->workload : p->best->metric);
        r->step_level = tb_report_is_step_level(p->best);
        tb_forest_point_of(p, &r->at[0]);
    }
    return n;
}

/* Draws plots/<device>/forest.* from the picks; a failure (no gnuplot, no
 * plots folder) is said in the report, not fatal: the tables hold it all. */
static int render_forest(const tb_report_folder *f, const report_picks *ps, char *why,
                         size_t cap)
{
    tb_forest_row rows[REPORT_MAX_PICKS];
    tb_forest fp = {1, {device_name(f)}, rows, forest_rows(ps, rows)};
    why[0] = '\0';
    if (!fp.n) {
        snprintf(why, cap, "no technique was compared with its baseline in this run");
        return 0;
    }
    mkdir(f->plots_dir, 0777); /* an existing folder is fine; a failure shows below */
    if (tb_forest_render(&fp, f->plots_dir, "forest") != TB_OK) {
        snprintf(why, cap, "%s", tb_error_message());
        tb_error_clear();
        return 0;
    }
    return 1;
}

/* A figure the report drew itself, at the top, with its caption. */
static void add_own_figure(doc *d, const tb_report_folder *f, const char *name, const char *alt,
                           const char *caption)
{
    char png[PATH_MAX + 64], md[PATH_MAX + 200];
    figure_paths(f, name, png, sizeof png, md, sizeof md);
    tb_doc_figure(d, png, md, alt, caption);
}

/* "**Not finished in this run**: ..." when the run did not finish every
 * technique it planned (run_state.json): a technique that failed or was
 * interrupted before writing its CSV would otherwise be absent from the
 * findings and the summary without a word. 0 (buf "") when it did. */
static int unfinished_text(const tb_report_folder *f, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!f->have_state || (f->complete && !f->nunfinished))
        return 0;
    if (f->nunfinished)
        snprintf(buf, cap, "**Not finished in this run** (%d of the techniques it planned): %s. "
                 "A technique that failed says why on bench:all's stderr; `bench:all --resume` "
                 "runs what is left.", f->nunfinished, f->unfinished);
    else
        snprintf(buf, cap, "**This run did not finish** (run_state.json): `bench:all --resume` "
                 "runs what is left.");
    return 1;
}

static void sec_findings(doc *d, const tb_report_folder *f, const report_picks *ps,
                         int have_forest, const char *why)
{
    const tb_report_pick *picks = ps->wl;
    size_t idx[TB_FINDINGS_MAX];
    size_t n = tb_report_findings(picks, ps->nwl, idx, TB_FINDINGS_MAX);
    tb_doc_text(d, BK_H2, "Findings");
    tb_doc_text(d, BK_COL, "%s", "");
    char unfinished[1200];
    if (unfinished_text(f, unfinished, sizeof unfinished))
        tb_doc_text(d, BK_P, "%s", unfinished);
    if (!n)
        tb_doc_text(d, BK_P, "No technique changed the measured time beyond its interval on "
                          "this machine, and none changed the result: the summary below gives "
                          "each one's interval.");
    for (size_t i = 0; i < n; i++) {
        char text[1200];
        tb_report_finding_text(&picks[idx[i]], text, sizeof text);
        tb_doc_text(d, BK_P, "%s", text);
    }
    tb_doc_text(d, BK_P, "%s", tb_report_findings_rule);
    if (!have_forest) {
        tb_doc_text(d, BK_P, "The forest plot (every technique's speedup with its interval) "
                          "was not drawn: %s.", why);
        fprintf(stderr, "report: the forest plot was not drawn: %s\n", why);
        tb_doc_text(d, BK_COLS_END, "%s", "");
        return;
    }
    tb_doc_text(d, BK_COL, "%s", "");
    char cap[900], rounds[96];
    rounds_text(f->rows, (size_t)f->ntech, rounds, sizeof rounds);
    snprintf(cap, sizeof cap,
             "Speedup of each technique's headline setting over its baseline on %s (the "
             "Hodges-Lehmann estimate of the per-round ratios where the settings were timed in "
             "interleaved rounds, else the ratio of medians; log scale, with its 95%% interval; "
             "%s), sorted by effect and coloured by "
             "verdict; the grey band is the row's noise floor, the dashed line 1× (no change). "
             "Upper panel: the whole training step or epoch, with the workload in brackets; "
             "lower panel: single kernels and operations, which are not training-step speedups. "
             "Also `forest.svg` and `forest.pdf` in `plots/%s/`.",
             device_name(f), rounds, f->slug);
    add_own_figure(d, f, "forest", "forest plot: every technique's speedup with its 95% interval",
                   cap);
    tb_doc_text(d, BK_COLS_END, "%s", "");
}

/* Figures the report draws itself, shown in their own sections. */
static int report_figure(const char *name)
{
    return !strcmp(name, "forest") || !strcmp(name, TB_REPORT_WATERFALL "_stages") ||
           !strcmp(name, TB_REPORT_WATERFALL "_leave_one_out");
}

static void build_doc(doc *d, const tb_report_folder *f, const report_picks *ps)
{
    char why[600];
    const tb_report_pick *picks = ps->tech;
    int have_forest = render_forest(f, ps, why, sizeof why);
    sec_header(d, f);
    sec_findings(d, f, ps, have_forest, why);
    tb_doc_text(d, BK_H2, "Summary");
    tb_report_summary_doc(d, ps->wl, ps->nwl);
    sec_how_to_read(d);

    sec_flagged(d, f);
    sec_ceilings(d, f, picks);
    sec_waterfall(d, f);
    sec_tta(d, f);
    tb_doc_text(d, BK_H2, "Techniques one by one");
    for (int t = 0; t < f->ntech; t++)
        sec_technique(d, f, t, &picks[t]);
    int other = 0;
    for (int i = 0; i < f->nplots; i++) {
        const char *p = f->plots[i];
        if (plot_owner(f, p) >= 0 || has_prefix(p, TB_REPORT_WATERFALL) ||
            has_prefix(p, TB_REPORT_TTA) || report_figure(p))
            continue;
        if (!other++)
            tb_doc_text(d, BK_H2, "Other figures");
        add_figure(d, f, p, NULL);
    }
    sec_na(d, f);
    sec_telemetry(d, f);
    sec_budget(d, f);
    sec_fingerprint(d, f);
    sec_files(d, f);
}

/* ---- writing ---- */

/* What the four files are written from. */
typedef struct report_src {
    const doc *d;
    const tb_report_folder *f;
    const report_picks *p;
} report_src;

static int w_md(const void *arg, FILE *out)
{
    const report_src *s = arg;
    return tb_md_write(s->d, out);
}

static int w_html(const void *arg, FILE *out)
{
    const report_src *s = arg;
    char title[256];
    snprintf(title, sizeof title, "tunebench report: %s", device_name(s->f));
    return tb_html_write(s->d, title, out);
}

static int w_sum_md(const void *arg, FILE *out)
{
    const report_src *s = arg;
    char label[512];
    device_label(s->f, label, sizeof label);
    fprintf(out, "# tunebench summary: %s\n\n", label);
    return tb_report_summary_md(s->p->wl, s->p->nwl, out);
}

static int w_sum_tex(const void *arg, FILE *out)
{
    const report_src *s = arg;
    char label[512];
    device_label(s->f, label, sizeof label);
    return tb_report_summary_tex(s->p->wl, s->p->nwl, label, out);
}

static int write_one(const report_src *s, const char *name, tb_atomic_writer w)
{
    char path[PATH_MAX + 64];
    TB_TRY(tb_outdir_join(s->f->results_dir, name, path, sizeof path));
    return tb_atomic_write_with(path, w, s);
}

/* The pick for technique t, labeled with its workload: the results' own,
 * else the small CNN every step technique runs by default. */
static void pick_one(const tb_report_folder *f, int t, tb_report_pick *p)
{
    tb_report_pick_headline(&f->rows[t], f->tech[t], f->headline[t], f->headline_metric[t], p);
    const tb_result_row *r = p->best ? p->best : p->baseline;
    if (f->workload[t][0])
        snprintf(p->workload, sizeof p->workload, "%s", f->workload[t]);
    else if (r && tb_report_is_step_level(r))
        snprintf(p->workload, sizeof p->workload, "small CNN");
    snprintf(p->earlier, sizeof p->earlier, "%s", f->earlier[t]);
}

/* Every technique's pick, and the summary's: one per (technique, workload)
 * for a technique whose rows name several workloads, else its own. */
static void pick_all(const tb_report_folder *f, report_picks *ps)
{
    char wl[REPORT_MAX_WL][48];
    ps->nwl = 0;
    for (int t = 0; t < f->ntech; t++) {
        pick_one(f, t, &ps->tech[t]);
        size_t n = tb_report_workloads(&f->rows[t], f->tech[t], wl, REPORT_MAX_WL);
        if (n < 2) {
            ps->wl[ps->nwl++] = ps->tech[t];
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            tb_report_pick *p = &ps->wl[ps->nwl++];
            tb_report_pick_workload(&f->rows[t], f->tech[t], f->headline[t],
                                    f->headline_metric[t], wl[k], p);
            snprintf(p->workload, sizeof p->workload, "%s", wl[k]);
            snprintf(p->earlier, sizeof p->earlier, "%s", f->earlier[t]);
        }
    }
    double least = 0;
    for (int mine = 1; mine >= 0 && !(least > 0); mine--) /* this run's rows; else all */
        for (int i = 0; i < ps->nwl; i++)
            if ((!mine || !ps->wl[i].earlier[0]) && ps->wl[i].flags.xcore_lo > 0 &&
                (!(least > 0) || ps->wl[i].flags.xcore_lo < least))
                least = ps->wl[i].flags.xcore_lo;
    for (int i = 0; i < ps->nwl; i++)
        ps->wl[i].xcore_least = least;
    for (int t = 0; t < f->ntech; t++)
        ps->tech[t].xcore_least = least;
}

int tb_report_write(const tb_report_folder *f)
{
    report_picks *ps = malloc(sizeof *ps);
    if (!ps)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory picking the summary's rows");
    pick_all(f, ps);
    doc d = {0};
    report_src src = {&d, f, ps};
    int rc = TB_OK;
    build_doc(&d, f, ps);
    if (d.oom) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of memory building the report");
        goto out_free;
    }
    TB_TRY_GOTO(rc, write_one(&src, "REPORT.md", w_md), out_free);
    TB_TRY_GOTO(rc, write_one(&src, "REPORT.html", w_html), out_free);
    TB_TRY_GOTO(rc, write_one(&src, "summary.md", w_sum_md), out_free);
    TB_TRY_GOTO(rc, write_one(&src, "summary.tex", w_sum_tex), out_free);
out_free:
    tb_doc_clear(&d);
    free(ps);
    return rc;
}

int tb_report_write_dir(const char *results_dir, const char *plots_dir)
{
    tb_report_folder *f = NULL;
    TB_TRY(tb_report_load(results_dir, plots_dir, &f));
    int rc = tb_report_write(f);
    tb_report_folder_free(f);
    return rc;
}

/* A finding without the Markdown's ** markers, for a terminal. */
static void put_plain(FILE *out, const char *prefix, const char *text)
{
    fputs(prefix, out);
    for (const char *c = text; *c; c++)
        if (strncmp(c, "**", 2) != 0)
            fputc(*c, out);
        else
            c++;
    fputc('\n', out);
}

int tb_report_print_findings(const tb_report_folder *f, const char *prefix, FILE *out)
{
    size_t idx[TB_FINDINGS_MAX];
    report_picks *ps = malloc(sizeof *ps);
    if (!ps)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory picking the findings");
    pick_all(f, ps);
    const tb_report_pick *picks = ps->wl;
    size_t n = tb_report_findings(picks, ps->nwl, idx, TB_FINDINGS_MAX);
    char unfinished[1200];
    if (unfinished_text(f, unfinished, sizeof unfinished))
        put_plain(out, prefix, unfinished);
    if (!n)
        fprintf(out, "%sno technique changed the time beyond its interval, none changed the "
                     "result\n", prefix);
    for (size_t i = 0; i < n; i++) {
        char text[1200];
        tb_report_finding_text(&picks[idx[i]], text, sizeof text);
        put_plain(out, prefix, text);
    }
    free(ps);
    return ferror(out) ? TB_FAIL(TB_ERR_IO, "cannot print the findings") : TB_OK;
}
