/*
 * stats.c - summaries, bootstrap speedup intervals, paired (per-round)
 * speedup intervals with their minimum detectable effect, and verdicts; see
 * stats.h.
 * Tests: bazel test //lib/core:stats_test
 */
#include "lib/core/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/rng.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorted malloc'd copy of x, for the functions that must not reorder input. */
static int sorted_copy(const double *x, size_t n, double **out)
{
    if (n == 0)
        return TB_FAIL(TB_ERR_INVALID, "statistics of an empty sample");
    double *s = malloc(n * sizeof *s);
    if (!s)
        return TB_FAIL(TB_ERR_NOMEM, "copy of %zu samples", n);
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    *out = s;
    return TB_OK;
}

double tb_stats_quantile_sorted(const double *sorted, size_t n, double q)
{
    if (q <= 0)
        return sorted[0];
    if (q >= 1)
        return sorted[n - 1];
    double h = (double)(n - 1) * q;
    size_t i = (size_t)h;
    if (i + 1 >= n)
        return sorted[n - 1];
    return sorted[i] + (h - (double)i) * (sorted[i + 1] - sorted[i]);
}

double tb_stats_mean(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s / (double)n;
}

double tb_stats_stddev(const double *x, size_t n)
{
    if (n < 2)
        return 0;
    double m = tb_stats_mean(x, n), ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (double)(n - 1));
}

int tb_stats_quantile(const double *x, size_t n, double q, double *out)
{
    if (!(q >= 0 && q <= 1))
        return TB_FAIL(TB_ERR_INVALID, "quantile %g outside [0, 1]", q);
    double *s;
    TB_TRY(sorted_copy(x, n, &s));
    *out = tb_stats_quantile_sorted(s, n, q);
    free(s);
    return TB_OK;
}

int tb_stats_median(const double *x, size_t n, double *out)
{
    return tb_stats_quantile(x, n, 0.5, out);
}

int tb_stats_summary(const double *x, size_t n, tb_summary *out)
{
    double *s;
    TB_TRY(sorted_copy(x, n, &s));
    out->n = n;
    out->min = s[0];
    out->max = s[n - 1];
    out->median = tb_stats_quantile_sorted(s, n, 0.5);
    out->q25 = tb_stats_quantile_sorted(s, n, 0.25);
    out->q75 = tb_stats_quantile_sorted(s, n, 0.75);
    out->mean = tb_stats_mean(x, n);
    out->stddev = tb_stats_stddev(x, n);
    free(s);
    return TB_OK;
}

/* ---- bootstrap ---- */

/* Median of n draws with replacement from x; scratch holds n doubles. */
static double resample_median(const double *x, size_t n, double *scratch, tb_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = x[tb_rng_index(rng, n)];
    qsort(scratch, n, sizeof *scratch, cmp_double);
    return tb_stats_quantile_sorted(scratch, n, 0.5);
}

static int check_times(const double *x, size_t n, const char *what)
{
    if (n == 0)
        return TB_FAIL(TB_ERR_INVALID, "%s: no repetitions", what);
    for (size_t i = 0; i < n; i++)
        if (!(x[i] > 0) || !isfinite(x[i]))
            return TB_FAIL(TB_ERR_INVALID, "%s: repetition %zu has time %g (must be > 0)", what, i, x[i]);
    return TB_OK;
}

