/*
 * summary.c - the summary rule (which row of a technique the summary
 * shows) and the summary table built from it; see summary.h.
 *
 * Test: bazel test //lib/report:report_test
 */
#include "lib/report/summary.h"

#include <math.h>
#include <string.h>

#include "lib/report/cells.h"
#include "lib/report/doc_blocks.h"
#include "lib/report/markdown.h"

/* ---- the summary rule ---- */

/* Whether r is a row of technique on workload (a value of the workload
 * column; NULL or "": any workload). */
static int mine(const tb_result_row *r, const char *technique, const char *workload)
{
    if (strcmp(r->technique, technique) != 0)
        return 0;
    return !workload || !workload[0] || !strcmp(r->workload, workload);
}

/* The larger of two points; NaN (no sweep) ranks below any value. */
static int point_above(double a, double b)
{
    if (isnan(a))
        return 0;
    return isnan(b) || a > b;
}

static const char *pick_metric(const tb_results *res, const char *technique, const char *wl,
                               const char *declared)
{
    const char *first = NULL, *step = NULL;
    /* a declared metric that rows have, timed or n/a: the technique is read
     * on it, and an n/a there is the summary's answer, never another
     * metric in its place (validation_frequency's time to accuracy, n/a
     * where no seed reached 85%, had its fit time shown instead) */
    for (size_t i = 0; declared && declared[0] && i < res->n; i++)
        if (mine(&res->rows[i], technique, wl) && !strcmp(res->rows[i].metric, declared))
            return res->rows[i].metric;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!mine(r, technique, wl) || !is_timed(r) || !r->is_baseline)
            continue;
        if (!strcmp(r->metric, "step time") && !step)
            step = r->metric;
        if (!first)
            first = r->metric;
    }
    return step ? step : first;
}

static void count_flags(const tb_results *res, const char *technique, const char *wl,
                        tb_report_flag_counts *out)
{
    memset(out, 0, sizeof *out);
    out->max_load = NAN;
    out->xcore_lo = out->xcore_hi = NAN;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!mine(r, technique, wl) || !is_timed(r))
            continue;
        int f = tb_report_row_flags(r);
        out->rows++;
        out->flagged += f != 0;
        out->budget += !!(f & TB_FLAG_BUDGET);
        out->cap += !!(f & TB_FLAG_CAP);
        out->busy += !!(f & TB_FLAG_BUSY);
        out->unreliable += !!(f & TB_FLAG_UNRELIABLE);
        out->imprecise += !!(f & TB_FLAG_IMPRECISE);
        if ((f & TB_FLAG_BUSY) && !isnan(r->load_avg) &&
            (isnan(out->max_load) || r->load_avg > out->max_load))
            out->max_load = r->load_avg;
        if (!isnan(r->xcore_ns)) {
            if (isnan(out->xcore_lo) || r->xcore_ns < out->xcore_lo)
                out->xcore_lo = r->xcore_ns;
            if (isnan(out->xcore_hi) || r->xcore_ns > out->xcore_hi)
                out->xcore_hi = r->xcore_ns;
        }
    }
}

void tb_report_count_flags(const tb_results *res, const char *technique,
                           tb_report_flag_counts *out)
{
    count_flags(res, technique, NULL, out);
}

/* The baseline row x was compared with, among the technique's baselines
 * of metric (at x's point only, with at_point; NULL when none is there).
 * With several (per-tensor SGD and per-tensor AdamW; DataParallel's and
 * DDP's one-rank runs): the one whose noise floor x carries (a paired
 * row's noise floor is its baseline's A/A interval, written on both), else
 * the one whose median x's speedup implies (speedup ~ baseline median /
 * its median: only roughly for a paired row, whose speedup is the
 * Hodges-Lehmann estimate of its rounds' ratios; ddp's 25M-bucket DDP row
 * was set beside DataParallel's baseline, 0.4% away, by that alone). */
