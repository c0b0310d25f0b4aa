/*
 * conv.c - selfcheck's checks of the convolution, batch norm and
 * pooling slots against lib/backend/ref/conv.h and lib/backend/ref/ops.h: convolutions
 * with the default algorithm and every one conv_find returns, both
 * layouts, odd sizes, fp32, TF32 and bf16/fp16 inputs.
 *
 *   bazel run //bench:selfcheck -- --device=cpu
 *   bazel test //lib/selfcheck:selfcheck_test
 */
#define _GNU_SOURCE /* strcasestr */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/backend/ref/conv.h"
#include "lib/backend/ref/ops.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/status.h"

/* ------------------------------------------------------------ convolution */

/* Odd spatial sizes, both layouts, stride 1 and 2, 3x3, 5x5 and 1x1. */
static const tb_conv_desc conv_descs[] = {
    {2, 3, 7, 7, 5, 3, 3, 1, 1, TB_NCHW, TB_F32, TB_MATH_F32},
    {3, 4, 9, 8, 6, 3, 3, 2, 1, TB_NHWC, TB_F32, TB_MATH_F32},
    {2, 5, 6, 5, 4, 5, 5, 1, 2, TB_NCHW, TB_F32, TB_MATH_F32},
    {2, 6, 5, 7, 3, 1, 1, 1, 0, TB_NHWC, TB_F32, TB_MATH_F32},
};
#define N_CONV_DESCS (sizeof conv_descs / sizeof conv_descs[0])

static const char *const conv_kind_names[] = {"fwd", "bwd_data", "bwd_filter"};

static void conv_desc_str(const tb_conv_desc *d, char *out, size_t cap)
{
    snprintf(out, cap, "%s %dx%dx%dx%d k%d %dx%d s%d p%d%s", d->layout == TB_NHWC ? "NHWC" : "NCHW",
             d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->stride, d->pad,
             d->math == TB_MATH_F32 ? "" : d->math == TB_MATH_TF32 ? " math=tf32" : " math=lowp");
}

typedef struct conv_sizes {
    size_t x, w, y;
} conv_sizes;

static conv_sizes conv_sizes_of(const tb_conv_desc *d)
{
    conv_sizes s;
    s.x = (size_t)d->n * d->c * d->h * d->w;
    s.w = (size_t)d->k * d->c * d->r * d->s;
    s.y = (size_t)d->n * d->k * tb_conv_out_h(d) * tb_conv_out_w(d);
    return s;
}

/* The algorithms a conv check runs: the default first, then every other
 * one conv_find returns. */
typedef struct conv_algos {
    int n;
    int id[TB_MAX_CONV_ALGOS + 1];
    char name[TB_MAX_CONV_ALGOS + 1][80];
} conv_algos;

/* Transforming algorithms lose more to rounding (internal.h), the more the
 * larger the filter. */
static double conv_tol(const char *algo_name, const tb_conv_desc *d)
{
    if (strcasestr(algo_name, "winograd_nonfused") && (d->r > 3 || d->s > 3))
        return TOL_WINOGRAD_LARGE;
    if (strcasestr(algo_name, "winograd") || strcasestr(algo_name, "wino") ||
        strcasestr(algo_name, "fft"))
        return TOL_TRANSFORM;
    return TOL_SUM;
}

/* Fills *a; a failing conv_algo_default or conv_find is a FAIL line of the
 * slot being checked (the op cannot be checked without them). */