int tb_stats_speedup_ci(const double *base, size_t nb, const double *var, size_t nv,
                        const tb_bootstrap_opts *opts, tb_interval *out)
{
    TB_TRY(check_times(base, nb, "baseline"));
    TB_TRY(check_times(var, nv, "variant"));
    int B = opts && opts->resamples > 0 ? opts->resamples : TB_STATS_DEFAULT_RESAMPLES;
    double level = opts && opts->level > 0 ? opts->level : 0.95;
    /* splitmix64 (lib/core/rng.h), identical everywhere, which is what a
     * reproducible interval needs (rand() differs between libcs) */
    tb_rng rng = tb_rng_seeded(opts && opts->seed ? opts->seed : TB_STATS_DEFAULT_SEED);
    if (level >= 1)
        return TB_FAIL(TB_ERR_INVALID, "interval level %g must be below 1", level);

    double mb, mv;
    TB_TRY(tb_stats_median(base, nb, &mb));
    TB_TRY(tb_stats_median(var, nv, &mv));

    int rc = TB_OK;
    double *ratios = malloc((size_t)B * sizeof *ratios);
    double *scratch = malloc((nb > nv ? nb : nv) * sizeof *scratch);
    if (!ratios || !scratch) {
        rc = TB_FAIL(TB_ERR_NOMEM, "bootstrap of %d resamples", B);
        goto out_free_buffers;
    }
    /* Draw the baseline first, then the variant, in every resample: the
     * stream order is part of what makes reruns identical. */
    for (int b = 0; b < B; b++) {
        double rb = resample_median(base, nb, scratch, &rng);
        double rv = resample_median(var, nv, scratch, &rng);
        ratios[b] = rb / rv;
    }
    qsort(ratios, (size_t)B, sizeof *ratios, cmp_double);
    out->point = mb / mv;
    out->lo = tb_stats_quantile_sorted(ratios, (size_t)B, (1 - level) / 2);
    out->hi = tb_stats_quantile_sorted(ratios, (size_t)B, (1 + level) / 2);
    out->level = level;

out_free_buffers:
    free(scratch);
    free(ratios);
    return rc;
}

double tb_stats_noise_floor(const tb_interval *aa)
{
    double noise = 0;
    if (aa->hi - 1 > noise)
        noise = aa->hi - 1;
    if (1 - aa->lo > noise)
        noise = 1 - aa->lo;
    return noise;
}

tb_speed_verdict tb_stats_timing_verdict(const tb_interval *speedup, double noise)
{
    if (speedup->lo > 1 + noise)
        return TB_SPEED_FASTER;
    if (speedup->hi < 1 - noise)
        return TB_SPEED_SLOWER;
    return TB_SPEED_WITHIN_NOISE;
}

const char *tb_speed_verdict_name(tb_speed_verdict v)
{
    switch (v) {
    case TB_SPEED_FASTER: return "faster";
    case TB_SPEED_SLOWER: return "slower";
    default: return "within noise";
    }
}