static const tb_result_row *compared_with(const tb_results *res, const tb_report_pick *p,
                                          const char *metric, const tb_result_row *x,
                                          int at_point)
{
    const tb_result_row *b = NULL;
    double want = x ? x->median * x->speedup : NAN, gap = INFINITY;
    int b_floor = 0;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!mine(r, p->technique, p->of_workload) || !is_timed(r) || !r->is_baseline ||
            strcmp(r->metric, metric) ||
            (at_point && x && !same_point(r->param_value, x->param_value)))
            continue;
        int floor_match = x && r->noise_floor > 0 && r->noise_floor == x->noise_floor;
        double g = isnan(want) ? 0 : fabs(r->median - want);
        if (!b || floor_match > b_floor || (floor_match == b_floor && g < gap)) {
            b = r;
            gap = g;
            b_floor = floor_match;
        }
    }
    return b;
}

/* The summary rule over the technique's rows on workload wl (NULL: all). */
static void pick_rows(const tb_results *res, const char *technique, const char *wl,
                      const char *declared_metric, tb_report_pick *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->technique, sizeof out->technique, "%s", technique);
    if (wl)
        snprintf(out->of_workload, sizeof out->of_workload, "%s", wl);
    count_flags(res, technique, wl, &out->flags);
    for (size_t i = 0; i < res->n && !out->na; i++)
        if (mine(&res->rows[i], technique, wl) && !is_timed(&res->rows[i]))
            out->na = &res->rows[i];
    for (size_t i = 0; i < res->n && !out->differs; i++)
        if (mine(&res->rows[i], technique, wl) && !res->rows[i].is_baseline &&
            res->rows[i].correctness == TB_CORRECT_DIFFERS)
            out->differs = &res->rows[i];
    const char *metric = pick_metric(res, technique, wl, declared_metric);
    if (!metric)
        return;
    /* the n/a reason of the metric shown, where it has one (a forward
     * kernel's "too small to time" is no reason for a backward one) */
    for (size_t i = 0; i < res->n; i++)
        if (mine(&res->rows[i], technique, wl) && !is_timed(&res->rows[i]) &&
            !strcmp(res->rows[i].metric, metric)) {
            out->na = &res->rows[i];
            break;
        }
    /* The largest point with a baseline and a non-baseline speedup. */
    double point = NAN;
    int found = 0;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!mine(r, technique, wl) || strcmp(r->metric, metric) || r->is_baseline ||
            isnan(r->speedup))
            continue;
        if (!found || point_above(r->param_value, point)) {
            point = r->param_value;
            found = 1;
        }
    }
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!mine(r, technique, wl) || strcmp(r->metric, metric) || !is_timed(r))
            continue;
        if (found && !same_point(r->param_value, point))
            continue;
        if (r->is_baseline && !out->baseline)
            out->baseline = r;
        else if (!r->is_baseline && !isnan(r->speedup) &&
                 (!out->best || r->speedup > out->best->speedup))
            out->best = r;
    }
    if (found && !out->baseline) {
        /* A sweep of settings (workers=0,1,2.., "no bias"), each its own point,
         * compared with a baseline at another point: the best over all of
         * them, beside the baseline they were compared with. */
        out->best = NULL;
        for (size_t i = 0; i < res->n; i++) {
            const tb_result_row *r = &res->rows[i];
            if (!mine(r, technique, wl) || strcmp(r->metric, metric) || !is_timed(r))
                continue;
            if (!r->is_baseline && !isnan(r->speedup) &&
                (!out->best || r->speedup > out->best->speedup))
                out->best = r;
        }
        out->baseline = compared_with(res, out, metric, out->best, 0);
    }
    if (!found) /* baseline timed, nothing compared with it: show the largest point */
        for (size_t i = 0; i < res->n; i++) {
            const tb_result_row *r = &res->rows[i];
            if (mine(r, technique, wl) && !strcmp(r->metric, metric) &&
                r->is_baseline && is_timed(r) &&
                (out->baseline == r || point_above(r->param_value, out->baseline->param_value)))
                out->baseline = r;
        }
    for (size_t i = 0; out->baseline && i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (mine(r, technique, wl) && !strcmp(r->metric, metric) && r->is_baseline &&
            is_timed(r) && !same_point(r->param_value, out->baseline->param_value))
            out->swept = 1;
    }
}

void tb_report_pick_best(const tb_results *res, const char *technique, tb_report_pick *out)
{
    pick_rows(res, technique, NULL, NULL, out);
}

/* The row of `setting` the summary should show in place of the fastest:
 * at the fastest's point when it was timed there, else at any point. */