static void conv_algo_list(sc_ctx *sc, const tb_conv_desc *d, tb_conv_kind kind, conv_algos *a)
{
    tb_backend *be = sc->be;
    char ds[96];
    conv_desc_str(d, ds, sizeof ds);
    a->n = 0;
    tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
    int found = 0, dflt = -1;
    int rc = be->conv_algo_default(be, d, kind, &dflt);
    if (rc != TB_OK) {
        sc_case c;
        sc_case_start(&c, "%s default algorithm", ds);
        sc_case_fail_rc(&c, "conv_algo_default", rc);
        sc_case_end(sc, &c);
    }
    rc = be->conv_find(be, d, kind, perf, TB_MAX_CONV_ALGOS, &found);
    if (rc != TB_OK) {
        sc_case c;
        sc_case_start(&c, "%s algorithms", ds);
        sc_case_fail_rc(&c, "conv_find", rc);
        sc_case_end(sc, &c);
        found = 0;
    }
    const char *dflt_name = "?";
    for (int i = 0; i < found; i++)
        if (perf[i].algo == dflt)
            dflt_name = perf[i].name;
    if (dflt >= 0) {
        a->id[a->n] = dflt;
        snprintf(a->name[a->n++], sizeof a->name[0], "default:%s", dflt_name);
    }
    for (int i = 0; i < found && i < TB_MAX_CONV_ALGOS; i++) {
        if (perf[i].algo == dflt)
            continue;
        if (perf[i].ms < 0) { /* conv_find could not run it: nothing to check */
            sc_case c;
            sc_case_start(&c, "%s algo=%s", ds, perf[i].name);
            c.na = 1;
            snprintf(c.why, sizeof c.why, "conv_find reports it failed on this problem");
            sc_case_end(sc, &c);
            continue;
        }
        a->id[a->n] = perf[i].algo;
        snprintf(a->name[a->n++], sizeof a->name[0], "%s", perf[i].name);
    }
}

static int conv_fwd_one(sc_ctx *sc, const tb_conv_desc *d, int algo, const char *name,
                        int with_bias, int optional)
{
    tb_backend *be = sc->be;
    conv_sizes n = conv_sizes_of(d);
    float *x, *dx, *w, *dw, *bias = NULL, *dbias = NULL, *want, *y;
    TB_TRY(sc_randf(sc, &x, &dx, n.x, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &w, &dw, n.w, -1.0f, 1.0f));
    if (with_bias)
        TB_TRY(sc_randf(sc, &bias, &dbias, (size_t)d->k, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &want, &y, n.y));
    tb_conv_desc rd = *d;
    rd.math = TB_MATH_F32;
    TB_TRY(tb_conv_ref_fwd(&rd, x, w, bias, want));
    double tol = conv_tol(name, d); /* fp32 math: conv_reduced_one checks the others */
    char ds[96];
    conv_desc_str(d, ds, sizeof ds);
    sc_case c;
    sc_case_start(&c, "%s%s algo=%s", ds, with_bias ? " bias" : "", name);
    TB_TRY(SC_FINISH(sc, &c, be->conv_fwd(be, d, algo, dx, dw, dbias, y), optional,
                     {"y", want, y, n.y, tol}));
    return sc_release(sc);
}

/* Runs kind with be's default algorithm for d: y = fwd(x, w, bias), dx =
 * bwd_data(dy, w), or dw, dbias = bwd_filter(x, dy) (added to when acc),
 * written to out, out_b. */
static int conv_run_default(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                            const void *x, const void *w, const void *dy, const float *bias,
                            float *out, float *out_b, int acc)
{
    int algo = 0;
    TB_TRY(be->conv_algo_default(be, d, kind, &algo));
    if (kind == TB_CONV_FWD)
        return be->conv_fwd(be, d, algo, x, w, bias, out);
    if (kind == TB_CONV_BWD_DATA)
        return be->conv_bwd_data(be, d, algo, dy, w, out);
    return be->conv_bwd_filter(be, d, algo, x, dy, out, out_b, acc);
}

/* An input of a reduced-precision case: fp32 for TF32 math, else bf16 or
 * fp16 bits on the device (f holds the values they round from). */
static int conv_rand_in(sc_ctx *sc, tb_dtype dt, float **f, void **dev, size_t n)
{
    if (dt == TB_F32)
        return sc_randf(sc, f, (float **)dev, n, -1.0f, 1.0f);
    return sc_rand_lowp(sc, dt, f, dev, n);
}

/* Reduced precision, the default algorithm, both layouts: TF32 math on
 * fp32 inputs (at TOL_TF32), and bf16 / fp16 inputs (each direction's,
 * lib/backend/backend.h) with fp32 outputs (at TOL_LOWP), against the fp32
 * reference on the unrounded inputs; bwd_filter also adding to dw and
 * dbias (gradient accumulation, with --amp). n/a where the backend lacks
 * the math mode or dtype (CPU fp16). */
