/*
 * report_test.c - the report on a results folder built here: rows made in
 * memory and saved with lib/report/results.h, a fingerprint, and a real PNG
 * rendered by lib/report/plot.h (gnuplot). Checks:
 *   - the summary rule (metric, point, best setting);
 *   - REPORT.html embeds every image as a data: URI and references nothing
 *     outside itself (no http(s), no href, no external src, no <link>/<script>);
 *   - every time and speedup in the tables has its unit and 95% interval;
 *   - every n/a carries its reason: on each line of REPORT.md, and in each
 *     cell of the summary (a technique whose other settings are n/a on this
 *     backend shows their reason, not a blank);
 *   - settings that are their own point (tf32 = 0 against 1) are all shown
 *     in their technique's section;
 *   - the waterfall and time-to-accuracy sections say "not measured in this
 *     run" without their CSVs and show tables with them;
 *   - flags beside a row (stopped by budget, round cap, busy machine,
 *     unreliable, imprecise) exactly where they apply, a busy technique
 *     flagged above its table and in the summary, the counts, and the
 *     "Flagged rows" list;
 *   - the answer first: REPORT.html holds the findings, then the forest
 *     plot, then the summary grouped faster / no detectable effect / not
 *     applicable, each group sorted by effect; the findings' rule (DIFFERS
 *     first, then faster or slower by the interval end nearest 1, never a
 *     within-noise row) and its sentences; the headline setting declared in
 *     a technique's JSON sidecar shown instead of its fastest;
 *   - every figure has a caption saying what was measured, and every
 *     gnuplot script axis labels (the forest's x axis in ×);
 *   - a step technique on several workloads (theta) has a summary row per
 *     workload, keyed "theta (gpt2)", and a row in the "Per workload" table;
 *   - summary.md / summary.tex match golden files byte for byte
 *     (lib/report/testdata/report_summary_golden.{md,tex}; regenerate with
 *     TB_UPDATE_GOLDEN=/path/to/lib/report/testdata).
 *
 * bazel test //lib/report:report_test
 */
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/report/cells.h"
#include "lib/report/findings.h"
#include "lib/report/forest.h"
#include "lib/report/plot.h"
#include "lib/report/report.h"
#include "lib/report/results_testing.h"
#include "lib/report/resume.h"
#include "lib/core/testing.h"

/* A timed row with a median, interval, speedup and correctness. */
static void timed(tb_result_row *r, const char *tech, const char *setting, int base,
                  const char *pname, double pval, const char *metric, double median, double sp)
{
    tb_test_timed_row(r, tech, "Test CPU", setting, base, pname, pval, metric, 5, median,
                      (tb_test_spread){0.97, 1.04, 0.95, 1.1});
    r->noise_floor = 0.02;
    if (base) {
        r->timing_verdict = TB_TIMING_BASELINE;
    } else {
        r->speedup = sp;
        r->speedup_ci_low = sp * 0.95;
        r->speedup_ci_high = sp * 1.05;
        r->timing_verdict = sp > 1.1 ? TB_TIMING_FASTER : sp < 0.9 ? TB_TIMING_SLOWER
                                                                   : TB_TIMING_WITHIN_NOISE;
    }
    r->correctness = TB_CORRECT_WITHIN_TOL;
    snprintf(r->checked_against, sizeof r->checked_against, "float64 reference");
    r->tolerance = 1e-5;
    r->max_rel_err = 2e-7;
}

/* A timed row added as is. */
static void add_timed(tb_results *res, const char *tech, const char *setting, int base,
                      const char *pname, double pval, const char *metric, double median,
                      double sp)
{
    tb_result_row r;
    timed(&r, tech, setting, base, pname, pval, metric, median, sp);
    tb_results_add(res, &r);
}

/* A setting not timed on the test machine's CPU backend, and why. */
static void add_na(tb_results *res, const char *tech, const char *setting, const char *metric,
                   const char *why)
{
    tb_results_add_na(res, tech, "cpu", "Test CPU", setting, metric, why);
}

static void build_alpha(tb_results *res)
{
    tb_result_row r;
    static const double sizes[2] = {1024, 4096};
    for (int i = 0; i < 2; i++) {
        double n = sizes[i];
        timed(&r, "alpha", "off", 1, "elements", n, "fwd time", 2.0 * n / 1024, 1);
        r.rate = 4.0 * n / (r.median * 1e-3) / 1e9;
        snprintf(r.rate_unit, sizeof r.rate_unit, "GB/s");
        snprintf(r.ceiling_name, sizeof r.ceiling_name, "copy bandwidth");
        r.ceiling_rate = 20;
        r.fraction_of_ceiling = r.rate / 20;
        tb_results_add(res, &r);
        add_timed(res, "alpha", "on", 0, "elements", n, "fwd time", n / 1024, i ? 2.0 : 5.0);
        timed(&r, "alpha", "half", 0, "elements", n, "fwd time", 1.5 * n / 1024, i ? 1.33 : 9.0);
        r.correctness = TB_CORRECT_EXACT;
        snprintf(r.checked_against, sizeof r.checked_against, "baseline");
        r.tolerance = NAN;
        r.max_rel_err = 0;
        tb_results_add(res, &r);
    }
}

static void build_beta(tb_results *res)
{
    tb_result_row r;
    add_timed(res, "beta", "memset", 1, "", NAN, "zero time", 1.0, 1);
    add_timed(res, "beta", "none", 0, "", NAN, "zero time", 0.5, 2.0);
    add_timed(res, "beta", "memset", 1, "", NAN, "step time", 10.0, 1);
    timed(&r, "beta", "none", 0, "", NAN, "step time", 9.9, 1.01);
    r.correctness = TB_CORRECT_DIFFERS;
    r.max_rel_err = 0.5;
    tb_results_add(res, &r);
    add_na(res, "beta", "pinned", "step time", "no copy to a device on the CPU backend");
}

static void build_gamma(tb_results *res)
{
    add_na(res, "gamma", "graphs", "step time", "CUDA graphs need a GPU");
}

/* The baseline timed, the only other setting n/a here (pinned memory on
 * the CPU), with a note that itself begins with "n/a". */
static void build_delta(tb_results *res)
{
    add_timed(res, "delta", "pageable", 1, "pinned", 0, "step time", 20.0, 1);
    add_na(res, "delta", "pinned", "step time", "n/a on the CPU backend: no copy to a device");
}

/* Each setting its own point: the baseline at tf32 = 0, tf32 at 1. */
static void build_epsilon(tb_results *res)
{
    add_timed(res, "epsilon", "fp32", 1, "tf32", 0, "step time", 8.0, 1);
    add_timed(res, "epsilon", "tf32", 0, "tf32", 1, "step time", 4.0, 2.0);
}

/* A paired row of zeta: rounds, how they stopped, the interval. */
static void add_paired(tb_results *res, const char *tech, const char *setting, double sp,
                       double lo, double hi, const char *stopped_by, int rounds)
{
    tb_result_row r;
    timed(&r, tech, setting, 0, "", NAN, "step time", 10.0 / sp, sp);
    r.speedup_ci_low = lo;
    r.speedup_ci_high = hi;
    r.timing_verdict = lo > 1 ? TB_TIMING_FASTER : hi < 1 ? TB_TIMING_SLOWER
                                                         : TB_TIMING_WITHIN_NOISE;
    r.rounds = rounds;
    r.mde = (hi - lo) / sp; /* about right for the test: wider interval, larger mde */
    snprintf(r.stopped_by, sizeof r.stopped_by, "%s", stopped_by);
    r.load_avg = 0.1;
    tb_results_add(res, &r);
}

/* Paired rows, one per flag, and one with none:
 *   budget: stopped by the budget at ±13%         -> "stopped by budget"
 *   busy:   on a busy machine (load 3.2)          -> "busy machine"
 *   biased: its A/A interval excluded 1           -> "unreliable"
 *   wide:   ±18%, stopped on the cap, no excuse   -> "imprecise" (and the cap)
 *   precise: ±2%, stopped on the target           -> nothing */
static void build_zeta(tb_results *res)
{
    tb_result_row r;
    timed(&r, "zeta", "off", 1, "", NAN, "step time", 10.0, 1);
    r.rounds = 30;
    snprintf(r.stopped_by, sizeof r.stopped_by, "target");
    r.load_avg = 0.1;
    tb_results_add(res, &r);
    add_paired(res, "zeta", "budget", 1.05, 0.92, 1.19, "budget", 60);
    add_paired(res, "zeta", "busy", 1.2, 1.15, 1.25, "target", 30);
    res->rows[res->n - 1].busy = 1;
    res->rows[res->n - 1].load_avg = 3.2;
    add_paired(res, "zeta", "biased", 1.03, 1.01, 1.05, "target", 30);
    res->rows[res->n - 1].unreliable = 1;
    add_paired(res, "zeta", "wide", 1.0, 0.85, 1.18, "cap", 100);
    add_paired(res, "zeta", "precise", 1.04, 1.02, 1.06, "target", 30);
    /* the machine state: the busy row measured with the CPUs apart */
    for (size_t i = res->n - 6; i < res->n; i++)
        res->rows[i].xcore_ns = 60.0 + (double)(i % 3);
    res->rows[res->n - 4].xcore_ns = 330.0;
}