static const tb_result_row *find_setting(const tb_results *res, const tb_report_pick *p,
                                         const char *setting)
{
    const tb_result_row *any = NULL;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (!mine(r, p->technique, p->of_workload) || strcmp(r->metric, p->best->metric) ||
            strcmp(r->setting, setting) || r->is_baseline || isnan(r->speedup))
            continue;
        if (same_point(r->param_value, p->best->param_value))
            return r;
        if (!any)
            any = r;
    }
    return any;
}

void tb_report_pick_headline(const tb_results *res, const char *technique, const char *headline,
                             const char *metric, tb_report_pick *out)
{
    tb_report_pick_workload(res, technique, headline, metric, NULL, out);
}

void tb_report_pick_workload(const tb_results *res, const char *technique, const char *headline,
                             const char *metric, const char *workload, tb_report_pick *out)
{
    pick_rows(res, technique, workload, metric, out);
    if (!out->best || !headline || !headline[0])
        return;
    const tb_result_row *h = find_setting(res, out, headline);
    if (!h)
        return;
    out->best = h;
    out->headline = 1;
    /* The headline timed only at another point than the one picked (the
     * settings of channels_last's fp32 and bf16 pairs have their own names):
     * its row beside the baseline it was compared with there, not the
     * picked point's. */
    const tb_result_row *b = out->baseline && !same_point(out->baseline->param_value,
                                                          h->param_value)
                                 ? compared_with(res, out, h->metric, h, 1)
                                 : NULL;
    /* each setting its own point (large_batch_optimizers: lars was paired
     * with sgd at another point than adamw, the fastest's baseline): the
     * baseline whose noise floor the headline carries, at any point */
    if (!b && out->baseline && !same_point(out->baseline->param_value, h->param_value))
        b = compared_with(res, out, h->metric, h, 0);
    if (b)
        out->baseline = b;
}

size_t tb_report_workloads(const tb_results *res, const char *technique, char names[][48],
                           size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        size_t k = 0;
        if (strcmp(r->technique, technique) != 0 || !r->workload[0])
            continue;
        while (k < n && strcmp(names[k], r->workload) != 0)
            k++;
        if (k == n && n < max)
            snprintf(names[n++], 48, "%s", r->workload);
    }
    return n;
}

tb_report_group tb_report_pick_group(const tb_report_pick *p)
{
    if (!p->best)
        return TB_GROUP_NA;
    if (p->best->timing_verdict == TB_TIMING_FASTER)
        return TB_GROUP_FASTER;
    if (p->best->timing_verdict == TB_TIMING_SLOWER)
        return TB_GROUP_SLOWER;
    return TB_GROUP_NO_EFFECT;
}

const char *tb_report_group_name(tb_report_group g)
{
    static const char *const names[TB_GROUP_COUNT] = {"faster", "no detectable effect", "slower",
                                                      "not applicable here"};
    return g < TB_GROUP_COUNT ? names[g] : "?";
}

/* Within a group: the larger effect first (a slowdown's effect is 1/speedup). */
static int order_before(const tb_report_pick *a, const tb_report_pick *b)
{
    tb_report_group ga = tb_report_pick_group(a), gb = tb_report_pick_group(b);
    if (ga != gb)
        return ga < gb;
    if (ga == TB_GROUP_NA)
        return strcmp(a->technique, b->technique) < 0;
    double ea = a->best->speedup, eb = b->best->speedup;
    if (ea != eb)
        return ga == TB_GROUP_SLOWER ? ea < eb : ea > eb;
    return strcmp(a->technique, b->technique) < 0;
}

