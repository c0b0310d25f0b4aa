/*
 * rounds_test.c - the rounds engine (bench/harness/rounds.c) on fake arms
 * whose times come from a model with known answers, on a fake clock: an
 * arm's run() reports seconds = units x (its unit time) x (1 + drift x
 * clock) x (warm-up factor) x lognormal noise and advances the clock by
 * that much, so nothing really waits and every run gives the same numbers.
 * Google Benchmark still runs each repetition (with the fake manual time).
 *
 * Checks: round orders are permutations, differ per round, follow the seed;
 * the warm-up rule stops on a settled sequence and runs on a falling one;
 * units_per_rep reaches min_rep_s; a known 5% effect is found and the A/A
 * arm covers 1 despite a strong linear drift; the stop rule (target early,
 * cap and budget for a noisy arm with an obvious effect: never a verdict);
 * GB's JSON holds every repetition; prepare runs before every timed round;
 * a failing arm and a bad cfg are errors; the busy rule.
 *
 * Run: bazel test //bench/harness:rounds_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/harness/gb_results.h"
#include "bench/harness/rounds.h"
#include "bench/harness/rounds_internal.h"
#include "lib/core/rng.h"
#include "lib/core/testing.h"

static double fake_clock;
static double fake_now(void *ctx)
{
    (void)ctx;
    return fake_clock;
}

typedef struct fake {
    double unit_s;       /* settled seconds per unit */
    double noise;        /* sigma of the log-normal noise per repetition */
    double drift;        /* relative slow-down per fake second */
    double wave;         /* amplitude of a slow wave in the machine's speed... */
    double period;       /* ...of this period in fake seconds (a shared VM's drift) */
    double warm_amp;     /* unit k (from the start) takes 1 + warm_amp e^(-k / 8) longer */
    double first_s;      /* the first unit takes this much longer (a lazy build) */
    double build_sd;     /* each build's own speed: x exp(build_sd N(0,1)), drawn anew... */
    double build_k;      /* ...at every rebuild (1 until the first) */
    int rebuilt;         /* rebuild calls */
    double rebuild_cost_s; /* fake seconds a rebuild takes */
    long done;           /* units run so far */
    int prepared;        /* prepare calls */
    int fail_at;         /* run call that fails (0: none) */
    int calls;
    int first_at;        /* its first run call was the experiment's this-th (1-based) */
    int rebuilt_at;      /* its first rebuild was the experiment's this-th rebuild */
    tb_rng rng;
} fake;

static int first_calls, rebuild_calls; /* counters for first_at and rebuilt_at */

/* Arm ids of the timed repetitions, in the order they ran (units > 1). */
static int log_ids[4096];
static int log_n;
static fake *log_arms[8];

static double normal(tb_rng *r)
{
    double u = tb_rng_double01(r), v = tb_rng_double01(r);
    return sqrt(-2 * log(1 - u)) * cos(2 * M_PI * v);
}

static int fake_run(void *user, long units, double *seconds)
{
    fake *f = user;
    if (f->calls++ == 0)
        f->first_at = ++first_calls;
    if (f->fail_at && f->calls == f->fail_at)
        return TB_FAIL(TB_ERR_NUMERIC, "fake arm fails on call %d", f->calls);
    double warm = 1 + f->warm_amp * exp(-(double)f->done / 8);
    double wave = f->period > 0 ? 1 + f->wave * sin(2 * M_PI * fake_clock / f->period) : 1;
    double k = f->build_k > 0 ? f->build_k : 1;
    double s = (double)units * f->unit_s * k * (1 + f->drift * fake_clock) * wave * warm *
               exp(f->noise * normal(&f->rng));
    if (f->done == 0)
        s += f->first_s;
    f->done += units;
    fake_clock += s;
    *seconds = s;
    if (units > 1 && log_n < (int)(sizeof log_ids / sizeof *log_ids))
        for (int i = 0; i < 8; i++)
            if (log_arms[i] == f)
                log_ids[log_n++] = i;
    return TB_OK;
}

static int fake_prepare(void *user)
{
    ((fake *)user)->prepared++;
    return TB_OK;
}

/* A fresh build: its own speed factor, the units' warm-up again. */
static int fake_rebuild(void *user)
{
    fake *f = user;
    if (++f->rebuilt == 1)
        f->rebuilt_at = ++rebuild_calls;
    fake_clock += f->rebuild_cost_s;
    f->build_k = exp(f->build_sd * normal(&f->rng));
    f->done = 0;
    return TB_OK;
}

static tb_rounds_cfg cfg_default(void)
{
    tb_rounds_cfg c = {0};
    c.min_rep_s = 0.2;
    c.min_rounds = 5;
    c.max_rounds = 200;
    c.target_half_width = 0.01;
    c.budget_s = 0;
    c.warmup_max_s = 5;
    c.seed = 1234;
    return c;
}

static uint64_t seed_base = 100;

static void reset(fake *f, int n)
{
    fake_clock = 0;
    log_n = 0;
    memset(log_arms, 0, sizeof log_arms);
    for (int i = 0; i < n; i++) {
        f[i].rng = tb_rng_seeded(seed_base + (uint64_t)i);
        if (i < (int)(sizeof log_arms / sizeof *log_arms))
            log_arms[i] = &f[i]; /* the first 8 arms are logged */
    }
}

static void test_orders(void)
{
    int a[6], b[6], seen_first[6] = {0};
    int differ = 0;
    for (int r = 0; r < 40; r++) {
        tb_rounds_order(7, r, 6, a);
        tb_rounds_order(7, r, 6, b);
        int mark[6] = {0}, perm = 1;
        for (int i = 0; i < 6; i++) {
            if (a[i] < 0 || a[i] >= 6 || mark[a[i]]++)
                perm = 0;
        }
        CHECK(perm, "round %d's order is a permutation", r);
        CHECK(memcmp(a, b, sizeof a) == 0, "round %d: same seed, same order", r);
        seen_first[a[0]]++;
        int c[6];
        tb_rounds_order(8, r, 6, c);
        differ += memcmp(a, c, sizeof a) != 0;
    }
    int all_first = 1;
    for (int i = 0; i < 6; i++)
        all_first &= seen_first[i] > 0;
    CHECK(all_first, "over 40 rounds every arm runs first at least once");
    CHECK(differ >= 35, "another seed gives other orders (%d of 40 differ)", differ);
}

/* Arms are built (first run) and rebuilt in tb_rounds_build_order's order,
 * a pure function of (seed, r) on a stream apart from the rounds' orders,
 * so the baseline is not always built first. */