/* A noise floor of ±15%: the baseline's rounds stopped on the budget (its
 * flag says so, with the noise floor as the width reached); the compared
 * row stopped on its target and has nothing to explain the noise floor:
 * imprecise, even though its own interval is narrow. */
static void build_eta(tb_results *res)
{
    tb_result_row r;
    timed(&r, "eta", "off", 1, "", NAN, "step time", 10.0, 1);
    r.noise_floor = 0.15;
    r.rounds = 20; /* the baseline's A/A ran out of time: that explains it */
    snprintf(r.stopped_by, sizeof r.stopped_by, "budget");
    tb_results_add(res, &r);
    add_paired(res, "eta", "on", 1.5, 1.47, 1.53, "target", 20);
    res->rows[res->n - 1].noise_floor = 0.15;
}

/* Rows on one workload of a step technique measured on several. */
static void on_workload(tb_results *res, size_t from, const char *workload)
{
    for (size_t i = from; i < res->n; i++)
        snprintf(res->rows[i].workload, sizeof res->rows[i].workload, "%s", workload);
}

/* A step technique on three workloads (issue 15): faster on GPT-2, within
 * noise on ResNet-50, n/a on the small CNN; the summary has a row for
 * each, and "Per workload" sets them side by side. */
static void build_theta(tb_results *res)
{
    add_timed(res, "theta", "off", 1, "", NAN, "step time", 30.0, 1);
    add_timed(res, "theta", "on", 0, "", NAN, "step time", 20.0, 1.5);
    on_workload(res, 0, "gpt2-reduced-synthetic");
    size_t at = res->n;
    add_timed(res, "theta", "off", 1, "", NAN, "step time", 40.0, 1);
    add_timed(res, "theta", "on", 0, "", NAN, "step time", 39.6, 1.01);
    on_workload(res, at, "resnet50-reduced-synthetic");
    at = res->n;
    add_na(res, "theta", "on", "step time", "no attention in the small CNN");
    on_workload(res, at, "small_cnn-fashion_mnist");
}

static int save(const tb_results *res, const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.csv", dir, name);
    return tb_results_save_csv(res, path);
}

#define LONG_NA_NOTE                                                                          \
    "no device copy on the CPU backend: the host's pages are where the kernels read them, "  \
    "so a pageable or a pinned buffer is the same memory, there is nothing to copy and no "   \
    "transfer time to measure; on a machine with a GPU this row holds the host-to-device "    \
    "bandwidth of a pageable buffer, which bench:pinned_memory_bw sweeps by size; this "      \
    "sentence runs on past three hundred and twenty bytes so that a table cell cut at the "   \
    "old width loses its end: end of the reason"

static void make_folder(const char *root, char *rdir, char *pdir)
{
    sprintf(rdir, "%s/results/test-cpu", root);
    sprintf(pdir, "%s/plots/test-cpu", root);
    CHECK_OK(tb_mkdir_p(rdir));
    CHECK_OK(tb_mkdir_p(pdir));
    tb_results a, b, g, c, dl, e, z, et, th;
    tb_results_init(&a), tb_results_init(&b), tb_results_init(&g), tb_results_init(&c);
    tb_results_init(&dl), tb_results_init(&e), tb_results_init(&z), tb_results_init(&et);
    tb_results_init(&th);
    build_theta(&th);
    build_zeta(&z);
    build_eta(&et);
    build_alpha(&a);
    build_beta(&b);
    build_gamma(&g);
    build_delta(&dl);
    build_epsilon(&e);
    tb_result_row r;
    timed(&r, "ceilings", "copy bandwidth", 0, "bytes", 268435456, "copy time", 25, NAN);
    r.timing_verdict = TB_TIMING_NA;
    r.correctness = TB_CORRECT_NA;
    r.rate = 21.5;
    snprintf(r.rate_unit, sizeof r.rate_unit, "GB/s");
    snprintf(r.note, sizeof r.note, "rate = bytes read + written / median time");
    tb_results_add(&c, &r);
    tb_results_add_na(&c, "ceilings", "cpu", "Test CPU", "h2d pinned bandwidth", "transfer time",
                      "no device copy on the CPU backend");
    /* a reason as long as a note can be (tf32's on an AVX2 CPU: 319 bytes)
     * and more: every table shows it whole */
    tb_results_add_na(&c, "ceilings", "cpu", "Test CPU", "h2d pageable bandwidth",
                      "transfer time", LONG_NA_NOTE);
    CHECK_OK(save(&a, rdir, "alpha"));
    CHECK_OK(save(&b, rdir, "beta"));
    CHECK_OK(save(&g, rdir, "gamma"));
    CHECK_OK(save(&c, rdir, "ceilings"));
    CHECK_OK(save(&dl, rdir, "delta"));
    CHECK_OK(save(&e, rdir, "epsilon"));
    CHECK_OK(save(&z, rdir, "zeta"));
    CHECK_OK(save(&et, rdir, "eta"));
    CHECK_OK(save(&th, rdir, "theta"));
    /* alpha declares "half" its headline: the summary shows it, not the
     * faster "on" (the JSON sidecar carries what the CSV does not). */
    char side[4300];
    snprintf(side, sizeof side, "%s/alpha.json", rdir);
    FILE *sf = fopen(side, "w");
    CHECK(sf && fputs("{\"schema\": \"tunebench-results/3\", \"headline\": \"half\", "
                      "\"rows\": []}\n", sf) >= 0 && fclose(sf) == 0);
    snprintf(side, sizeof side, "%s/theta.json", rdir);
    sf = fopen(side, "w");
    CHECK(sf && fputs("{\"schema\": \"tunebench-results/3\", \"headline\": \"on\", "
                      "\"rows\": []}\n", sf) >= 0 && fclose(sf) == 0);
    tb_results_free(&z), tb_results_free(&et), tb_results_free(&th);
    tb_results_free(&a), tb_results_free(&b), tb_results_free(&g), tb_results_free(&c);
    tb_results_free(&dl), tb_results_free(&e);

    tb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    tb_fingerprint_set(&fp, "device.name", "Test CPU");
    tb_fingerprint_set(&fp, "device.backend", "cpu");
    tb_fingerprint_set_number(&fp, "device.threads", 2);
    tb_fingerprint_set(&fp, "cpu.frequency", "n/a (not exposed by this machine)");
    char path[4200];
    sprintf(path, "%s/fingerprint.json", rdir);
    CHECK_OK(tb_fingerprint_save(&fp, path));

    /* A real figure, PNG only, named after technique alpha. */
    double x[2] = {1024, 4096}, y[2] = {1, 2};
    tb_plot_series s = {"on", x, y, NULL, NULL, 2};
    tb_plot p = {"alpha", "elements", "speedup (x)", 2, 0, &s, 1, NULL, 0, 0};
    CHECK_OK(tb_plot_render(&p, pdir, "alpha_speedup", TB_PLOT_PNG));
}

/* The findings' rule and the summary's order on picks made here. */
static void test_findings_and_order(void)
{
    tb_results res[5];
    void (*build[5])(tb_results *) = {build_zeta, build_eta, build_alpha, build_beta,
                                      build_epsilon};
    static const char *const names[5] = {"zeta", "eta", "alpha", "beta", "epsilon"};
    /* zeta's headline "wide" is within noise: no finding, whatever its fastest */
    static const char *const heads[5] = {"wide", "", "", "", ""};
    tb_report_pick p[5];
    for (int i = 0; i < 5; i++) {
        tb_results_init(&res[i]);
        build[i](&res[i]);
        tb_report_pick_headline(&res[i], names[i], heads[i], NULL, &p[i]);
    }
    CHECK(p[0].headline && !strcmp(p[0].best->setting, "wide"));
    CHECK(!p[1].headline && !strcmp(p[2].best->setting, "on"));
    size_t idx[TB_FINDINGS_MAX];
    size_t n = tb_report_findings(p, 5, idx, TB_FINDINGS_MAX);
    /* beta DIFFERS (within noise, still first); then the training step's
     * by interval end nearest 1: epsilon 1.90, eta 1.47; then one kernel's:
     * alpha 1.90 (fwd time), though as sure an effect as epsilon's; zeta
     * left out */
    CHECK(n == 4);
    if (n == 4)
        CHECK(idx[0] == 3 && idx[1] == 4 && idx[2] == 1 && idx[3] == 2, "order %zu %zu %zu %zu",
              idx[0], idx[1], idx[2], idx[3]);
    CHECK(tb_report_findings(p, 5, idx, 2) == 2 && idx[0] == 3 && idx[1] == 4);
    char text[700];
    tb_report_finding_text(&p[2], text, sizeof text);
    CHECK(!strcmp(text, "**alpha** (on): 2.0× faster [1.9, 2.1] on fwd time at elements = 4096 "
                        "(one kernel or operation, not the training step), same result within "
                        "0.001%."));
    /* a slowdown reads as its factor, interval turned round */
    tb_result_row slow = *p[1].best;
    slow.speedup = 0.5, slow.speedup_ci_low = 0.4, slow.speedup_ci_high = 0.625;
    slow.correctness = TB_CORRECT_EXACT;
    tb_report_pick ps = p[1];
    ps.best = &slow;
    snprintf(ps.workload, sizeof ps.workload, "ResNet-50");
    tb_report_finding_text(&ps, text, sizeof text);
    CHECK(!strcmp(text, "**eta** (on): 2.0× slower [1.6, 2.5] on the training step (ResNet-50), "
                        "bitwise the same result. Read with care: imprecise: interval ±25.0%, "
                        "noise floor ±15.0%."), "%s", text);
    CHECK(tb_report_sure_effect(&slow) == log(0.625));
    /* two digits would put the estimate on an end of its interval: three */
    slow.speedup = 0.732, slow.speedup_ci_low = 0.712, slow.speedup_ci_high = 0.754;
    tb_report_finding_text(&ps, text, sizeof text);
    CHECK(strstr(text, "1.37× slower [1.33, 1.40]"), "three digits: %s", text);
    /* a setting other than the one shown DIFFERS (the H200 run's fp16 on
     * ResNet-50 beside its bf16 headline): it comes first, and is named */
    tb_result_row bad = *p[2].best;
    snprintf(bad.setting, sizeof bad.setting, "fp16");
    bad.correctness = TB_CORRECT_DIFFERS;
    bad.max_rel_err = 0.0725, bad.tolerance = 0.05;
    tb_report_pick pd[2] = {p[2], p[1]};
    pd[1].differs = &bad;
    CHECK(tb_report_findings(pd, 2, idx, TB_FINDINGS_MAX) == 2 && idx[0] == 1,
          "a technique with a setting that DIFFERS comes first");
    tb_report_finding_text(&pd[1], text, sizeof text);
    CHECK(strstr(text, "**eta** (fp16):") && strstr(text, "DIFFERS by 7.2%"),
          "the finding names the setting that DIFFERS: %s", text);
    /* order: faster by speedup (eta 1.5 > alpha 2.0? no: alpha 2.0, epsilon 2.0, eta 1.5),
     * then within noise (zeta's wide, beta) */
    size_t order[5];
    tb_report_order(p, 5, order);
    CHECK(order[0] == 2 && order[1] == 4 && order[2] == 1);
    CHECK(tb_report_pick_group(&p[order[3]]) == TB_GROUP_NO_EFFECT &&
          tb_report_pick_group(&p[order[4]]) == TB_GROUP_NO_EFFECT);
    for (int i = 0; i < 5; i++)
        tb_results_free(&res[i]);
}

