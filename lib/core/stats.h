/*
 * stats.h - the statistics behind every tunebench verdict.
 *
 * Timing: summaries of repetition times (median, quantiles, min/max, mean,
 * stddev), a bootstrap 95% interval of a speedup (ratio of medians), and the
 * faster / slower / within-noise verdict. Google Benchmark gives the
 * repetitions; it has no intervals, so tunebench computes them here.
 * Correctness: max abs/rel error and the exact / within tolerance / DIFFERS
 * verdict for arrays or single values (a loss after N steps).
 *
 * The bootstrap is deterministic: it draws from a seeded splitmix64 stream,
 * so the same samples and seed give the same interval on every run and
 * machine (golden tests rely on it).
 *
 * Tests: lib/core/stats_test.c (bazel test //lib/core:stats_test).
 */
#ifndef TB_STATS_H
#define TB_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- summaries ---- */

typedef struct tb_summary {
    size_t n;
    double min, max, mean, median;
    double stddev; /* sample standard deviation (n - 1); 0 when n == 1 */
    double q25, q75;
} tb_summary;

/* REQUIRES: n > 0 (TB_ERR_INVALID otherwise). x is not modified. */
int tb_stats_summary(const double *x, size_t n, tb_summary *out);
int tb_stats_median(const double *x, size_t n, double *out);

/* Quantile q in [0, 1] with linear interpolation between order statistics
 * (Hyndman & Fan type 7, the default of R and NumPy): h = (n - 1) q,
 * result = x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]). */
int tb_stats_quantile(const double *x, size_t n, double q, double *out);
/* Same on data already sorted ascending; no allocation. REQUIRES: n > 0. */
double tb_stats_quantile_sorted(const double *sorted, size_t n, double q);

double tb_stats_mean(const double *x, size_t n);   /* REQUIRES: n > 0 */
double tb_stats_stddev(const double *x, size_t n); /* sample (n - 1); 0 when n < 2 */

/* ---- speedup interval ---- */

typedef struct tb_interval {
    double point; /* median(baseline) / median(variant) */
    double lo, hi;
    double level; /* 0.95 */
} tb_interval;

typedef struct tb_bootstrap_opts {
    int resamples; /* B; 0 means 2000 */
    double level;  /* 0 means 0.95 */
    uint64_t seed; /* 0 means TB_STATS_DEFAULT_SEED */
} tb_bootstrap_opts;

#define TB_STATS_DEFAULT_RESAMPLES 2000
#define TB_STATS_DEFAULT_SEED 0x74756e6562656e63ull /* "tunebenc" */

/* Speedup of variant over baseline with a percentile bootstrap interval:
 * point = median(base) / median(var) (> 1: the variant is faster).
 * Each of B resamples draws nb times with replacement from base and nv
 * times from var and takes the ratio of the medians; lo and hi are the
 * (1-level)/2 and (1+level)/2 quantiles (type 7) of the B ratios.
 * REQUIRES: nb, nv > 0; all times > 0 (TB_ERR_INVALID otherwise).
 * opts may be NULL for the defaults. */
int tb_stats_speedup_ci(const double *base, size_t nb, const double *var, size_t nv,
                        const tb_bootstrap_opts *opts, tb_interval *out);

/* ---- timing verdict ---- */

typedef enum tb_speed_verdict {
    TB_SPEED_WITHIN_NOISE = 0,
    TB_SPEED_FASTER = 1,
    TB_SPEED_SLOWER = 2,
} tb_speed_verdict;

/* The noise floor from an A/A interval, i.e. tb_stats_speedup_ci of the
 * baseline against a second timing of the baseline in the same run:
 *   noise = max(0, aa.hi - 1, 1 - aa.lo),
 * the farthest the A/A interval strays from 1. */
double tb_stats_noise_floor(const tb_interval *aa);

/* The rule, exactly:
 *   "faster"        if speedup.lo > 1 + noise,
 *   "slower"        if speedup.hi < 1 - noise,
 *   "within noise"  otherwise (the interval reaches into [1 - noise, 1 + noise]).
 * noise is tb_stats_noise_floor of the A/A interval (0 when there is none:
 * then the plain test "interval excludes 1" remains). */
tb_speed_verdict tb_stats_timing_verdict(const tb_interval *speedup, double noise);
const char *tb_speed_verdict_name(tb_speed_verdict v); /* "faster", "slower", "within noise" */

/* ---- paired comparisons (rounds) ----
 * Interleaved measurements come in rounds: round r times the baseline and
 * the variant once each (bench/harness/rounds.h), so each round gives one
 * ratio base[r] / var[r] (> 1: the variant is faster) and drift over the
 * run cancels within the pair. The speedup and its 95% interval come from
 * those per-round ratios (implementation: lib/core/stats.c states the
 * estimator, its interval and why). */