static void test_build_orders(void)
{
    int a[4], b[4], o[4], base_first = 0, same_as_rounds = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        tb_rounds_build_order(seed, 0, 4, a);
        tb_rounds_build_order(seed, 0, 4, b);
        tb_rounds_order(seed, 0, 4, o);
        int mark[4] = {0}, perm = 1;
        for (int i = 0; i < 4; i++)
            if (a[i] < 0 || a[i] >= 4 || mark[a[i]]++)
                perm = 0;
        CHECK(perm && memcmp(a, b, sizeof a) == 0, "seed %llu: a permutation, the same twice",
              (unsigned long long)seed);
        base_first += a[0] == 0;
        same_as_rounds += memcmp(a, o, sizeof a) == 0;
    }
    CHECK(base_first > 2 && base_first < 25, "the baseline built first for %d of 40 seeds",
          base_first);
    CHECK(same_as_rounds < 10, "its own stream: %d of 40 equal to round 0's order",
          same_as_rounds);
    /* the engine: first runs in the drawn order, rebuilds too */
    for (uint64_t seed = 1; seed <= 3; seed++) {
        fake f[4] = {{.unit_s = 0.010, .noise = 0.01, .build_sd = 0.01},
                     {.unit_s = 0.010, .noise = 0.01, .build_sd = 0.01},
                     {.unit_s = 0.010, .noise = 0.01, .build_sd = 0.01},
                     {.unit_s = 0.010, .noise = 0.01, .build_sd = 0.01}};
        reset(f, 4);
        first_calls = rebuild_calls = 0;
        static const char *const names[4] = {"a0", "a1", "a2", "a3"};
        tb_arm arms[4];
        for (int i = 0; i < 4; i++)
            arms[i] = (tb_arm){names[i], 0, 0, fake_run, NULL, &f[i], fake_rebuild};
        tb_rounds_cfg c = cfg_default();
        c.seed = seed;
        c.rounds_per_build = 1;
        c.max_rounds = 5;
        tb_rounds_result r;
        int rc = tb_rounds_run(&c, arms, 4, &r);
        CHECK(rc == TB_OK, "seed %llu: the experiment runs", (unsigned long long)seed);
        if (rc != TB_OK)
            continue;
        tb_rounds_build_order(seed, 0, 4, a);
        tb_rounds_build_order(seed, 1, 4, b);
        for (int k = 0; k < 4; k++) {
            CHECK(f[a[k]].first_at == k + 1, "seed %llu: arm %d built %d-th, drawn %d-th",
                  (unsigned long long)seed, a[k], f[a[k]].first_at, k + 1);
            CHECK(f[b[k]].rebuilt_at == k + 1, "seed %llu: arm %d rebuilt %d-th, drawn %d-th",
                  (unsigned long long)seed, b[k], f[b[k]].rebuilt_at, k + 1);
        }
        tb_rounds_result_free(&r);
    }
}

static void test_settled_rule(void)
{
    double flat[6] = {1, 1.01, 0.99, 1, 1.005, 0.995};
    double falling[6] = {2, 1.9, 1.8, 1.7, 1.6, 1.5};
    double rising[6] = {1, 1, 1, 1.2, 1.2, 1.2};
    double short_[5] = {1, 1, 1, 1, 1};
    double slight[6] = {1, 1, 1, 0.99, 0.99, 0.99}; /* 1% below: within 1.5% */
    CHECK(tb_rounds_settled(flat, 6), "a flat sequence has settled");
    CHECK(!tb_rounds_settled(falling, 6), "a falling sequence has not");
    CHECK(tb_rounds_settled(rising, 6), "a rising one has (it stopped falling)");
    CHECK(!tb_rounds_settled(short_, 5), "fewer than 6 units never settle");
    CHECK(tb_rounds_settled(slight, 6), "a 1%% fall is within the 1.5%% rule");
}

/* Base, its A/A copy, a 5% faster arm; 2% noise; a 50% slow-down over the
 * run (drift 0.01 per fake second), which sequential blocks would mistake
 * for an effect; the first units 3x slower (warm-up). */
static void test_effect_and_drift(const char *dir)
{
    fake f[3] = {{.unit_s = 0.010, .noise = 0.02, .drift = 0.01, .warm_amp = 2},
                 {.unit_s = 0.010, .noise = 0.02, .drift = 0.01, .warm_amp = 2},
                 {.unit_s = 0.010 / 1.05, .noise = 0.02, .drift = 0.01, .warm_amp = 2}};
    reset(f, 3);
    tb_arm arms[3] = {
        {"base", 0, 0, fake_run, fake_prepare, &f[0]},
        {"again", 0, 1, fake_run, fake_prepare, &f[1]},
        {"fast", 0, 0, fake_run, fake_prepare, &f[2]},
    };
    char json[512];
    snprintf(json, sizeof json, "%s/effect.gbench.json", dir);
    tb_rounds_cfg c = cfg_default();
    c.gbench_json = json;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 3, &r);
    CHECK(rc == TB_OK, "the experiment runs");
    if (rc != TB_OK)
        return;
    CHECK(r.stop == TB_STOP_TARGET, "stopped on target (%s)", tb_rounds_stop_name(r.stop));
    CHECK(r.rounds >= 5 && r.rounds < 200, "%d rounds", r.rounds);
    CHECK(r.seed == 1234, "the seed is recorded");
    const tb_paired *fast = &r.arms[2].cmp, *aa = &r.arms[1].cmp;
    CHECK(fast->lo > 1 && fast->lo <= 1.05 && fast->hi >= 1.05,
          "the 5%% effect is found: %.4f [%.4f, %.4f]", fast->speedup, fast->lo, fast->hi);
    CHECK(fabs(fast->speedup / 1.05 - 1) < 0.01, "drift does not bias it: %.4f vs 1.05",
          fast->speedup);
    CHECK(fabs(aa->speedup - 1) < 0.02, "the A/A arm is near 1 (its coverage over seeds: "
          "test_wave_drift): %.4f [%.4f, %.4f]", aa->speedup, aa->lo, aa->hi);
    CHECK(fast->half_width <= 0.01 && aa->half_width <= 0.01, "both within the target");
    CHECK(r.arms[0].cmp.rounds == 0, "the baseline has no comparison of its own");
    /* the logged order of the timed repetitions is the engine's sequence,
     * an arm running in round k while k < its rounds */
    int base_of[3] = {0, 0, 0}, active[3], seq[TB_ROUNDS_SEQ_ROOM(3)], pos = 0, match = 1,
        base_slots = 0;
    for (int k = 0; k < r.rounds; k++) {
        for (int i = 0; i < 3; i++)
            active[i] = k < r.arms[i].rounds;
        int len = tb_rounds_sequence(1234, k, base_of, active, NULL, 3, seq);
        for (int q = 0; q < len; q++) {
            match &= pos < log_n && log_ids[pos++] == seq[q];
            base_slots += seq[q] == 0;
        }
    }
    CHECK(match && pos == log_n, "each round ran tb_rounds_sequence(seed, round)'s order");
    for (int i = 0; i < 3; i++) {
        double first_rep = r.arms[i].seconds[0] * (double)r.arms[i].units_per_rep;
        CHECK(first_rep >= c.min_rep_s * 0.95, "arm %d: %ld units a repetition reach min_rep_s "
              "(%.3f s in round 1)", i, r.arms[i].units_per_rep, first_rep);
        CHECK(r.arms[i].warmup_units > 6, "arm %d: a falling start warms up longer (%ld units)",
              i, r.arms[i].warmup_units);
        int reps = i == 0 ? base_slots : r.arms[i].rounds;
        CHECK(f[i].prepared == reps + 1, "arm %d: prepared for the warm-up and each repetition "
              "(%d, %d repetitions)", i, f[i].prepared, reps);
        CHECK(r.arms[i].stop == TB_STOP_TARGET, "arm %d stopped on its target", i);
    }
    CHECK(r.arms[0].rounds == r.rounds && r.arms[0].rounds ==
          (r.arms[1].rounds > r.arms[2].rounds ? r.arms[1].rounds : r.arms[2].rounds),
          "the baseline runs as long as its longest-running arm (%d, %d, %d)", r.arms[0].rounds,
          r.arms[1].rounds, r.arms[2].rounds);

    gb_results *g = NULL;
    rc = gb_results_read(json, &g);
    CHECK(rc == TB_OK, "GB's JSON reads back");
    if (rc == TB_OK) {
        for (int i = 0; i < 3; i++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "%s/", arms[i].name);
            const gb_run *run = NULL;
            for (size_t k = 0; k < g->n_runs; k++)
                if (strncmp(g->runs[k].name, prefix, strlen(prefix)) == 0)
                    run = &g->runs[k];
            CHECK(run, "GB's JSON has arm %s", arms[i].name);
            if (!run)
                continue;
            int reps = i == 0 ? base_slots : r.arms[i].rounds;
            CHECK(run->repetitions == reps, "arm %s: %d repetitions in GB's JSON, %d ran",
                  arms[i].name, run->repetitions, reps);
            int same = i == 0 || run->repetitions == r.arms[i].rounds;
            for (int k = 0; i > 0 && same && k < r.arms[i].rounds; k++)
                same &= fabs(run->seconds[k] / r.arms[i].seconds[k] - 1) < 1e-6 &&
                        run->iterations[k] == r.arms[i].units_per_rep;
            CHECK(same, "arm %s: GB's times and iterations are the rounds' own", arms[i].name);
        }
        gb_results_free(g);
    }
    CHECK(!isnan(r.load_avg) && r.load_avg >= 0, "load average read (%.2f)", r.load_avg);
    CHECK(r.other_cpu_s >= 0, "other processes' CPU time read (%.2f s)", r.other_cpu_s);
    tb_rounds_result_free(&r);
}

