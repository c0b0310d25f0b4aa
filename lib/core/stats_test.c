/*
 * stats_test.c - checks summaries and quantiles against hand-computed values,
 * the bootstrap interval (identical samples contain 1, shifted samples are
 * faster/slower, reruns are identical), the noise-floor verdict rule, and
 * the correctness verdicts.
 * Run: bazel test //lib/core:stats_test
 */
#include "lib/core/rng.h"
#include "lib/core/stats.h"
#include "lib/core/testing.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 * (1 + fabs(b)))

static void test_summary(void)
{
    printf("summary: median, quantiles, min/max, mean, stddev\n");
    const double x[] = {5, 1, 4, 2, 3}; /* sorted 1 2 3 4 5 */
    tb_summary s;
    CHECK(tb_stats_summary(x, 5, &s) == TB_OK, "summary");
    CHECK(s.n == 5 && s.min == 1 && s.max == 5 && s.median == 3 && s.mean == 3, "odd n");
    CHECK(NEAR(s.stddev, sqrt(2.5)), "stddev %g", s.stddev);
    CHECK(s.q25 == 2 && s.q75 == 4, "quartiles %g %g", s.q25, s.q75);
    CHECK(x[0] == 5 && x[4] == 3, "input not reordered");

    const double y[] = {4, 1, 3, 2}; /* even n: median between 2 and 3 */
    double m, q;
    CHECK(tb_stats_median(y, 4, &m) == TB_OK && m == 2.5, "even median %g", m);
    CHECK(tb_stats_quantile(y, 4, 0.1, &q) == TB_OK && NEAR(q, 1.3), "q10 type 7 = %g", q);
    CHECK(tb_stats_quantile(y, 4, 0, &q) == TB_OK && q == 1, "q0 = min");
    CHECK(tb_stats_quantile(y, 4, 1, &q) == TB_OK && q == 4, "q1 = max");
    const double one[] = {7};
    CHECK(tb_stats_summary(one, 1, &s) == TB_OK && s.median == 7 && s.stddev == 0, "n = 1");

    tb_error_clear();
    CHECK(tb_stats_median(y, 0, &m) == TB_ERR_INVALID, "empty sample is an error");
    CHECK(tb_stats_quantile(y, 4, 1.5, &q) == TB_ERR_INVALID, "q outside [0,1] is an error");
    tb_error_clear();
}

/* Deterministic pseudo-noise around center: +-spread (fraction). */
static void make_times(double *t, int n, double center, double spread, unsigned seed)
{
    tb_rng r = tb_rng_seeded(seed);
    for (int i = 0; i < n; i++)
        t[i] = center * (1 + spread * tb_rng_uniform(&r, -1, 1));
}

static void print_interval(const char *what, const tb_interval *iv)
{
    printf("  %-34s speedup %.4f  95%% [%.4f, %.4f]\n", what, iv->point, iv->lo, iv->hi);
}

