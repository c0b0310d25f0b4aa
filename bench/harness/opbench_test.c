/*
 * opbench_test.c - the op sweeps' rebuild path (bench/harness/opbench.h:
 * opb_set_rebuild) on the CPU backend, tiny profile (5 rounds, a rebuild
 * every 2): fake cases whose op spins over a buffer that their rebuild
 * frees and reallocates. Shape, never timings.
 *
 * Checks: a baseline and its variant are rebuilt before round 3, not
 * before round 5, the last (a build of one round: rounds.c, rebuild_arms),
 * and an A/A copy registered with its base's op and argument is rebuilt
 * with its base, not on its own (its base's count stays 1); a case without
 * a rebuild is never rebuilt; the rows' comparisons are over builds
 * (opb_builds: 2 distinct builds in 5 rounds);
 * opb_set_rebuild refuses an unknown case; opb_rounds_cfg's repetition floor
 * per profile (the gpu profile's shorter one).
 *
 * Run: bazel test //bench/harness:opbench_test
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/opbench.h"
#include "lib/core/testing.h"

typedef struct fake_case {
    float *buf;                /* what the op reads; replaced by each rebuild */
    size_t n;
    int rebuilds;
    int calls;
} fake_case;

static int fake_op(void *arg)
{
    fake_case *f = arg;
    volatile float s = 0;
    for (size_t i = 0; i < f->n; i++)
        s += f->buf[i];
    f->calls++;
    return TB_OK;
}

static int fake_rebuild(void *arg)
{
    fake_case *f = arg;
    float *p = malloc(f->n * sizeof *p);
    if (!p)
        return TB_FAIL(TB_ERR_NOMEM, "fake rebuild");
    for (size_t i = 0; i < f->n; i++)
        p[i] = (float)i;
    free(f->buf);
    f->buf = p;
    f->rebuilds++;
    return TB_OK;
}

enum { F_BASE, F_VAR, F_LONE, NFAKE };

typedef struct test_state {
    fake_case f[NFAKE];
    size_t builds_var, builds_base, builds_lone;
    int reported;
} test_state;

static int setup(tb_bench *b, void *state, opb_set *set)
{
    test_state *st = state;
    for (int i = 0; i < NFAKE; i++) {
        st->f[i].n = 4096;
        TB_TRY(fake_rebuild(&st->f[i]));
        st->f[i].rebuilds = 0;
    }
    CHECK(opb_set_rebuild(set, 0, fake_rebuild, 1) == TB_ERR_INVALID,
          "opb_set_rebuild of a case not registered is refused");
    tb_error_clear();
    TB_TRY(opb_register(b, set, OPB_WARMUPS, fake_op, &st->f[F_BASE], 1, "fake_base/1"));
    TB_TRY(opb_set_rebuild(set, 0, fake_rebuild, OPB_REBUILD_WARMUPS));
    /* the A/A copy: its base's op and argument, no rebuild of its own */
    TB_TRY(opb_register(b, set, OPB_WARMUPS, fake_op, &st->f[F_BASE], 1, "fake_base_again/1"));
    TB_TRY(opb_compare(set, 1, 0, 1));
    TB_TRY(opb_register(b, set, OPB_WARMUPS, fake_op, &st->f[F_VAR], 1, "fake_var/1"));
    TB_TRY(opb_compare(set, 2, 0, 0));
    TB_TRY(opb_set_rebuild(set, 2, fake_rebuild, OPB_REBUILD_WARMUPS));
    return opb_register(b, set, OPB_WARMUPS, fake_op, &st->f[F_LONE], 1, "fake_lone/1");
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    (void)b;
    test_state *st = state;
    const gb_run *base, *var, *lone;
    TB_TRY(opb_need(r, &base, "fake_base/1"));
    TB_TRY(opb_need(r, &var, "fake_var/1"));
    TB_TRY(opb_need(r, &lone, "fake_lone/1"));
    st->builds_base = opb_builds(base);
    st->builds_var = opb_builds(var);
    st->builds_lone = opb_builds(lone);
    st->reported = 1;
    return TB_OK;
}

static int plot(tb_bench *b, void *state)
{
    (void)b;
    (void)state;
    return TB_OK;
}

static void teardown(tb_bench *b, void *state)
{
    (void)b;
    test_state *st = state;
    for (int i = 0; i < NFAKE; i++)
        free(st->f[i].buf);
}

static const tb_technique technique = {
    .name = "opbench_test",
    .what = "the op sweeps' rebuild path on fake cases",
    .est_seconds = {5, 5, 5},
    .budget_seconds = {0, 0, 0},
    .order = 1,
};

int main(void)
{
    char dir[256], out_flag[300];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(dir, sizeof dir, "%s", tmp ? tmp : "/tmp");
    snprintf(out_flag, sizeof out_flag, "--out-dir=%s", dir);
    char *argv[] = {"opbench_test", "--device=cpu", "--profile=tiny", "--threads=1", out_flag,
                    NULL};
    tb_bench b;
    int done = 0;
    int rc = tb_bench_init(&b, &technique, NULL, 0, 5, argv, &done);
    CHECK(rc == TB_OK && !done, "the bench starts on the CPU backend");
    if (rc != TB_OK || done)
        return tb_test_exit(rc);
    static const opb_sweep sweep = {setup, report, plot, teardown};
    test_state st;
    memset(&st, 0, sizeof st);
    rc = opb_run(&b, &sweep, &st);
    CHECK(rc == TB_OK && st.reported, "the sweep runs and reports");
    const fake_case *fb = &st.f[F_BASE], *fv = &st.f[F_VAR], *fl = &st.f[F_LONE];
    CHECK(fb->rebuilds == 1 && fv->rebuilds == 1,
          "5 rounds (the cap), a rebuild every 2: the base and the variant rebuilt before round "
          "3, not before round 5, whose build would have one round (%d and %d), the A/A copy "
          "with its base, not on its own", fb->rebuilds, fv->rebuilds);
    CHECK(fl->rebuilds == 0, "a case without a rebuild is never rebuilt (%d)", fl->rebuilds);
    CHECK(st.builds_var == 2, "the variant's interval is over 2 builds (%zu)", st.builds_var);
    CHECK(st.builds_base == 2, "the baseline's A/A interval is over 2 builds (%zu)",
          st.builds_base);
    CHECK(st.builds_lone == 0, "a case compared with nothing has no builds (%zu)",
          st.builds_lone);
    /* the repetition floor: the profile's, or on the gpu profile the
     * shorter one its device-event timing allows */
    tb_rounds_cfg cfg;
    opb_rounds_cfg(&b, &cfg);
    CHECK(cfg.min_rep_floor_s == 0, "tiny profile: no floor (%g)", cfg.min_rep_floor_s);
    b.run_profile = TB_PROFILE_GPU;
    b.profile = TB_PROFILE_FULL;
    opb_rounds_cfg(&b, &cfg);
    CHECK(cfg.min_rep_floor_s == OPB_GPU_MIN_REP_FLOOR && cfg.min_rep_s == 0.2,
          "gpu profile: full's 0.2 s repetitions, floor %g (got %g, %g)", OPB_GPU_MIN_REP_FLOOR,
          cfg.min_rep_s, cfg.min_rep_floor_s);
    b.run_profile = TB_PROFILE_FULL;
    opb_rounds_cfg(&b, &cfg);
    CHECK(cfg.min_rep_floor_s == 0.05, "full profile: floor 0.05 s (%g)", cfg.min_rep_floor_s);
    tb_bench_close(&b);
    return tb_test_exit(TB_OK);
}