void tb_report_order(const tb_report_pick *picks, size_t n, size_t *order)
{
    for (size_t i = 0; i < n; i++) { /* insertion sort: stable, n is tens */
        size_t k = i;
        while (k > 0 && order_before(&picks[i], &picks[order[k - 1]])) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
}

/* ---- summary table ---- */

static const char *summary_rule =
    "One row per technique, and per workload for a step technique measured on several (its "
    "workload in brackets: a tip that helps the transformer may do nothing for the CNN; the "
    "table \"Per workload\" below sets them side by side), grouped by verdict (faster, no detectable effect, slower, not "
    "applicable here) and sorted by effect within each group. **Measurement**: the metric the "
    "technique declares its headline is read on, where it times several (the one training pays "
    "for: AdamW on the largest tensors, attention's causal forward and backward), else the "
    "whole training step (`step time`) when it measures it, else the first metric it lists. "
    "**Point**: the largest swept size where the baseline and another setting were both "
    "timed, the one closest to real training; where each setting is its own point (a switch, "
    "a choice), the setting columns name what differs. **Setting shown**: the technique's "
    "headline "
    "setting, declared in its home (`bench/techniques/<name>.c`) before anything was measured; "
    "picking the fastest of several noisy settings would bias every row upward. A technique "
    "that declares none shows its fastest setting and says so. Every other setting and size is "
    "in the technique's section below and in its CSV. **Flags**: why a number is less certain "
    "than it looks (stopped by the time budget, a busy machine, an A/A check that failed, or an "
    "interval or noise floor wider than ±10% with no such reason).";


int tb_report_pick_apart(const tb_report_pick *p, const tb_result_row *r)
{
    return p->xcore_least > 0 && r->xcore_ns >= TB_REPORT_XCORE_STATES * p->xcore_least;
}

void tb_report_append_apart(const tb_report_pick *p, const tb_result_row *r, const char *lead,
                            char *buf, size_t cap)
{
    if (!tb_report_pick_apart(p, r))
        return;
    size_t n = strlen(buf);
    if (n < cap)
        snprintf(buf + n, cap - n, "%s%sCPUs apart (core-to-core %.0f ns, the run's least %.0f)",
                 n ? "; " : "", lead, r->xcore_ns, p->xcore_least);
}

/* The flags cell: the shown row's own flags, except a busy machine, which
 * is said once for the whole technique (any of its rows busy). */
static void summary_flags(const tb_report_pick *p, const tb_result_row *shown, char *buf,
                          size_t cap)
{
    char load[32], own[TB_REPORT_CELL] = "";
    if (shown)
        tb_report_flags_text(own, sizeof own, shown, ~TB_FLAG_BUSY);
    /* the other machine state: compare it with rows of its own state */
    if (shown)
        tb_report_append_apart(p, shown, "", own, sizeof own);
    if (p->earlier[0])
        snprintf(buf, cap, "FROM AN EARLIER RUN (%s)%s%s", p->earlier, own[0] ? "; " : "",
                 own);
    else
        snprintf(buf, cap, "%s", own);
    if (!p->flags.busy)
        return;
    size_t n = strlen(buf);
    tb_report_num(load, sizeof load, p->flags.max_load);
    snprintf(buf + n, cap - n, "%sbusy machine: %d of %d rows (load up to %s)", n ? "; " : "",
             p->flags.busy, p->flags.rows, load);
    /* the shown row's own wide noise floor, which its busy flag would have
     * said (tb_report_flags_text) and the mask above took out */
    if (shown && shown->busy && !isnan(shown->noise_floor) &&
        shown->noise_floor > TB_REPORT_IMPRECISE &&
        !(tb_report_row_flags(shown) & (TB_FLAG_BUDGET | TB_FLAG_CAP))) {
        char nf[32];
        tb_report_num(nf, sizeof nf, 100.0 * shown->noise_floor);
        n = strlen(buf);
        snprintf(buf + n, cap - n, "; this row's noise floor ±%s%%", nf);
    }
}

/* "step time, elements = 4096": where the summary compares. A baseline
 * and best setting at different points (a setting that is its own point)
 * show only the metric where their names differ: the setting columns say
 * what differs ("gzip IDX every epoch" against "decoded once in RAM"),
 * which "source = 0 vs source = 2" or "optimizer = 1 vs optimizer = 3"
 * only encoded; where the names are the same (ddp's "DDP bucket=25M" at
 * 1 and 2 ranks), both points. With nothing compared, the point is shown
 * only when the baseline was timed at several (a lone "on = 0" says
 * nothing). */
static void summary_point(const tb_report_pick *p, char *buf, size_t cap)
{
    const tb_result_row *b = p->baseline, *x = p->best;
    char pt[96], pt2[96];
    tb_report_point(pt, sizeof pt, b);
    if (x && !same_point(b->param_value, x->param_value) && strcmp(b->setting, x->setting)) {
        snprintf(buf, cap, "%s", b->metric);
    } else if (x && !same_point(b->param_value, x->param_value)) {
        tb_report_point(pt2, sizeof pt2, x);
        snprintf(buf, cap, "%s, %s vs %s", b->metric, pt, pt2);
    } else if (x || p->swept) {
        snprintf(buf, cap, "%s, %s", b->metric, pt);
    } else {
        snprintf(buf, cap, "%s", b->metric);
    }
}

/* The model part of a workload column ("gpt2" of "gpt2-reduced-synthetic"). */
static void workload_model(const char *label, char *buf, size_t cap)
{
    int n = (int)strcspn(label, "-");
    snprintf(buf, cap, "%.*s", n, label);
}

/* "amp (gpt2)" for a pick of one of several workloads, else "amp". */
static void technique_cell(const tb_report_pick *p, char *buf, size_t cap)
{
    char model[48];
    if (!p->of_workload[0]) {
        snprintf(buf, cap, "%s", p->technique);
        return;
    }
    workload_model(p->of_workload, model, sizeof model);
    snprintf(buf, cap, "%s (%s)", p->technique, model);
}

void tb_report_other_differs(const tb_report_pick *p, char *buf, size_t cap)
{
    const tb_result_row *x = p->differs;
    buf[0] = '\0';
    if (!x || x == p->best)
        return;
    char e[32], t[32];
    tb_report_num(e, sizeof e, x->max_rel_err);
    tb_report_num(t, sizeof t, x->tolerance);
    if (isnan(x->max_rel_err))
        snprintf(buf, cap, "setting '%s' DIFFERS (its loss not finite)", x->setting);
    else
        snprintf(buf, cap, "setting '%s' DIFFERS (max rel err %s > %s)", x->setting, e, t);
}

/* Appends "; also: <tb_report_other_differs>" to a correctness cell. */
static void add_other_differs(const tb_report_pick *p, char *buf, size_t cap)
{
    char other[200];
    tb_report_other_differs(p, other, sizeof other);
    size_t n = strlen(buf);
    if (other[0] && n < cap)
        snprintf(buf + n, cap - n, "; also: %s", other);
}

void tb_report_summary_cells(const tb_report_pick *p, char cells[SUM_COLS][TB_REPORT_CELL])
{
    char bt[96], best[160];
    static const char *not_timed = "n/a: nothing was timed";
    static const char *nothing = "n/a: nothing timed to compare with";
    for (int c = 0; c < SUM_COLS; c++)
        cells[c][0] = '\0';
    technique_cell(p, cells[0], TB_REPORT_CELL);
    if (!p->baseline) {
        snprintf(cells[1], TB_REPORT_CELL, "%s", p->na ? p->na->metric : "");
        snprintf(cells[2], TB_REPORT_CELL, "%s", not_timed);
        if (p->na)
            tb_report_na(cells[3], TB_REPORT_CELL, p->na->setting, p->na->note);
        else
            snprintf(cells[3], TB_REPORT_CELL, "n/a: the CSV has no rows");
        for (int c = 4; c < SUM_COLS - 1; c++)
            snprintf(cells[c], TB_REPORT_CELL, "%s", not_timed);
        summary_flags(p, NULL, cells[7], TB_REPORT_CELL);
        return;
    }
    const tb_result_row *b = p->baseline;
    summary_point(p, cells[1], TB_REPORT_CELL);
    /* a step technique measured on several workloads: say which one is shown */
    if (b->workload[0]) {
        size_t at = strlen(cells[1]);
        snprintf(cells[1] + at, TB_REPORT_CELL - at, ", on %s", b->workload);
    }
    tb_report_time(bt, sizeof bt, b);
    snprintf(cells[2], TB_REPORT_CELL, "%s: %s", b->setting, bt);
    if (!p->best) {
        /* The other settings have no meaning here (pinned memory on the
         * CPU): their reason, not a blank. */
        if (p->na)
            tb_report_na(cells[3], TB_REPORT_CELL, p->na->setting, p->na->note);
        else
            snprintf(cells[3], TB_REPORT_CELL, "n/a: no other setting was timed against the baseline");
        snprintf(cells[4], TB_REPORT_CELL, "%s", nothing);
        snprintf(cells[5], TB_REPORT_CELL, "%s", nothing);
        tb_report_correctness(cells[6], TB_REPORT_CELL, b);
        add_other_differs(p, cells[6], TB_REPORT_CELL);
        summary_flags(p, b, cells[7], TB_REPORT_CELL);
        return;
    }
    tb_report_time(bt, sizeof bt, p->best);
    snprintf(best, sizeof best, "%s: %s", p->best->setting, bt);
    snprintf(cells[3], TB_REPORT_CELL, "%s", best);
    tb_report_speedup(cells[4], TB_REPORT_CELL, p->best);
    tb_report_verdict(cells[5], TB_REPORT_CELL, p->best);
    tb_report_correctness_vs(cells[6], TB_REPORT_CELL, p->best, b);
    add_other_differs(p, cells[6], TB_REPORT_CELL);
    summary_flags(p, p->best, cells[7], TB_REPORT_CELL);
}

static const char *const summary_header[SUM_COLS] = {
    "technique", "measured at", "baseline: median [95% CI]", "setting shown: median [95% CI]",
    "speedup [95% CI]", "verdict", "correctness (tolerance)", "flags"};


/* Whether picks[i] is its technique's first pick (a technique measured on
 * several workloads has one pick for each). */
static int first_of_technique(const tb_report_pick *picks, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (!strcmp(picks[j].technique, picks[i].technique))
            return 0;
    return 1;
}

/* The machine state over the run (the rows' xcore_ns): one sentence when
 * the run saw one state, a paragraph when the host moved the CPUs. */
static void summary_state(doc *d, const tb_report_pick *picks, size_t n)
{
    double lo = NAN, hi = NAN;
    for (size_t i = 0; i < n; i++) {
        const tb_report_flag_counts *c = &picks[i].flags;
        if (!(c->xcore_lo > 0) || !(c->xcore_hi > 0)) /* NaN (none) or 0 (never counted) */
            continue;
        if (isnan(lo) || c->xcore_lo < lo)
            lo = c->xcore_lo;
        if (isnan(hi) || c->xcore_hi > hi)
            hi = c->xcore_hi;
    }
    if (isnan(lo)) /* no row has a round trip */
        return;
    if (hi < TB_REPORT_XCORE_STATES * lo) {
        tb_doc_text(d, BK_P, "**Machine state**: the round trip of a cache line between the "
                    "first two CPUs (`xcore_ns`, sampled after every round) stayed within "
                    "%.0f-%.0f ns over the run's rows: one state throughout.", lo, hi);
        return;
    }
    int techs = 0, apart = 0;
    for (size_t i = 0; i < n; i++) {
        if (!first_of_technique(picks, i))
            continue;
        int has = 0, far = 0;
        for (size_t j = i; j < n; j++) {
            const tb_report_flag_counts *c = &picks[j].flags;
            if (strcmp(picks[j].technique, picks[i].technique) || !(c->xcore_hi > 0))
                continue;
            has = 1;
            far |= c->xcore_hi >= TB_REPORT_XCORE_STATES * lo;
        }
        techs += has;
        apart += far;
    }
    tb_doc_text(d, BK_P, "**Machine state**: the round trip of a cache line between the first "
                "two CPUs (`xcore_ns`, sampled after every round) ranged from %.0f to %.0f ns "
                "over the run's rows: the host ran the two CPUs close together part of the run "
                "and apart (%.0fx the least round trip or more) the rest. %d of the %d "
                "techniques with such rows have rows measured apart. Where threads hand data "
                "to each other the two states are two different machines (on the VM this was "
                "found on, two threads stepped the small CNN no faster than one while apart): "
                "compare rows within one state, as `tools/compare_runs.py` does between runs.",
                lo, hi, TB_REPORT_XCORE_STATES, apart, techs);
}

/* "n rows stopped by the budget" and the like, over every technique. */
static void summary_counts(doc *d, const tb_report_pick *picks, size_t n)
{
    tb_report_flag_counts t = {0};
    int busy_tech = 0;
    for (size_t i = 0; i < n; i++) {
        const tb_report_flag_counts *c = &picks[i].flags;
        t.rows += c->rows;
        t.flagged += c->flagged;
        t.budget += c->budget;
        t.cap += c->cap;
        t.busy += c->busy;
        t.unreliable += c->unreliable;
        t.imprecise += c->imprecise;
        busy_tech += c->busy > 0;
    }
    if (!t.flagged) {
        tb_doc_text(d, BK_P, "**Flags**: none of the %d timed rows of the techniques above is "
                    "flagged (the waterfall's rows are not counted here): every one stopped "
                    "on its precision target or was not paired, on a quiet machine, with an "
                    "interval and noise floor within ±10%%.", t.rows);
        return;
    }
    tb_doc_text(d, BK_P, "**Flags** over the %d timed rows of the techniques above (not the "
                "waterfall's): %d flagged; %d stopped by the time "
                "budget, %d at the round cap, %d measured on a busy machine (%d technique%s), "
                "%d unreliable (A/A interval excludes 1), %d imprecise (interval or noise floor "
                "above ±10%% with neither the budget nor a busy machine to explain it). Every "
                "flagged row, the waterfall's too, is listed under \"Flagged rows\" in "
                "REPORT.md.",
                t.rows, t.flagged, t.budget, t.cap, t.busy, busy_tech, busy_tech == 1 ? "" : "s",
                t.unreliable, t.imprecise);
}

/* The not-applicable group: what was not compared, and why. */
static void summary_na_row(doc *d, const tb_report_pick *p)
{
    char why[TB_REPORT_CELL];
    if (p->na)
        tb_report_na(why, sizeof why, p->na->setting, p->na->note);
    else if (p->baseline)
        snprintf(why, sizeof why, "n/a: no other setting was timed against the baseline");
    else
        snprintf(why, sizeof why, "n/a: the CSV has no rows");
    /* what the summary's flags cell would say (an earlier run's CSV, a
     * busy machine): an n/a row keeps it */
    char flags[TB_REPORT_CELL];
    summary_flags(p, p->baseline, flags, sizeof flags);
    size_t n = strlen(why);
    if (flags[0] && n < sizeof why)
        snprintf(why + n, sizeof why - n, " (flags: %s)", flags);
    char tech[96];
    technique_cell(p, tech, sizeof tech);
    const char *row[2] = {tech, why};
    tb_doc_row(d, row);
}

/* Whether an earlier pick of the same technique shows its fastest setting. */
static int named_before(const tb_report_pick *picks, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (!strcmp(picks[j].technique, picks[i].technique) && picks[j].best &&
            !picks[j].headline)
            return 1;
    return 0;
}

/* The techniques whose row shows their fastest setting, named once: their
 * speedups are the best of several noisy ones, biased upward. */
static void summary_no_headline(doc *d, const tb_report_pick *picks, size_t n)
{
    char names[1024] = "";
    size_t len = 0;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!picks[i].best || picks[i].headline || named_before(picks, i))
            continue;
        len += (size_t)snprintf(names + len, len < sizeof names ? sizeof names - len : 0,
                                "%s`%s`", k++ ? ", " : "", picks[i].technique);
    }
    if (k)
        tb_doc_text(d, BK_P, "**No headline setting declared** (the row shows the fastest "
                    "setting, which flatters it): %s.", names);
}