static void test_bootstrap(void)
{
    printf("bootstrap interval of the ratio of medians\n");
    double base[10], base2[10], fast[10], slow[10];
    make_times(base, 10, 1.0e-3, 0.02, 1);
    make_times(base2, 10, 1.0e-3, 0.02, 2);
    make_times(fast, 10, 0.8e-3, 0.02, 3);   /* 1.25x faster */
    make_times(slow, 10, 1.25e-3, 0.02, 4);  /* 0.8x */

    tb_interval same, aa, f, s;
    CHECK(tb_stats_speedup_ci(base, 10, base, 10, NULL, &same) == TB_OK, "same");
    print_interval("baseline vs itself", &same);
    CHECK(same.point == 1 && same.lo <= 1 && same.hi >= 1, "identical samples: CI contains 1");
    CHECK(same.level == 0.95, "level defaults to 0.95");

    CHECK(tb_stats_speedup_ci(base, 10, base2, 10, NULL, &aa) == TB_OK, "A/A");
    print_interval("baseline vs baseline timed again", &aa);
    CHECK(aa.lo <= 1 && aa.hi >= 1, "A/A interval contains 1");
    double noise = tb_stats_noise_floor(&aa);
    printf("  noise floor %.4f\n", noise);
    CHECK(noise > 0 && noise < 0.05, "noise floor small: %g", noise);

    CHECK(tb_stats_speedup_ci(base, 10, fast, 10, NULL, &f) == TB_OK, "fast");
    print_interval("baseline vs 1.25x faster", &f);
    CHECK(f.lo > 1.15 && f.hi < 1.35 && f.lo <= f.point && f.point <= f.hi, "fast interval");
    CHECK(tb_stats_timing_verdict(&f, noise) == TB_SPEED_FASTER, "verdict faster");

    CHECK(tb_stats_speedup_ci(base, 10, slow, 10, NULL, &s) == TB_OK, "slow");
    print_interval("baseline vs 0.8x", &s);
    CHECK(s.hi < 0.9 && s.lo > 0.7, "slow interval");
    CHECK(tb_stats_timing_verdict(&s, noise) == TB_SPEED_SLOWER, "verdict slower");
    CHECK(tb_stats_timing_verdict(&aa, noise) == TB_SPEED_WITHIN_NOISE, "A/A is within noise");
    CHECK(strcmp(tb_speed_verdict_name(TB_SPEED_WITHIN_NOISE), "within noise") == 0, "name");

    printf("reruns and seeds: identical intervals for the same seed\n");
    tb_interval again, other;
    tb_stats_speedup_ci(base, 10, fast, 10, NULL, &again);
    CHECK(memcmp(&again, &f, sizeof f) == 0, "rerun gives the identical interval");
    tb_bootstrap_opts o = {.resamples = 500, .level = 0.9, .seed = 12345};
    tb_stats_speedup_ci(base, 10, fast, 10, &o, &other);
    CHECK(other.level == 0.9 && other.point == f.point, "options honoured");
    CHECK(other.hi - other.lo < f.hi - f.lo, "90%% interval narrower than 95%%");

    printf("unequal sample sizes and bad input\n");
    CHECK(tb_stats_speedup_ci(base, 10, fast, 3, NULL, &other) == TB_OK, "nb != nv");
    const double bad[] = {1e-3, 0};
    tb_error_clear();
    CHECK(tb_stats_speedup_ci(base, 10, bad, 2, NULL, &other) == TB_ERR_INVALID, "zero time");
    CHECK(tb_stats_speedup_ci(base, 0, fast, 10, NULL, &other) == TB_ERR_INVALID, "empty");
    tb_error_clear();
}

static void test_verdict_rule(void)
{
    printf("timing verdict rule at the edges\n");
    tb_interval iv = {.point = 1.1, .lo = 1.05, .hi = 1.15};
    CHECK(tb_stats_timing_verdict(&iv, 0.0) == TB_SPEED_FASTER, "lo above 1, no noise");
    CHECK(tb_stats_timing_verdict(&iv, 0.05) == TB_SPEED_WITHIN_NOISE, "lo == 1 + noise is not faster");
    CHECK(tb_stats_timing_verdict(&iv, 0.04) == TB_SPEED_FASTER, "lo above 1 + noise");
    tb_interval dn = {.point = 0.9, .lo = 0.85, .hi = 0.95};
    CHECK(tb_stats_timing_verdict(&dn, 0.04) == TB_SPEED_SLOWER, "hi below 1 - noise");
    CHECK(tb_stats_timing_verdict(&dn, 0.06) == TB_SPEED_WITHIN_NOISE, "hi above 1 - noise");
    tb_interval aa = {.point = 1, .lo = 0.97, .hi = 1.02};
    CHECK(NEAR(tb_stats_noise_floor(&aa), 0.03), "noise is the larger excursion");
    tb_interval off = {.point = 1.2, .lo = 1.1, .hi = 1.3}; /* A/A not containing 1 */
    CHECK(NEAR(tb_stats_noise_floor(&off), 0.3), "A/A off 1 widens the floor");
}