static int conv_reduced_one(sc_ctx *sc, tb_conv_kind kind, tb_dtype dt, tb_layout layout,
                            int acc)
{
    tb_backend *be = sc->be;
    tb_conv_desc d = {.n = 2, .c = 5, .h = 9, .w = 7, .k = 8, .r = 3, .s = 3, .stride = 1,
                      .pad = 1, .layout = layout, .dtype = dt,
                      .math = dt == TB_F32 ? TB_MATH_TF32 : TB_MATH_LOWP};
    tb_conv_desc rd = d;
    rd.dtype = TB_F32;
    rd.math = TB_MATH_F32;
    conv_sizes n = conv_sizes_of(&d);
    float *x, *w, *g, *bias, *dbias, *want, *out, *want_b = NULL, *out_b = NULL;
    void *dx, *dw, *dg;
    TB_TRY(conv_rand_in(sc, dt, &x, &dx, n.x));
    TB_TRY(conv_rand_in(sc, dt, &w, &dw, n.w));
    TB_TRY(conv_rand_in(sc, dt, &g, &dg, n.y));
    TB_TRY(sc_randf(sc, &bias, &dbias, (size_t)d.k, -1.0f, 1.0f));
    size_t nout = kind == TB_CONV_FWD ? n.y : kind == TB_CONV_BWD_DATA ? n.x : n.w;
    TB_TRY(sc_inoutf(sc, &want, &out, nout, acc));
    if (kind == TB_CONV_FWD)
        TB_TRY(tb_conv_ref_fwd(&rd, x, w, bias, want));
    else if (kind == TB_CONV_BWD_DATA)
        TB_TRY(tb_conv_ref_bwd_data(&rd, g, w, want));
    else {
        TB_TRY(sc_inoutf(sc, &want_b, &out_b, (size_t)d.k, acc));
        TB_TRY(tb_conv_ref_bwd_filter(&rd, x, g, want, want_b, acc));
    }
    double tol = dt == TB_F32 ? TOL_TF32 : TOL_LOWP;
    sc_case c;
    sc_case_start(&c, "%s %s n=2 c=5 9x7 k=8 3x3%s default algorithm",
                  layout == TB_NHWC ? "nhwc" : "nchw", dt == TB_F32 ? "tf32" : sc_lowp_names[dt],
                  acc ? " accumulate=1" : "");
    TB_TRY(SC_FINISH(sc, &c,
                     conv_run_default(be, &d, kind, dx, dw, dg, dbias, out, out_b, acc), 1,
                     {kind == TB_CONV_FWD ? "y" : kind == TB_CONV_BWD_DATA ? "dx" : "dw", want, out,
                      nout, tol},
                     {"dbias", want_b, out_b, (size_t)d.k, tol}));
    return sc_release(sc);
}

static int conv_reduced_cases(sc_ctx *sc, tb_conv_kind kind)
{
    for (int dt = TB_F32; dt <= TB_F16; dt++)
        for (int lay = TB_NCHW; lay <= TB_NHWC; lay++)
            for (int acc = 0; acc <= (kind == TB_CONV_BWD_FILTER); acc++)
                TB_TRY(conv_reduced_one(sc, kind, (tb_dtype)dt, (tb_layout)lay, acc));
    return TB_OK;
}

int check_conv_fwd(sc_ctx *sc)
{
    TB_TRY(conv_reduced_cases(sc, TB_CONV_FWD));
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        conv_algos a;
        conv_algo_list(sc, &conv_descs[i], TB_CONV_FWD, &a);
        for (int j = 0; j < a.n; j++)
            TB_TRY(conv_fwd_one(sc, &conv_descs[i], a.id[j], a.name[j], 1, 0));
        if (a.n > 0) /* no conv bias before batch norm: bias NULL */
            TB_TRY(conv_fwd_one(sc, &conv_descs[i], a.id[0], a.name[0], 0, 0));
    }
    return TB_OK;
}