/* Every gnuplot script in pdir labels its axes; the forest's x axis says
 * its unit. */
static void check_plot_labels(const char *pdir)
{
    static const char *const names[2] = {"forest.gp", "alpha_speedup.gp"};
    for (int i = 0; i < 2; i++) {
        char *gp = tb_test_slurp(pdir, names[i]);
        /* the forest's rows are labeled one by one, its panels say what they hold */
        CHECK(gp && strstr(gp, "set xlabel '") && (i == 0 || strstr(gp, "set ylabel '")));
        if (gp && i == 0)
            CHECK(strstr(gp, "set xlabel 'speedup over the baseline (×, log scale") &&
                  strstr(gp, "\"training step or epoch: technique: setting (workload)\"") &&
                  strstr(gp, "\"single kernels and operations: technique: setting (metric)\"") &&
                  strstr(gp, "\"beta: none (small CNN)  [DIFFERS]\""));
        free(gp);
    }
}

/* The forest's label column grows with its longest label: 420 px at the
 * least, and none cut at the figure's left edge (labels of ~58 characters
 * were, at a fixed 420 px). The PNG's width is read from its script. */
static int forest_png_width(const char *pdir, const char *name, const char *long_label)
{
    tb_forest_row rows[2];
    memset(rows, 0, sizeof rows);
    snprintf(rows[0].label, sizeof rows[0].label, "alpha: on (small CNN)");
    snprintf(rows[1].label, sizeof rows[1].label, "%s", long_label);
    for (int i = 0; i < 2; i++) {
        rows[i].step_level = 1;
        rows[i].at[0] = (tb_forest_point){.speedup = 1.5, .lo = 1.4, .hi = 1.6, .noise = 0.02};
    }
    tb_forest fp = {.ncols = 1, .col_title = {"test"}, .rows = rows, .n = 2};
    CHECK_OK(tb_forest_write_script(&fp, pdir, name));
    char gp_name[64];
    snprintf(gp_name, sizeof gp_name, "%s.gp", name);
    char *gp = tb_test_slurp(pdir, gp_name);
    const char *at = gp ? strstr(gp, "pngcairo size ") : NULL;
    int w = at ? atoi(at + strlen("pngcairo size ")) : -1;
    free(gp);
    return w;
}

/* An interval that excludes 1 never prints as holding it: a faster row's
 * lower end 1.0034 is "1.003", not "1.00" (conv_bias in run 50 read
 * "1.02x [1.00, 1.03] faster"); a slower row's upper end likewise. */