/* Sequences: every running compared arm once, between two repetitions of
 * its baseline; stopped arms and the arms of a stopped baseline left out;
 * a baseline with nothing to compare once. */
static void test_sequences(void)
{
    /* arms 0 and 3 are baselines; 1, 2, 4 compare with 0; 5 with 3; 6 alone */
    int base[7] = {0, 0, 0, 3, 0, 3, 6}, all[7] = {1, 1, 1, 1, 1, 1, 1};
    int seq[TB_ROUNDS_SEQ_ROOM(7)];
    for (int r = 0; r < 20; r++) {
        int len = tb_rounds_sequence(99, r, base, all, NULL, 7, seq);
        int seen[7] = {0}, ok = len == 4 * 2 + 3;
        for (int q = 0; q < len; q++) {
            int i = seq[q];
            seen[i]++;
            if (base[i] != i)
                ok &= q > 0 && q + 1 < len && seq[q - 1] == base[i] && seq[q + 1] == base[i];
        }
        ok &= seen[1] == 1 && seen[2] == 1 && seen[4] == 1 && seen[5] == 1 && seen[6] == 1 &&
              seen[0] == 4 && seen[3] == 2;
        CHECK(ok, "round %d: every compared arm between two of its baseline's (%d slots)", r,
              len);
    }
    int some[7] = {1, 0, 1, 0, 1, 1, 0};
    int len = tb_rounds_sequence(99, 3, base, some, NULL, 7, seq), ok = len == 5;
    for (int q = 0; q < len; q++)
        ok &= seq[q] == 0 || seq[q] == 2 || seq[q] == 4;
    CHECK(ok, "stopped arms, a stopped baseline's arms and a stopped lone arm are left out "
          "(%d slots)", len);
}

/* A/A slots: an A/A arm of a baseline compared with k other arms runs
 * 1 + k / 8 times a round (at most 3), each time between two of its
 * baseline's repetitions and never next to itself; other arms once. */
static void test_aa_slots(void)
{
    enum { N = 26 };
    /* arm 0: a baseline with 22 compared arms and an A/A (arm 23); arm 24:
     * a baseline with its A/A alone (arm 25) */
    int base[N], aa[N] = {0}, slots[N], all[N], seq[TB_ROUNDS_SEQ_ROOM(N)];
    for (int i = 0; i < N; i++) {
        base[i] = i < 24 ? 0 : 24;
        all[i] = 1;
    }
    aa[23] = aa[25] = 1;
    tb_rounds_slots(base, aa, N, slots);
    int ok = slots[23] == 3 && slots[25] == 1 && slots[0] == 1 && slots[24] == 1;
    for (int i = 1; i < 23; i++)
        ok &= slots[i] == 1;
    CHECK(ok, "slots: the waterfall-sized A/A 3 (%d), a lone A/A 1 (%d), others 1", slots[23],
          slots[25]);
    /* 8 and 16 compared arms: 2 and 3 slots */
    int b9[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, a9[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, s9[10];
    tb_rounds_slots(b9, a9, 10, s9);
    CHECK(s9[9] == 2, "an A/A beside 8 compared arms runs twice a round (%d)", s9[9]);
    for (int r = 0; r < 30; r++) {
        int len = tb_rounds_sequence(7, r, base, all, slots, N, seq);
        int seen[N] = {0}, good = len == 1 + 2 * 25 + 1 + 2 * 1, last_aa = -10, apart = 1;
        for (int q = 0; q < len; q++) {
            int i = seq[q];
            seen[i]++;
            if (base[i] != i)
                good &= q > 0 && q + 1 < len && seq[q - 1] == base[i] && seq[q + 1] == base[i];
            if (i == 23) {
                apart &= q - last_aa > 2; /* another arm between its repetitions */
                last_aa = q;
            }
        }
        good &= seen[23] == 3 && seen[25] == 1 && seen[0] == 26 && seen[24] == 2;
        for (int i = 1; i < 23; i++)
            good &= seen[i] == 1;
        CHECK(good && apart, "round %d: the A/A thrice, spread, each between two of its "
              "baseline's; others once (%d slots)", r, len);
    }
    /* the A/A's slots leave the sequence with it: two arms left, the A/A
     * still thrice, between baselines */
    int two[N] = {0};
    two[0] = two[5] = two[23] = 1;
    int len = tb_rounds_sequence(7, 2, base, two, slots, N, seq), n_aa = 0, good = len == 9;
    for (int q = 0; q < len; q++) {
        n_aa += seq[q] == 23;
        if (seq[q] != 0)
            good &= q > 0 && q + 1 < len && seq[q - 1] == 0 && seq[q + 1] == 0;
    }
    CHECK(good && n_aa == 3, "with one other arm left the A/A still runs thrice (%d slots)",
          len);
}

/* The engine with an A/A arm of two slots (8 other arms compared with its
 * baseline): GB's JSON holds two of its repetitions a round, and its
 * round's seconds and reference are the geometric means of those two. */
static void test_aa_slots_run(const char *dir)
{
    enum { N = 10 };
    fake f[N];
    for (int i = 0; i < N; i++)
        f[i] = (fake){.unit_s = 0.010 / (i >= 1 && i <= 8 ? 1 + 0.01 * i : 1), .noise = 0.02};
    reset(f, N);
    tb_arm arms[N];
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], i == 0 ? "base" : i == 9 ? "again" : "set%d", i);
        arms[i] = (tb_arm){names[i], 0, i == 9, fake_run, NULL, &f[i]};
    }
    char json[512];
    snprintf(json, sizeof json, "%s/aa_slots.gbench.json", dir);
    tb_rounds_cfg c = cfg_default();
    c.gbench_json = json;
    c.target_half_width = 0.02;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, N, &r);
    CHECK(rc == TB_OK, "the experiment runs");
    if (rc != TB_OK)
        return;
    const tb_rounds_arm_result *aa = &r.arms[9];
    CHECK(aa->cmp.lo <= 1 && aa->cmp.hi >= 1, "the A/A interval covers 1: %.4f [%.4f, %.4f]",
          aa->cmp.speedup, aa->cmp.lo, aa->cmp.hi);
    gb_results *g = NULL;
    rc = gb_results_read(json, &g);
    CHECK(rc == TB_OK, "GB's JSON reads back");
    const gb_run *run = NULL;
    for (size_t k = 0; rc == TB_OK && k < g->n_runs; k++)
        if (strncmp(g->runs[k].name, "again/", 6) == 0)
            run = &g->runs[k];
    CHECK(run && run->repetitions == 2 * aa->rounds, "two A/A repetitions a round in GB's "
          "JSON (%d for %d rounds)", run ? run->repetitions : -1, aa->rounds);
    int same = run != NULL;
    for (int k = 0; same && k < aa->rounds && 2 * k + 1 < run->repetitions; k++)
        same &= fabs(sqrt(run->seconds[2 * k] * run->seconds[2 * k + 1]) / aa->seconds[k] - 1) <
                1e-6;
    CHECK(same, "the A/A round's seconds are the geometric mean of its two repetitions");
    for (int i = 1; i < 9; i++)
        CHECK(r.arms[i].rounds > 0, "arm %d ran", i);
    if (g)
        gb_results_free(g);
    tb_rounds_result_free(&r);
}