#define BY_WL_MAX 4

/* The shown setting's result in one cell of "Per workload". */
static void by_workload_cell(const tb_report_pick *p, char *buf, size_t cap)
{
    char sp[96];
    tb_report_group g = tb_report_pick_group(p);
    if (g == TB_GROUP_NA) {
        if (p->na)
            tb_report_na(buf, cap, NULL, p->na->note);
        else
            snprintf(buf, cap, "n/a: nothing compared");
        return;
    }
    tb_report_speedup(sp, sizeof sp, p->best);
    const char *c;
    switch (p->best->correctness) {
    case TB_CORRECT_EXACT: c = "exact"; break;
    case TB_CORRECT_WITHIN_TOL: c = "within tolerance"; break;
    case TB_CORRECT_DIFFERS: c = "result DIFFERS"; break;
    default: c = "result not checked"; break;
    }
    snprintf(buf, cap, "%s: %s, %s; %s", p->best->setting, sp,
             p->best->timing_verdict == TB_TIMING_NA ? "no verdict" : tb_report_group_name(g),
             c);
    add_other_differs(p, buf, cap);
}

/* Index of the pick of technique `tech` on workload `wl` (-1: none). */
static long find_pick(const tb_report_pick *picks, size_t n, const char *tech, const char *wl)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(picks[i].technique, tech) && !strcmp(picks[i].of_workload, wl))
            return (long)i;
    return -1;
}

