/*
 * stats.c - summaries, bootstrap speedup intervals and verdicts; see stats.h.
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