int check_conv_bwd_data(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    TB_TRY(conv_reduced_cases(sc, TB_CONV_BWD_DATA));
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        const tb_conv_desc *d = &conv_descs[i];
        conv_sizes n = conv_sizes_of(d);
        char ds[96];
        conv_desc_str(d, ds, sizeof ds);
        conv_algos a;
        conv_algo_list(sc, d, TB_CONV_BWD_DATA, &a);
        for (int j = 0; j < a.n; j++) {
            float *g, *dg, *w, *dw, *want, *dx;
            TB_TRY(sc_randf(sc, &g, &dg, n.y, -1.0f, 1.0f));
            TB_TRY(sc_randf(sc, &w, &dw, n.w, -1.0f, 1.0f));
            TB_TRY(sc_outf(sc, &want, &dx, n.x));
            TB_TRY(tb_conv_ref_bwd_data(d, g, w, want));
            sc_case c;
            sc_case_start(&c, "%s algo=%s", ds, a.name[j]);
            TB_TRY(SC_FINISH(sc, &c, be->conv_bwd_data(be, d, a.id[j], dg, dw, dx), 0,
                             {"dx", want, dx, n.x, conv_tol(a.name[j], d)}));
            TB_TRY(sc_release(sc));
        }
    }
    return TB_OK;
}

static int conv_bwd_filter_one(sc_ctx *sc, const tb_conv_desc *d, int algo, const char *name,
                               int with_bias, int acc)
{
    tb_backend *be = sc->be;
    conv_sizes n = conv_sizes_of(d);
    float *x, *dx, *g, *dg, *want_w, *dw, *want_b = NULL, *db = NULL;
    TB_TRY(sc_randf(sc, &x, &dx, n.x, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &g, &dg, n.y, -1.0f, 1.0f));
    TB_TRY(sc_inoutf(sc, &want_w, &dw, n.w, acc));
    if (with_bias)
        TB_TRY(sc_inoutf(sc, &want_b, &db, (size_t)d->k, acc));
    TB_TRY(tb_conv_ref_bwd_filter(d, x, g, want_w, want_b, acc));
    char ds[96];
    conv_desc_str(d, ds, sizeof ds);
    sc_case c;
    sc_case_start(&c, "%s%s accumulate=%d algo=%s", ds, with_bias ? " dbias" : "", acc, name);
    TB_TRY(SC_FINISH(sc, &c, be->conv_bwd_filter(be, d, algo, dx, dg, dw, db, acc), 0,
                     {"dw", want_w, dw, n.w, conv_tol(name, d)},
                     {"dbias", want_b, db, (size_t)d->k, TOL_SUM}));
    return sc_release(sc);
}

/* conv_bwd (optional): both gradients in one call, with the default
 * algorithms, a bias gradient, written or accumulated, against the
 * reference (the CPU reorders dy once where both kernels want it blocked). */
static int conv_bwd_one(sc_ctx *sc, const tb_conv_desc *d, int acc)
{
    tb_backend *be = sc->be;
    conv_sizes n = conv_sizes_of(d);
    conv_algos af, ad;
    conv_algo_list(sc, d, TB_CONV_BWD_FILTER, &af);
    conv_algo_list(sc, d, TB_CONV_BWD_DATA, &ad);
    if (af.n == 0 || ad.n == 0)
        return TB_OK;
    float *x, *dxin, *g, *dg, *w, *dwin, *want_w, *dw, *want_b, *db, *want_x, *dx;
    TB_TRY(sc_randf(sc, &x, &dxin, n.x, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &g, &dg, n.y, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &w, &dwin, n.w, -1.0f, 1.0f));
    TB_TRY(sc_inoutf(sc, &want_w, &dw, n.w, acc));
    TB_TRY(sc_inoutf(sc, &want_b, &db, (size_t)d->k, acc));
    TB_TRY(sc_outf(sc, &want_x, &dx, n.x));
    TB_TRY(tb_conv_ref_bwd_filter(d, x, g, want_w, want_b, acc));
    TB_TRY(tb_conv_ref_bwd_data(d, g, w, want_x));
    char ds[96];
    conv_desc_str(d, ds, sizeof ds);
    sc_case c;
    sc_case_start(&c, "%s dbias accumulate=%d algos=%s, %s", ds, acc, af.name[0], ad.name[0]);
    TB_TRY(SC_FINISH(sc, &c,
                     be->conv_bwd(be, d, af.id[0], ad.id[0], dxin, dg, dwin, dw, db, acc, dx), 0,
                     {"dw", want_w, dw, n.w, conv_tol(af.name[0], d)},
                     {"dbias", want_b, db, (size_t)d->k, TOL_SUM},
                     {"dx", want_x, dx, n.x, conv_tol(ad.name[0], d)}));
    return sc_release(sc);
}