/* A slow wave in the machine's speed (+-15%, a 3 s period: repetitions of
 * 0.2 s see it change between neighbours), as a shared VM's drift, over 40
 * seeds: the bracketed reference cancels most of it, so the 5% effect
 * comes out unbiased and the A/A arm's 95% interval covers 1 about as
 * often as it should (at least 34 of 40: the chance of fewer, with true
 * 95% coverage, is under 2%). */
static void test_wave_drift(void)
{
    int covered = 0, found = 0, target = 0, seeds = 40;
    double worst = 0;
    for (int k = 0; k < seeds; k++) {
        fake f[3];
        for (int i = 0; i < 3; i++)
            f[i] = (fake){.unit_s = i == 2 ? 0.010 / 1.05 : 0.010, .noise = 0.01, .wave = 0.15,
                          .period = 3};
        seed_base = 1000 + 10 * (uint64_t)k;
        reset(f, 3);
        tb_arm arms[3] = {{"base", 0, 0, fake_run, NULL, &f[0]},
                          {"again", 0, 1, fake_run, NULL, &f[1]},
                          {"fast", 0, 0, fake_run, NULL, &f[2]}};
        tb_rounds_cfg c = cfg_default();
        c.target_half_width = 0.01;
        c.seed = 77 + (uint64_t)k;
        tb_rounds_result r;
        if (tb_rounds_run(&c, arms, 3, &r) != TB_OK)
            break;
        const tb_paired *fast = &r.arms[2].cmp, *aa = &r.arms[1].cmp;
        covered += aa->lo <= 1 && aa->hi >= 1;
        found += fast->lo > 1;
        target += r.stop == TB_STOP_TARGET;
        if (fabs(fast->speedup / 1.05 - 1) > worst)
            worst = fabs(fast->speedup / 1.05 - 1);
        tb_rounds_result_free(&r);
    }
    seed_base = 100;
    fprintf(stderr, "wave drift over %d seeds: target %d, 5%% effect found %d (worst %.2f%% "
            "off), A/A covers 1 in %d\n", seeds, target, found, 100 * worst, covered);
    CHECK(target == seeds, "a +-15%% wave: every run reaches the target (%d of %d)", target,
          seeds);
    CHECK(found == seeds && worst < 0.012, "the 5%% effect found through the wave in every run "
          "(%d of %d), off by at most %.2f%%", found, seeds, 100 * worst);
    CHECK(covered >= 34, "the A/A interval covers 1 in %d of %d runs", covered, seeds);
}

/* Builds that differ: each build of an arm runs at its own speed (sd 3%,
 * as an autotuner's choice or a tensor's placement would make it), 1%
 * noise a repetition. Kept alive for the whole run, the per-round ratios
 * see one draw per arm and the A/A interval misses 1 in most runs; rebuilt
 * every 3 rounds, the interval over builds covers 1 as it should, and each
 * arm stops only once its rounds span TB_ROUNDS_MIN_BUILDS builds. */
static void test_build_spread(void)
{
    int covered[2] = {0, 0}, seeds = 40, min_builds = 1 << 30, rebuilds_ok = 1;
    for (int rebuild = 0; rebuild <= 1; rebuild++)
        for (int k = 0; k < seeds; k++) {
            fake f[2];
            for (int i = 0; i < 2; i++)
                f[i] = (fake){.unit_s = 0.010, .noise = 0.01, .build_sd = 0.03};
            seed_base = 5000 + 10 * (uint64_t)k;
            reset(f, 2);
            for (int i = 0; i < 2; i++)
                f[i].build_k = exp(f[i].build_sd * normal(&f[i].rng)); /* the first build */
            tb_arm arms[2] = {{"base", 0, 0, fake_run, NULL, &f[0], fake_rebuild},
                              {"again", 0, 1, fake_run, NULL, &f[1], fake_rebuild}};
            tb_rounds_cfg c = cfg_default();
            c.target_half_width = 0.02;
            c.max_rounds = 60;
            c.seed = 300 + (uint64_t)k;
            c.rounds_per_build = rebuild ? 3 : 0;
            tb_rounds_result r;
            if (tb_rounds_run(&c, arms, 2, &r) != TB_OK)
                break;
            const tb_paired *aa = &r.arms[1].cmp;
            covered[rebuild] += aa->lo <= 1 && aa->hi >= 1;
            if (rebuild) {
                if (r.arms[1].stop == TB_STOP_TARGET && (int)aa->builds < min_builds)
                    min_builds = (int)aa->builds;
                /* rebuilt before rounds 4, 7, ...: (rounds - 1) / 3 times */
                rebuilds_ok &= f[0].rebuilt == (r.arms[0].rounds - 1) / 3 &&
                               r.arms[1].build[r.arms[1].rounds - 1] == 2 * f[0].rebuilt;
            } else {
                rebuilds_ok &= f[0].rebuilt == 0 && aa->builds == 1;
            }
            tb_rounds_result_free(&r);
        }
    seed_base = 100;
    fprintf(stderr, "builds with a 3%% spread, %d seeds: A/A covers 1 in %d kept alive, %d "
            "rebuilt every 3 rounds\n", seeds, covered[0], covered[1]);
    CHECK(covered[0] < 30, "kept alive, one build per arm: the interval misses the build "
          "spread (%d of %d cover 1)", covered[0], seeds);
    CHECK(covered[1] >= 34, "rebuilt: the interval over builds covers 1 in %d of %d", covered[1],
          seeds);
    CHECK(min_builds >= TB_ROUNDS_MIN_BUILDS, "an arm stops on target only after %d builds "
          "(least seen %d)", TB_ROUNDS_MIN_BUILDS, min_builds);
    CHECK(rebuilds_ok, "rebuild runs every 3 rounds, and each round records its build");
}

