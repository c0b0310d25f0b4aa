/*
 * mixed_precision_ops.c - `bazel run //bench:mixed_precision_ops`: GEMM and
 * convolution alone in fp32 (off: the baseline) vs with bf16 or fp16
 * inputs and fp32 accumulation (what autocast runs them in): gemm_lowp,
 * and conv_fwd with a bf16/fp16 descriptor (math TB_MATH_LOWP). The inputs
 * are cast once before timing (the op alone, not autocast's casts).
 * Where the backend answers TB_ERR_UNSUPPORTED (the CPU backend: fp16, as
 * oneDNN 2.6 has no CPU fp16 matmul or convolution), the row is n/a and
 * quotes the backend's message. On a CPU without avx512_bf16, oneDNN runs
 * bf16 through its avx512_core emulation. The training step with AMP is
 * the step benches' (bench/harness/step_harness.h).
 *
 * Sweep: square GEMMs n = 256, 512, 1024 (full: 512 .. 4096; bf16 runs by
 * emulation on CPUs without avx512_bf16, several times slower than fp32,
 * so the default stays small); convolution forward on the small
 * CNN's 32-channel 7x7 layer (batch 32) and a ResNet-ish 128-channel 28x28
 * layer (batch 8).
 *
 * Writes results/<device>/mixed_precision_ops.csv and plots/<device>/
 * mixed_precision_ops_gemm.* and mixed_precision_ops_conv.* (speedups). Correctness: each low-precision output
 * against the fp32 output of the same inputs, tolerance by dtype
 * (TB_TOL_BF16, TB_TOL_F16 in lib/core/stats.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/opbench.h"

enum { V_F32, V_F32_AGAIN, V_BF16, V_F16, NV };
static const struct { const char *name, *setting; tb_dtype dtype; double tol; } vdefs[NV] = {
    {"f32", "off (fp32)", TB_F32, 0},
    {"f32_again", "off (fp32)", TB_F32, 0},
    {"bf16", "bf16", TB_BF16, TB_TOL_BF16},
    {"f16", "fp16", TB_F16, TB_TOL_F16},
};

/* A point: a GEMM (n > 0) or a convolution (conv.n > 0). */
typedef struct mp_point {
    int gemm_n;
    tb_conv_desc conv;
    const char *what;
} mp_point;

static tb_conv_desc conv_desc(int n, int c, int hw, int k)
{
    return (tb_conv_desc){n, c, hw, hw, k, 3, 3, 1, 1, TB_NCHW, TB_F32, TB_MATH_F32};
}

static int plan_points(int profile, mp_point *p)
{
    int n = 0;
    static const int gemm_default[] = {256, 512, 1024}, gemm_full[] = {512, 1024, 2048, 4096},
                     gemm_tiny[] = {256};
    const int *g = profile == TB_PROFILE_TINY ? gemm_tiny
                   : profile == TB_PROFILE_FULL ? gemm_full : gemm_default;
    int ng = profile == TB_PROFILE_TINY ? 1 : profile == TB_PROFILE_FULL ? 4 : 3;
    for (int i = 0; i < ng; i++)
        p[n++] = (mp_point){g[i], {0}, "square GEMM"};
    p[n++] = (mp_point){0, conv_desc(profile == TB_PROFILE_TINY ? 8 : 32, 32, 7, 32),
                        "small CNN conv 32->32 ch, 7x7"};
    if (profile != TB_PROFILE_TINY)
        p[n++] = (mp_point){0, conv_desc(8, 128, 28, 128), "ResNet-ish conv 128 ch, 28x28"};
    return n;
}

static size_t point_inputs(const mp_point *p, size_t *na, size_t *nb, size_t *nc)
{
    if (p->gemm_n) {
        *na = *nb = *nc = (size_t)p->gemm_n * p->gemm_n;
    } else {
        const tb_conv_desc *d = &p->conv;
        *na = (size_t)d->n * d->c * d->h * d->w;
        *nb = (size_t)d->k * d->c * d->r * d->s;
        *nc = (size_t)d->n * d->k * tb_conv_out_h(d) * tb_conv_out_w(d);
    }
    return *na + *nb + *nc;
}

typedef struct mp_bufs {
    float *a, *b, *c;          /* device fp32: inputs and output */
    void *lp_a[2], *lp_b[2];   /* device bf16 and fp16 copies of a and b */
    float *ha, *hb, *hc[NV];   /* host */
    size_t max_a, max_b, max_c;
} mp_bufs;