typedef struct tb_paired {
    size_t rounds;        /* pairs used */
    double speedup;       /* point estimate of base / var */
    double lo, hi;        /* 95% interval of the speedup */
    double half_width;    /* relative: max(hi / speedup - 1, 1 - lo / speedup) */
    double mde;           /* minimum detectable effect, relative (e.g. 0.021 = 2.1%):
                             the smallest true speedup this many rounds would call
                             faster or slower with 80% power at the 5% level */
    size_t builds;        /* tb_stats_paired_builds: the builds the rounds spanned
                             (0: not grouped, tb_stats_paired) */
    double between;       /* tb_stats_paired_builds: the between-build standard
                             deviation of the log ratio (0 when none is seen) */
    double between_df;    /* the degrees of freedom of its estimate: builds - 1 for
                             the arm's own, more when pooled over an experiment's
                             arms (0: none estimated) */
} tb_paired;

/* The speedup of var over base from the per-round ratios base[r] / var[r]:
 * the Hodges-Lehmann estimate with the exact Wilcoxon signed-rank interval
 * of the log ratios from 6 rounds on, the mean with a Student-t interval
 * below (stats.c says why, and gives the mde formula).
 * REQUIRES: n >= 2, every time > 0 and finite (TB_ERR_INVALID otherwise).
 * seed: for any resampling, so the same input gives the same output (the
 * present estimator does not resample: the output depends on the input
 * alone). */
int tb_stats_paired(const double *base, const double *var, size_t n, uint64_t seed,
                    tb_paired *out);

/* tb_stats_paired for rounds grouped into builds: round r ran on build[r]
 * (non-decreasing; a build is a fresh copy of both arms' state: a new
 * trainer from the same seed, new buffers, a new autotuner choice). What
 * differs between builds (an algorithm the autotuner picked, where the
 * allocator put the tensors) is the same for every round of a build, so the
 * per-round ratios alone underrate the uncertainty of a result that another
 * run, with its own builds, would reproduce. The estimate is
 * tb_stats_paired's; the interval is widened, on the log scale, by the
 * between-build component (stats.c: one-way random-effects ANOVA, a
 * Student-t quantile with builds - 1 degrees of freedom), which is 0 when
 * the builds agree beyond what the round-to-round noise explains. One
 * build, or one round a build: tb_stats_paired's result (the per-round
 * ratios then already carry any build-to-build spread), with builds set.
 * REQUIRES: as tb_stats_paired; build non-NULL and non-decreasing. */
int tb_stats_paired_builds(const double *base, const double *var, const int *build, size_t n,
                           uint64_t seed, tb_paired *out);

/* The one-way ANOVA, by build, of one arm's per-round log ratios
 * log(base[r] / var[r]) (what tb_stats_paired_builds widens its interval
 * with), kept so that the arms of one experiment can pool it. */
typedef struct tb_build_anova {
    size_t rounds, builds;
    double ssb, ssw;      /* between- and within-build sums of squares (0 unless
                             2 <= builds < rounds) */
    double sum_n2;        /* sum over builds of their rounds squared */
} tb_build_anova;

/* The between-build spread pooled over the arms of one experiment (one
 * machine, one workload, one way of building): every arm's builds are taken
 * to differ by the same sb, estimated from all of them, with df = sum of
 * (builds - 1) over the arms with 2 <= builds < rounds (0: none). An arm
 * kept alive for several rounds a build sees 2-3 builds in a short run,
 * whose own estimate has 1-2 degrees of freedom: t's tail (12.7 at 1)
 * then turned a 1% spread into a 10% widening. */
typedef struct tb_build_pool {
    double between;       /* sb, on the log scale (0: none seen) */
    double df;            /* its degrees of freedom */
    double within;        /* the pooled within-build variance of the log ratios */
    double df_within;
} tb_build_pool;

/* Fills *out from one arm's rounds. REQUIRES: as tb_stats_paired_builds. */
int tb_stats_build_anova(const double *base, const double *var, const int *build, size_t n,
                         tb_build_anova *out);

/* The pool over k arms' ANOVAs (stats.c gives the estimator). */
tb_build_pool tb_stats_build_pool(const tb_build_anova *arms, size_t k);

/* tb_stats_paired_builds with the pool's between-build spread and degrees
 * of freedom in place of the arm's own, unless the arm's own builds differ
 * beyond the 99th percentile of what the pool predicts (then its own, as
 * tb_stats_paired_builds). An arm whose rounds all ran on one build gets
 * the pool's spread in full (its rounds cannot show it; without a pool its
 * interval is the per-round one). pool NULL, or with df 0: the arm's own.
 * out->between is the spread used, out->between_df its degrees of freedom
 * (set when estimated, even at 0). */