int check_conv_bwd(sc_ctx *sc)
{
    for (size_t i = 0; i < N_CONV_DESCS; i++)
        for (int acc = 0; acc < 2; acc++)
            TB_TRY(conv_bwd_one(sc, &conv_descs[i], acc));
    return TB_OK;
}

int check_conv_bwd_filter(sc_ctx *sc)
{
    TB_TRY(conv_reduced_cases(sc, TB_CONV_BWD_FILTER));
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        conv_algos a;
        conv_algo_list(sc, &conv_descs[i], TB_CONV_BWD_FILTER, &a);
        for (int j = 0; j < a.n; j++)
            TB_TRY(conv_bwd_filter_one(sc, &conv_descs[i], a.id[j], a.name[j], 1, 0));
        if (a.n > 0) /* gradient accumulation, without a conv bias */
            TB_TRY(conv_bwd_filter_one(sc, &conv_descs[i], a.id[0], a.name[0], 0, 1));
    }
    return TB_OK;
}

/* conv_algo_default: answers for every problem and kind with an id that
 * the conv_* checks then run (they fail if the id is unusable). */
static void conv_algo_default_one(sc_ctx *sc, const tb_conv_desc *d, tb_conv_kind kind,
                                  sc_case *c)
{
    int algo = -1;
    int rc = sc->be->conv_algo_default(sc->be, d, kind, &algo);
    if (rc != TB_OK)
        sc_case_fail_rc(c, "conv_algo_default", rc);
    else if (algo < 0)
        sc_case_fail(c, "returned algorithm id %d", algo);
    else
        snprintf(c->note, sizeof c->note, "algo=%d", algo);
}

/* conv_find: at least one algorithm, each named, fastest first. */
static void conv_find_one(sc_ctx *sc, const tb_conv_desc *d, tb_conv_kind kind, sc_case *c)
{
    tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
    int found = -1;
    int rc = sc->be->conv_find(sc->be, d, kind, perf, TB_MAX_CONV_ALGOS, &found);
    if (rc != TB_OK) {
        sc_case_fail_rc(c, "conv_find", rc);
        return;
    }
    if (found < 1 || found > TB_MAX_CONV_ALGOS)
        sc_case_fail(c, "returned %d algorithms (want 1..%d)", found, TB_MAX_CONV_ALGOS);
    float last = 0.0f;
    for (int j = 0; j < found && j < TB_MAX_CONV_ALGOS; j++) {
        if (!perf[j].name[0])
            sc_case_fail(c, "algorithm %d (id %d) has no name", j, perf[j].algo);
        if (perf[j].ms < 0)
            continue;
        if (perf[j].ms < last)
            sc_case_fail(c, "not fastest first: %s %.3g ms after %.3g ms", perf[j].name,
                         perf[j].ms, last);
        last = perf[j].ms;
    }
    if (!c->failed)
        snprintf(c->note, sizeof c->note, "%d algorithms, fastest %s %.3g ms", found,
                 perf[0].name, perf[0].ms);
}

/* One case per problem and kind, filled in by query. */
static void conv_each_query(sc_ctx *sc, void (*query)(sc_ctx *, const tb_conv_desc *,
                                                      tb_conv_kind, sc_case *))
{
    for (size_t i = 0; i < N_CONV_DESCS; i++) {
        char ds[96];
        conv_desc_str(&conv_descs[i], ds, sizeof ds);
        for (int k = 0; k < 3; k++) {
            sc_case c;
            sc_case_start(&c, "%s %s", ds, conv_kind_names[k]);
            query(sc, &conv_descs[i], (tb_conv_kind)k, &c);
            sc_case_end(sc, &c);
        }
    }
}

int check_conv_algo_default(sc_ctx *sc)
{
    conv_each_query(sc, conv_algo_default_one);
    return TB_OK;
}

int check_conv_find(sc_ctx *sc)
{
    conv_each_query(sc, conv_find_one);
    return TB_OK;
}

/* ------------------------------------------------------------ batch norm */