/* The rounds left to a run: the minimum rounds, the cap and the budget at
 * the last round's length; a new build is worth beginning with half its
 * interval left, and 2 rounds. */
static void test_rounds_left(void)
{
    tb_rounds_cfg c = cfg_default();
    c.budget_s = 10;
    CHECK(tb_rounds_left(&c, 2, 3, 1) == 7, "7 s left at 1 s a round: 7 rounds (%d)",
          tb_rounds_left(&c, 2, 3, 1));
    CHECK(tb_rounds_left(&c, 6, 9.5, 1) == 1, "the budget spent: the round the stop rule "
          "allowed (%d)", tb_rounds_left(&c, 6, 9.5, 1));
    CHECK(tb_rounds_left(&c, 1, 9.5, 1) == 4, "the budget spent after 1 round: the 4 of the "
          "minimum 5 still to run (%d)", tb_rounds_left(&c, 1, 9.5, 1));
    c.max_rounds = 20;
    CHECK(tb_rounds_left(&c, 18, 0, 0.01) == 2, "the cap: 2 (%d)", tb_rounds_left(&c, 18, 0, 0.01));
    c.budget_s = 0;
    CHECK(tb_rounds_left(&c, 3, 100, 1) == 17, "no budget: to the cap (%d)",
          tb_rounds_left(&c, 3, 100, 1));
    CHECK(tb_rounds_build_worth(1, 1) && !tb_rounds_build_worth(2, 1) &&
          tb_rounds_build_worth(2, 2) && !tb_rounds_build_worth(4, 1) &&
          tb_rounds_build_worth(4, 2) && !tb_rounds_build_worth(5, 2) &&
          tb_rounds_build_worth(5, 3) && !tb_rounds_build_worth(8, 3) &&
          tb_rounds_build_worth(8, 4), "a build is worth half its interval, and 2 rounds");
}

/* A build due before the budget's last round is not begun: with a build
 * every 2 rounds and a budget that ends the run after its 5 minimum
 * rounds, the arms are rebuilt before round 3 only, never before round 5
 * (a one-round build, whose spread on one degree of freedom widened every
 * interval of data_format's experiment from +-3% to +-25%). */
static void test_no_last_round_build(void)
{
    fake f[3] = {{.unit_s = 0.010, .noise = 0.01, .build_sd = 0.02},
                 {.unit_s = 0.005, .noise = 0.01, .build_sd = 0.02},
                 {.unit_s = 0.010, .noise = 0.01, .build_sd = 0.02}};
    reset(f, 3);
    tb_arm arms[3] = {{"base", 0, 0, fake_run, NULL, &f[0], fake_rebuild},
                      {"fast", 0, 0, fake_run, NULL, &f[1], fake_rebuild},
                      {"again", 0, 1, fake_run, NULL, &f[2], fake_rebuild}};
    tb_rounds_cfg c = cfg_default();
    c.target_half_width = 1e-6; /* never met: the budget ends it */
    c.rounds_per_build = 2;
    c.budget_s = 4.5; /* a round of 5 repetitions of 0.2 s: 5 rounds and the warm-up */
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 3, &r);
    CHECK(rc == TB_OK, "the experiment runs");
    if (rc != TB_OK)
        return;
    int n = r.rounds;
    CHECK(n == 5 && r.stop == TB_STOP_BUDGET, "stopped by its budget after 5 rounds (%d)", n);
    CHECK(f[0].rebuilt == 1 && f[1].rebuilt == 1 && f[2].rebuilt == 1,
          "rebuilt before round 3 only: %d, %d, %d builds", f[0].rebuilt, f[1].rebuilt,
          f[2].rebuilt);
    for (int i = 1; i < 3 && n >= 2; i++)
        CHECK(r.arms[i].build[n - 1] == r.arms[i].build[n - 2],
              "%s: its last round shares its build with the round before", arms[i].name);
    tb_rounds_result_free(&r);
}

/* A baseline and the arms compared with it are rebuilt together, at the
 * longest interval any of them needs: a cheap baseline beside an arm whose
 * rebuild outweighs several rounds' repetitions, on rounds_per_build 1.
 * Rebuilt on their own schedules they cut the rounds into overlapping
 * builds of a round or two and the between-build spread went unseen. */
static void test_group_rebuilds(void)
{
    fake f[3] = {{.unit_s = 0.010, .noise = 0.005, .build_sd = 0.02},
                 {.unit_s = 0.009, .noise = 0.005, .build_sd = 0.02, .rebuild_cost_s = 3.0},
                 {.unit_s = 0.010, .noise = 0.005, .build_sd = 0.02}};
    reset(f, 3);
    tb_arm arms[3] = {{"base", 0, 0, fake_run, NULL, &f[0], fake_rebuild},
                      {"dear", 0, 0, fake_run, NULL, &f[1], fake_rebuild},
                      {"again", 0, 1, fake_run, NULL, &f[2], fake_rebuild}};
    tb_rounds_cfg c = cfg_default();
    c.target_half_width = 1e-6; /* never met: the cap ends it */
    c.max_rounds = 24;
    c.rounds_per_build = 1;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 3, &r);
    CHECK(rc == TB_OK, "the experiment runs");
    if (rc != TB_OK)
        return;
    CHECK(f[1].rebuilt >= 1 && f[0].rebuilt == f[1].rebuilt && f[2].rebuilt == f[1].rebuilt,
          "the group is rebuilt together: %d, %d, %d builds", f[0].rebuilt, f[1].rebuilt,
          f[2].rebuilt);
    CHECK(f[1].rebuilt < r.rounds / 2, "at the dear arm's interval (%d builds in %d rounds)",
          f[1].rebuilt, r.rounds);
    for (int k = 1; k < r.rounds; k++)
        CHECK((r.arms[0].build[k] != r.arms[0].build[k - 1]) ==
                  (r.arms[1].build[k] != r.arms[1].build[k - 1]),
              "round %d: the baseline's and the arm's builds change together", k + 1);
    tb_rounds_result_free(&r);
}

/* Arms built afresh every round (a prepare hook, as the step harness's
 * arms that cannot all stay alive) beside arms kept alive and rebuilt
 * every 2 rounds, whose builds differ: each round of a prepared arm is a
 * build of its own, so its interval is its rounds' (which carry the
 * spread between builds) and not widened by the kept arms' pool again. */