/* "Per workload": a row per technique measured on several workloads, a
 * column per workload, so a reader sees at a glance which models a tip
 * helps. Nothing when no technique has per-workload picks. */
static void summary_by_workload(doc *d, const tb_report_pick *picks, size_t n)
{
    char wl[BY_WL_MAX][48], cells[1 + BY_WL_MAX][TB_REPORT_CELL];
    const char *header[1 + BY_WL_MAX], *row[1 + BY_WL_MAX];
    size_t nwl = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        if (!picks[i].of_workload[0])
            continue;
        while (k < nwl && strcmp(wl[k], picks[i].of_workload) != 0)
            k++;
        if (k == nwl && nwl < BY_WL_MAX)
            snprintf(wl[nwl++], 48, "%s", picks[i].of_workload);
    }
    if (!nwl)
        return;
    tb_doc_text(d, BK_H3, "Per workload");
    tb_doc_text(d, BK_P, "Each step technique measured on several workloads, its shown setting's "
                "speedup [95%% CI], verdict and correctness on each, and any other setting "
                "whose result DIFFERS there; \"not run\": the technique does not declare that "
                "workload.");
    header[0] = "technique";
    for (size_t k = 0; k < nwl; k++)
        header[1 + k] = wl[k];
    tb_doc_table(d, (int)(1 + nwl), header);
    for (size_t i = 0; i < n; i++) {
        if (!picks[i].of_workload[0] || !first_of_technique(picks, i))
            continue;
        snprintf(cells[0], TB_REPORT_CELL, "%s", picks[i].technique);
        for (size_t k = 0; k < nwl; k++) {
            long at = find_pick(picks, n, picks[i].technique, wl[k]);
            if (at < 0)
                snprintf(cells[1 + k], TB_REPORT_CELL, "not run");
            else
                by_workload_cell(&picks[at], cells[1 + k], TB_REPORT_CELL);
        }
        for (size_t c = 0; c < 1 + nwl; c++)
            row[c] = cells[c];
        tb_doc_row(d, row);
    }
}