static void test_speedup_digits(void)
{
    static const struct {
        double v, lo, hi;
        const char *want, *what;
    } cases[] = {
        {1.02, 1.0034, 1.03, "1.020× [1.003, 1.030]", "a faster end near 1"},
        {0.985, 0.97, 0.99951, "0.9850× [0.9700, 0.9995]", "a slower end near 1"},
        {1.33, 1.26, 1.40, "1.33× [1.26, 1.40]", "ends far from 1 as before"},
        {1.01, 0.96, 1.06, "1.01× [0.960, 1.06]", "an interval holding 1 as before"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tb_result_row r;
        memset(&r, 0, sizeof r);
        char buf[96];
        r.speedup = cases[k].v, r.speedup_ci_low = cases[k].lo, r.speedup_ci_high = cases[k].hi;
        tb_report_speedup(buf, sizeof buf, &r);
        CHECK(!strcmp(buf, cases[k].want), "%s: %s", cases[k].what, buf);
    }
}

/* What bench:report and bench:compare accept as results folders. */
static void test_results_folders(const char *root, const char *rdir)
{
    char out[3][4200], dir[4200];
    int n = -1;
    CHECK_OK(tb_report_results_folders(rdir, out[0], sizeof out[0], 3, &n)); /* itself */
    CHECK(n == 1 && !strcmp(out[0], rdir));
    CHECK_OK(tb_report_results_folders(root, out[0], sizeof out[0], 3, &n)); /* a root */
    CHECK(n == 1 && !strcmp(out[0], rdir));
    snprintf(dir, sizeof dir, "%s/results", root);
    CHECK_OK(tb_report_results_folders(dir, out[0], sizeof out[0], 3, &n)); /* results/ */
    CHECK(n == 1 && !strcmp(out[0], rdir));
    /* plots/ holds folders without a fingerprint or a CSV: no results there */
    snprintf(dir, sizeof dir, "%s/plots", root);
    CHECK(tb_report_results_folders(dir, out[0], sizeof out[0], 3, &n) == TB_ERR_IO && n == 0);
    CHECK(strstr(tb_error_message(), "no results here"));
    tb_error_clear();
}

static void test_forest_label_width(const char *pdir)
{
    int narrow = forest_png_width(pdir, "forest_narrow", "beta: off (small CNN)");
    char long_label[160];
    snprintf(long_label, sizeof long_label, "%s", "data_format: decoded once in RAM "
             "(small_cnn-fashion_mnist), and some more words");
    int wide = forest_png_width(pdir, "forest_wide", long_label);
    CHECK(narrow == 420 + 580);
    /* 8.6 px a character of the PNG's Sans 12, plus its padding */
    CHECK(wide >= (int)(8.6 * (double)strlen(long_label)) + 580 && wide > narrow);
}

/* Two points of their own settings (channels_last's fp32 and bf16 pairs);
 * its headline, "channels last", is timed at the smaller one only. */
static void build_kappa(tb_results *k)
{
    add_timed(k, "kappa", "NCHW", 1, "bf16_autocast", 0, "step time", 43.9, 1);
    add_timed(k, "kappa", "channels last", 0, "bf16_autocast", 0, "step time", 37.4, 1.15);
    add_timed(k, "kappa", "NCHW, bf16", 1, "bf16_autocast", 1, "step time", 55.7, 1);
    add_timed(k, "kappa", "channels last, bf16", 0, "bf16_autocast", 1, "step time", 50.4, 1.07);
}

static void test_pick(const char *rdir)
{
    tb_results a, b;
    tb_results_init(&a), tb_results_init(&b);
    build_alpha(&a);
    build_beta(&b);
    tb_report_pick p;
    tb_report_pick_best(&a, "alpha", &p);
    /* Largest point (4096), best median speedup there ("on", 2.0 > 1.33),
     * although "half" is faster at the small point. */
    CHECK(p.baseline && p.best);
    if (p.best) {
        CHECK(p.best->param_value == 4096);
        CHECK(!strcmp(p.best->setting, "on"));
    }
    tb_report_pick_best(&b, "beta", &p);
    CHECK(p.best && !strcmp(p.best->metric, "step time")); /* step time wins over the first metric */

    /* A headline timed at one point only (channels_last: its fp32 and bf16
     * pairs have their own names): shown beside the baseline it was compared
     * with there, not the largest point's (it once showed NCHW bf16's median
     * beside channels last fp32's speedup). */
    tb_results k;
    tb_results_init(&k);
    build_kappa(&k);
    tb_report_pick_headline(&k, "kappa", "channels last", NULL, &p);
    CHECK(p.headline && p.best && p.baseline);
    if (p.best && p.baseline) {
        CHECK(!strcmp(p.best->setting, "channels last") && p.best->param_value == 0);
        CHECK(!strcmp(p.baseline->setting, "NCHW") && p.baseline->param_value == 0,
              "headline beside baseline %s at %g", p.baseline->setting, p.baseline->param_value);
    }
    tb_report_pick_best(&k, "kappa", &p); /* no headline: the largest point's pair */
    CHECK(p.best && p.baseline && !strcmp(p.baseline->setting, "NCHW, bf16") &&
          !strcmp(p.best->setting, "channels last, bf16"));
    tb_results_free(&k);

    /* ddp in run 50: two one-rank baselines (DataParallel 26.3 ms, DDP
     * 26.2 ms) and DDP on two ranks, 24.6 ms at a paired 1.07x, whose
     * median times speedup (26.3) lies nearer DataParallel's: the noise
     * floor the DDP row shares with its own baseline (its A/A) decides. */
    tb_results d;
    tb_results_init(&d);
    tb_result_row row;
    timed(&row, "ddp", "DP threads", 1, "ranks", 1, "step time", 26.3e-3, NAN);
    row.noise_floor = 0.0353;
    tb_results_add(&d, &row);
    timed(&row, "ddp", "DDP", 1, "ranks", 1, "step time", 26.2e-3, NAN);
    row.noise_floor = 0.0321;
    tb_results_add(&d, &row);
    timed(&row, "ddp", "DDP", 0, "ranks", 2, "step time", 24.6e-3, 1.07);
    row.noise_floor = 0.0321;
    tb_results_add(&d, &row);
    tb_report_pick_headline(&d, "ddp", "DDP", NULL, &p);
    CHECK(p.best && p.baseline && !strcmp(p.baseline->setting, "DDP"),
          "ddp's DDP row beside its own baseline, not %s",
          p.baseline ? p.baseline->setting : "none");
    /* one name at two points: the points say what differs */
    static char cells[SUM_COLS][TB_REPORT_CELL];
    if (p.best && p.baseline) {
        tb_report_summary_cells(&p, cells);
        CHECK(!strcmp(cells[1], "step time, ranks = 1 vs ranks = 2"), "ddp measured at: %s",
              cells[1]);
    }
    tb_results_free(&d);
    /* a declared headline metric (fused_attention's "fwd+bwd time,
     * causal"): read there, not on the first metric listed; one that was
     * not timed falls back to the first */
    tb_results m;
    tb_results_init(&m);
    add_timed(&m, "attn", "manual", 1, "seq", 4096, "fwd time", 8.0, NAN);
    add_timed(&m, "attn", "fused", 0, "seq", 4096, "fwd time", 8.0, 1.0);
    add_timed(&m, "attn", "manual", 1, "seq", 4096, "fwd+bwd time, causal", 30.0, NAN);
    add_timed(&m, "attn", "fused", 0, "seq", 4096, "fwd+bwd time, causal", 15.0, 2.0);
    tb_report_pick_headline(&m, "attn", "fused", "fwd+bwd time, causal", &p);
    CHECK(p.best && !strcmp(p.best->metric, "fwd+bwd time, causal") && p.best->speedup == 2.0,
          "declared metric: %s", p.best ? p.best->metric : "none");
    tb_report_pick_headline(&m, "attn", "fused", "bwd time", &p);
    CHECK(p.best && !strcmp(p.best->metric, "fwd time"), "undeclared: %s",
          p.best ? p.best->metric : "none");
    tb_results_free(&m);
    /* a declared metric whose rows are all n/a (validation_frequency's time
     * to accuracy where no seed reached 85%): the summary's answer is that
     * n/a, never the fit time in its place */
    tb_results v;
    tb_results_init(&v);
    tb_results_add_na(&v, "vf", "cpu", "CPU", "every 1", "time to accuracy", "0 of 5 reached");
    tb_results_add_na(&v, "vf", "cpu", "CPU", "every 2", "time to accuracy", "0 of 5 reached");
    add_timed(&v, "vf", "every 1", 1, "every", 1, "fit time", 10.0, NAN);
    add_timed(&v, "vf", "every 2", 0, "every", 2, "fit time", 8.0, 1.25);
    tb_report_pick_headline(&v, "vf", "every 2", "time to accuracy", &p);
    CHECK(!p.best && p.na && !strcmp(p.na->metric, "time to accuracy"),
          "declared metric n/a: best %s, na %s", p.best ? p.best->metric : "none",
          p.na ? p.na->metric : "none");
    tb_results_free(&v);
    /* each setting its own point, two baselines: the headline beside the
     * baseline it was paired with (its noise floor), not the fastest's */
    tb_results o;
    tb_results_init(&o);
    static const struct { const char *set; int base; double pt, floor, sp; } lbo[] = {
        {"sgd", 1, 0, 0.0088, NAN}, {"lars", 0, 1, 0.0088, 1.01},
        {"adamw", 1, 2, 0.02, NAN}, {"lamb", 0, 3, 0.02, 1.03}};
    for (int i = 0; i < 4; i++) {
        timed(&row, "lbo", lbo[i].set, lbo[i].base, "optimizer", lbo[i].pt,
              "time per 1000 samples", 0.385, lbo[i].sp);
        row.noise_floor = lbo[i].floor;
        tb_results_add(&o, &row);
    }
    tb_report_pick_headline(&o, "lbo", "lars", NULL, &p);
    CHECK(p.best && p.baseline && !strcmp(p.best->setting, "lars") &&
              !strcmp(p.baseline->setting, "sgd"),
          "lars beside sgd, its pair, not %s", p.baseline ? p.baseline->setting : "none");
    tb_results_free(&o);
    tb_results_free(&a), tb_results_free(&b);
    (void)rdir;
}

/* Every "n/a" in the Markdown is followed by its reason: "n/a: why" or
 * "n/a (why)" somewhere on the same line. */
static void check_na_reasons(const char *md)
{
    const char *line = md;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        if (strstr(buf, "n/a")) {
            int has_reason = 0;
            for (const char *p = buf; (p = strstr(p, "n/a")) != NULL; p += 3)
                if ((p[3] == ':' || (p[3] == ' ' && p[4] == '(')) && p[5] && p[5] != '|')
                    has_reason = 1;
            if (!has_reason)
                fprintf(stderr, "n/a without a reason: %s\n", buf);
            CHECK(has_reason);
        }
        line = end ? end + 1 : NULL;
    }
}

static int matches(const char *re, const char *s)
{
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB) != 0)
        return 0;
    int ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

#define NUM "-?[0-9]+(\\.[0-9]+)?(e[-+][0-9]+)?"
#define TIME NUM " (ms|us|s) \\[" NUM ", " NUM "\\]"
#define SPEEDUP NUM "× \\[" NUM ", " NUM "\\]"

/* Summary rows of summary.md: the baseline and best cells are "setting:
 * TIME", the speedup cell "SPEEDUP", unless the row is n/a with a reason. */
static void check_units(const char *md)
{
    int rows = 0;
    const char *by_wl = strstr(md, "### Per workload"); /* its cells are checked apart */
    for (const char *line = strstr(md, "\n| "); line && (!by_wl || line < by_wl);
         line = strstr(line + 1, "\n| ")) {
        char buf[4096], *cell[8];
        const char *end = strchr(line + 1, '\n');
        snprintf(buf, sizeof buf, "%.*s", (int)(end ? end - line - 1 : (long)strlen(line + 1)),
                 line + 1);
        if (strstr(buf, "| technique |") == buf || strstr(buf, "| --- |") == buf)
            continue;
        int n = 0;
        for (char *t = strtok(buf, "|"); t && n < 8; t = strtok(NULL, "|")) {
            while (*t == ' ')
                t++;
            size_t l = strlen(t);
            while (l && t[l - 1] == ' ')
                t[--l] = '\0';
            cell[n++] = t;
        }
        CHECK(n == 8 || n == 2); /* the not-applicable group: technique, reason */
        if (n != 8 && n != 2)
            continue;
        rows++;
        for (int c = 0; c < n; c++)
            if (strstr(cell[c], "n/a") && !matches("n/a(: | \\()[^ ]", cell[c])) {
                fprintf(stderr, "summary cell n/a without a reason: %s\n", cell[c]);
                failures++;
            }
        if (n == 2 || !strncmp(cell[4], "n/a", 3))
            continue;
        if (!matches("^[a-z0-9]+: " TIME "$", cell[2]) || !matches("^[a-z0-9]+: " TIME "$", cell[3]) ||
            !matches("^" SPEEDUP "$", cell[4])) {
            fprintf(stderr, "number without unit or interval in: %s | %s | %s\n", cell[2],
                    cell[3], cell[4]);
            failures++;
        }
    }
    CHECK(rows == 10);
    CHECK(!strstr(md, "none compared"));
}

static int count_of(const char *text, const char *needle);

/* Where needle first occurs in html, as an offset; -1 when absent. */
static long at(const char *html, const char *needle)
{
    const char *p = strstr(html, needle);
    if (!p)
        fprintf(stderr, "not in REPORT.html: %s\n", needle);
    return p ? p - html : -1;
}

