/*
 * findings.c - the findings at the top of the report and their rule; see
 * findings.h.
 *
 * Test: bazel test //lib/report:report_test
 */
#include "lib/report/findings.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/report/cells.h"

const char *const tb_report_findings_rule =
    "How these were chosen: a technique with a setting whose result DIFFERS from the baseline "
    "comes first, naming that setting; then techniques measured faster or slower (never "
    "\"within noise\"), those timed on the training step, an epoch or time to accuracy before "
    "those timed on one kernel or operation, each ranked by the end of their 95% interval "
    "nearest 1×, the effect the data vouch for; at most five. Each is otherwise the technique's headline setting, as in the "
    "summary.";

int tb_report_is_step_level(const tb_result_row *r)
{
    static const char *const whole[] = {"step time", "epoch time", "time to accuracy",
                                        "time per 1000 samples", "evaluation time"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(r->metric, whole[i]))
            return 1;
    return 0;
}

double tb_report_sure_effect(const tb_result_row *r)
{
    if (isnan(r->speedup_ci_low) || isnan(r->speedup_ci_high))
        return 0;
    if (r->speedup_ci_low > 1)
        return log(r->speedup_ci_low);
    if (r->speedup_ci_high < 1)
        return log(r->speedup_ci_high);
    return 0;
}

/* The row a finding speaks of: the shown setting, or, when another of
 * the technique's settings DIFFERS and the shown one does not, that one
 * (a DIFFERS comes first whichever setting it is: the H200 run's fp16 on
 * ResNet-50 was only in its technique's table). */
static const tb_result_row *finding_row(const tb_report_pick *p)
{
    if (p->best && p->best->correctness != TB_CORRECT_DIFFERS && p->differs &&
        !isnan(p->differs->speedup))
        return p->differs;
    return p->best;
}

static int differs(const tb_report_pick *p)
{
    const tb_result_row *r = finding_row(p);
    return r && r->correctness == TB_CORRECT_DIFFERS;
}

/* Rank of a candidate: DIFFERS first, then what training sees (a step,
 * an epoch, time to accuracy) before one kernel or operation, each by
 * |sure effect|; -1: none. A fused kernel's 3x over its unfused chain is
 * real, but the step it sits in gains a few percent: ranked by effect
 * alone, run 52's findings were three kernels and no training step. */
static double rank_of(const tb_report_pick *p)
{
    const tb_result_row *r = finding_row(p);
    if (!r || isnan(r->speedup))
        return -1;
    double e = fabs(tb_report_sure_effect(r));
    if (differs(p))
        return 1000 + e;
    tb_timing_verdict v = r->timing_verdict;
    if (v != TB_TIMING_FASTER && v != TB_TIMING_SLOWER)
        return -1;
    return tb_report_is_step_level(r) ? 100 + e : e;
}

size_t tb_report_findings(const tb_report_pick *picks, size_t n, size_t *idx, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) { /* insertion by rank, best first; ties keep input order */
        double r = rank_of(&picks[i]);
        if (r < 0)
            continue;
        size_t at = k;
        while (at > 0 && rank_of(&picks[idx[at - 1]]) < r)
            at--;
        if (at >= max)
            continue;
        for (size_t j = (k < max ? k : max - 1); j > at; j--)
            idx[j] = idx[j - 1];
        idx[at] = i;
        if (k < max)
            k++;
    }
    return k;
}

/* 2 significant digits, whole numbers from 10 up: "2.4", "0.68", "16". */
static void num2(char *buf, size_t cap, double v)
{
    if (fabs(v) >= 10)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%#.2g", v);
}

/* 3 significant digits, whole numbers from 100 up: "1.37", "14.2", "150". */
static void num3(char *buf, size_t cap, double v)
{
    if (fabs(v) >= 100)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%#.3g", v);
}

/* "2.4× faster [2.0, 2.7]", or a slowdown as its factor "1.5× slower
 * [1.4, 1.5]" (1/speedup, so the larger number says the larger effect). */
static void effect_text(const tb_result_row *r, char *buf, size_t cap)
{
    int faster = r->speedup >= 1;
    char a[32], lo[32], hi[32];
    num2(a, sizeof a, faster ? r->speedup : 1 / r->speedup);
    if (r->timing_verdict != TB_TIMING_FASTER && r->timing_verdict != TB_TIMING_SLOWER &&
        !isnan(r->speedup_ci_low) && !isnan(r->speedup_ci_high)) { /* a DIFFERS row's time */
        /* three digits: two read [0.98, 1.03] as "[0.98, 1.0]", all slower */
        num3(a, sizeof a, r->speedup);
        num3(lo, sizeof lo, r->speedup_ci_low);
        num3(hi, sizeof hi, r->speedup_ci_high);
        snprintf(buf, cap, "no detectable change in time (%s× [%s, %s])", a, lo, hi);
        return;
    }
    if (isnan(r->speedup_ci_low) || isnan(r->speedup_ci_high)) {
        snprintf(buf, cap, "%s× %s (no interval)", a, faster ? "faster" : "slower");
        return;
    }
    num2(lo, sizeof lo, faster ? r->speedup_ci_low : 1 / r->speedup_ci_high);
    num2(hi, sizeof hi, faster ? r->speedup_ci_high : 1 / r->speedup_ci_low);
    /* the end nearest 1 keeps its side: "1.003", not "1.0" */
    int d = tb_report_num_off_one(lo, sizeof lo, faster ? r->speedup_ci_low
                                                        : 1 / r->speedup_ci_high);
    if (d > 0) {
        snprintf(a, sizeof a, "%.*f", d, faster ? r->speedup : 1 / r->speedup);
        snprintf(hi, sizeof hi, "%.*f", d, faster ? r->speedup_ci_high : 1 / r->speedup_ci_low);
    } else if (!strcmp(a, lo) || !strcmp(a, hi)) {
        /* two digits put the estimate on an end of its interval ("1.4×
         * slower [1.3, 1.4]" for 1/0.732 in [1.33, 1.40]): three */
        num3(a, sizeof a, faster ? r->speedup : 1 / r->speedup);
        num3(lo, sizeof lo, faster ? r->speedup_ci_low : 1 / r->speedup_ci_high);
        num3(hi, sizeof hi, faster ? r->speedup_ci_high : 1 / r->speedup_ci_low);
    }
    snprintf(buf, cap, "%s× %s [%s, %s]", a, faster ? "faster" : "slower", lo, hi);
}

