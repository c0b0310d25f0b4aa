/*
 * gelu.c - `bazel run //bench:gelu`: fused vs unfused GELU, forward and
 * backward, over tensor sizes, beside the copy bandwidth of the same device
 * with the same threads.
 *
 * Unfused is GELU as eager PyTorch runs it: five element-wise passes
 * through memory (x*0.7071, erf, +1, x*0.5, product); fused is one pass
 * (what torch.jit.script or a fused kernel gives). Both use the same
 * vectorized erf (kernels/gelu_math.h). Baseline: unfused (the technique off).
 *
 * Writes results/<device>/gelu.csv (+ .json, gelu.gbench.json) and
 * plots/<device>/gelu.{png,svg,pdf} (bandwidth) and gelu_speedup.* .
 * Effective bandwidth counts the bytes a perfect kernel must move:
 * forward reads x and writes y (8 bytes per element), backward reads x and
 * dy and writes dx (12 bytes); copy reads and writes (8 bytes).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/opbench.h"
#include "lib/backend/ref/gelu.h"

/* The op one benchmark times, with its buffers. */
typedef enum gelu_op { OP_COPY, OP_FWD, OP_BWD } gelu_op;

/* What the cases of one size and direction (copy, forward, backward) work
 * on: buffers of exactly n floats, the inputs copied from the sweep's host
 * arrays. The direction's baseline rebuilds them (new addresses, new
 * pages: what another run of the program would draw), so that its
 * variants and A/A copy, compared with it, change build with it. */
typedef struct gelu_bufs {
    tb_backend *be;
    const float *hx, *hdy;     /* host inputs (the sweep's), n floats read */
    float *x, *dy, *out;       /* device buffers of n floats; dy: backward only */
    size_t n;
    int with_dy;
} gelu_bufs;

typedef struct gelu_case {
    tb_backend *be;
    gelu_op op;
    tb_gelu_variant v;
    gelu_bufs *buf;
    int64_t iterations;
} gelu_case;

static int run_case(void *arg)
{
    gelu_case *c = arg;
    tb_backend *be = c->be;
    gelu_bufs *g = c->buf;
    switch (c->op) {
    /* on the compute stream, as the kernels run: no host wait per copy */
    case OP_COPY: return be->copy_d2d(be, g->out, g->x, g->n * sizeof(float), TB_ON_COMPUTE);
    case OP_FWD: return be->gelu_fwd(be, c->v, g->x, g->out, g->n);
    case OP_BWD: return be->gelu_bwd(be, c->v, g->x, g->dy, g->out, g->n);
    }
    return TB_FAIL(TB_ERR_INTERNAL, "unknown op");
}

static void bufs_free(gelu_bufs *g)
{
    g->be->dev_free(g->be, g->x);
    g->be->dev_free(g->be, g->dy);
    g->be->dev_free(g->be, g->out);
    g->x = g->dy = g->out = NULL;
}

/* Allocates g's buffers, copies the inputs in and touches every page of
 * the output (its first write must not be timed). */
static int bufs_alloc(gelu_bufs *g)
{
    tb_backend *be = g->be;
    size_t bytes = g->n * sizeof(float);
    int rc;
    g->x = g->dy = g->out = NULL;
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->x, bytes), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, g->x, g->hx, bytes, NULL), out_free);
    if (g->with_dy) {
        TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->dy, bytes), out_free);
        TB_TRY_GOTO(rc, be->copy_h2d(be, g->dy, g->hdy, bytes, NULL), out_free);
    }
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->out, bytes), out_free);
    TB_TRY_GOTO(rc, be->memset(be, g->out, 0, bytes, NULL), out_free);
    return be->sync(be);
out_free:
    bufs_free(g);
    return rc;
}

/* opb_set_rebuild: new buffers before the old are freed, so that the
 * allocator cannot hand the same blocks back. */
static int case_rebuild(void *arg)
{
    gelu_bufs *g = ((gelu_case *)arg)->buf, old = *g;
    TB_TRY(bufs_alloc(g));
    bufs_free(&old);
    return TB_OK;
}