/* The first screen: findings, forest plot, then the grouped summary in
 * its order; every figure captioned with what it measured. */
static void check_html_order(const char *html)
{
    long findings = at(html, "<h2>Findings</h2>");
    long first = at(html, "<p><b>beta</b> (none): no detectable change in time (1.01× [0.960, "
                          "1.06]) on the training step (small CNN), but the result DIFFERS by 50% "
                          "(tolerance 0.001%, vs float64 reference).</p>");
    long forest = at(html, "<figure><img alt=\"forest plot:");
    long summary = at(html, "<h2>Summary</h2>");
    long faster = at(html, "<h3>faster</h3>");
    long none = at(html, "<h3>no detectable effect</h3>");
    long na = at(html, "<h3>not applicable here</h3>");
    long how = at(html, "<h2>How to read this report</h2>");
    CHECK(findings >= 0 && findings < first && first < forest && forest < summary &&
          summary < faster && faster < none && none < na && na < how);
    CHECK(!strstr(html, "<h3>slower</h3>")); /* no empty group */
    /* faster, by effect: epsilon and alpha... as ordered by speedup */
    long eps = at(html, "<tr><td>epsilon</td>"), eta = at(html, "<tr><td>eta</td>");
    long alpha = at(html, "<tr><td>alpha</td>"), zeta = at(html, "<tr><td>zeta</td>");
    long beta = at(html, "<tr><td>beta</td>"), delta = at(html, "<tr><td>delta</td>");
    long gamma = at(html, "<tr><td>gamma</td>");
    CHECK(faster < eps && eps < eta && eta < alpha && alpha < zeta && zeta < none);
    CHECK(none < beta && beta < na && na < delta && delta < gamma);
    int figures = count_of(html, "<figure>");
    CHECK(figures == 2); /* forest and alpha_speedup */
    CHECK(count_of(html, "<figcaption>Measured: fwd time against elements, every setting of "
                         "the technique beside its baseline, on Test CPU; 5 repetitions a "
                         "row, not paired in rounds.") == 1);
    CHECK(count_of(html, "<figcaption>Speedup of each technique&#39;s headline setting") +
              count_of(html, "<figcaption>Speedup of each technique's headline setting") == 1);
}

static void check_html(const char *html)
{
    CHECK(strstr(html, "<img alt=\"figure alpha_speedup\" src=\"data:image/png;base64,iVBORw0KGgo"));
    CHECK(!strstr(html, "http://"));
    CHECK(!strstr(html, "https://"));
    CHECK(!strstr(html, "href="));
    CHECK(!strstr(html, "<link"));
    CHECK(!strstr(html, "<script"));
    CHECK(!strstr(html, "url("));
    /* flags cells stand out: a biased harness red, the others amber */
    CHECK(strstr(html, "<td class=\"bad\">unreliable: A/A interval excludes 1</td>"));
    CHECK(strstr(html, "<td class=\"meh\">stopped by budget after 60 rounds"));
    CHECK(strstr(html, "<td class=\"meh\">busy machine (load 3.20)</td>"));
    CHECK(strstr(html, "<td class=\"meh\">imprecise: noise floor ±15.0%</td>"));
    for (const char *p = html; (p = strstr(p, "src=\"")) != NULL; p += 5)
        CHECK(!strncmp(p + 5, "data:", 5));
}

static void check_golden(const char *rdir, const char *name, const char *golden)
{
    char path[4200], gpath[4200];
    snprintf(path, sizeof path, "%s/%s", rdir, name);
    const char *update = getenv("TB_UPDATE_GOLDEN");
    char *got = slurp(path);
    CHECK(got);
    if (update && got) {
        snprintf(gpath, sizeof gpath, "%s/%s", update, golden);
        FILE *f = fopen(gpath, "wb");
        CHECK(f && fputs(got, f) >= 0 && fclose(f) == 0);
        free(got);
        return;
    }
    snprintf(gpath, sizeof gpath, "lib/report/testdata/%s", golden);
    char *want = slurp(gpath);
    CHECK(want);
    if (got && want && strcmp(got, want) != 0) {
        fprintf(stderr, "%s differs from %s:\n--- got\n%s\n--- want\n%s\n", name, gpath, got, want);
        failures++;
    }
    free(got);
    free(want);
}

/* The line of text that begins with prefix, copied into buf ("" when none). */
static const char *line_of(const char *text, const char *prefix, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, prefix, strlen(prefix)) != 0)
            continue;
        size_t len = strcspn(p, "\n");
        snprintf(buf, cap, "%.*s", (int)(len < cap ? len : cap - 1), p);
        break;
    }
    return buf;
}

/* How many times needle occurs in text. */
static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* A noise floor past ±10% is said where the budget or a busy machine
 * explains the interval too (ddp in run 52: "faster 1.08x [1.03, 1.13]",
 * its A/A pair ±21%, and the flags said only the budget). */
static void test_wide_floor_flags(void)
{
    tb_result_row r;
    char buf[512];
    timed(&r, "ddp", "DDP", 0, "ranks", 2, "step time", 24.2e-3, 1.08);
    r.noise_floor = 0.213;
    r.rounds = 5;
    snprintf(r.stopped_by, sizeof r.stopped_by, "budget");
    tb_report_flags_text(buf, sizeof buf, &r, ~0);
    CHECK(!strcmp(buf, "stopped by budget after 5 rounds (interval ±5.00%, noise floor ±21.3%)"),
          "budget, wide floor: %s", buf);
    snprintf(r.stopped_by, sizeof r.stopped_by, "target");
    r.busy = 1;
    r.load_avg = 2.5;
    tb_report_flags_text(buf, sizeof buf, &r, ~0);
    CHECK(!strcmp(buf, "busy machine (load 2.50; noise floor ±21.3%)"), "busy, wide floor: %s",
          buf);
    r.noise_floor = 0.02;
    tb_report_flags_text(buf, sizeof buf, &r, ~0);
    CHECK(!strcmp(buf, "busy machine (load 2.50)"), "busy, narrow floor: %s", buf);
    /* a loss check a constant model would pass says so where it is shown */
    r.correctness = TB_CORRECT_WITHIN_TOL;
    r.max_rel_err = 0.0638, r.tolerance = 0.105;
    snprintf(r.note, sizeof r.note, "loss at step 3 7.03 vs 7.40; weak loss check: a model "
             "predicting nothing (uniform over 1000) scores 6.908, within this tolerance");
    tb_report_correctness(buf, sizeof buf, &r);
    CHECK(strstr(buf, "within tolerance (") == buf && strstr(buf, "; weak loss check (a model "
          "predicting nothing passes it too)"), "weak check: %s", buf);
    r.note[0] = '\0';
    tb_report_correctness(buf, sizeof buf, &r);
    CHECK(!strstr(buf, "weak"), "a strong check: %s", buf);
    /* another trajectory (batch_size): its accuracy beside the baseline's */
    tb_result_row base = r;
    r.correctness = TB_CORRECT_NA;
    snprintf(r.note, sizeof r.note, "another batch size and learning rate train another "
             "trajectory: compare the accuracy instead; test accuracy 58.8%% (1000 test images)");
    snprintf(base.note, sizeof base.note, "loss at step 64 1.23 vs 1.23; test accuracy 70.1%% "
             "(1000 test images) after 1024 training samples");
    tb_report_correctness_vs(buf, sizeof buf, &r, &base);
    CHECK(!strcmp(buf, "not checked (another trajectory): test accuracy 58.8% vs the baseline's "
                       "70.1% after as many samples"), "accuracy: %s", buf);
    /* a batch past the check's samples trained more of them: said */
    snprintf(r.note, sizeof r.note, "test accuracy 61.0%% (1000 test images) after 4096 "
             "training samples");
    tb_report_correctness_vs(buf, sizeof buf, &r, &base);
    CHECK(!strcmp(buf, "not checked (another trajectory): test accuracy 61.0% after 4096 "
                       "samples vs the baseline's 70.1% after 1024"), "more samples: %s", buf);
    base.note[0] = '\0';
    tb_report_correctness_vs(buf, sizeof buf, &r, &base);
    CHECK(!strcmp(buf, "not checked"), "no baseline accuracy: %s", buf);
}

/* A bench:all run that began after a technique's CSV was written (an
 * --only run over an older folder): that technique is flagged as from an
 * earlier run, the others are not. */
static void test_earlier_run(const char *rdir)
{
    char path[4300], cmd[4400];
    tb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    snprintf(path, sizeof path, "%s/run_state.fingerprint.json", rdir);
    CHECK_OK(tb_fingerprint_set(&fp, "run.time_utc", "2030-01-01T00:00:00Z"));
    CHECK_OK(tb_fingerprint_save(&fp, path));
    /* every CSV but alpha's written "after" the run began */
    snprintf(cmd, sizeof cmd, "touch -d 2030-06-01 '%s'/*.csv && touch -c -d 2029-12-31 "
             "'%s/alpha.csv' '%s/ceilings.csv'", rdir, rdir, rdir);
    CHECK(system(cmd) == 0, "touch");
    CHECK_OK(tb_report_write_dir(rdir, NULL));
    char *md = tb_test_slurp(rdir, "summary.md");
    char l[4096];
    if (md) {
        line_of(md, "| alpha |", l, sizeof l);
        CHECK(strstr(l, "FROM AN EARLIER RUN (its CSV written 2029-12-31 00:00 UTC, before this "
                        "run began)"), "alpha flagged: %s", l);
        CHECK(count_of(md, "FROM AN EARLIER RUN") == 1, "only alpha flagged");
    }
    free(md);
    /* a special CSV's section says so too */
    md = tb_test_slurp(rdir, "REPORT.md");
    CHECK(md && strstr(md, "**FROM AN EARLIER RUN**: `ceilings.csv` is not the bench:all run's "
                           "this folder holds (its CSV written 2029-12-31 00:00 UTC, before "
                           "this run began)") && count_of(md, "**FROM AN EARLIER RUN**") == 1,
          "the ceilings' section flagged, no other");
    free(md);
    unlink(path);
}