static void where_text(const tb_report_pick *p, char *buf, size_t cap)
{
    const tb_result_row *r = p->best;
    const char *w = p->workload[0] ? p->workload : NULL;
    if (!strcmp(r->metric, "step time"))
        snprintf(buf, cap, "on the training step%s%s%s", w ? " (" : "", w ? w : "", w ? ")" : "");
    else if (!strcmp(r->metric, "evaluation time"))
        snprintf(buf, cap, "on an evaluation pass%s%s%s", w ? " (" : "", w ? w : "", w ? ")" : "");
    else if (tb_report_is_step_level(r))
        snprintf(buf, cap, "on %s%s%s%s", r->metric, w ? " (" : "", w ? w : "", w ? ")" : "");
    else {
        char pt[96];
        tb_report_point(pt, sizeof pt, r);
        snprintf(buf, cap, "on %s at %s (one kernel or operation, not the training step)",
                 r->metric, pt);
    }
}

/* A relative error as a percentage a reader takes in: "0.16%", "< 0.001%". */
static void percent(char *buf, size_t cap, double rel)
{
    if (isnan(rel))
        snprintf(buf, cap, "an unrecorded amount");
    else if (100 * rel < 0.001)
        snprintf(buf, cap, "0.001%%"); /* at most: smaller reads as noise */
    else if (100 * rel < 0.1)
        snprintf(buf, cap, "%.1g%%", 100 * rel);
    else
        snprintf(buf, cap, "%.2g%%", 100 * rel);
}

static void result_text(const tb_result_row *r, const tb_result_row *base, char *buf,
                        size_t cap)
{
    char e[32], t[32];
    double mine, theirs;
    percent(e, sizeof e, r->max_rel_err);
    percent(t, sizeof t, r->tolerance);
    switch (r->correctness) {
    case TB_CORRECT_EXACT:
        snprintf(buf, cap, "bitwise the same result");
        break;
    case TB_CORRECT_WITHIN_TOL:
        snprintf(buf, cap, "same result within %s%s", e,
                 tb_report_weak_check(r) ? " (a weak loss check: its note gives the first "
                                           "update's)" : "");
        break;
    case TB_CORRECT_DIFFERS:
        if (isnan(r->max_rel_err)) /* results/README.md: the loss was not finite */
            snprintf(buf, cap, "but the result DIFFERS: its loss was not finite (the training "
                     "diverged; tolerance %s%s%s)", t, r->checked_against[0] ? ", vs " : "",
                     r->checked_against);
        else
            snprintf(buf, cap, "but the result DIFFERS by %s (tolerance %s%s%s)", e, t,
                     r->checked_against[0] ? ", vs " : "", r->checked_against);
        break;
    default:
        if (tb_report_accuracy_pair(r, base, &mine, &theirs))
            snprintf(buf, cap, "test accuracy %.1f%% against the baseline's %.1f%% after as "
                     "many samples (another trajectory: not compared by loss)", mine, theirs);
        else
            snprintf(buf, cap, "result not checked");
    }
}

/* " Read with care: <the row's flags>." where the row is flagged (the
 * summary's flags cell, cells.h), else "": a finding is the first thing a
 * reader takes away, so it says what the table beside its row says. */
static void caveat_text(const tb_report_pick *p, const tb_result_row *r, char *buf, size_t cap)
{
    char flags[400];
    tb_report_flags_text(flags, sizeof flags, r, ~0);
    tb_report_append_apart(p, r, "measured with the ", flags, sizeof flags);
    if (flags[0])
        snprintf(buf, cap, " Read with care: %s.", flags);
    else
        buf[0] = '\0';
}

void tb_report_finding_text(const tb_report_pick *p, char *buf, size_t cap)
{
    char effect[96], where[200], result[200], caveat[480];
    tb_report_pick shown = *p;
    shown.best = finding_row(p);
    effect_text(shown.best, effect, sizeof effect);
    where_text(&shown, where, sizeof where);
    result_text(shown.best, p->baseline, result, sizeof result);
    caveat_text(p, shown.best, caveat, sizeof caveat);
    snprintf(buf, cap, "**%s** (%s): %s %s, %s.%s%s%s%s", p->technique, shown.best->setting,
             effect, where, result, caveat, p->earlier[0] ? " From an earlier run (" : "",
             p->earlier, p->earlier[0] ? "), not this one." : "");
}