typedef struct mp_case {
    tb_backend *be;
    mp_bufs *bf;               /* the point's device buffers */
    const mp_bufs *host;       /* the host inputs they are filled from */
    const mp_point *p;
    int v, algo;
} mp_case;

static int lp_index(tb_dtype t) { return t == TB_BF16 ? 0 : 1; }

static int run_case(void *arg)
{
    mp_case *c = arg;
    const mp_bufs *f = c->bf;
    tb_backend *be = c->be;
    tb_dtype t = vdefs[c->v].dtype;
    int n = c->p->gemm_n;
    if (n && t == TB_F32)
        return be->gemm(be, 0, 0, n, n, n, 1.0f, f->a, n, f->b, n, 0.0f, f->c, n, TB_MATH_F32);
    if (n)
        return be->gemm_lowp(be, t, 0, 0, n, n, n, 1.0f, f->lp_a[lp_index(t)], n,
                             f->lp_b[lp_index(t)], n, 0.0f, f->c, n);
    tb_conv_desc d = c->p->conv;
    if (t == TB_F32)
        return be->conv_fwd(be, &d, c->algo, f->a, f->b, NULL, f->c);
    d.dtype = t;
    d.math = TB_MATH_LOWP;
    return be->conv_fwd(be, &d, c->algo, f->lp_a[lp_index(t)], f->lp_b[lp_index(t)], NULL, f->c);
}

/* Prepares case c (the conv algorithm) and runs it once: TB_ERR_UNSUPPORTED
 * leaves its message in why and returns 0; other errors fail. */
static int try_case(mp_case *c, char *why, size_t cap, int *ok)
{
    *ok = 1;
    int rc = TB_OK;
    if (!c->p->gemm_n) {
        tb_conv_desc d = c->p->conv;
        d.dtype = vdefs[c->v].dtype;
        d.math = d.dtype == TB_F32 ? TB_MATH_F32 : TB_MATH_LOWP;
        rc = c->be->conv_algo_default(c->be, &d, TB_CONV_FWD, &c->algo);
    }
    if (rc == TB_OK)
        rc = run_case(c);
    if (rc == TB_OK)
        rc = c->be->sync(c->be);
    if (rc != TB_ERR_UNSUPPORTED)
        return rc;
    snprintf(why, cap, "%s", tb_error_message());
    tb_error_clear();
    *ok = 0;
    return TB_OK;
}

typedef struct mp_state {
    mp_point pts[8];
    int npts;
    mp_bufs f;                 /* host inputs and outputs read back */
    mp_bufs dev[8];            /* (npts): each point's device buffers, what its cases run on */
    mp_case *cases;            /* npts * NV */
    int ok[8][NV];
    char why[8][NV][200];
} mp_state;

static void free_dev(tb_backend *be, mp_bufs *g)
{
    be->dev_free(be, g->a);
    be->dev_free(be, g->b);
    be->dev_free(be, g->c);
    for (int i = 0; i < 2; i++) {
        be->dev_free(be, g->lp_a[i]);
        be->dev_free(be, g->lp_b[i]);
        g->lp_a[i] = g->lp_b[i] = NULL;
    }
    g->a = g->b = g->c = NULL;
}

/* One point's device buffers (g->max_a, max_b, max_c floats): a and b from
 * the host inputs' first floats, their bf16 and fp16 casts, c with every
 * page touched (its first write is not timed). */
static int alloc_dev(tb_backend *be, const mp_bufs *host, mp_bufs *g)
{
    int rc;
    static const tb_dtype lp[2] = {TB_BF16, TB_F16};
    g->a = g->b = g->c = NULL;
    for (int i = 0; i < 2; i++)
        g->lp_a[i] = g->lp_b[i] = NULL;
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->a, g->max_a * sizeof(float)), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->b, g->max_b * sizeof(float)), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->c, g->max_c * sizeof(float)), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, g->a, host->ha, g->max_a * sizeof(float), NULL), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, g->b, host->hb, g->max_b * sizeof(float), NULL), out_free);
    TB_TRY_GOTO(rc, be->memset(be, g->c, 0, g->max_c * sizeof(float), NULL), out_free);
    for (int i = 0; i < 2; i++) {
        TB_TRY_GOTO(rc, be->dev_alloc(be, &g->lp_a[i], g->max_a * 2), out_free);
        TB_TRY_GOTO(rc, be->dev_alloc(be, &g->lp_b[i], g->max_b * 2), out_free);
        TB_TRY_GOTO(rc, be->cast_f32_to_lowp(be, lp[i], g->a, g->lp_a[i], g->max_a), out_free);
        TB_TRY_GOTO(rc, be->cast_f32_to_lowp(be, lp[i], g->b, g->lp_b[i], g->max_b), out_free);
    }
    return be->sync(be);
