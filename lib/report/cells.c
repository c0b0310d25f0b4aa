/*
 * cells.c - a result row's numbers as the report's cells print them
 * (times, speedups, rates with their intervals, verdicts, correctness, the
 * sweep point, n/a reasons); see cells.h.
 *
 * Test: bazel test //lib/report:report_test
 */
#include "lib/report/cells.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tb_report_num(char *buf, size_t cap, double v)
{
    double a = fabs(v);
    if (isnan(v) || isinf(v))
        snprintf(buf, cap, "n/a");
    else if (a == 0)
        snprintf(buf, cap, "0");
    else if (a >= 1e6 || a < 1e-3)
        snprintf(buf, cap, "%.3g", v);
    else if (a >= 100)
        snprintf(buf, cap, "%.0f", v);
    else if (a >= 10)
        snprintf(buf, cap, "%.1f", v);
    else if (a >= 1)
        snprintf(buf, cap, "%.2f", v);
    else {
        int digits = 2 - (int)floor(log10(a)); /* 3 significant digits */
        snprintf(buf, cap, "%.*f", digits, v);
    }
}

static void num_interval(char *buf, size_t cap, double v, double lo, double hi, const char *unit,
                         const char *sep)
{
    char a[32], b[32], c[32];
    tb_report_num(a, sizeof a, v);
    if (isnan(lo) || isnan(hi)) {
        snprintf(buf, cap, "%s%s%s [interval n/a: too few repetitions]", a, sep, unit);
        return;
    }
    tb_report_num(b, sizeof b, lo);
    tb_report_num(c, sizeof c, hi);
    snprintf(buf, cap, "%s%s%s [%s, %s]", a, sep, unit, b, c);
}

/* buf, the text of v, reads as 1 or on the other side of it. */
static int crosses_one(const char *buf, double v)
{
    double read = strtod(buf, NULL);
    return (v > 1 && read <= 1) || (v < 1 && read >= 1);
}

int tb_report_num_off_one(char *buf, size_t cap, double v)
{
    if (!isfinite(v) || v == 1 || !crosses_one(buf, v))
        return 0;
    int d = 1;
    for (; d < 6; d++) {
        snprintf(buf, cap, "%.*f", d, v);
        if (!crosses_one(buf, v))
            return d;
    }
    snprintf(buf, cap, "%.*f", d, v);
    return d;
}