static void test_prepared_builds(void)
{
    fake f[4] = {{.unit_s = 0.010, .noise = 0.005, .build_sd = 0.03},
                 {.unit_s = 0.009, .noise = 0.005, .build_sd = 0.03},
                 {.unit_s = 0.010, .noise = 0.005},
                 {.unit_s = 0.008, .noise = 0.005}};
    reset(f, 4);
    tb_arm arms[4] = {{"kept", 0, 0, fake_run, NULL, &f[0], fake_rebuild},
                      {"kept_fast", 0, 0, fake_run, NULL, &f[1], fake_rebuild},
                      {"alone", 2, 0, fake_run, fake_prepare, &f[2], NULL},
                      {"alone_fast", 2, 0, fake_run, fake_prepare, &f[3], NULL}};
    tb_rounds_cfg c = cfg_default();
    c.target_half_width = 1e-6; /* never met: runs to the cap */
    c.max_rounds = 12;
    c.rounds_per_build = 2;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 4, &r);
    CHECK(rc == TB_OK, "the experiment runs");
    if (rc != TB_OK)
        return;
    const tb_rounds_arm_result *a = &r.arms[3], *k = &r.arms[1];
    CHECK(k->cmp.builds >= 2 && k->cmp.builds < k->rounds && k->cmp.between > 0,
          "the kept arm's builds differ (%d builds in %d rounds, sd %g)", k->cmp.builds,
          k->rounds, k->cmp.between);
    CHECK(a->cmp.builds == a->rounds, "a prepared arm: a build a round (%d builds in %d rounds)",
          a->cmp.builds, a->rounds);
    CHECK(a->cmp.between == 0, "a prepared arm's interval is not widened by the pool (sd %g)",
          a->cmp.between);
    tb_rounds_result_free(&r);
}

/* A dear build is rebuilt less often: repetitions of ~0.21 s, a rebuild
 * of 0.4 s, asked for every round: after the first (which measures it)
 * every ceil(0.4 / (0.25 x 0.21)) = 8 rounds, so 4 rebuilds in 30 rounds
 * (before rounds 2, 10, 18, 26). */
static void test_dear_build(void)
{
    fake f[2] = {{.unit_s = 0.010, .noise = 0.01, .rebuild_cost_s = 0.4},
                 {.unit_s = 0.010, .noise = 0.01, .rebuild_cost_s = 0.4}};
    reset(f, 2);
    tb_arm arms[2] = {{"base", 0, 0, fake_run, NULL, &f[0], fake_rebuild},
                      {"again", 0, 1, fake_run, NULL, &f[1], fake_rebuild}};
    tb_rounds_cfg c = cfg_default();
    c.target_half_width = 1e-6; /* never met: runs to the cap */
    c.max_rounds = 30;
    c.rounds_per_build = 1;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 2, &r);
    CHECK(rc == TB_OK, "the experiment runs");
    if (rc != TB_OK)
        return;
    CHECK(r.rounds == 30, "ran to the cap (%d rounds)", r.rounds);
    CHECK(f[0].rebuilt == 4 && f[1].rebuilt == 4, "a 0.4 s build every 8 rounds: %d and %d "
          "rebuilds in 30 rounds", f[0].rebuilt, f[1].rebuilt);
    tb_rounds_result_free(&r);
}

/* The minimum rounds fitted to the budget: at 0.2 s repetitions, 5 rounds
 * of a pair and an arm whose unit lasts 0.15 s take ~5.7 s, more than a
 * 4 s budget; with a floor of 0.02 s the repetitions shrink (the long arm
 * runs one unit) and the experiment ends within its budget; without a
 * floor the 5 rounds run past it. */
static void test_fit_budget(void)
{
    double seconds[2] = {0, 0};
    long units[2][3];
    int rounds[2] = {0, 0};
    for (int floor_on = 0; floor_on <= 1; floor_on++) {
        fake f[3] = {{.unit_s = 0.001, .noise = 0.002},
                     {.unit_s = 0.0011, .noise = 0.002},
                     {.unit_s = 0.15, .noise = 0.002}};
        reset(f, 3);
        tb_arm arms[3] = {{"base", 0, 0, fake_run, NULL, &f[0]},
                          {"var", 0, 0, fake_run, NULL, &f[1]},
                          {"long", 2, 0, fake_run, NULL, &f[2]}};
        tb_rounds_cfg c = cfg_default();
        c.target_half_width = 1e-6; /* never met: the budget ends it */
        c.max_rounds = 50;
        c.budget_s = 4;
        c.min_rep_floor_s = floor_on ? 0.02 : 0;
        tb_rounds_result r;
        int rc = tb_rounds_run(&c, arms, 3, &r);
        CHECK(rc == TB_OK, "the experiment runs (floor %d)", floor_on);
        if (rc != TB_OK)
            return;
        seconds[floor_on] = r.seconds;
        rounds[floor_on] = r.rounds;
        for (int i = 0; i < 3; i++)
            units[floor_on][i] = r.arms[i].units_per_rep;
        tb_rounds_result_free(&r);
    }
    CHECK(rounds[0] == 5 && seconds[0] > 4, "no floor: the 5 minimum rounds run past the 4 s "
          "budget (%d rounds, %.2f s)", rounds[0], seconds[0]);
    CHECK(rounds[1] >= 5 && seconds[1] <= 4, "a floor: at least 5 rounds within the 4 s budget "
          "(%d rounds, %.2f s)", rounds[1], seconds[1]);
    CHECK(units[0][0] >= 210 && units[1][0] < 200 && units[1][0] >= 21,
          "the pair's repetitions shrink toward the floor (%ld -> %ld units)", units[0][0],
          units[1][0]);
    CHECK(units[0][2] == 2 && units[1][2] == 1, "the long arm runs one unit (%ld -> %ld)",
          units[0][2], units[1][2]);
}

/* Each arm stops on its own: a quiet arm reaches the target and stops
 * early, a noisy one runs on to the cap; the baseline runs with the noisy
 * one; the rows say which stopped why. */
static void test_per_arm_stop(void)
{
    fake f[3] = {{.unit_s = 0.010, .noise = 0.004},
                 {.unit_s = 0.012, .noise = 0.004},
                 {.unit_s = 0.011, .noise = 0.2}};
    reset(f, 3);
    tb_arm arms[3] = {{"base", 0, 0, fake_run, NULL, &f[0]},
                      {"quiet", 0, 0, fake_run, NULL, &f[1]},
                      {"noisy", 0, 0, fake_run, NULL, &f[2]}};
    tb_rounds_cfg c = cfg_default();
    c.max_rounds = 30;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 3, &r);
    CHECK(rc == TB_OK, "the per-arm experiment runs");
    if (rc != TB_OK)
        return;
    CHECK(r.arms[1].stop == TB_STOP_TARGET && r.arms[1].rounds < 15,
          "the quiet arm stops on its target early (%s, %d rounds)",
          tb_rounds_stop_name(r.arms[1].stop), r.arms[1].rounds);
    CHECK(r.arms[2].stop == TB_STOP_CAP && r.arms[2].rounds == 30,
          "the noisy arm runs to the cap (%s, %d rounds)", tb_rounds_stop_name(r.arms[2].stop),
          r.arms[2].rounds);
    CHECK(r.arms[0].rounds == 30 && r.stop == TB_STOP_CAP && r.rounds == 30,
          "the baseline and the experiment run with it (%d rounds, %s)", r.arms[0].rounds,
          tb_rounds_stop_name(r.stop));
    CHECK(r.arms[1].cmp.rounds == (size_t)r.arms[1].rounds,
          "the quiet arm's interval is over its own rounds (%zu)", r.arms[1].cmp.rounds);
    tb_rounds_result_free(&r);
}