/* Buffers per size: copy, forward, backward. */
enum { B_COPY, B_FWD, B_BWD, NBUFS };

typedef struct gelu_sweep {
    size_t sizes[32];
    int nsizes;
    gelu_case *cases;          /* nsizes * NCASES */
    gelu_bufs *bufs;           /* nsizes * NBUFS: what the cases time */
    float *x, *dy, *out;       /* device buffers of the largest size: the checks' */
    float *hx, *hdy, *hout[2]; /* host: inputs, read back */
    float *href[2];            /* host: the reference of the largest size, forward and backward */
} gelu_sweep;

/* Order of the cases per size; the A/A pairs give the noise floors. */
enum { C_COPY, C_FWD_UNFUSED, C_FWD_UNFUSED_AGAIN, C_FWD_FUSED, C_BWD_UNFUSED,
       C_BWD_UNFUSED_AGAIN, C_BWD_FUSED, NCASES };

static const struct { const char *name; gelu_op op; tb_gelu_variant v; } case_defs[NCASES] = {
    {"copy", OP_COPY, TB_GELU_FUSED},
    {"fwd_unfused", OP_FWD, TB_GELU_UNFUSED},
    {"fwd_unfused_again", OP_FWD, TB_GELU_UNFUSED},
    {"fwd_fused", OP_FWD, TB_GELU_FUSED},
    {"bwd_unfused", OP_BWD, TB_GELU_UNFUSED},
    {"bwd_unfused_again", OP_BWD, TB_GELU_UNFUSED},
    {"bwd_fused", OP_BWD, TB_GELU_FUSED},
};

/* What each case is compared with (its own index: nothing): the copy is the
 * ceiling, fused is compared with unfused, "again" is unfused's A/A copy. */
static const int case_base[NCASES] = {C_COPY, C_FWD_UNFUSED, C_FWD_UNFUSED, C_FWD_UNFUSED,
                                      C_BWD_UNFUSED, C_BWD_UNFUSED, C_BWD_UNFUSED};

static void plan_sizes(int profile, gelu_sweep *sw)
{
    int lo = 10, hi = 24, step = 2;       /* default: 2^10 .. 2^24 */
    if (profile == TB_PROFILE_FULL)
        hi = 26, step = 1;                /* 2^10 .. 2^26, every power */
    else if (profile == TB_PROFILE_TINY)
        hi = 14, step = 2;
    sw->nsizes = 0;
    for (int e = lo; e <= hi; e += step)
        sw->sizes[sw->nsizes++] = (size_t)1 << e;
}

/* Enough iterations that one repetition moves about 128 MiB (256 MiB in
 * the full profile): long enough for the clock, short enough for minutes. */
static int64_t plan_iterations(int profile, size_t n)
{
    double bytes = profile == TB_PROFILE_FULL ? 256.0 * (1 << 20) : 128.0 * (1 << 20);
    if (profile == TB_PROFILE_TINY)
        bytes = 4.0 * (1 << 20);
    int64_t it = (int64_t)(bytes / (8.0 * (double)n));
    return it < 2 ? 2 : it;
}

/* Each size's buffers (copy, forward, backward), allocated and filled. */
static int alloc_bufs(tb_bench *b, gelu_sweep *sw)
{
    sw->bufs = calloc((size_t)sw->nsizes * NBUFS, sizeof *sw->bufs);
    if (!sw->bufs)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory planning the sweep");
    for (int s = 0; s < sw->nsizes; s++)
        for (int d = 0; d < NBUFS; d++) {
            gelu_bufs *g = &sw->bufs[s * NBUFS + d];
            *g = (gelu_bufs){b->be, sw->hx, sw->hdy, NULL, NULL, NULL, sw->sizes[s], d == B_BWD};
            TB_TRY(bufs_alloc(g));
        }
    return TB_OK;
}