/* ---- paired comparisons (rounds) ----
 *
 * Input: per-round log ratios d[r] = log(base[r] / var[r]); d > 0: the
 * variant was faster in that round.
 *
 * Estimator and interval, n >= 6 rounds: the Hodges-Lehmann estimate (the
 * median of the n (n + 1) / 2 Walsh averages (d[i] + d[j]) / 2, i <= j)
 * with the exact Wilcoxon signed-rank interval [A(c), A(M + 1 - c)] on the
 * sorted Walsh averages A(1..M), where c - 1 is the largest w with
 * P(W+ <= w) <= 2.5% under the signed-rank null (computed exactly up to
 * 200 rounds, normal approximation beyond). Why:
 *   - it is honest at any n: its coverage is at least 95% (exactly the
 *     level the discrete distribution allows: 96.9% at 6 rounds, 95.1% at
 *     10, 95.2% at 20) whatever the noise's shape, provided the log ratios
 *     are symmetric about the true value. Interleaving gives that: when
 *     the two arms' noise has the same distribution (true of an A/A pair,
 *     and of a variant that scales the baseline's time), base and var are
 *     exchangeable around the effect and their log difference is symmetric;
 *   - it is robust: one round hit by a scheduler hiccup moves the estimate
 *     by about one rank step instead of 1/n of the hiccup (the mean's
 *     fate), and the interval by one order statistic instead of inflating a
 *     standard deviation (stats_test shows a hiccup that flips a t interval
 *     but not this one);
 *   - under Gaussian noise it loses little: the signed-rank interval's
 *     asymptotic efficiency relative to the t interval is 3 / pi = 95.5%;
 *   - it needs no resampling, so it is deterministic (seed unused).
 * With n < 6 no signed-rank interval reaches 95% (the widest, the range of
 * the ratios, covers 1 - 2^(1-n) <= 93.75%), so 2..5 rounds use the mean of
 * the log ratios with a Student-t interval (exact for lognormal noise).
 *
 * Minimum detectable effect: with h the interval's half-width in log space
 * ((log hi - log lo) / 2), se = h / q the estimator's standard error
 * (q: the interval's critical value: t(0.975, n-1), or the normal quantile
 * of the signed-rank interval's achieved level), the smallest true log
 * speedup whose interval clears 0 with 80% probability is
 *   log(1 + mde) = h + q80 se = h (1 + q80 / q),
 * q80 = t(0.80, n-1) or z(0.80) = 0.8416. At fixed spread, h ~ 1/sqrt(n),
 * and so is the mde. A slowdown of the same size in log space, a speedup
 * of 1 / (1 + mde), is detected with the same power.
 *
 * Adaptive rounds: stopping when this interval is narrow enough selects
 * rounds whose spread came out low, which costs some coverage (stats_test,
 * 2.5% noise, +-2% target, 5..60 rounds: 92.2% when the engine stops the
 * first time the target is met, 94.1% when it is met on two rounds in a
 * row).
 */

/* Student-t quantiles for 1..4 degrees of freedom (the n < 6 fallback). */
static const double T975[5] = {0, 12.7062, 4.30265, 3.18245, 2.77645};
static const double T80[5] = {0, 1.37638, 1.06066, 0.978472, 0.940965};
#define Z80 0.8416212335729143
#define Z975 1.959963984540054
#define WILCOXON_EXACT_MAX 200