/* Each flag beside the row that earns it, and nowhere else. */
static void check_flags(const char *md)
{
    char l[4096];
    printf("flags: each shown when it should be, absent otherwise\n");
    line_of(md, "| budget | step time |", l, sizeof l);
    CHECK(strstr(l, "| stopped by budget after 60 rounds (interval ±13.3%) |"));
    CHECK(!strstr(l, "imprecise")); /* the budget explains the width */
    line_of(md, "| busy | step time |", l, sizeof l);
    CHECK(strstr(l, "| busy machine (load 3.20) |"));
    line_of(md, "| biased | step time |", l, sizeof l);
    CHECK(strstr(l, "| unreliable: A/A interval excludes 1 |"));
    CHECK(strstr(l, "| faster |")); /* the verdict is kept */
    line_of(md, "| wide | step time |", l, sizeof l);
    CHECK(strstr(l, "| stopped at the round cap after 100 rounds (interval ±18.0%); imprecise: "
                    "interval ±18.0% |"));
    /* a paired within-noise row says what it could have detected */
    CHECK(strstr(l, "within noise (interval holds 1; smallest detectable effect ±33.0%, "
                    "noise floor ±2.00%)"));
    line_of(md, "| precise | step time |", l, sizeof l);
    CHECK(l[0] && strstr(l, " |  |") == l + strlen(l) - 5); /* empty flags cell */
    line_of(md, "| on | step time |", l, sizeof l); /* eta: noise floor only */
    CHECK(strstr(l, "| imprecise: noise floor ±15.0% |"));
    line_of(md, "| off (baseline) | step time | 10.0 ms", l, sizeof l); /* eta's, first */
    CHECK(strstr(l, "| stopped by budget after 20 rounds (noise floor ±15.0%) |"));
    /* technique level: zeta busy, said once above its table and in the summary */
    CHECK(count_of(md, "**Busy machine**: 1 of its 6 timed rows") == 1);
    CHECK(count_of(md, "**Busy machine**") == 1);
    line_of(md, "| zeta |", l, sizeof l);
    CHECK(strstr(l, "| busy: 8.33 ms [8.08, 8.67] | 1.20× [1.15, 1.25] |") &&
          strstr(l, "| CPUs apart (core-to-core 330 ns, the run's least 60); busy machine: 1 of "
                    "6 rows (load up to 3.20) |"));
    line_of(md, "| alpha |", l, sizeof l);
    CHECK(strstr(l, " |  |") == l + strlen(l) - 5);
    /* the counts, and the flagged rows listed (five of zeta, two of eta) */
    CHECK(strstr(md, "**Flags** over the 25 timed rows of the techniques above (not the "
                     "waterfall's): 6 flagged; 2 stopped by the time budget, "
                     "1 at the round cap, 1 measured on a busy machine (1 technique), "
                     "1 unreliable (A/A interval excludes 1), 2 imprecise"));
    /* the machine state: zeta's rows at 60-62 ns, its busy row at 330 */
    CHECK(strstr(md, "**Machine state**: the round trip of a cache line between the first two "
                     "CPUs (`xcore_ns`, sampled after every round) ranged from 60 to 330 ns") &&
          strstr(md, "1 of the 1 techniques with such rows have rows measured apart"));
    const char *flagged = strstr(md, "## Flagged rows");
    const char *next = flagged ? strstr(flagged + 3, "\n## ") : NULL;
    CHECK(flagged && next);
    if (flagged && next) {
        char sec[8192];
        snprintf(sec, sizeof sec, "%.*s", (int)(next - flagged), flagged);
        CHECK(count_of(sec, "\n| zeta |") == 4 && count_of(sec, "\n| eta |") == 2);
        CHECK(strstr(sec, "| zeta | -- | budget | step time | (no sweep) | 1.05× [0.920, 1.19] | "
                          "60 |"));
        CHECK(!strstr(sec, "| precise |") && !strstr(sec, "| alpha |"));
    }
}

/* A step technique on several workloads: a summary row for each, keyed
 * by its workload, and the "Per workload" table. */
static void check_per_workload(const char *md)
{
    char l[4096];
    printf("summary: one row per (technique, workload)\n");
    line_of(md, "| theta (gpt2) |", l, sizeof l);
    CHECK(strstr(l, "| step time, (no sweep), on gpt2-reduced-synthetic | off: 30.0 ms") &&
          strstr(l, "| on: 20.0 ms") && strstr(l, "| faster |"));
    line_of(md, "| theta (resnet50) |", l, sizeof l);
    CHECK(strstr(l, "| step time, (no sweep), on resnet50-reduced-synthetic | off: 40.0 ms") &&
          strstr(l, "| on: 39.6 ms") && strstr(l, "| within noise"));
    CHECK(strstr(md, "| theta (small_cnn) | on: n/a: no attention in the small CNN |"));
    CHECK(strstr(md, "### Per workload"));
    CHECK(strstr(md, "| technique | gpt2-reduced-synthetic | resnet50-reduced-synthetic | "
                     "small_cnn-fashion_mnist |"));
    line_of(md, "| theta |", l, sizeof l);
    CHECK(strstr(md, "| theta | on: 1.50× [1.43, 1.57], faster; within tolerance | on: 1.01× "
                     "[0.960, 1.06], no detectable effect; within tolerance | n/a: no attention "
                     "in the small CNN |"), "%s", l);
    /* the single-workload techniques keep one row, their name alone */
    CHECK(strstr(md, "| alpha | fwd time") && !strstr(md, "| alpha ("));
}

/* rdir/budget.json with text (bench:all's plan), whole. */
static void write_budget(const char *rdir, const char *text)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/budget.json", rdir);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

/* A bench:all run that planned techniques it did not finish, with
 * budget.json naming each one's CSV: the findings name what is missing
 * (lambda, no CSV; gamma, an earlier run's CSV), and a CSV whose technique is not among the run's
 * finished is flagged from run_state.json, whatever its time says (eta's,
 * written "after" the run began: a copied folder's times are the copy's).
 * kappa's shown setting (bf16, the fastest) is within tolerance and its
 * fp16 DIFFERS: the summary's row, the paper table, "Per workload" and
 * the forest say so beside the shown one. */