void tb_report_summary_doc(doc *d, const tb_report_pick *picks, size_t n)
{
    static const char *const na_header[2] = {"technique", "why it was not compared here"};
    size_t order[n ? n : 1];
    tb_report_order(picks, n, order);
    tb_doc_text(d, BK_P, "%s", summary_rule);
    for (size_t i = 0; i < n; i++) {
        const tb_report_pick *p = &picks[order[i]];
        tb_report_group g = tb_report_pick_group(p);
        if (i == 0 || g != tb_report_pick_group(&picks[order[i - 1]])) {
            tb_doc_text(d, BK_H3, "%s", tb_report_group_name(g));
            if (g == TB_GROUP_NA)
                tb_doc_table(d, 2, na_header);
            else
                tb_doc_table(d, SUM_COLS, summary_header);
        }
        if (g == TB_GROUP_NA) {
            summary_na_row(d, p);
            continue;
        }
        char cells[SUM_COLS][TB_REPORT_CELL];
        const char *row[SUM_COLS];
        tb_report_summary_cells(p, cells);
        for (int c = 0; c < SUM_COLS; c++)
            row[c] = cells[c];
        tb_doc_row(d, row);
    }
    summary_by_workload(d, picks, n);
    summary_no_headline(d, picks, n);
    summary_counts(d, picks, n);
    summary_state(d, picks, n);
}

int tb_report_summary_md(const tb_report_pick *picks, size_t n, FILE *f)
{
    doc d = {0};
    tb_report_summary_doc(&d, picks, n);
    int rc = d.oom ? TB_FAIL(TB_ERR_NOMEM, "out of memory building the summary") : tb_md_write(&d, f);
    tb_doc_clear(&d);
    return rc;
}