out_free:
    free_dev(be, g);
    return rc;
}

/* opb_set_rebuild (the point's fp32 baseline): new buffers before the old
 * are freed, so that the allocator cannot hand the same blocks back; the
 * point's other precisions, compared with it, change build with it. */
static int point_rebuild(void *arg)
{
    mp_case *c = arg;
    mp_bufs old = *c->bf;
    TB_TRY(alloc_dev(c->be, c->host, c->bf));
    free_dev(c->be, &old);
    return TB_OK;
}

/* The checks' buffers: host inputs (seeded), outputs read back, and device
 * buffers of the largest sizes (alloc_dev). */
static int alloc_bufs(tb_backend *be, mp_bufs *f)
{
    TB_TRY(be->host_alloc(be, (void **)&f->ha, f->max_a * sizeof(float), 0));
    TB_TRY(be->host_alloc(be, (void **)&f->hb, f->max_b * sizeof(float), 0));
    for (int v = 0; v < NV; v++)
        TB_TRY(be->host_alloc(be, (void **)&f->hc[v], f->max_c * sizeof(float), 0));
    tb_rng_fill(f->ha, f->max_a, 1, -1.0, 1.0);
    tb_rng_fill(f->hb, f->max_b, 2, -1.0, 1.0);
    return alloc_dev(be, f, f);
}

static void free_bufs(tb_backend *be, mp_bufs *f)
{
    free_dev(be, f);
    be->host_free(be, f->ha, 0);
    be->host_free(be, f->hb, 0);
    for (int v = 0; v < NV; v++)
        be->host_free(be, f->hc[v], 0);
}

static int64_t plan_iterations(int profile, const mp_point *p)
{
    double flops = p->gemm_n ? 2.0 * p->gemm_n * (double)p->gemm_n * p->gemm_n
                             : 2.0 * p->conv.n * p->conv.k * (double)tb_conv_out_h(&p->conv) *
                                   tb_conv_out_w(&p->conv) * p->conv.c * 9;
    double budget = profile == TB_PROFILE_FULL ? 2e10 : profile == TB_PROFILE_TINY ? 5e7 : 2e9;
    int64_t it = (int64_t)(budget / flops);
    return it < 1 ? 1 : it;
}