static void test_run_state(const char *rdir)
{
    char cmd[4400];
    tb_results k;
    tb_results_init(&k);
    add_timed(&k, "kappa", "fp32", 1, "", NAN, "step time", 10.0, 1);
    add_timed(&k, "kappa", "bf16", 0, "", NAN, "step time", 7.0, 1.43);
    add_timed(&k, "kappa", "fp16", 0, "", NAN, "step time", 8.0, 1.25);
    k.rows[2].correctness = TB_CORRECT_DIFFERS;
    k.rows[2].max_rel_err = 0.072;
    k.rows[2].tolerance = 0.02;
    k.rows[0].memory_bytes = 200 * 1048576.0;
    k.rows[1].memory_bytes = 150 * 1048576.0;
    snprintf(k.rows[1].note, sizeof k.rows[1].note, "bf16 kernels: conv, linear");
    CHECK_OK(save(&k, rdir, "kappa"));
    tb_results_free(&k);

    tb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    CHECK_OK(tb_fingerprint_set(&fp, "run.time_utc", "2030-01-01T00:00:00Z"));
    tb_run_state *st = calloc(1, sizeof *st);
    CHECK(st != NULL);
    if (!st)
        return;
    tb_run_state_init(st, "tiny", 0, &fp);
    CHECK_OK(tb_run_state_mark_done(st, "ceilings"));
    CHECK_OK(tb_run_state_mark_done(st, "alpha"));
    CHECK_OK(tb_run_state_mark_done(st, "kappa_bin"));
    CHECK_OK(tb_run_state_save(st, rdir));
    free(st);
    write_budget(rdir,
          "{\"schema\": \"tunebench-budget/1\", \"profile\": \"tiny\", \"limit_s\": 600, "
          "\"budget_s\": 30, \"est_s\": 40, \"undeclared\": 0, \"over\": false, "
          "\"allowed_over\": false, \"techniques\": ["
          "{\"name\": \"ceilings\", \"results\": \"ceilings\", \"budget_s\": 10, \"est_s\": 10}, "
          "{\"name\": \"alpha\", \"results\": \"alpha\", \"budget_s\": 10, \"est_s\": 10}, "
          "{\"name\": \"kappa_bin\", \"results\": \"kappa\", \"budget_s\": 5, \"est_s\": 10}, "
          "{\"name\": \"gamma\", \"results\": \"gamma\", \"budget_s\": 5, \"est_s\": 10}, "
          "{\"name\": \"lambda\", \"results\": \"lambda\", \"budget_s\": 5, \"est_s\": 10}]}\n");
    snprintf(cmd, sizeof cmd, "touch -d 2030-06-01 '%s'/*.csv", rdir);
    CHECK(system(cmd) == 0, "touch");
    CHECK_OK(tb_report_write_dir(rdir, NULL));
    char *md = tb_test_slurp(rdir, "REPORT.md");
    char l[4096];
    CHECK(md && strstr(md, "**Not finished in this run** (2 of the techniques it planned): gamma "
                           "(its rows below are an earlier run's), lambda (no results)."),
          "the unfinished techniques named: %.600s", md ? strstr(md, "## Findings") : "");
    if (md) {
        line_of(md, "| eta |", l, sizeof l);
        CHECK(strstr(l, "FROM AN EARLIER RUN (not among the techniques this run finished, "
                        "run_state.json)"), "eta flagged by the state: %s", l);
        line_of(md, "| kappa |", l, sizeof l);
        CHECK(strstr(l, "| bf16: ") && strstr(l, "within tolerance") &&
                  strstr(l, "; also: setting 'fp16' DIFFERS (max rel err 0.0720 > 0.0200)") &&
                  !strstr(l, "EARLIER"),
              "kappa's other setting: %s", l);
        line_of(md, "| alpha |", l, sizeof l);
        CHECK(!strstr(l, "EARLIER"), "alpha is this run's: %s", l);
        /* the finding names the setting that DIFFERS */
        CHECK(strstr(md, "**kappa** (fp16): "), "kappa's finding is fp16's");
        /* under its table, each row's note and peak memory */
        CHECK(strstr(md, "**bf16**: peak 150 MiB (-25% against its baseline's 200 MiB); bf16 "
                         "kernels: conv, linear"), "kappa's bf16 note and memory");
        CHECK(strstr(md, "**fp32 (baseline)**: peak 200 MiB"), "the baseline's memory");
    }
    free(md);
    char *tex = tb_test_slurp(rdir, "summary.tex");
    CHECK(tex && strstr(tex, "; fp16 DIFFERS"), "the paper table names fp16");
    free(tex);
    /* the terminal's findings (bench:all, bench:report) name it too */
    tb_report_folder *f = NULL;
    CHECK_OK(tb_report_load(rdir, NULL, &f));
    char buf[8192] = "";
    FILE *out = fmemopen(buf, sizeof buf - 1, "w");
    CHECK(f && out);
    if (f && out) {
        CHECK_OK(tb_report_print_findings(f, "> ", out));
        fclose(out);
        CHECK(strstr(buf, "> Not finished in this run (2 of the techniques it planned): gamma"),
              "%s", buf);
    }
    tb_report_folder_free(f);
    snprintf(cmd, sizeof cmd, "rm -f '%s/kappa.csv' '%s/budget.json' '%s/run_state.json' "
             "'%s/run_state.fingerprint.json'", rdir, rdir, rdir, rdir);
    CHECK(system(cmd) == 0, "clean up");

    /* a renamed copy of a technique's CSV (kappa's rows as kappa_h100.csv)
     * is left out, and a CSV whose rows name another device is flagged at
     * the top of the report */
    tb_results_init(&k);
    add_timed(&k, "kappa", "fp32", 1, "", NAN, "step time", 10.0, 1);
    add_timed(&k, "kappa", "bf16", 0, "", NAN, "step time", 7.0, 1.43);
    CHECK_OK(save(&k, rdir, "kappa_h100"));
    for (size_t i = 0; i < k.n; i++)
        snprintf(k.rows[i].device, sizeof k.rows[i].device, "Other CPU");
    CHECK_OK(save(&k, rdir, "kappa"));
    tb_results_free(&k);
    CHECK_OK(tb_report_write_dir(rdir, NULL));
    md = tb_test_slurp(rdir, "REPORT.md");
    CHECK(md && !strstr(md, "kappa_h100"), "the renamed copy left out");
    CHECK(md && strstr(md, "**ROWS FROM ANOTHER MACHINE**: the rows of kappa (Other CPU) name "
                           "another device than this folder's (`fingerprint.json`: Test CPU)"),
          "the other machine's rows flagged");
    free(md);
    snprintf(cmd, sizeof cmd, "rm -f '%s/kappa.csv' '%s/kappa_h100.csv'", rdir, rdir);
    CHECK(system(cmd) == 0, "clean up");
    CHECK_OK(tb_report_write_dir(rdir, NULL)); /* the report as the tests after expect it */
}