/* Standard normal quantile by bisection on erfc: enough for a critical value. */
static double normal_quantile(double p)
{
    double lo = -10, hi = 10;
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2;
        if (0.5 * erfc(-mid / sqrt(2.0)) < p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

/* The signed-rank interval's rank c (1-based, on the M sorted Walsh
 * averages) and its achieved two-sided level 1 - 2 P(W+ <= c - 1).
 * REQUIRES: n >= 6. */
static int signed_rank_c(size_t n, size_t *c, double *level)
{
    size_t m = n * (n + 1) / 2;
    if (n > WILCOXON_EXACT_MAX) {
        double mu = (double)m / 2, sd = sqrt((double)n * (n + 1) * (2 * n + 1) / 24.0);
        /* P(W+ <= w) ~ Phi((w + 0.5 - mu) / sd) */
        double w = floor(mu - Z975 * sd - 0.5);
        *c = (size_t)w + 1;
        *level = 1 - 2 * 0.5 * erfc(-((w + 0.5 - mu) / sd) / sqrt(2.0));
        return TB_OK;
    }
    /* p[w] = P(W+ = w): each rank k joins W+ with probability 1/2. */
    double *p = calloc(m + 1, sizeof *p);
    if (!p)
        return TB_FAIL(TB_ERR_NOMEM, "signed-rank distribution of %zu rounds", n);
    p[0] = 1;
    size_t top = 0;
    for (size_t k = 1; k <= n; k++) {
        top += k;
        for (size_t w = top; w >= k; w--)
            p[w] = 0.5 * (p[w] + p[w - k]);
        for (size_t w = 0; w < k; w++)
            p[w] *= 0.5;
    }
    double cum = 0;
    size_t w = 0;
    while (cum + p[w] <= 0.025) /* n >= 6: p[0] = 2^-n < 0.025 */
        cum += p[w++];
    free(p);
    *c = w; /* P(W+ <= c - 1) = cum <= 0.025 < P(W+ <= c) */
    *level = 1 - 2 * cum;
    return TB_OK;
}

/* The n (n + 1) / 2 Walsh averages of d, sorted, into a new *out. */
static int walsh_sorted(const double *d, size_t n, double **out)
{
    size_t m = n * (n + 1) / 2, k = 0;
    double *a = malloc(m * sizeof *a);
    if (!a)
        return TB_FAIL(TB_ERR_NOMEM, "%zu Walsh averages", m);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++)
            a[k++] = (d[i] + d[j]) / 2;
    qsort(a, m, sizeof *a, cmp_double);
    *out = a;
    return TB_OK;
}

/* Hodges-Lehmann estimate and signed-rank interval of d (log scale):
 * *est, *lo, *hi and the interval's critical value *q. */
static int hodges_lehmann(const double *d, size_t n, double *est, double *lo, double *hi,
                          double *q)
{
    size_t m = n * (n + 1) / 2, c = 1;
    double level = 0.95, *a;
    TB_TRY(signed_rank_c(n, &c, &level));
    TB_TRY(walsh_sorted(d, n, &a));
    *est = tb_stats_quantile_sorted(a, m, 0.5);
    *lo = a[c - 1];
    *hi = a[m - c];
    *q = normal_quantile((1 + level) / 2);
    free(a);
    return TB_OK;
}

static int check_paired(const double *base, const double *var, size_t n)
{
    if (n < 2)
        return TB_FAIL(TB_ERR_INVALID, "paired comparison of %zu rounds (needs at least 2)", n);
    TB_TRY(check_times(base, n, "paired baseline"));
    TB_TRY(check_times(var, n, "paired variant"));
    return TB_OK;
}

/* Round r's log ratio log(base[r] / var[r]): > 0 when the variant is faster. */
static double log_ratio(const double *base, const double *var, size_t r)
{
    return log(base[r]) - log(var[r]);
}

int tb_stats_paired(const double *base, const double *var, size_t n, uint64_t seed,
                    tb_paired *out)
{
    (void)seed; /* no resampling: the result is a function of the input alone */
    if (!base || !var || !out)
        return TB_FAIL(TB_ERR_INVALID, "paired comparison: NULL argument");
    TB_TRY(check_paired(base, var, n));
    double *d = malloc(n * sizeof *d);
    if (!d)
        return TB_FAIL(TB_ERR_NOMEM, "%zu log ratios", n);
    for (size_t r = 0; r < n; r++)
        d[r] = log_ratio(base, var, r);

    double est = 0, lo = 0, hi = 0, q = 0, q80 = 0;
    int rc = TB_OK;
    if (n >= 6) {
        rc = hodges_lehmann(d, n, &est, &lo, &hi, &q);
        q80 = Z80;
    } else {
        double se = tb_stats_stddev(d, n) / sqrt((double)n);
        est = tb_stats_mean(d, n);
        q = T975[n - 1];
        q80 = T80[n - 1];
        lo = est - q * se;
        hi = est + q * se;
    }
    free(d);
    if (rc != TB_OK)
        return rc;

    double h = (hi - lo) / 2;
    out->rounds = n;
    out->builds = 0;
    out->between = out->between_df = 0;
    out->speedup = exp(est);
    out->lo = exp(lo);
    out->hi = exp(hi);
    out->half_width = fmax(out->hi / out->speedup - 1, 1 - out->lo / out->speedup);
    out->mde = q > 0 ? expm1(h * (1 + q80 / q)) : 0;
    return TB_OK;
}

/* ---- paired comparisons over builds ----
 *
 * Model, on the log scale: the ratio of round r in build b is
 *   d = mu + u_b + e_r,  u_b ~ (0, sb^2) per build, e_r ~ (0, se^2) per round,
 * and what a rerun would reproduce is mu, not mu + the mean of this run's
 * u_b. With N rounds in B builds of n_b rounds, the mean of all rounds has
 *   Var = se^2 / N + sb^2 * sum(n_b^2) / N^2.
 * The first term is what tb_stats_paired's interval holds already (its
 * half-width h on each side); the second is added to it in quadrature:
 *   lo' = est - sqrt((est - lo)^2 + (t * sb * sqrt(sum n_b^2) / N)^2)
 * and the same for hi, t = t(0.975, B - 1): sb is estimated from B builds
 * only. sb^2 by the ANOVA (method of moments) estimator, floored at 0:
 *   MSB = sum n_b (mean_b - mean)^2 / (B - 1),
 *   MSW = sum (d - mean_b)^2 / (N - B),
 *   n0  = (N - sum n_b^2 / N) / (B - 1),
 *   sb^2 = max(0, (MSB - MSW) / n0).
 * When the builds agree (sb^2 = 0, about half the time without a real
 * build effect) the interval is tb_stats_paired's; a real build effect
 * widens it, and a run with few builds pays for that with t's tail.
 * stats_test checks coverage on simulated builds with and without an
 * effect.
 *
 * Pooled over the arms of one experiment (tb_stats_build_pool): with
 * E[SSB_i] = (B_i - 1) (se^2 + n0_i sb^2) for each arm i,
 *   se^2 = sum SSW_i / sum (N_i - B_i),
 *   sb^2 = max(0, (sum SSB_i - se^2 sum (B_i - 1)) / sum n0_i (B_i - 1)),
 * with t(0.975, sum (B_i - 1)). An arm whose MSB_i exceeds the 99th
 * percentile of its expected value under the pool, se^2 + n0_i sb^2 times
 * chi^2(B_i - 1) / (B_i - 1), keeps its own estimate and its own t: its
 * builds differ more than the others' (an autotuner picking differently),
 * and the pool would hide that. */
static const double T975_DF[31] = {
    0,       12.7062, 4.30265, 3.18245, 2.77645, 2.57058, 2.44691, 2.36462, 2.30600,
    2.26216, 2.22814, 2.20099, 2.17881, 2.16037, 2.14479, 2.13145, 2.11991, 2.10982,
    2.10092, 2.09302, 2.08596, 2.07961, 2.07387, 2.06866, 2.06390, 2.05954, 2.05553,
    2.05183, 2.04841, 2.04523, 2.04227};

/* t(0.975, df): the table to 30, a Cornish-Fisher expansion beyond (error
 * under 1e-4 there). REQUIRES: df >= 1. */
static double t975(size_t df)
{
    if (df <= 30)
        return T975_DF[df];
    double z = Z975, v = (double)df, z3 = z * z * z, z5 = z3 * z * z;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

/* Validates build[] (non-decreasing) and fills a with the one-way ANOVA of
 * the log ratios by build (the groups are runs of equal build[]). */
static int build_anova(const double *base, const double *var, const int *build, size_t n,
                       tb_build_anova *a)
{
    if (!build)
        return TB_FAIL(TB_ERR_INVALID, "paired comparison over builds: NULL builds");
    for (size_t r = 1; r < n; r++)
        if (build[r] < build[r - 1])
            return TB_FAIL(TB_ERR_INVALID, "paired comparison over builds: build of round %zu "
                           "(%d) before round %zu's (%d)", r, build[r], r - 1, build[r - 1]);
    memset(a, 0, sizeof *a);
    a->rounds = n;
    a->builds = n > 0;
    for (size_t r = 1; r < n; r++)
        a->builds += build[r] != build[r - 1];
    if (a->builds < 2 || a->builds >= n)
        return TB_OK;
    double grand = 0;
    for (size_t r = 0; r < n; r++)
        grand += log_ratio(base, var, r);
    grand /= (double)n;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double m = 0;
        for (; j < n && build[j] == build[i]; j++)
            m += log_ratio(base, var, j);
        double nb = (double)(j - i);
        m /= nb;
        for (size_t r = i; r < j; r++) {
            double d = log_ratio(base, var, r) - m;
            a->ssw += d * d;
        }
        a->ssb += nb * (m - grand) * (m - grand);
        a->sum_n2 += nb * nb;
        i = j;
    }
    return TB_OK;
}

int tb_stats_build_anova(const double *base, const double *var, const int *build, size_t n,
                         tb_build_anova *out)
{
    if (!out)
        return TB_FAIL(TB_ERR_INVALID, "build ANOVA: NULL output");
    return build_anova(base, var, build, n, out);
}

/* An arm whose builds tell something: 2 <= builds < rounds. */
static int anova_counts(const tb_build_anova *a)
{
    return a->builds >= 2 && a->builds < a->rounds;
}

/* n0 (the ANOVA's effective build size) times builds - 1. */
static double n0_df(const tb_build_anova *a)
{
    double N = (double)a->rounds;
    return N - a->sum_n2 / N;
}

tb_build_pool tb_stats_build_pool(const tb_build_anova *arms, size_t k)
{
    tb_build_pool p = {0, 0, 0, 0};
    double ssb = 0, ssw = 0, n0df = 0;
    for (size_t i = 0; i < k; i++) {
        if (!anova_counts(&arms[i]))
            continue;
        ssb += arms[i].ssb;
        ssw += arms[i].ssw;
        p.df += (double)(arms[i].builds - 1);
        p.df_within += (double)(arms[i].rounds - arms[i].builds);
        n0df += n0_df(&arms[i]);
    }
    if (!(p.df > 0) || !(p.df_within > 0))
        return p;
    p.within = ssw / p.df_within;
    double sb2 = n0df > 0 ? (ssb - p.within * p.df) / n0df : 0;
    p.between = sb2 > 0 ? sqrt(sb2) : 0;
    return p;
}

/* chi-square's 99th percentile over k degrees of freedom, divided by k
 * (Wilson-Hilferty: 6.58 for k = 1 against the exact 6.63, closer beyond). */
static double chi2_99_over_k(double k)
{
    double c = 2 / (9 * k), x = 1 - c + 2.326347874 * sqrt(c);
    return x * x * x;
}

int tb_stats_paired_builds_pooled(const double *base, const double *var, const int *build,
                                  size_t n, uint64_t seed, const tb_build_pool *pool,
                                  tb_paired *out)
{
    tb_build_anova a;
    TB_TRY(build_anova(base, var, build, n, &a));
    TB_TRY(tb_stats_paired(base, var, n, seed, out));
    out->builds = a.builds;
    out->between = out->between_df = 0;
    int pooled = pool && pool->df > 0;
    /* a build a round: the ratios carry the spread; one build: only a pool
     * can say what another build would give */
    if (a.builds >= a.rounds || (a.builds < 2 && !pooled))
        return TB_OK;
    if (a.builds < 2)
        a.sum_n2 = (double)n * (double)n;

    /* the pool's component, unless this arm's builds differ more than the
     * pool explains (its between-build mean square above the 99th
     * percentile of what the pool predicts): then its own, from its own
     * builds, as over one arm */
    tb_build_pool own = tb_stats_build_pool(&a, 1), use = own;
    if (pooled && a.builds < 2) {
        use = *pool;
    } else if (pooled) {
        double df = (double)(a.builds - 1), n0 = n0_df(&a) / df;
        double expect = pool->within + n0 * pool->between * pool->between;
        use = a.ssb / df > chi2_99_over_k(df) * expect ? own : *pool;
    }
    out->between_df = use.df;
    if (!(use.between > 0) || !(use.df >= 1))
        return TB_OK;
    out->between = use.between;

    double N = (double)n, est = log(out->speedup), lo = log(out->lo), hi = log(out->hi);
    double extra = t975((size_t)use.df) * use.between * sqrt(a.sum_n2) / N;
    double h_old = (hi - lo) / 2;
    lo = est - hypot(est - lo, extra);
    hi = est + hypot(hi - est, extra);
    out->lo = exp(lo);
    out->hi = exp(hi);
    out->half_width = fmax(out->hi / out->speedup - 1, 1 - out->lo / out->speedup);
    /* the mde grows with the interval: same power rule, the wider h */
    double h = (hi - lo) / 2;
    out->mde = h_old > 0 ? expm1(log1p(out->mde) * h / h_old) : out->mde;
    return TB_OK;
}

int tb_stats_paired_builds(const double *base, const double *var, const int *build, size_t n,
                           uint64_t seed, tb_paired *out)
{
    return tb_stats_paired_builds_pooled(base, var, build, n, seed, NULL, out);
}

/* ---- the reference on both sides ----
 *
 * The interleaved rounds (bench/harness/rounds.c) put a baseline
 * repetition on each side of a variant's, and compare the variant with
 * their mean: drift within the round cancels. But then a round's log
 * ratio sets one repetition against the mean of two, and is not symmetric
 * when repetition times are skewed (a VM's are: a late repetition is
 * common, an early one is not): the mean of two is less skewed than one,
 * so the median of the ratios leans toward "faster". Over 402 A/A
 * experiments of eleven default runs of bench:all on a 2-core VM, the
 * copies' estimates averaged +0.22% and their intervals excluded 1 on the
 * faster side 10.0% of the time against 1.7% on the slower. Each single
 * ratio, log(before / var) or log(after / var), is symmetric (one
 * repetition against one); the Hodges-Lehmann estimate of the 2n of them
 * is the center (the mean below 6 rounds, as tb_stats_paired), and the
 * interval keeps the width the per-round ratios gave it (the 2n are not
 * independent: each pair shares its variant's repetition). On those
 * experiments, replayed with the signed-rank interval alone: +0.04% on
 * average, 7.0% against 2.5%, the same widths (stats_test's skewed A/A:
 * +0.17% -> 0.00%). */
int tb_stats_paired_recenter(const double *before, const double *after, const double *var,
                             size_t n, tb_paired *cmp)
{
    if (!before || !after || !var || !cmp)
        return TB_FAIL(TB_ERR_INVALID, "paired re-centering: NULL argument");
    TB_TRY(check_paired(before, var, n));
    TB_TRY(check_times(after, n, "paired reference after"));
    if (cmp->rounds != n)
        return TB_FAIL(TB_ERR_INVALID, "paired re-centering: %zu rounds for a comparison of %zu",
                       n, cmp->rounds);
    size_t m = 2 * n;
    double *d = malloc(m * sizeof *d), est;
    if (!d)
        return TB_FAIL(TB_ERR_NOMEM, "%zu log ratios", m);
    for (size_t r = 0; r < n; r++) {
        d[2 * r] = log_ratio(before, var, r);
        d[2 * r + 1] = log_ratio(after, var, r);
    }
    if (n >= 6) {
        double *a;
        int rc = walsh_sorted(d, m, &a);
        if (rc != TB_OK) {
            free(d);
            return rc;
        }
        est = tb_stats_quantile_sorted(a, m * (m + 1) / 2, 0.5);
        free(a);
    } else {
        est = tb_stats_mean(d, m);
    }
    free(d);
    double shift = exp(est) / cmp->speedup;
    cmp->speedup = exp(est);
    cmp->lo *= shift;
    cmp->hi *= shift;
    return TB_OK;
}

/* An interval that is absent (NULL, or no rounds) flags nothing. */
static int paired_excludes_one(const tb_paired *p)
{
    return p && p->rounds > 0 && (p->lo > 1 || p->hi < 1);
}

double tb_stats_paired_noise_floor(const tb_paired *aa)
{
    return fmax(0, fmax(aa->hi - 1, 1 - aa->lo));
}

tb_speed_verdict tb_stats_paired_verdict(const tb_paired *cmp, const tb_paired *aa,
                                         int *unreliable)
{
    if (unreliable)
        *unreliable = paired_excludes_one(aa);
    if (cmp->lo > 1)
        return TB_SPEED_FASTER;
    if (cmp->hi < 1)
        return TB_SPEED_SLOWER;
    return TB_SPEED_WITHIN_NOISE;
}

/* ---- correctness ---- */

/* |got - ref| with the NaN/Inf rules of tb_max_abs_err. */
static double abs_err(double ref, double got)
{
    if (isnan(ref) || isnan(got))
        return isnan(ref) && isnan(got) ? 0 : INFINITY;
    if (isinf(ref) || isinf(got))
        return ref == got ? 0 : INFINITY;
    return fabs(got - ref);
}

double tb_max_abs_err(const float *ref, const float *got, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = abs_err(ref[i], got[i]);
        if (e > worst)
            worst = e;
    }
    return worst;
}