/* A settled arm warms up in exactly 6 units; a low-noise pair reaches the
 * target one round past min_rounds (two rounds in a row, both at least the
 * minimum: stopping at min_rounds itself on a streak begun before it cost
 * coverage). */
static void test_target_early(void)
{
    fake f[2] = {{.unit_s = 0.010, .noise = 0.001}, {.unit_s = 0.011, .noise = 0.001}};
    reset(f, 2);
    tb_arm arms[2] = {{"a", 0, 0, fake_run, NULL, &f[0]}, {"b", 0, 0, fake_run, NULL, &f[1]}};
    tb_rounds_cfg c = cfg_default();
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 2, &r);
    CHECK(rc == TB_OK, "the experiment runs");
    if (rc != TB_OK)
        return;
    CHECK(r.stop == TB_STOP_TARGET && r.rounds == c.min_rounds + 1,
          "target reached one round past min_rounds (%s, %d)", tb_rounds_stop_name(r.stop),
          r.rounds);
    CHECK(r.arms[0].warmup_units == 6, "a settled arm warms up in 6 units (%ld)",
          r.arms[0].warmup_units);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < r.rounds; k++)
            CHECK(r.arms[i].seconds[k] * (double)r.arms[i].units_per_rep >= c.min_rep_s * 0.995,
                  "arm %d round %d: the repetition lasts min_rep_s", i, k);
    CHECK(r.arms[1].cmp.hi < 1, "b is slower: [%.4f, %.4f]", r.arms[1].cmp.lo, r.arms[1].cmp.hi);
    tb_rounds_result_free(&r);
}

/* An A/A arm stops on its half-width, as every arm does, never on the
 * noise floor its row reports: a copy 3% slower than its baseline (a
 * harness bias) with little noise stops on its target one round past the
 * minimum and reports the 3%, where stopping once its interval lay within
 * the target of 1 ran it to the cap. */
static void test_aa_stops_on_width(void)
{
    fake f[2] = {{.unit_s = 0.010, .noise = 0.001}, {.unit_s = 0.0103, .noise = 0.001}};
    reset(f, 2);
    tb_arm arms[2] = {{"a", 0, 0, fake_run, NULL, &f[0]}, {"again", 0, 1, fake_run, NULL, &f[1]}};
    tb_rounds_cfg c = cfg_default();
    c.max_rounds = 30;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 2, &r);
    CHECK(rc == TB_OK, "the experiment runs");
    if (rc != TB_OK)
        return;
    double nf = tb_stats_paired_noise_floor(&r.arms[1].cmp);
    CHECK(r.arms[1].stop == TB_STOP_TARGET && r.arms[1].rounds == c.min_rounds + 1,
          "the A/A arm stops on its half-width (%s, %d rounds)",
          tb_rounds_stop_name(r.arms[1].stop), r.arms[1].rounds);
    CHECK(nf > 0.02 && nf < 0.04, "its noise floor reports the 3%% bias (%.4f)", nf);
    tb_rounds_result_free(&r);
}

/* A warm-up that keeps falling stops at warmup_max_s. */
static void test_warmup_cap(void)
{
    fake f[1] = {{.unit_s = 0.010, .noise = 0.001, .warm_amp = 2}};
    reset(f, 1);
    tb_arm arms[1] = {{"a", 0, 0, fake_run, NULL, &f[0]}};
    tb_rounds_cfg c = cfg_default();
    c.warmup_max_s = 0.05; /* the first units take ~30 ms */
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 1, &r);
    CHECK(rc == TB_OK, "the capped warm-up runs");
    if (rc != TB_OK)
        return;
    CHECK(r.arms[0].warmup_units == 3, "a falling warm-up stops at the cap, after the 3 "
          "probes an estimate needs (%ld units)", r.arms[0].warmup_units);
    CHECK(r.stop == TB_STOP_TARGET && r.rounds == 5, "one arm, nothing to compare: min_rounds");
    tb_rounds_result_free(&r);

    /* a cold first unit 100x a step, past the cap at once: the repetition
     * length still comes from the warm units */
    f[0] = (fake){.unit_s = 0.010, .noise = 0.001, .first_s = 1.0};
    reset(f, 1);
    rc = tb_rounds_run(&c, arms, 1, &r);
    CHECK(rc == TB_OK, "the cold-start experiment runs");
    if (rc != TB_OK)
        return;
    CHECK(r.arms[0].warmup_units == 3 && r.arms[0].units_per_rep >= 20,
          "a cold first unit does not set the repetition (%ld units warm-up, %ld a rep)",
          r.arms[0].warmup_units, r.arms[0].units_per_rep);
    tb_rounds_result_free(&r);
}

/* An A/A arm on its base's state (same run and user) shares its warm-up
 * and repetition length; the pair is then exactly A/A. */
static void test_aa_shares_warmup(void)
{
    fake f[1] = {{.unit_s = 0.010, .noise = 0.01, .warm_amp = 1}};
    reset(f, 1);
    tb_arm arms[2] = {{"base", 0, 0, fake_run, NULL, &f[0]},
                      {"again", 0, 1, fake_run, NULL, &f[0]}};
    tb_rounds_cfg c = cfg_default();
    c.target_half_width = 0.02;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 2, &r);
    CHECK(rc == TB_OK, "the shared A/A experiment runs");
    if (rc != TB_OK)
        return;
    CHECK(r.arms[0].warmup_units > 6 && r.arms[1].warmup_units == 0,
          "one warm-up serves both (%ld, %ld units)", r.arms[0].warmup_units,
          r.arms[1].warmup_units);
    CHECK(r.arms[1].units_per_rep == r.arms[0].units_per_rep, "same repetition length");
    CHECK(r.arms[1].cmp.lo <= 1 && r.arms[1].cmp.hi >= 1, "A/A covers 1: [%.4f, %.4f]",
          r.arms[1].cmp.lo, r.arms[1].cmp.hi);
    tb_rounds_result_free(&r);
}

/* An op sweep's point: the baseline and a variant rebuilt every 2 rounds
 * (their buffers placed anew: each build its own speed), and the A/A copy
 * timed on the baseline's own buffers. The copy shares every build with
 * its base, so its ratio's between-build sum of squares is 0: the pool is
 * the variant's alone (with the copy in it, its estimate was diluted),
 * and the copy's interval takes that pool's spread. */