void tb_report_speedup(char *buf, size_t cap, const tb_result_row *r)
{
    if (isnan(r->speedup)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    double lo = r->speedup_ci_low, hi = r->speedup_ci_high;
    if (isnan(lo) || isnan(hi)) {
        num_interval(buf, cap, r->speedup, lo, hi, "×", "");
        return;
    }
    char a[32], b[32], c[32];
    tb_report_num(a, sizeof a, r->speedup);
    tb_report_num(b, sizeof b, lo);
    tb_report_num(c, sizeof c, hi);
    int d = lo > 1 ? tb_report_num_off_one(b, sizeof b, lo)
            : hi < 1 ? tb_report_num_off_one(c, sizeof c, hi)
                     : 0;
    if (d > 0) { /* the other numbers as precise as the end that needed it */
        snprintf(a, sizeof a, "%.*f", d, r->speedup);
        snprintf(lo > 1 ? c : b, sizeof b, "%.*f", d, lo > 1 ? hi : lo);
    }
    snprintf(buf, cap, "%s× [%s, %s]", a, b, c);
}

void tb_report_time(char *buf, size_t cap, const tb_result_row *r)
{
    if (isnan(r->median)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    num_interval(buf, cap, r->median, r->ci_low, r->ci_high, r->unit, " ");
}

void tb_report_na(char *buf, size_t cap, const char *prefix, const char *note)
{
    /* Some binaries write their note as "n/a on the CPU backend: why"; drop
     * that leading "n/a" so the cell does not say it twice. */
    if (note && !strncmp(note, "n/a", 3)) {
        note += 3;
        while (*note == ':' || *note == ' ')
            note++;
    }
    if (!note || !note[0])
        note = "no reason recorded (a bug in the technique that wrote the row)";
    snprintf(buf, cap, "%s%sn/a: %s", prefix ? prefix : "", prefix && prefix[0] ? ": " : "", note);
}

/* The rate's interval follows from the time's: rate = work / time. */
void tb_report_rate(char *buf, size_t cap, const tb_result_row *r)
{
    if (isnan(r->rate)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    double lo = NAN, hi = NAN;
    if (!isnan(r->ci_low) && !isnan(r->ci_high) && r->ci_low > 0) {
        lo = r->rate * r->median / r->ci_high;
        hi = r->rate * r->median / r->ci_low;
    }
    num_interval(buf, cap, r->rate, lo, hi, r->rate_unit, " ");
}

void tb_report_ceiling(char *buf, size_t cap, const tb_result_row *r)
{
    if (!r->ceiling_name[0] || isnan(r->fraction_of_ceiling)) {
        snprintf(buf, cap, "%s", "");
        return;
    }
    char c[32], pct[32];
    tb_report_num(c, sizeof c, r->ceiling_rate);
    tb_report_num(pct, sizeof pct, 100.0 * r->fraction_of_ceiling);
    snprintf(buf, cap, "%s%% of %s (%s %s)", pct, r->ceiling_name, c, r->rate_unit);
}

/* "within noise" of a paired row: its verdict came from the interval
 * alone (results/README.md), so the noise floor is context, and what the
 * reader needs is how small an effect the rounds could have seen. */
static int paired_within_noise(char *buf, size_t cap, const tb_result_row *r)
{
    char mde[32], nf[32];
    if (r->rounds <= 0 || r->timing_verdict != TB_TIMING_WITHIN_NOISE || isnan(r->mde))
        return 0;
    tb_report_num(mde, sizeof mde, 100.0 * r->mde);
    tb_report_num(nf, sizeof nf, 100.0 * r->noise_floor);
    if (isnan(r->noise_floor))
        snprintf(buf, cap, "within noise (interval holds 1; smallest detectable effect ±%s%%)",
                 mde);
    else
        snprintf(buf, cap, "within noise (interval holds 1; smallest detectable effect ±%s%%, "
                 "noise floor ±%s%%)", mde, nf);
    return 1;
}

void tb_report_verdict(char *buf, size_t cap, const tb_result_row *r)
{
    char pct[32];
    tb_report_num(pct, sizeof pct, 100.0 * r->noise_floor);
    if (paired_within_noise(buf, cap, r))
        return;
    if (r->timing_verdict == TB_TIMING_WITHIN_NOISE && !isnan(r->noise_floor) &&
        r->noise_floor > 0.5)
        snprintf(buf, cap, "within noise (noise floor ±%s%%: too noisy to tell; rerun on an "
                 "idle machine)", pct);
    else if (r->timing_verdict == TB_TIMING_WITHIN_NOISE && !isnan(r->noise_floor))
        snprintf(buf, cap, "within noise (noise floor ±%s%%)", pct);
    else if (r->timing_verdict == TB_TIMING_NA)
        snprintf(buf, cap, "no verdict (no baseline, or too few repetitions for an interval)");
    else
        snprintf(buf, cap, "%s", tb_timing_verdict_name(r->timing_verdict));
}

int tb_report_note_accuracy(const tb_result_row *r, double *pct)
{
    const char *at = r ? strstr(r->note, "test accuracy ") : NULL;
    return at && sscanf(at, "test accuracy %lf%%", pct) == 1;
}

int tb_report_accuracy_pair(const tb_result_row *r, const tb_result_row *base, double *mine,
                            double *theirs)
{
    return r && r != base && r->correctness == TB_CORRECT_NA &&
           tb_report_note_accuracy(r, mine) && tb_report_note_accuracy(base, theirs);
}

/* The training samples an accuracy note says it was reached after ("test
 * accuracy X% (N images) after S [training] samples"); -1 when it says none. */
static long note_samples(const tb_result_row *r)
{
    const char *at = strstr(r->note, "test accuracy ");
    at = at ? strstr(at, ") after ") : NULL;
    long s;
    return at && sscanf(at, ") after %ld", &s) == 1 ? s : -1;
}

void tb_report_correctness_vs(char *buf, size_t cap, const tb_result_row *r,
                              const tb_result_row *base)
{
    double mine, theirs;
    tb_report_correctness(buf, cap, r);
    if (!tb_report_accuracy_pair(r, base, &mine, &theirs))
        return;
    /* a batch larger than the check's samples trains one whole step: more
     * samples than its baseline (batch 1024 against 128 in the tiny profile) */
    long sm = note_samples(r), sb = note_samples(base);
    if (sm >= 0 && sb >= 0 && sm != sb)
        snprintf(buf, cap, "not checked (another trajectory): test accuracy %.1f%% after %ld "
                 "samples vs the baseline's %.1f%% after %ld", mine, sm, theirs, sb);
    else
        snprintf(buf, cap, "not checked (another trajectory): test accuracy %.1f%% vs the "
                 "baseline's %.1f%% after as many samples", mine, theirs);
}

int tb_report_weak_check(const tb_result_row *r)
{
    return strstr(r->note, "weak loss check") != NULL;
}

void tb_report_correctness(char *buf, size_t cap, const tb_result_row *r)
{
    char e[32], t[32];
    tb_report_num(e, sizeof e, r->max_rel_err);
    tb_report_num(t, sizeof t, r->tolerance);
    const char *against = r->checked_against[0] ? r->checked_against : "baseline";
    switch (r->correctness) {
    case TB_CORRECT_EXACT: snprintf(buf, cap, "exact (bitwise, vs %s)", against); break;
    case TB_CORRECT_WITHIN_TOL:
        snprintf(buf, cap, "within tolerance (max rel err %s ≤ %s, vs %s)", e, t, against);
        break;
    case TB_CORRECT_DIFFERS:
        if (isnan(r->max_rel_err)) /* results/README.md: its loss was not finite */
            snprintf(buf, cap, "DIFFERS (loss not finite: the training diverged; tolerance %s, "
                     "vs %s)", t, against);
        else
            snprintf(buf, cap, "DIFFERS (max rel err %s > %s, vs %s)", e, t, against);
        break;
    default: snprintf(buf, cap, "not checked"); break;
    }
    size_t n = strlen(buf);
    if (tb_report_weak_check(r) && r->correctness != TB_CORRECT_NA && n + 1 < cap)
        snprintf(buf + n, cap - n, "; weak loss check (a model predicting nothing passes it "
                 "too): its note gives the first update's comparison");
}

void tb_report_point(char *buf, size_t cap, const tb_result_row *r)
{
    char v[32];
    if (!r->param_name[0] || isnan(r->param_value)) {
        snprintf(buf, cap, "(no sweep)");
        return;
    }
    if (r->param_value == floor(r->param_value) && fabs(r->param_value) < 1e15)
        snprintf(v, sizeof v, "%.0f", r->param_value);
    else
        tb_report_num(v, sizeof v, r->param_value);
    snprintf(buf, cap, "%s = %s", r->param_name, v);
}

double tb_report_half_width(const tb_result_row *r)
{
    double s = r->speedup, lo = r->speedup_ci_low, hi = r->speedup_ci_high;
    if (r->is_baseline || isnan(s) || isnan(lo) || isnan(hi) || s <= 0)
        return NAN;
    return fmax(hi / s - 1, 1 - lo / s);
}

int tb_report_row_flags(const tb_result_row *r)
{
    if (!is_timed(r))
        return 0;
    int f = 0;
    if (!strcmp(r->stopped_by, "budget"))
        f |= TB_FLAG_BUDGET;
    if (!strcmp(r->stopped_by, "cap"))
        f |= TB_FLAG_CAP;
    if (r->busy)
        f |= TB_FLAG_BUSY;
    if (r->unreliable)
        f |= TB_FLAG_UNRELIABLE;
    double hw = tb_report_half_width(r);
    int wide = (!isnan(hw) && hw > TB_REPORT_IMPRECISE) ||
               (!isnan(r->noise_floor) && r->noise_floor > TB_REPORT_IMPRECISE);
    /* The budget and a busy machine explain a wide interval; an unreliable
     * A/A says the harness is biased, which is not the same thing. */
    if (wide && !(f & (TB_FLAG_BUDGET | TB_FLAG_BUSY)))
        f |= TB_FLAG_IMPRECISE;
    return f;
}

/* Appends "; " (when buf is not empty) and then the formatted text. */
static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(buf);
    va_list ap;
    if (n + 3 >= cap)
        return;
    if (n)
        n += (size_t)snprintf(buf + n, cap - n, "; ");
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

void tb_report_flags_text(char *buf, size_t cap, const tb_result_row *r, int which)
{
    int f = tb_report_row_flags(r) & which;
    char hw[96], num[32], rounds[32], load[32], nf[32];
    double h = tb_report_half_width(r);
    int wide_nf = !isnan(r->noise_floor) && r->noise_floor > TB_REPORT_IMPRECISE;
    buf[0] = '\0';
    tb_report_num(nf, sizeof nf, 100.0 * r->noise_floor);
    /* A baseline row has no speedup interval of its own: the width its
     * rounds reached is its A/A pair's, the noise floor. A noise floor past
     * TB_REPORT_IMPRECISE is said beside a narrower interval too: the budget
     * or a busy machine explains it, but a reader of "faster 1.08x [1.03,
     * 1.13]" must still see that an A/A pair moved by ±21% (ddp, run 52). */
    tb_report_num(num, sizeof num, 100.0 * (isnan(h) ? r->noise_floor : h));
    if (!isnan(h) && wide_nf)
        snprintf(hw, sizeof hw, "interval ±%s%%, noise floor ±%s%%", num, nf);
    else if (!isnan(h))
        snprintf(hw, sizeof hw, "interval ±%s%%", num);
    else if (!isnan(r->noise_floor))
        snprintf(hw, sizeof hw, "noise floor ±%s%%", num);
    else
        snprintf(hw, sizeof hw, "no interval");
    snprintf(rounds, sizeof rounds, "%d", r->rounds);
    tb_report_num(load, sizeof load, r->load_avg);
    if (f & TB_FLAG_BUDGET)
        append(buf, cap, "stopped by budget after %s rounds (%s)", rounds, hw);
    if (f & TB_FLAG_CAP)
        append(buf, cap, "stopped at the round cap after %s rounds (%s)", rounds, hw);
    if ((f & TB_FLAG_BUSY) && wide_nf && !(f & (TB_FLAG_BUDGET | TB_FLAG_CAP)))
        append(buf, cap, "busy machine (load %s; noise floor ±%s%%)", load, nf);
    else if (f & TB_FLAG_BUSY)
        append(buf, cap, "busy machine (load %s)", load);
    if (f & TB_FLAG_UNRELIABLE)
        append(buf, cap, "unreliable: A/A interval excludes 1");
    if (f & TB_FLAG_IMPRECISE) {
        int wide_ci = !isnan(h) && h > TB_REPORT_IMPRECISE;
        if (wide_ci)
            append(buf, cap, "imprecise: %s", hw);
        else
            append(buf, cap, "imprecise: noise floor ±%s%%", nf);
    }
}