int tb_stats_paired_builds_pooled(const double *base, const double *var, const int *build,
                                  size_t n, uint64_t seed, const tb_build_pool *pool,
                                  tb_paired *out);

/* Moves a paired comparison's estimate, and its interval with it, to
 * where the single-sided ratios put it: base[r] of the comparison was the
 * mean of before[r] and after[r], the baseline's repetitions on each side
 * of var[r]'s, and a mean of two against one leans toward "faster" under
 * skewed times (stats.c says how much and why). The interval's width, its
 * mde and its build terms are unchanged.
 * REQUIRES: cmp from tb_stats_paired* over the same n rounds of var; every
 * time > 0 and finite (TB_ERR_INVALID otherwise). */
int tb_stats_paired_recenter(const double *before, const double *after, const double *var,
                             size_t n, tb_paired *cmp);

/* The verdict of a paired comparison, the noise counted once: "faster" when
 * the interval's lower end is above 1, "slower" when its upper end is
 * below 1, "within noise" otherwise. aa (may be NULL) is the A/A pair of
 * the same baseline interleaved the same way; *unreliable is set when its
 * interval excludes 1 (the harness is biased: the row is flagged, its
 * verdict kept). */
tb_speed_verdict tb_stats_paired_verdict(const tb_paired *cmp, const tb_paired *aa,
                                         int *unreliable);
/* *unreliable (may be NULL) is always written: 1 when aa is given, has
 * rounds and its interval excludes 1, else 0. */

/* The noise floor of a paired A/A comparison, as tb_stats_noise_floor:
 * max(0, aa.hi - 1, 1 - aa.lo), the farthest its interval strays from 1
 * (the CSV's noise_floor column). Informative only: the paired verdict does
 * not add it to the interval (the noise is counted once, in the interval). */
double tb_stats_paired_noise_floor(const tb_paired *aa);

/* ---- correctness verdict ---- */

typedef enum tb_match {
    TB_MATCH_EXACT = 0,      /* bitwise equal */
    TB_MATCH_WITHIN_TOL = 1, /* max relative error <= tol */
    TB_MATCH_DIFFERS = 2,
} tb_match;

/* Default tolerances by storage type, for callers that compare against an
 * fp32 reference: about 100 ulp of fp32, and a few ulp of bf16 / fp16. */
#define TB_TOL_F32 1e-5
#define TB_TOL_BF16 2e-2
#define TB_TOL_F16 2e-3

typedef struct tb_compare {
    tb_match verdict;
    double max_abs;     /* max_i |got_i - ref_i|; INFINITY on a NaN/Inf mismatch */
    double max_rel;     /* tb_max_rel_err */
    double tol;         /* the tolerance the verdict used */
    size_t worst;       /* index with the largest |got - ref| */
    size_t n;
} tb_compare;

/* max_i |got_i - ref_i|. A position where exactly one side is NaN, or where
 * infinities differ, counts as INFINITY. NaN at the same position in both
 * counts as 0. REQUIRES: n > 0. */
double tb_max_abs_err(const float *ref, const float *got, size_t n);

/* Relative error against the scale of the reference:
 *   max_i |got_i - ref_i| / max_i |ref_i|
 * (the infinity-norm relative error), so elements near zero do not turn
 * rounding noise into huge ratios. For one value this is |got - ref| / |ref|.
 * When every ref_i is 0: 0 if the error is 0, else INFINITY. */
double tb_max_rel_err(const float *ref, const float *got, size_t n);

/* Verdict: EXACT if the n floats are bitwise equal (memcmp; -0 and +0
 * differ, equal NaN bit patterns match), WITHIN_TOL if tb_max_rel_err <= tol,
 * else DIFFERS. REQUIRES: n > 0, tol >= 0. */
int tb_compare_floats(const float *ref, const float *got, size_t n, double tol, tb_compare *out);

/* Same for two loss values (doubles): EXACT if bitwise equal,
 * WITHIN_TOL if |got - ref| / |ref| <= tol (ref == 0: |got| <= tol), else DIFFERS. */
int tb_compare_values(double ref, double got, double tol, tb_compare *out);

const char *tb_match_name(tb_match m); /* "exact", "within tolerance", "DIFFERS" */

/* One line for tables, stating the tolerance: "exact",
 * "within tolerance (max rel err 3.1e-07 <= tol 1e-05)",
 * "DIFFERS (max rel err 0.02 > tol 1e-05, at index 17)".
 * snprintf-style return. */
int tb_compare_format(const tb_compare *c, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