static const tb_bn_desc bn_descs[] = {
    {3, 5, 7, TB_NCHW, 1e-5f, 0.1f},
    {4, 3, 9, TB_NHWC, 1e-5f, 0.1f},
    {2, 17, 1, TB_NCHW, 1e-5f, 0.1f},  /* after a linear layer */
    {5, 33, 13, TB_NHWC, 1e-3f, 0.2f},
};
#define N_BN_DESCS (sizeof bn_descs / sizeof bn_descs[0])

static void bn_desc_str(const tb_bn_desc *d, char *out, size_t cap)
{
    snprintf(out, cap, "%s n=%d c=%d hw=%d", d->layout == TB_NHWC ? "NHWC" : "NCHW", d->n, d->c,
             d->hw);
}

/* The forward's inputs, host and device: x (N, C, HW), gamma, beta and
 * the running statistics (C). */
typedef struct bn_io {
    size_t n, c;
    float *x, *ga, *bt, *rm, *rv;      /* host */
    float *dx, *dga, *dbt, *drm, *drv; /* device */
} bn_io;

static int bn_inputs(sc_ctx *sc, const tb_bn_desc *d, bn_io *io)
{
    io->n = (size_t)d->n * d->c * d->hw;
    io->c = (size_t)d->c;
    TB_TRY(sc_randf(sc, &io->x, &io->dx, io->n, -2.0f, 3.0f));
    TB_TRY(sc_randf(sc, &io->ga, &io->dga, io->c, 0.5f, 1.5f));
    TB_TRY(sc_randf(sc, &io->bt, &io->dbt, io->c, -0.5f, 0.5f));
    TB_TRY(sc_randf(sc, &io->rm, &io->drm, io->c, -0.5f, 0.5f));
    return sc_randf(sc, &io->rv, &io->drv, io->c, 0.5f, 1.5f);
}

static int bn_fwd_train_one(sc_ctx *sc, const tb_bn_desc *d)
{
    tb_backend *be = sc->be;
    bn_io io;
    float *y, *dy, *sm, *dsm, *si, *dsi;
    TB_TRY(bn_inputs(sc, d, &io));
    size_t n = io.n, c = io.c;
    TB_TRY(sc_outf(sc, &y, &dy, n));
    TB_TRY(sc_outf(sc, &sm, &dsm, c));
    TB_TRY(sc_outf(sc, &si, &dsi, c));
    TB_TRY(tb_ref_bn_fwd_train(d, io.x, io.ga, io.bt, y, io.rm, io.rv, sm, si));
    char ds[64];
    bn_desc_str(d, ds, sizeof ds);
    sc_case k;
    sc_case_start(&k, "%s", ds);
    return SC_FINISH(sc, &k,
                     be->bn_fwd_train(be, d, io.dx, io.dga, io.dbt, dy, io.drm, io.drv, dsm, dsi),
                     0, {"y", y, dy, n, TOL_SUM}, {"running_mean", io.rm, io.drm, c, TOL_SUM},
                     {"running_var", io.rv, io.drv, c, TOL_SUM},
                     {"save_mean", sm, dsm, c, TOL_SUM}, {"save_invstd", si, dsi, c, TOL_SUM});
}

static int bn_fwd_infer_one(sc_ctx *sc, const tb_bn_desc *d)
{
    tb_backend *be = sc->be;
    bn_io io;
    float *y, *dy;
    TB_TRY(bn_inputs(sc, d, &io));
    TB_TRY(sc_outf(sc, &y, &dy, io.n));
    TB_TRY(tb_ref_bn_fwd_infer(d, io.x, io.ga, io.bt, io.rm, io.rv, y));
    char ds[64];
    bn_desc_str(d, ds, sizeof ds);
    sc_case k;
    sc_case_start(&k, "%s", ds);
    return SC_FINISH(sc, &k, be->bn_fwd_infer(be, d, io.dx, io.dga, io.dbt, io.drm, io.drv, dy),
                     0, {"y", y, dy, io.n, TOL_SUM});
}