static void test_correctness(void)
{
    printf("correctness verdicts\n");
    float ref[5] = {1.0f, -2.0f, 0.5f, 0.0f, 4.0f};
    float same[5], near[5], far[5], nan[5];
    memcpy(same, ref, sizeof ref);
    memcpy(near, ref, sizeof ref);
    memcpy(far, ref, sizeof ref);
    memcpy(nan, ref, sizeof ref);
    near[2] = 0.5f + 1e-6f;  /* abs 1e-6, rel to scale 4: 2.5e-7 */
    near[3] = 1e-7f;         /* near zero: would be huge elementwise */
    far[1] = -2.1f;
    nan[4] = NAN;

    tb_compare c;
    char line[128];
    CHECK(tb_compare_floats(ref, same, 5, TB_TOL_F32, &c) == TB_OK && c.verdict == TB_MATCH_EXACT,
          "identical arrays are exact");
    CHECK(c.max_abs == 0 && c.max_rel == 0, "zero errors");
    tb_compare_format(&c, line, sizeof line);
    printf("  same:  %s\n", line);
    CHECK(strcmp(line, "exact") == 0, "format exact");

    tb_compare_floats(ref, near, 5, TB_TOL_F32, &c);
    tb_compare_format(&c, line, sizeof line);
    printf("  near:  %s\n", line);
    CHECK(c.verdict == TB_MATCH_WITHIN_TOL, "near is within tolerance");
    CHECK(c.worst == 2 && fabs(c.max_abs - 1e-6) < 1e-7, "worst index 2, max abs %g", c.max_abs);
    CHECK(NEAR(c.max_rel, c.max_abs / 4), "rel to the largest |ref|");
    CHECK(strstr(line, "within tolerance") && strstr(line, "tol 1e-05"), "states the tol");

    tb_compare_floats(ref, far, 5, TB_TOL_F32, &c);
    tb_compare_format(&c, line, sizeof line);
    printf("  far:   %s\n", line);
    CHECK(c.verdict == TB_MATCH_DIFFERS && c.worst == 1, "far differs at 1");
    CHECK(strstr(line, "DIFFERS") && strstr(line, "index 1"), "format differs");

    tb_compare_floats(ref, nan, 5, 1.0, &c);
    CHECK(c.verdict == TB_MATCH_DIFFERS && isinf(c.max_abs), "NaN against a number differs");
    CHECK(tb_compare_floats(nan, nan, 5, 0, &c) == TB_OK && c.verdict == TB_MATCH_EXACT,
          "same NaN bits are exact");
    float pz = 0.0f, nz = -0.0f;
    tb_compare_floats(&pz, &nz, 1, 0, &c);
    CHECK(c.verdict == TB_MATCH_WITHIN_TOL && c.max_abs == 0, "-0 vs +0 within tol, not exact");

    CHECK(isinf(tb_max_rel_err(&pz, &ref[0], 1)), "rel err against an all-zero reference");
    CHECK(tb_max_abs_err(ref, far, 5) > 0.099 && tb_max_abs_err(ref, far, 5) < 0.101, "max abs");

    printf("loss values\n");
    CHECK(tb_compare_values(2.3025, 2.3025, TB_TOL_F32, &c) == TB_OK && c.verdict == TB_MATCH_EXACT,
          "same loss exact");
    tb_compare_values(2.0, 2.00001, 1e-5, &c);
    tb_compare_format(&c, line, sizeof line);
    printf("  loss 2.0 vs 2.00001: %s\n", line);
    CHECK(c.verdict == TB_MATCH_WITHIN_TOL && NEAR(c.max_rel, 5e-6), "loss within tol");
    tb_compare_values(2.0, 2.1, 1e-5, &c);
    tb_compare_format(&c, line, sizeof line);
    printf("  loss 2.0 vs 2.1:     %s\n", line);
    CHECK(c.verdict == TB_MATCH_DIFFERS && strcmp(tb_match_name(c.verdict), "DIFFERS") == 0, "loss differs");
    tb_compare_values(0.0, 1e-6, 1e-5, &c);
    CHECK(c.verdict == TB_MATCH_WITHIN_TOL, "zero reference uses absolute error");
}

int main(void)
{
    test_summary();
    test_bootstrap();
    test_verdict_rule();
    test_correctness();
    if (failures) {
        printf("stats_test: %d FAILED\n", failures);
        return 1;
    }
    printf("stats_test: all passed\n");
    return 0;
}