double tb_max_rel_err(const float *ref, const float *got, size_t n)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
    double err = tb_max_abs_err(ref, got, n);
    if (err == 0)
        return 0;
    return scale > 0 ? err / scale : INFINITY;
}

int tb_compare_floats(const float *ref, const float *got, size_t n, double tol, tb_compare *out)
{
    if (n == 0 || !(tol >= 0))
        return TB_FAIL(TB_ERR_INVALID, "compare %zu floats with tol %g", n, tol);
    memset(out, 0, sizeof *out);
    out->n = n;
    out->tol = tol;
    for (size_t i = 0; i < n; i++) {
        double e = abs_err(ref[i], got[i]);
        if (e > out->max_abs) {
            out->max_abs = e;
            out->worst = i;
        }
    }
    out->max_rel = tb_max_rel_err(ref, got, n);
    if (memcmp(ref, got, n * sizeof *ref) == 0)
        out->verdict = TB_MATCH_EXACT;
    else
        out->verdict = out->max_rel <= tol ? TB_MATCH_WITHIN_TOL : TB_MATCH_DIFFERS;
    return TB_OK;
}

int tb_compare_values(double ref, double got, double tol, tb_compare *out)
{
    if (!(tol >= 0))
        return TB_FAIL(TB_ERR_INVALID, "compare with tol %g", tol);
    memset(out, 0, sizeof *out);
    out->n = 1;
    out->tol = tol;
    out->max_abs = abs_err(ref, got);
    if (out->max_abs == 0)
        out->max_rel = 0;
    else
        out->max_rel = ref != 0 && isfinite(ref) ? out->max_abs / fabs(ref) : out->max_abs;
    if (memcmp(&ref, &got, sizeof ref) == 0)
        out->verdict = TB_MATCH_EXACT;
    else
        out->verdict = out->max_rel <= tol ? TB_MATCH_WITHIN_TOL : TB_MATCH_DIFFERS;
    return TB_OK;
}

const char *tb_match_name(tb_match m)
{
    switch (m) {
    case TB_MATCH_EXACT: return "exact";
    case TB_MATCH_WITHIN_TOL: return "within tolerance";
    default: return "DIFFERS";
    }
}

int tb_compare_format(const tb_compare *c, char *buf, size_t cap)
{
    switch (c->verdict) {
    case TB_MATCH_EXACT:
        return snprintf(buf, cap, "exact");
    case TB_MATCH_WITHIN_TOL:
        return snprintf(buf, cap, "within tolerance (max rel err %.2g <= tol %.2g)", c->max_rel, c->tol);
    default:
        if (c->n > 1)
            return snprintf(buf, cap, "DIFFERS (max rel err %.2g > tol %.2g, at index %zu)",
                            c->max_rel, c->tol, c->worst);
        return snprintf(buf, cap, "DIFFERS (rel err %.2g > tol %.2g)", c->max_rel, c->tol);
    }
}