/* Waterfall and time to accuracy: absent, then present. */
static void test_optional_sections(const char *rdir, const char *pdir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/REPORT.md", rdir);
    char *md = slurp(path);
    CHECK(md && strstr(md, "Not measured in this run: `waterfall.csv` is absent"));
    CHECK(md && strstr(md, "Not measured in this run: `time_to_accuracy.csv` is absent"));
    CHECK(md && strstr(md, "Not recorded in this run: `budget.json` is absent"));
    free(md);

    /* bench:all's plan: the report says which profile limit applied. */
    write_budget(rdir,
          "{\"schema\": \"tunebench-budget/1\", \"profile\": \"default\", "
          "\"limit_s\": 900, \"budget_s\": 840, \"est_s\": 880, \"undeclared\": 1, "
          "\"over\": false, \"allowed_over\": false, \"techniques\": ["
          "{\"name\": \"ceilings\", \"budget_s\": 0, \"est_s\": 40}, "
          "{\"name\": \"alpha\", \"budget_s\": 840, \"est_s\": 840}]}\n");
    tb_results w, t;
    tb_results_init(&w), tb_results_init(&t);
    tb_result_row r;
    add_timed(&w, "waterfall", "all off", 1, "stage", 0, "step time", 10, 1);
    add_timed(&w, "waterfall", "+ fused GELU", 0, "stage", 1, "step time", 8, 1.25);
    w.rows[w.n - 1].rounds = 30; /* its flag goes into the note column */
    snprintf(w.rows[w.n - 1].stopped_by, sizeof w.rows[0].stopped_by, "budget");
    add_timed(&w, "waterfall", "all on", 0, "leave-one-out", 0, "step time", 8, 1.25);
    add_timed(&w, "waterfall", "all on but fused GELU", 0, "leave-one-out", 1, "step time", 10,
              1.0);
    timed(&r, "time_to_accuracy", "baseline", 1, "target accuracy", 0.85, "time to accuracy", 60, 1);
    snprintf(r.unit, sizeof r.unit, "s");
    tb_results_add(&t, &r);
    tb_results_add_na(&t, "time_to_accuracy", "cpu", "Test CPU", "all techniques",
                      "time to accuracy", "did not reach 85% in 3 epochs");
    CHECK_OK(save(&w, rdir, "waterfall"));
    CHECK_OK(save(&t, rdir, "time_to_accuracy"));
    tb_results_free(&w), tb_results_free(&t);
    tb_results k;
    tb_results_init(&k);
    build_kappa(&k);
    CHECK_OK(save(&k, rdir, "kappa"));
    tb_results_free(&k);
    char side[4300];
    snprintf(side, sizeof side, "%s/kappa.json", rdir);
    FILE *sf = fopen(side, "w");
    CHECK(sf && fputs("{\"schema\": \"tunebench-results/3\", \"headline\": \"channels last\", "
                      "\"rows\": []}\n", sf) >= 0 && fclose(sf) == 0);
    CHECK_OK(tb_report_write_dir(rdir, pdir));
    md = slurp(path);
    /* kappa: its headline beside the baseline it was compared with, and its
     * section shows both points' settings, each point holding its own */
    CHECK(md && strstr(md, "| kappa | step time, bf16_autocast = 0 | NCHW: 43.9 ms"));
    CHECK(md && strstr(md, "each at its own `bf16_autocast`") &&
          strstr(md, "| channels last, bf16 | step time |"));
    CHECK(md && !strstr(md, "Not measured in this run: `waterfall.csv`"));
    CHECK(md && strstr(md, "| + fused GELU | 8.00 ms [7.76, 8.32] | 1.25× [1.19, 1.31] |"));
    CHECK(md && strstr(md, "| all on but fused GELU |"));
    CHECK(md && strstr(md, "| within tolerance (max rel err 2e-07 ≤ 1e-05, vs float64 reference) | "
                           "stopped by budget after 30 rounds (interval ±5.00%) |"));
    CHECK(md && strstr(md, "| waterfall | -- | + fused GELU | step time | stage = 1 | 1.25× [1.19, "
                           "1.31] | 30 | stopped by budget"));
    CHECK(md && strstr(md, "n/a: did not reach 85% in 3 epochs"));
    /* the special CSVs are not techniques in the summary */
    /* (the "Flagged rows" list names them: "| waterfall | -- | + fused GELU |") */
    CHECK(md && !strstr(md, "\n| waterfall | step time"));
    CHECK(md && strstr(md, "Profile `default`, limit 900 s:") &&
          strstr(md, "add up to 840 s (estimated run time with set-up: 880 s)."));
    CHECK(md && strstr(md, "| ceilings | harness default | 40.0 |") &&
          strstr(md, "| alpha | 840 | 840 |"));
    CHECK(md && !strstr(md, "**Over the limit**"));
    /* the waterfall as labeled bars: configurations named on the axis, each
     * axis titled with its unit, a caption saying what was measured */
    char *gp = tb_test_slurp(pdir, "waterfall_stages.gp");
    CHECK(gp && strstr(gp, "set ylabel \"cumulative speedup over all off (×)\"") &&
          strstr(gp, "set xlabel \"configuration: ") &&
          strstr(gp, "set xtics (\"all off\" 0, \"+ fused GELU\" 1)") &&
          !strstr(gp, "yerrorlines"));
    free(gp);
    gp = tb_test_slurp(pdir, "waterfall_leave_one_out.gp");
    CHECK(gp && strstr(gp, "\"all on but fused GELU\" 1)") && strstr(gp, "title \"all on\""));
    free(gp);
    CHECK(md && strstr(md, "*Measured: step time against stage, every setting of the technique "
                           "beside its baseline, on Test CPU;") &&
          strstr(md, "Bars: cumulative speedup of each configuration over every technique off"));
    if (md)
        check_na_reasons(md);
    free(md);

    /* the waterfall on two workloads: a section per workload with its own
     * tables and figures (named after the model), a stage n/a on one of
     * them in its tables and not among its bars */
    tb_results_init(&w);
    static const char *const wls[2] = {"small_cnn-fashion_mnist", "gpt2-reduced-synthetic"};
    for (int k = 0; k < 2; k++) {
        add_timed(&w, "waterfall", "all off", 1, "stage", 0, "step time", 10 + k, 1);
        add_timed(&w, "waterfall", "+ fused GELU", 0, "stage", 1, "step time", 8, 1.25 + k);
        add_timed(&w, "waterfall", "all on", 0, "leave-one-out", 0, "step time", 8, 1.25 + k);
        for (size_t i = w.n - 3; i < w.n; i++)
            snprintf(w.rows[i].workload, sizeof w.rows[i].workload, "%s", wls[k]);
    }
    add_na(&w, "waterfall", "+ no conv bias", "step time", "n/a on GPT-2: it has no convolutions");
    snprintf(w.rows[w.n - 1].workload, sizeof w.rows[0].workload, "%s", wls[1]);
    snprintf(w.rows[w.n - 1].param_name, sizeof w.rows[0].param_name, "stage");
    CHECK_OK(save(&w, rdir, "waterfall"));
    tb_results_free(&w);
    CHECK_OK(tb_report_write_dir(rdir, pdir));
    md = slurp(path);
    CHECK(md && strstr(md, "It ran on 2 workloads, each against its own step"));
    const char *on_cnn = md ? strstr(md, "### Waterfall on small_cnn-fashion_mnist") : NULL;
    const char *on_gpt = md ? strstr(md, "### Waterfall on gpt2-reduced-synthetic") : NULL;
    CHECK(on_cnn && on_gpt && on_cnn < on_gpt);
    /* each section holds its own rows: GPT-2's 2.25x only after its heading */
    const char *gpt_row = md ? strstr(md, "| + fused GELU | 8.00 ms [7.76, 8.32] | 2.25×") : NULL;
    CHECK(gpt_row && on_gpt && gpt_row > on_gpt);
    CHECK(md && strstr(md, "n/a: on GPT-2: it has no convolutions"));
    gp = tb_test_slurp(pdir, "waterfall_stages_gpt2.gp");
    CHECK(gp && strstr(gp, "on gpt2-reduced-synthetic") &&
          strstr(gp, "set xtics (\"all off\" 0, \"+ fused GELU\" 1)"));
    free(gp);
    gp = tb_test_slurp(pdir, "waterfall_leave_one_out_small_cnn.gp");
    CHECK(gp != NULL);
    free(gp);
    free(md);

    /* the gpu profile, chosen by --profile=auto: the report says so, and
     * that this CPU run's times say nothing about its H100 budgets */
    write_budget(rdir,
          "{\"schema\": \"tunebench-budget/1\", \"profile\": \"gpu\", "
          "\"profile_auto\": true, \"limit_s\": 600, \"budget_s\": 523, \"est_s\": 599, "
          "\"undeclared\": 0, \"over\": false, \"allowed_over\": false, "
          "\"techniques\": []}\n");
    CHECK_OK(tb_report_write_dir(rdir, pdir));
    md = slurp(path);
    CHECK(md && strstr(md, "Profile `gpu`, limit 600 s:") &&
          strstr(md, "**The gpu profile**, chosen by default because the CUDA backend was "
                     "active: the real ResNet-50 (224 x 224, batch 64)") &&
          strstr(md, "This run was not on a GPU"));
    free(md);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char root[4096], rdir[4200], pdir[4200];
    snprintf(root, sizeof root, "%s/report_test", tmp ? tmp : "/tmp");
    make_folder(root, rdir, pdir);
    test_results_folders(root, rdir);
    test_speedup_digits();
    test_wide_floor_flags();
    test_pick(rdir);
    /* a user's CSV beside the results: left out with a warning, not a failed report */
    char notes[4300];
    snprintf(notes, sizeof notes, "%s/notes.csv", rdir);
    FILE *nf = fopen(notes, "w");
    CHECK(nf && fputs("when,what\n1,2\n", nf) >= 0 && fclose(nf) == 0, "notes.csv written");
    /* but a technique's CSV (its JSON sidecar beside it) that is damaged,
     * here empty, still fails the report: it must not read as not measured */
    char broken[4300], side[4300];
    snprintf(broken, sizeof broken, "%s/broken.csv", rdir);
    snprintf(side, sizeof side, "%s/broken.json", rdir);
    FILE *bf = fopen(broken, "w"), *sf = fopen(side, "w");
    CHECK(bf && sf && fputs("{}\n", sf) >= 0 && fclose(bf) == 0 && fclose(sf) == 0, "broken");
    CHECK(tb_report_write_dir(rdir, NULL) != TB_OK, "an empty technique CSV fails the report");
    tb_error_clear();
    unlink(broken);
    unlink(side);
    CHECK_OK(tb_report_write_dir(rdir, NULL)); /* plots found as the sibling folder */

    test_findings_and_order();
    check_plot_labels(pdir);
    test_forest_label_width(pdir);
    char *html = tb_test_slurp(rdir, "REPORT.html");
    if (html) {
        check_html(html);
        check_html_order(html);
    }
    free(html);
    char *md = tb_test_slurp(rdir, "REPORT.md");
    if (md) {
        check_na_reasons(md);
        CHECK(strstr(md, "](../../plots/test-cpu/alpha_speedup.png)"));
        CHECK(strstr(md, "| gamma | graphs: n/a: CUDA graphs need a GPU |"));
        /* the other setting's reason in the summary, its leading "n/a" not doubled */
        CHECK(strstr(md, "| delta | pinned: n/a: on the CPU backend: no copy to a device |"));
        /* the headline, not the fastest; the others named as showing their fastest */
        CHECK(strstr(md, "| alpha | fwd time, elements = 4096 | off: 8.00 ms [7.76, 8.32] | "
                         "half: 6.00 ms [5.82, 6.24] | 1.33×"));
        CHECK(strstr(md, "**No headline setting declared** (the row shows the fastest setting, "
                         "which flatters it): `beta`, `epsilon`, `eta`, `zeta`."));
        CHECK(!strstr(md, "n/a: n/a"));
        CHECK(strstr(md, "Not timed: **pinned** (step time), n/a: on the CPU backend: no copy"));
        /* settings that are their own point: both rows in the section */
        /* their names say what differs: no "tf32 = 0 vs tf32 = 1" */
        CHECK(strstr(md, "| epsilon | step time | fp32: "));
        CHECK(strstr(md, "| tf32 | step time | 4.00 ms [3.88, 4.16] | 2.00× [1.90, 2.10] |"));
        CHECK(strstr(md, "| copy bandwidth | bytes = 268435456 | 21.5 GB/s [20.7, 22.2] |"));
        check_flags(md);
        check_per_workload(md);
        /* a technique's table with several workloads names each row's */
        CHECK(strstr(md, "| off (baseline), on gpt2-reduced-synthetic |") &&
                  strstr(md, "| off (baseline), on resnet50-reduced-synthetic |"),
              "theta's table names the workload of its two baselines");
        CHECK(!strstr(md, "| fp32 (baseline), on "), "a one-workload table names none");
        /* the long reason whole in "Not applicable on this device" */
        CHECK(strstr(md, "| ceilings | h2d pageable bandwidth | transfer time | n/a: "
                         LONG_NA_NOTE " |"));
    }
    free(md);
    char *sum = tb_test_slurp(rdir, "summary.md");
    if (sum)
        check_units(sum);
    free(sum);
    check_golden(rdir, "summary.md", "report_summary_golden.md");
    check_golden(rdir, "summary.tex", "report_summary_golden.tex");
    test_earlier_run(rdir);
    test_run_state(rdir);
    test_optional_sections(rdir, pdir);
    if (failures) {
        fprintf(stderr, "report_test: %d failures\n", failures);
        return 1;
    }
    printf("report_test: ok\n");
    return 0;
}