static void test_aa_shared_builds(void)
{
    fake f[2] = {{.unit_s = 0.010, .noise = 0.004, .build_sd = 0.04},
                 {.unit_s = 0.008, .noise = 0.004, .build_sd = 0.04}};
    reset(f, 2);
    tb_arm arms[3] = {{"base", 0, 0, fake_run, NULL, &f[0], fake_rebuild},
                      {"variant", 0, 0, fake_run, NULL, &f[1], fake_rebuild},
                      {"again", 0, 1, fake_run, NULL, &f[0], fake_rebuild}};
    tb_rounds_cfg c = cfg_default();
    c.target_half_width = 1e-6; /* never met: runs to the cap */
    c.max_rounds = 16;
    c.rounds_per_build = 2;
    tb_rounds_result r;
    int rc = tb_rounds_run(&c, arms, 3, &r);
    CHECK(rc == TB_OK, "the op-sweep experiment runs");
    if (rc != TB_OK)
        return;
    const tb_rounds_arm_result *v = &r.arms[1], *aa = &r.arms[2];
    tb_build_anova an;
    CHECK(tb_stats_build_anova(v->ref, v->seconds, v->build, (size_t)v->rounds, &an) == TB_OK,
          "the variant's ANOVA");
    tb_build_pool own = tb_stats_build_pool(&an, 1);
    CHECK(own.between > 0 && aa->cmp.between > 0,
          "the variant's builds differ (sd %g), and the copy takes the pool's spread (sd %g)",
          own.between, aa->cmp.between);
    CHECK(fabs(aa->cmp.between - own.between) <= 1e-12 * own.between &&
              aa->cmp.between_df == own.df,
          "the pool is the variant's builds alone: sd %g on %g df, the copy took sd %g on %g df",
          own.between, own.df, aa->cmp.between, aa->cmp.between_df);
    tb_rounds_result_free(&r);
}

/* 30% noise and a 20% effect: obvious early, but the interval stays wide,
 * so it runs on to the cap, or stops on the budget. */
static void test_noisy_stops(void)
{
    fake f[2] = {{.unit_s = 0.010, .noise = 0.3}, {.unit_s = 0.010 / 1.2, .noise = 0.3}};
    tb_arm arms[2] = {{"a", 0, 0, fake_run, NULL, &f[0]}, {"b", 0, 0, fake_run, NULL, &f[1]}};
    tb_rounds_cfg c = cfg_default();
    c.target_half_width = 0.02;
    c.max_rounds = 12;
    tb_rounds_result r;
    reset(f, 2);
    int rc = tb_rounds_run(&c, arms, 2, &r);
    CHECK(rc == TB_OK, "the capped experiment runs");
    if (rc == TB_OK) {
        CHECK(r.stop == TB_STOP_CAP && r.rounds == 12, "noisy: stopped on the cap (%s, %d)",
              tb_rounds_stop_name(r.stop), r.rounds);
        tb_rounds_result_free(&r);
    }
    c.max_rounds = 1000;
    c.budget_s = 8;
    reset(f, 2);
    rc = tb_rounds_run(&c, arms, 2, &r);
    CHECK(rc == TB_OK, "the budgeted experiment runs");
    if (rc == TB_OK) {
        CHECK(r.stop == TB_STOP_BUDGET, "noisy: stopped on the budget (%s, %d rounds)",
              tb_rounds_stop_name(r.stop), r.rounds);
        CHECK(r.rounds >= 5 && r.rounds < 1000, "%d rounds", r.rounds);
        CHECK(r.seconds <= c.budget_s, "within the budget: %.2f s of %.0f", r.seconds,
              c.budget_s);
        CHECK(r.seconds > c.budget_s - 2, "used most of it: %.2f s", r.seconds);
        tb_rounds_result_free(&r);
    }
}

static void test_errors(void)
{
    fake f[2] = {{.unit_s = 0.010, .noise = 0.01}, {.unit_s = 0.010, .noise = 0.01}};
    reset(f, 2);
    tb_arm arms[2] = {{"a", 0, 0, fake_run, NULL, &f[0]}, {"b", 0, 0, fake_run, NULL, &f[1]}};
    tb_rounds_cfg c = cfg_default();
    tb_rounds_result r;
    f[1].fail_at = 8; /* after its 6-unit warm-up, in round 2 */
    int rc = tb_rounds_run(&c, arms, 2, &r);
    CHECK(rc == TB_ERR_NUMERIC, "an arm's failure in a round is the run's error (%d)", rc);
    tb_error_clear();
    c.min_rounds = 3;
    CHECK(tb_rounds_run(&c, arms, 2, &r) == TB_ERR_INVALID, "fewer than 5 rounds refused");
    c = cfg_default();
    arms[0].base = 1;
    CHECK(tb_rounds_run(&c, arms, 2, &r) == TB_ERR_INVALID, "a base that is no baseline refused");
    arms[0].base = 0;
    arms[1].name = "a";
    CHECK(tb_rounds_run(&c, arms, 2, &r) == TB_ERR_INVALID, "two arms of one name refused");
    tb_error_clear();
}

static void test_xcore_moved(void)
{
    double fast[6] = {60, 62, 58, 138, 61, 64}, one_odd[6] = {60, 62, 58, 330, 61, 64};
    double split[6] = {60, 330, 58, 340, 61, 64}, slow[5] = {330, 340, 569, 325, 333};
    double late[5] = {60, 61, 330, 335, 331};
    CHECK(!tb_rounds_xcore_moved(fast, 6), "58-138 ns: one state");
    CHECK(!tb_rounds_xcore_moved(one_odd, 6), "one odd round: not a state");
    CHECK(tb_rounds_xcore_moved(split, 6), "two rounds at 330 ns among 60s: moved");
    CHECK(tb_rounds_xcore_moved(late, 5), "60 ns, then 330 ns: moved");
    CHECK(!tb_rounds_xcore_moved(slow, 5), "apart throughout (569 is under 3x 325): one state");
    CHECK(!tb_rounds_xcore_moved(fast, 0), "no rounds: not moved");
}

static void test_busy_rule(void)
{
    CHECK(!tb_rounds_busy_rule(0.1, 0.5, 20, 2), "idle: load 0.1, 2.5%% of a core");
    CHECK(tb_rounds_busy_rule(0.1, 3, 20, 2), "others took 15%% of a core: busy");
    CHECK(!tb_rounds_busy_rule(6.0, 0.5, 20, 2),
          "load 6 from our own loader workers, others 2.5%% of a core: not busy");
    CHECK(tb_rounds_busy_rule(2.6, NAN, 20, 2), "not measured: load 2.6 on 2 cores is busy");
    CHECK(!tb_rounds_busy_rule(2.4, NAN, 20, 2), "not measured: load 2.4 on 2 cores is not");
    CHECK(!tb_rounds_busy_rule(NAN, NAN, 20, 2), "nothing measured: not called busy");
}

int main(void)
{
    char dir[256];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(dir, sizeof dir, "%s", tmp ? tmp : "/tmp");
    tb_rounds_set_clock(fake_now, NULL);
    test_orders();
    test_build_orders();
    test_settled_rule();
    test_sequences();
    test_aa_slots();
    test_effect_and_drift(dir);
    test_aa_slots_run(dir);
    test_wave_drift();
    test_per_arm_stop();
    test_build_spread();
    test_dear_build();
    test_prepared_builds();
    test_aa_shared_builds();
    test_rounds_left();
    test_no_last_round_build();
    test_fit_budget();
    test_target_early();
    test_aa_stops_on_width();
    test_group_rebuilds();
    test_aa_shares_warmup();
    test_warmup_cap();
    test_noisy_stops();
    test_errors();
    test_busy_rule();
    test_xcore_moved();
    tb_rounds_set_clock(NULL, NULL);
    return tb_test_exit(TB_OK);
}