static int bn_bwd_case(sc_ctx *sc, const tb_bn_desc *d, int acc)
{
    tb_backend *be = sc->be;
    size_t n = (size_t)d->n * d->c * d->hw, c = (size_t)d->c;
    float *x, *dx_in, *ga, *dga, *be_, *rm, *rv, *y, *sm, *si, *g, *dg, *d_sm, *d_si;
    float *wdx, *odx, *wdg, *odg, *wdb, *odb;
    TB_TRY(sc_randf(sc, &x, &dx_in, n, -2.0f, 3.0f));
    TB_TRY(sc_randf(sc, &ga, &dga, c, 0.5f, 1.5f));
    TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
    /* the forward's saved statistics, from the reference */
    TB_TRY(sc_host_randf(sc, &be_, c, -0.5f, 0.5f));
    TB_TRY(sc_host_randf(sc, &rm, c, -0.5f, 0.5f));
    TB_TRY(sc_host_randf(sc, &rv, c, 0.5f, 1.5f));
    TB_TRY(sc_host(sc, (void **)&y, n * sizeof(float)));
    TB_TRY(sc_host(sc, (void **)&sm, c * sizeof(float)));
    TB_TRY(sc_host(sc, (void **)&si, c * sizeof(float)));
    TB_TRY(tb_ref_bn_fwd_train(d, x, ga, be_, y, rm, rv, sm, si));
    TB_TRY(sc_upload(sc, (void **)&d_sm, sm, c * sizeof(float)));
    TB_TRY(sc_upload(sc, (void **)&d_si, si, c * sizeof(float)));
    TB_TRY(sc_outf(sc, &wdx, &odx, n));
    TB_TRY(sc_inoutf(sc, &wdg, &odg, c, acc));
    TB_TRY(sc_inoutf(sc, &wdb, &odb, c, acc));
    TB_TRY(tb_ref_bn_bwd(d, x, g, ga, sm, si, wdx, wdg, wdb, acc));
    /* dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)): its error is
     * the rounding of those terms, gamma invstd |dy| (|dy| <= 1), however
     * much they cancel. With n*hw = 2 they cancel to eps/var, and an error
     * relative to dx alone measures nothing but that (4e-4 of a dx of 2e-5,
     * one rounding of terms near 1, on an AVX2 CPU). */
    double dx_floor = 0;
    for (size_t i = 0; i < c; i++)
        dx_floor = fmax(dx_floor, fabs((double)ga[i] * si[i]));
    char ds[64];
    bn_desc_str(d, ds, sizeof ds);
    sc_case k;
    sc_case_start(&k, "%s accumulate=%d", ds, acc);
    TB_TRY(SC_FINISH(sc, &k, be->bn_bwd(be, d, dx_in, dg, dga, d_sm, d_si, odx, odg, odb, acc), 0,
                     {"dx", wdx, odx, n, TOL_CANCEL, dx_floor}, {"dgamma", wdg, odg, c, TOL_SUM},
                     {"dbeta", wdb, odb, c, TOL_SUM}));
    return sc_release(sc);
}

static int bn_bwd_one(sc_ctx *sc, const tb_bn_desc *d)
{
    for (int acc = 0; acc < 2; acc++)
        TB_TRY(bn_bwd_case(sc, d, acc));
    return TB_OK;
}