static int setup(tb_bench *b, void *state, opb_set *set)
{
    mp_state *st = state;
    st->npts = plan_points(b->profile, st->pts);
    for (int i = 0; i < st->npts; i++) {
        size_t na, nb, nc;
        point_inputs(&st->pts[i], &na, &nb, &nc);
        st->f.max_a = na > st->f.max_a ? na : st->f.max_a;
        st->f.max_b = nb > st->f.max_b ? nb : st->f.max_b;
        st->f.max_c = nc > st->f.max_c ? nc : st->f.max_c;
    }
    st->cases = calloc((size_t)st->npts * NV, sizeof *st->cases);
    if (!st->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    TB_TRY(alloc_bufs(b->be, &st->f));
    for (int i = 0; i < st->npts; i++) {
        mp_bufs *g = &st->dev[i];
        point_inputs(&st->pts[i], &g->max_a, &g->max_b, &g->max_c);
        TB_TRY(alloc_dev(b->be, &st->f, g));
    }
    for (int i = 0; i < st->npts; i++) {
        size_t base = 0;
        for (int v = 0; v < NV; v++) {
            mp_case *c = &st->cases[i * NV + v];
            *c = (mp_case){b->be, &st->dev[i], &st->f, &st->pts[i], v, 0};
            TB_TRY(try_case(c, st->why[i][v], sizeof st->why[i][v], &st->ok[i][v]));
            if (!st->ok[i][v])
                continue;
            /* the A/A copy runs f32's case (warmed up and rebuilt with it) */
            mp_case *arg = v == V_F32_AGAIN && st->ok[i][V_F32] ? &st->cases[i * NV + V_F32] : c;
            TB_TRY(opb_register(b, set, OPB_WARMUPS, run_case, arg,
                                plan_iterations(b->profile, c->p), "mp_%s/%d", vdefs[v].name,
                                i));
            /* Every precision is compared with f32 of its point; f32_again
             * is f32's A/A copy. */
            if (v == V_F32) {
                base = set->n - 1;
                TB_TRY(opb_set_rebuild(set, base, point_rebuild, OPB_REBUILD_WARMUPS));
            } else if (st->ok[i][V_F32])
                TB_TRY(opb_compare(set, set->n - 1, base, v == V_F32_AGAIN));
        }
    }
    return TB_OK;
}

/* Each supported variant once more, read back, compared with fp32. */
static int check_point(tb_backend *be, mp_state *st, int i, tb_compare *cmp)
{
    size_t na, nb, nc;
    point_inputs(&st->pts[i], &na, &nb, &nc);
    for (int v = 0; v < NV; v++) {
        if (!st->ok[i][v] || v == V_F32_AGAIN)
            continue;
        TB_TRY(run_case(&st->cases[i * NV + v]));
        TB_TRY(be->copy_d2h(be, st->f.hc[v], st->dev[i].c, nc * sizeof(float), NULL));
        TB_TRY(be->sync(be));
        if (v != V_F32)
            TB_TRY(tb_compare_floats(st->f.hc[V_F32], st->f.hc[v], nc, vdefs[v].tol, &cmp[v]));
    }
    return TB_OK;
}

static int add_point_rows(tb_bench *b, const gb_results *r, mp_state *st, int i)
{
    const mp_point *p = &st->pts[i];
    const char *metric = p->gemm_n ? "gemm time" : "conv fwd time";
    const char *param = p->gemm_n ? "n" : "shape";
    double value = p->gemm_n ? p->gemm_n : i;
    tb_compare cmp[NV];
    TB_TRY(check_point(b->be, st, i, cmp));
    const gb_run *base, *again;
    TB_TRY(opb_need(r, &base, "mp_%s/%d", vdefs[V_F32].name, i));
    TB_TRY(opb_need(r, &again, "mp_%s/%d", vdefs[V_F32_AGAIN].name, i));
    for (int v = 0; v < NV; v++) {
        if (v == V_F32_AGAIN)
            continue;
        tb_result_row row;
        char reason[256];
        if (!st->ok[i][v]) {
            snprintf(reason, sizeof reason, "%s at %s: the backend says: %s", vdefs[v].setting,
                     p->what, st->why[i][v]);
            TB_TRY(opb_add_na(b, vdefs[v].setting, metric, reason));
            continue;
        }
        const gb_run *me;
        TB_TRY(opb_need(r, &me, "mp_%s/%d", vdefs[v].name, i));
        tb_bench_row(b, &row, vdefs[v].setting, v == V_F32, param, value, metric);
        if (v == V_F32)
            TB_TRY(opb_fill_base(&row, base, again, 1e3, "ms"));
        else
            TB_TRY(opb_fill_variant(&row, me, base, again, 1e3, "ms"));
        if (v != V_F32)
            opb_set_check(&row, &cmp[v], "fp32 output");
        snprintf(row.note, sizeof row.note, "%s; inputs cast before timing, fp32 accumulate "
                 "and output", p->what);
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    mp_state *st = state;
    for (int i = 0; i < st->npts; i++)
        TB_TRY(add_point_rows(b, r, st, i));
    return TB_OK;
}

static int plot(tb_bench *b, void *state)
{
    (void)state;
    TB_TRY(opb_plot_metric(b, "mixed_precision_ops_gemm", "Square GEMM, low precision over fp32",
                           "n (n x n x n)", "speedup (x)", 2, OPB_Y_SPEEDUP, "gemm time"));
    return opb_plot_metric(b, "mixed_precision_ops_conv",
                           "Convolution forward, low precision over fp32",
                           "shape (index; see notes)", "speedup (x)", 0, OPB_Y_SPEEDUP,
                           "conv fwd time");
}

static void teardown(tb_bench *b, void *state)
{
    mp_state *st = state;
    free(st->cases);
    for (int i = 0; i < st->npts; i++)
        free_dev(b->be, &st->dev[i]);
    free_bufs(b->be, &st->f);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    mp_state st = {0};
    return opb_run(b, &sweep, &st);
}

static const tb_technique technique = {
    .name = "mixed_precision_ops",
    .headline = "bf16",
    .what = "GEMM and convolution alone: fp32 vs bf16 / fp16 inputs with fp32 "
            "accumulation.",
    .est_seconds = {10, 200, 3, 12}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {10, 180, 2, 12},
    .order = 370,
    .tiny = {.min_rows = 6, .plots = "mixed_precision_ops_gemm,mixed_precision_ops_conv"},
};

TB_OPB_MAIN(technique, run)