static int register_all(tb_bench *b, gelu_sweep *sw, opb_set *set)
{
    sw->cases = calloc((size_t)sw->nsizes * NCASES, sizeof *sw->cases);
    if (!sw->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory planning the sweep");
    TB_TRY(alloc_bufs(b, sw));
    for (int s = 0; s < sw->nsizes; s++) {
        for (int k = 0; k < NCASES; k++) {
            gelu_case *c = &sw->cases[s * NCASES + k];
            int d = case_defs[k].op == OP_COPY ? B_COPY : case_defs[k].op == OP_FWD ? B_FWD : B_BWD;
            *c = (gelu_case){b->be, case_defs[k].op, case_defs[k].v, &sw->bufs[s * NBUFS + d],
                             plan_iterations(b->profile, sw->sizes[s])};
            /* an A/A copy runs its base's case (warmed up and rebuilt with it) */
            int aa = k == C_FWD_UNFUSED_AGAIN || k == C_BWD_UNFUSED_AGAIN;
            gelu_case *arg = aa ? &sw->cases[s * NCASES + case_base[k]] : c;
            TB_TRY(opb_register(b, set, OPB_WARMUPS, run_case, arg, c->iterations, "gelu_%s/%zu",
                                case_defs[k].name, sw->sizes[s]));
            /* the copy and each direction's baseline rebuild the size's
             * buffers; the variant and the A/A copy follow their base */
            if (case_base[k] == k)
                TB_TRY(opb_set_rebuild(set, set->n - 1, case_rebuild, OPB_REBUILD_WARMUPS));
            /* The cases of a size are registered together: case k's base
             * is case_base[k] of the same size. */
            if (case_base[k] != k)
                TB_TRY(opb_compare(set, set->n - 1, set->n - 1 - k + case_base[k], aa));
        }
    }
    return TB_OK;
}

typedef struct size_check {
    tb_compare fwd_err[2], bwd_err[2];   /* [variant] vs the float64 reference */
    tb_compare fwd_vs_base, bwd_vs_base; /* fused vs unfused output */
} size_check;

/* Tolerance against the float64 reference (tb_max_rel_err: relative to the
 * largest reference value): the vectorized erf is accurate to a few fp32 ulp. */
#define GELU_REF_TOL 1e-5

/* The float64 reference of the largest size, forward into ref[0] and
 * backward into ref[1], once: every size's inputs are a prefix of the
 * largest's (setup), so each size compares with a prefix of it. In slices
 * on every OpenMP thread, each slice the reference's plain loop: the same
 * values as one loop over all of it. One core computing it again per size
 * was most of the 17 s between the H200 run's rounds and its rows (the gpu
 * profile's sizes, 2^10 to 2^26 elements). */
#define REF_SLICE ((size_t)1 << 16)
static void reference(const float *hx, const float *hdy, size_t n, float *ref[2])
{
    long long slices = (long long)((n + REF_SLICE - 1) / REF_SLICE);
#pragma omp parallel for schedule(static)
    for (long long k = 0; k < slices; k++) {
        size_t at = (size_t)k * REF_SLICE, len = n - at < REF_SLICE ? n - at : REF_SLICE;
        tb_ref_gelu_fwd(hx + at, ref[0] + at, len);
        tb_ref_gelu_bwd(hx + at, hdy + at, ref[1] + at, len);
    }
}

/* The correctness pass, after timing: each variant once more, read back,
 * compared with the float64 reference (ref: reference()) and with the
 * baseline's output. */
static int check_size(tb_backend *be, size_t n, const float *hx, const float *hdy, float *x,
                      float *dy, float *out, float *hout[2], float *const ref[2],
                      size_check *chk)
{
    TB_TRY(be->copy_h2d(be, x, hx, n * sizeof(float), NULL));
    TB_TRY(be->copy_h2d(be, dy, hdy, n * sizeof(float), NULL));
    for (int v = 0; v < 2; v++) {
        TB_TRY(be->gelu_fwd(be, (tb_gelu_variant)v, x, out, n));
        TB_TRY(be->copy_d2h(be, hout[v], out, n * sizeof(float), NULL));
        TB_TRY(tb_compare_floats(ref[0], hout[v], n, GELU_REF_TOL, &chk->fwd_err[v]));
    }
    TB_TRY(tb_compare_floats(hout[TB_GELU_UNFUSED], hout[TB_GELU_FUSED], n, TB_TOL_F32,
                             &chk->fwd_vs_base));
    for (int v = 0; v < 2; v++) {
        TB_TRY(be->gelu_bwd(be, (tb_gelu_variant)v, x, dy, out, n));
        TB_TRY(be->copy_d2h(be, hout[v], out, n * sizeof(float), NULL));
        TB_TRY(tb_compare_floats(ref[1], hout[v], n, GELU_REF_TOL, &chk->bwd_err[v]));
    }
    return tb_compare_floats(hout[TB_GELU_UNFUSED], hout[TB_GELU_FUSED], n, TB_TOL_F32,
                             &chk->bwd_vs_base);
}

static void set_correctness(tb_result_row *row, const tb_compare *err, const tb_compare *vs_base,
                            int is_fused)
{
    opb_set_check(row, err, "float64 reference");
    if (is_fused) {
        char verdict[160];
        tb_compare_format(vs_base, verdict, sizeof verdict);
        snprintf(row->note, sizeof row->note, "output vs unfused: %s", verdict);
    }
}

static int add_rows(tb_bench *b, const gb_results *r, size_t n, const size_check *chk)
{
    const gb_run *run[NCASES];
    for (int k = 0; k < NCASES; k++)
        TB_TRY(opb_need(r, &run[k], "gelu_%s/%zu", case_defs[k].name, n));
    tb_result_row row;
    double copy_gbs;
    tb_bench_row(b, &row, "copy", 0, "elements", (double)n, "copy time");
    TB_TRY(tb_bench_fill_timing(&row, run[C_COPY], 1e6, "us"));
    copy_gbs = 8.0 * (double)n / (row.median * 1e-6) / 1e9;
    row.timing_verdict = TB_TIMING_NA;
    row.rate = copy_gbs;
    snprintf(row.rate_unit, sizeof row.rate_unit, "GB/s");
    snprintf(row.note, sizeof row.note, "the ceiling: device copy with the same threads");
    TB_TRY(tb_results_add(&b->res, &row));

    static const struct { int base, again, fused; const char *metric; double bytes; int fwd; } dir[2] = {
        {C_FWD_UNFUSED, C_FWD_UNFUSED_AGAIN, C_FWD_FUSED, "fwd time", 8, 1},
        {C_BWD_UNFUSED, C_BWD_UNFUSED_AGAIN, C_BWD_FUSED, "bwd time", 12, 0},
    };
    for (int d = 0; d < 2; d++) {
        for (int fused = 0; fused < 2; fused++) {
            const gb_run *me = run[fused ? dir[d].fused : dir[d].base];
            tb_bench_row(b, &row, fused ? "fused" : "unfused", !fused, "elements", (double)n,
                         dir[d].metric);
            if (fused)
                TB_TRY(opb_fill_variant(&row, me, run[dir[d].base], run[dir[d].again], 1e6, "us"));
            else /* speedup 1, as every baseline row (results/README.md) */
                TB_TRY(opb_fill_base(&row, me, run[dir[d].again], 1e6, "us"));
            row.rate = dir[d].bytes * (double)n / (row.median * 1e-6) / 1e9;
            snprintf(row.rate_unit, sizeof row.rate_unit, "GB/s");
            snprintf(row.ceiling_name, sizeof row.ceiling_name, "copy bandwidth");
            row.ceiling_rate = copy_gbs;
            row.fraction_of_ceiling = row.rate / copy_gbs;
            const tb_compare *err = dir[d].fwd ? &chk->fwd_err[fused] : &chk->bwd_err[fused];
            set_correctness(&row, err, dir[d].fwd ? &chk->fwd_vs_base : &chk->bwd_vs_base, fused);
            TB_TRY(tb_results_add(&b->res, &row));
        }
    }
    return TB_OK;
}

/* setup: buffers of the largest size, inputs, the cases. */
static int setup(tb_bench *b, void *state, opb_set *set)
{
    gelu_sweep *sw = state;
    plan_sizes(b->profile, sw);
    size_t max_n = sw->sizes[sw->nsizes - 1], bytes = max_n * sizeof(float);
    tb_backend *be = b->be;
    TB_TRY(be->dev_alloc(be, (void **)&sw->x, bytes));
    TB_TRY(be->dev_alloc(be, (void **)&sw->dy, bytes));
    TB_TRY(be->dev_alloc(be, (void **)&sw->out, bytes));
    TB_TRY(be->host_alloc(be, (void **)&sw->hx, bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&sw->hdy, bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&sw->hout[0], bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&sw->hout[1], bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&sw->href[0], bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&sw->href[1], bytes, 0));
    /* Uniform in [-6, 6]: covers both tails, where erf saturates, and the
     * curved middle; no zeros. */
    tb_rng_fill(sw->hx, max_n, 1, -6.0, 6.0);
    tb_rng_fill(sw->hdy, max_n, 2, -6.0, 6.0);
    TB_TRY(be->copy_h2d(be, sw->x, sw->hx, bytes, NULL));
    TB_TRY(be->copy_h2d(be, sw->dy, sw->hdy, bytes, NULL));
    return register_all(b, sw, set);
}

/* report: the correctness pass per size, after timing, then its rows. */
static int report(tb_bench *b, void *state, const gb_results *r)
{
    gelu_sweep *sw = state;
    reference(sw->hx, sw->hdy, sw->sizes[sw->nsizes - 1], sw->href);
    for (int s = 0; s < sw->nsizes; s++) {
        size_check chk;
        TB_TRY(check_size(b->be, sw->sizes[s], sw->hx, sw->hdy, sw->x, sw->dy, sw->out,
                          sw->hout, sw->href, &chk));
        TB_TRY(add_rows(b, r, sw->sizes[s], &chk));
    }
    return TB_OK;
}

/* Bandwidth vs size (copy and the four GELU variants), and the speedup of
 * fused over unfused with its interval. */
static int plot(tb_bench *b, void *state)
{
    (void)state;
    TB_TRY(opb_plot(b, "gelu", "GELU effective bandwidth", "elements",
                    "effective bandwidth (GB/s)", 2, OPB_Y_RATE));
    return opb_plot(b, "gelu_speedup", "GELU fused over unfused (paired estimate, 95% CI)",
                    "elements", "speedup (x)", 2, OPB_Y_SPEEDUP);
}

static void teardown(tb_bench *b, void *state)
{
    gelu_sweep *sw = state;
    tb_backend *be = b->be;
    free(sw->cases);
    for (int i = 0; sw->bufs && i < sw->nsizes * NBUFS; i++)
        if (sw->bufs[i].be)
            bufs_free(&sw->bufs[i]);
    free(sw->bufs);
    be->dev_free(be, sw->x);
    be->dev_free(be, sw->dy);
    be->dev_free(be, sw->out);
    be->host_free(be, sw->hx, 0);
    be->host_free(be, sw->hdy, 0);
    be->host_free(be, sw->hout[0], 0);
    be->host_free(be, sw->hout[1], 0);
    be->host_free(be, sw->href[0], 0);
    be->host_free(be, sw->href[1], 0);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    gelu_sweep sw = {0};
    return opb_run(b, &sweep, &sw);
}

static const tb_technique technique = {
    .name = "gelu",
    .headline = "fused",
    .what = "Fused vs unfused GELU (forward and backward) over sizes, beside the "
            "copy bandwidth.",
    .est_seconds = {25, 240, 5, 22}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {26, 200, 2, 10},
    .order = 10,
    .tiny = {.min_rows = 15, .plots = "gelu,gelu_speedup"},
};

TB_OPB_MAIN(technique, run)