/* Runs one(sc, d) for each batch norm problem, freeing after each. */
static int bn_each(sc_ctx *sc, int (*one)(sc_ctx *, const tb_bn_desc *))
{
    for (size_t i = 0; i < N_BN_DESCS; i++) {
        TB_TRY(one(sc, &bn_descs[i]));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

int check_bn_fwd_train(sc_ctx *sc) { return bn_each(sc, bn_fwd_train_one); }
int check_bn_fwd_infer(sc_ctx *sc) { return bn_each(sc, bn_fwd_infer_one); }
int check_bn_bwd(sc_ctx *sc) { return bn_each(sc, bn_bwd_one); }

/* ------------------------------------------------------------ pooling */

static const tb_pool_desc pool_descs[] = {
    {TB_POOL_MAX, 2, 3, 7, 7, 3, 2, 1, TB_NCHW},
    {TB_POOL_MAX, 2, 4, 6, 5, 2, 2, 0, TB_NHWC},
    {TB_POOL_MAX, 1, 5, 9, 9, 3, 1, 1, TB_NHWC},
    {TB_POOL_AVG, 2, 3, 7, 7, 3, 2, 1, TB_NCHW},
    {TB_POOL_AVG, 1, 5, 9, 9, 3, 1, 1, TB_NHWC},
};
#define N_POOL_DESCS (sizeof pool_descs / sizeof pool_descs[0])

static void pool_desc_str(const tb_pool_desc *d, char *out, size_t cap)
{
    snprintf(out, cap, "%s %s %dx%dx%dx%d window=%d s%d p%d",
             d->kind == TB_POOL_MAX ? "max" : "avg", d->layout == TB_NHWC ? "NHWC" : "NCHW", d->n,
             d->c, d->h, d->w, d->window, d->stride, d->pad);
}

/* Elements in (nin) and out (nout) of a pooling problem. */
static int pool_sizes(const tb_pool_desc *d, size_t *nin, size_t *nout)
{
    int p, q;
    TB_TRY(tb_ref_pool_out(d, &p, &q));
    *nin = (size_t)d->n * d->c * d->h * d->w;
    *nout = (size_t)d->n * d->c * p * q;
    return TB_OK;
}

/* Max pooling's y and argmax are selections: exact. */
static int pool_fwd_one(sc_ctx *sc, const tb_pool_desc *d)
{
    tb_backend *be = sc->be;
    int max = d->kind == TB_POOL_MAX;
    size_t nin, nout;
    TB_TRY(pool_sizes(d, &nin, &nout));
    float *x, *dx, *y, *dy;
    int32_t *am = NULL, *dam = NULL;
    TB_TRY(sc_randf(sc, &x, &dx, nin, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &y, &dy, nout));
    if (max) {
        TB_TRY(sc_host(sc, (void **)&am, nout * sizeof *am));
        TB_TRY(sc_dev(sc, (void **)&dam, nout * sizeof *dam));
    }
    TB_TRY(tb_ref_pool_fwd(d, x, y, am));
    char ds[96];
    pool_desc_str(d, ds, sizeof ds);
    sc_case c;
    sc_case_start(&c, "%s", ds);
    return SC_FINISH(sc, &c, be->pool_fwd(be, d, dx, dy, dam), 0,
                     {"y", y, dy, nout, max ? TOL_EXACT : TOL_ROUND},
                     {.what = "argmax", .want = am, .got = dam, .n = nout, .elem = sizeof *am});
}

static int pool_bwd_one(sc_ctx *sc, const tb_pool_desc *d)
{
    tb_backend *be = sc->be;
    int max = d->kind == TB_POOL_MAX;
    size_t nin, nout;
    TB_TRY(pool_sizes(d, &nin, &nout));
    float *x, *y, *g, *dg, *want, *out;
    int32_t *am = NULL, *dam = NULL;
    TB_TRY(sc_host(sc, (void **)&y, nout * sizeof *y));
    TB_TRY(sc_host_randf(sc, &x, nin, -1.0f, 1.0f));
    if (max)
        TB_TRY(sc_host(sc, (void **)&am, nout * sizeof *am));
    TB_TRY(tb_ref_pool_fwd(d, x, y, am)); /* the forward's argmax, from the reference */
    if (max)
        TB_TRY(sc_upload(sc, (void **)&dam, am, nout * sizeof *am));
    TB_TRY(sc_randf(sc, &g, &dg, nout, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &want, &out, nin));
    TB_TRY(tb_ref_pool_bwd(d, g, am, want));
    char ds[96];
    pool_desc_str(d, ds, sizeof ds);
    sc_case c;
    sc_case_start(&c, "%s", ds);
    return SC_FINISH(sc, &c, be->pool_bwd(be, d, dg, dam, out), 0,
                     {"dx", want, out, nin, TOL_ROUND});
}

/* Runs one(sc, d) for each pooling problem, freeing after each. */
static int pool_each(sc_ctx *sc, int (*one)(sc_ctx *, const tb_pool_desc *))
{
    for (size_t i = 0; i < N_POOL_DESCS; i++) {
        TB_TRY(one(sc, &pool_descs[i]));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

int check_pool_fwd(sc_ctx *sc) { return pool_each(sc, pool_fwd_one); }
int check_pool_bwd(sc_ctx *sc) { return pool_each(sc, pool_bwd_one); }
