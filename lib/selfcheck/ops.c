/*
 * ops.c - selfcheck's checks of the element-wise, dense-layer,
 * mixed-precision, loss, reduction, dropout and optimizer slots: each runs
 * the op on the backend under test and the plain reference (lib/backend/ref/ops.h,
 * lib/backend/ref/gelu.h, kernels/cast_math.h) on fresh random inputs at a few
 * sizes, odd ones included, at the tolerance lib/selfcheck/internal.h gives.
 *
 *   bazel run //bench:selfcheck -- --device=cpu
 *   bazel test //lib/selfcheck:selfcheck_test
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cast_math.h"
#include "lib/backend/ref/conv.h" /* tb_gemm_ref */
#include "lib/backend/ref/gelu.h"
#include "lib/backend/ref/ops.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/status.h"

/* ------------------------------------------------------------ element-wise */

/* 1 (a single element), odd, and odd past 64 Ki (threaded CPU paths,
 * a partial last CUDA block). */
static const size_t ew_sizes[] = {1, 1003, 65537};
#define N_EW_SIZES (sizeof ew_sizes / sizeof ew_sizes[0])

static const char *const gelu_names[] = {"unfused", "fused"};

/* Both GELU forms (erf, tanh) share these cases: a backend slot and the
 * double reference of the same form. */
typedef int (*gelu_fwd_slot)(tb_backend *be, tb_gelu_variant v, const float *x, float *y,
                             size_t n);
typedef int (*gelu_bwd_slot)(tb_backend *be, tb_gelu_variant v, const float *x,
                             const float *dy, float *dx, size_t n);

/* GELU's error bound is absolute, 1e-6 max(1, |x|): floor 1 (sc_cmp_floor). */
static int gelu_fwd_cases(sc_ctx *sc, gelu_fwd_slot op,
                          void (*ref)(const float *x, float *y, size_t n))
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        float *x, *dx, *want, *dy;
        TB_TRY(sc_randf(sc, &x, &dx, n, -6.0f, 6.0f));
        TB_TRY(sc_outf(sc, &want, &dy, n));
        ref(x, want, n);
        for (int v = 0; v < 2; v++) {
            sc_case c;
            sc_case_start(&c, "%s n=%zu", gelu_names[v], n);
            TB_TRY(SC_FINISH(sc, &c, op(be, (tb_gelu_variant)v, dx, dy, n), 0,
                             {"y", want, dy, n, TOL_SUM, 1.0}));
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int gelu_bwd_cases(sc_ctx *sc, gelu_bwd_slot op,
                          void (*ref)(const float *x, const float *dy, float *dx, size_t n))
{
    tb_backend *be = sc->be;
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        size_t n = ew_sizes[i];
        float *x, *dx_in, *g, *dg, *want, *out;
        TB_TRY(sc_randf(sc, &x, &dx_in, n, -6.0f, 6.0f));
        TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &want, &out, n));
        ref(x, g, want, n);
        for (int v = 0; v < 2; v++) {
            sc_case c;
            sc_case_start(&c, "%s n=%zu", gelu_names[v], n);
            TB_TRY(SC_FINISH(sc, &c, op(be, (tb_gelu_variant)v, dx_in, dg, out, n), 0,
                             {"dx", want, out, n, TOL_SUM, 1.0}));
        }
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

int check_gelu_fwd(sc_ctx *sc) { return gelu_fwd_cases(sc, sc->be->gelu_fwd, tb_ref_gelu_fwd); }
int check_gelu_bwd(sc_ctx *sc) { return gelu_bwd_cases(sc, sc->be->gelu_bwd, tb_ref_gelu_bwd); }

/* The tanh GELU (GPT-2's): the same cases and bound as the erf form's,
 * against the double tanh formula. */
int check_gelu_tanh_fwd(sc_ctx *sc)
{
    return gelu_fwd_cases(sc, sc->be->gelu_tanh_fwd, tb_ref_gelu_tanh_fwd);
}

int check_gelu_tanh_bwd(sc_ctx *sc)
{
    return gelu_bwd_cases(sc, sc->be->gelu_tanh_bwd, tb_ref_gelu_tanh_bwd);
}

static int relu_fwd_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    float *x, *dx, *want, *dy;
    TB_TRY(sc_randf(sc, &x, &dx, n, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &want, &dy, n));
    tb_ref_relu_fwd(x, want, n);
    sc_case c;
    sc_case_start(&c, "n=%zu", n);
    return SC_FINISH(sc, &c, be->relu_fwd(be, dx, dy, n), 0, {"y", want, dy, n, TOL_EXACT});
}

static int relu_bwd_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    float *x, *dx_unused, *y, *d_y, *g, *dg, *want, *out;
    TB_TRY(sc_randf(sc, &x, &dx_unused, n, -1.0f, 1.0f));
    TB_TRY(sc_host(sc, (void **)&y, n * sizeof *y));
    tb_ref_relu_fwd(x, y, n); /* y > 0 about half the time */
    TB_TRY(sc_upload(sc, (void **)&d_y, y, n * sizeof *y));
    TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &want, &out, n));
    tb_ref_relu_bwd(y, g, want, n);
    sc_case c;
    sc_case_start(&c, "n=%zu", n);
    return SC_FINISH(sc, &c, be->relu_bwd(be, d_y, dg, out, n), 0,
                     {"dx", want, out, n, TOL_EXACT});
}

static int add_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    float *a, *da, *b, *db, *want, *out;
    TB_TRY(sc_randf(sc, &a, &da, n, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &b, &db, n, -1.0f, 1.0f));
    TB_TRY(sc_outf(sc, &want, &out, n));
    tb_ref_add(a, b, want, n);
    sc_case c;
    sc_case_start(&c, "n=%zu", n);
    return SC_FINISH(sc, &c, be->add(be, da, db, out, n), 0, {"y", want, out, n, TOL_EXACT});
}

/* Runs one(sc, n) at each element-wise size, freeing after each. */
static int ew_each_size(sc_ctx *sc, int (*one)(sc_ctx *, size_t))
{
    for (size_t i = 0; i < N_EW_SIZES; i++) {
        TB_TRY(one(sc, ew_sizes[i]));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

int check_relu_fwd(sc_ctx *sc) { return ew_each_size(sc, relu_fwd_one); }
int check_relu_bwd(sc_ctx *sc) { return ew_each_size(sc, relu_bwd_one); }
int check_add(sc_ctx *sc) { return ew_each_size(sc, add_one); }

/* ---- bf16 activations: relu_fwd_lowp, relu_bwd_lowp, add_lowp ----
 * The bits of the fp32 reference on the widened inputs, rounded with
 * tb_f32_to_bf16 (ReLU's results are inputs: nothing to round). */
static float widened(const float *f, size_t i) { return tb_bf16_to_f32(tb_f32_to_bf16(f[i])); }

static int relu_fwd_lowp_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    float *x;
    void *dx;
    uint16_t *want, *y;
    TB_TRY(sc_rand_lowp(sc, TB_BF16, &x, &dx, n));
    TB_TRY(sc_host(sc, (void **)&want, n * sizeof *want));
    TB_TRY(sc_dev(sc, (void **)&y, n * sizeof *y));
    for (size_t i = 0; i < n; i++) {
        float v = widened(x, i), r;
        tb_ref_relu_fwd(&v, &r, 1);
        want[i] = tb_f32_to_bf16(r);
    }
    sc_case c;
    sc_case_start(&c, "bf16 n=%zu", n);
    return SC_FINISH(sc, &c, be->relu_fwd_lowp(be, TB_BF16, dx, y, n), 0,
                     {.what = "bits", .want = want, .got = y, .n = n, .elem = sizeof *want});
}

static int relu_bwd_lowp_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    float *x, *g;
    void *dx, *dg;
    uint16_t *want, *out;
    TB_TRY(sc_rand_lowp(sc, TB_BF16, &x, &dx, n)); /* y: below 0 about half the time */
    TB_TRY(sc_rand_lowp(sc, TB_BF16, &g, &dg, n));
    TB_TRY(sc_host(sc, (void **)&want, n * sizeof *want));
    TB_TRY(sc_dev(sc, (void **)&out, n * sizeof *out));
    for (size_t i = 0; i < n; i++) {
        float y = widened(x, i), dy = widened(g, i), r;
        tb_ref_relu_bwd(&y, &dy, &r, 1);
        want[i] = tb_f32_to_bf16(r);
    }
    sc_case c;
    sc_case_start(&c, "bf16 n=%zu", n);
    return SC_FINISH(sc, &c, be->relu_bwd_lowp(be, TB_BF16, dx, dg, out, n), 0,
                     {.what = "bits", .want = want, .got = out, .n = n, .elem = sizeof *want});
}

static int add_lowp_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    float *a, *b;
    void *da, *db;
    uint16_t *want, *out;
    TB_TRY(sc_rand_lowp(sc, TB_BF16, &a, &da, n));
    TB_TRY(sc_rand_lowp(sc, TB_BF16, &b, &db, n));
    TB_TRY(sc_host(sc, (void **)&want, n * sizeof *want));
    TB_TRY(sc_dev(sc, (void **)&out, n * sizeof *out));
    for (size_t i = 0; i < n; i++) {
        float x = widened(a, i), y = widened(b, i), r;
        tb_ref_add(&x, &y, &r, 1);
        want[i] = tb_f32_to_bf16(r);
    }
    sc_case c;
    sc_case_start(&c, "bf16 n=%zu", n);
    return SC_FINISH(sc, &c, be->add_lowp(be, TB_BF16, da, db, out, n), 0,
                     {.what = "bits", .want = want, .got = out, .n = n, .elem = sizeof *want});
}

int check_relu_fwd_lowp(sc_ctx *sc) { return ew_each_size(sc, relu_fwd_lowp_one); }
int check_relu_bwd_lowp(sc_ctx *sc) { return ew_each_size(sc, relu_bwd_lowp_one); }
int check_add_lowp(sc_ctx *sc) { return ew_each_size(sc, add_lowp_one); }

/* beta == 0: y starts as NaN, which the op must not read. */
static int axpby_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    static const float betas[] = {0.0f, 0.75f};
    for (int b = 0; b < 2; b++) {
        float alpha = -1.25f, beta = betas[b];
        float *x, *dx, *want, *y;
        TB_TRY(sc_randf(sc, &x, &dx, n, -1.0f, 1.0f));
        TB_TRY(sc_inoutf(sc, &want, &y, n, beta != 0.0f));
        tb_ref_axpby(alpha, x, beta, want, n);
        sc_case c;
        sc_case_start(&c, "alpha=%g beta=%g n=%zu", alpha, beta, n);
        TB_TRY(SC_FINISH(sc, &c, be->axpby(be, alpha, dx, beta, y, n), 0,
                         {"y", want, y, n, TOL_ROUND}));
    }
    return TB_OK;
}

int check_axpby(sc_ctx *sc) { return ew_each_size(sc, axpby_one); }

/* ------------------------------------------------------------ dense layers */

typedef struct gemm_case {
    int ta, tb, m, n, k, ld_pad;
    float alpha, beta;
    tb_math math;
} gemm_case;

static const char *const math_names[] = {"f32", "tf32", "lowp"};

static int gemm_one(sc_ctx *sc, const gemm_case *g)
{
    tb_backend *be = sc->be;
    int lda = (g->ta ? g->m : g->k) + g->ld_pad;
    int ldb = (g->tb ? g->k : g->n) + g->ld_pad;
    int ldc = g->n + g->ld_pad;
    size_t na = (size_t)(g->ta ? g->k : g->m) * lda;
    size_t nb = (size_t)(g->tb ? g->n : g->k) * ldb;
    size_t nc = (size_t)g->m * ldc;
    float *a, *da, *b, *db, *want, *c_dev;
    TB_TRY(sc_randf(sc, &a, &da, na, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &b, &db, nb, -1.0f, 1.0f));
    TB_TRY(sc_inoutf(sc, &want, &c_dev, nc, g->beta != 0.0f));
    TB_TRY(tb_gemm_ref(g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, lda, b, ldb, g->beta, want,
                       ldc));
    double tol = g->math == TB_MATH_F32 ? TOL_SUM : g->math == TB_MATH_TF32 ? TOL_TF32 : TOL_LOWP;
    sc_case c;
    sc_case_start(&c, "%c%c %dx%dx%d alpha=%g beta=%g ld+%d math=%s", g->ta ? 'T' : 'N',
                  g->tb ? 'T' : 'N', g->m, g->n, g->k, g->alpha, g->beta, g->ld_pad,
                  math_names[g->math]);
    TB_TRY(SC_FINISH(sc, &c,
                     be->gemm(be, g->ta, g->tb, g->m, g->n, g->k, g->alpha, da, lda, db, ldb,
                              g->beta, c_dev, ldc, g->math),
                     g->math != TB_MATH_F32, {"C", want, c_dev, nc, tol}));
    return sc_release(sc);
}

int check_gemm(sc_ctx *sc)
{
    static const gemm_case cases[] = {
        {0, 0, 1, 1, 1, 0, 1.0f, 0.0f, TB_MATH_F32},
        {0, 0, 7, 5, 3, 0, 1.0f, 0.0f, TB_MATH_F32},
        {0, 0, 33, 17, 9, 3, 0.5f, 1.5f, TB_MATH_F32},
        {0, 1, 33, 17, 9, 3, 0.5f, 1.5f, TB_MATH_F32},
        {1, 0, 33, 17, 9, 3, 0.5f, 1.5f, TB_MATH_F32},
        {1, 1, 33, 17, 9, 3, 0.5f, 1.5f, TB_MATH_F32},
        {0, 1, 65, 129, 100, 0, 1.0f, 0.0f, TB_MATH_F32},
        {0, 1, 65, 129, 100, 0, 1.0f, 0.0f, TB_MATH_TF32},
        {0, 1, 65, 129, 100, 0, 1.0f, 0.0f, TB_MATH_LOWP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        TB_TRY(gemm_one(sc, &cases[i]));
    return TB_OK;
}

/* ---- mixed precision: gemm_lowp and the casts (kernels/cast_math.h) ---- */

/* Against the fp32 reference on the unrounded inputs: TOL_LOWP. */
static int gemm_lowp_one(sc_ctx *sc, tb_dtype dt, int ta, int tb, int m, int n, int k,
                         float beta)
{
    tb_backend *be = sc->be;
    int lda = ta ? m : k, ldb = tb ? k : n;
    float *a, *b, *want, *c;
    void *da, *db;
    TB_TRY(sc_rand_lowp(sc, dt, &a, &da, (size_t)m * k));
    TB_TRY(sc_rand_lowp(sc, dt, &b, &db, (size_t)k * n));
    TB_TRY(sc_inoutf(sc, &want, &c, (size_t)m * n, beta != 0.0f));
    TB_TRY(tb_gemm_ref(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, want, n));
    sc_case cs;
    sc_case_start(&cs, "%s %c%c %dx%dx%d beta=%g", sc_lowp_names[dt], ta ? 'T' : 'N',
                  tb ? 'T' : 'N', m, n, k, beta);
    TB_TRY(SC_FINISH(sc, &cs,
                     be->gemm_lowp(be, dt, ta, tb, m, n, k, 1.0f, da, lda, db, ldb, beta, c, n),
                     1, {"C", want, c, (size_t)m * n, TOL_LOWP}));
    return sc_release(sc);
}

int check_gemm_lowp(sc_ctx *sc)
{
    for (int dt = TB_BF16; dt <= TB_F16; dt++) {
        TB_TRY(gemm_lowp_one(sc, (tb_dtype)dt, 0, 1, 65, 129, 100, 0.0f));
        TB_TRY(gemm_lowp_one(sc, (tb_dtype)dt, 1, 0, 33, 17, 9, 1.0f));
        TB_TRY(gemm_lowp_one(sc, (tb_dtype)dt, 0, 0, 7, 5, 3, 0.0f));
    }
    return TB_OK;
}

/* Edge values (ties, NaN, Inf, denormals, the largest finite) then random
 * ones over a wide range; the device must match the header bitwise. */
static void cast_inputs(sc_ctx *sc, float *x, size_t n)
{
    static const uint32_t edges[] = {
        0x3f808000u, 0x3f818000u, 0x7fc00000u, 0xffc00000u, 0x7f800000u, 0xff800000u,
        0x00000001u, 0x00018000u, 0x807fffffu, 0x7f7fffffu, 0x477fe000u, 0x477ff000u,
        0x33000000u, 0x33000001u, 0x38800000u, 0x80000000u,
    };
    for (size_t i = 0; i < n; i++) {
        uint32_t u = i < sizeof edges / sizeof edges[0] ? edges[i] : (uint32_t)(tb_rng_next_u64(&sc->rng) >> 32);
        memcpy(&x[i], &u, sizeof u);
    }
}

static int cast_f32_to_lowp_one(sc_ctx *sc, tb_dtype dt, size_t n)
{
    tb_backend *be = sc->be;
    float *x, *dx;
    uint16_t *want, *y;
    TB_TRY(sc_host(sc, (void **)&x, n * sizeof *x));
    cast_inputs(sc, x, n);
    TB_TRY(sc_upload(sc, (void **)&dx, x, n * sizeof *x));
    TB_TRY(sc_host(sc, (void **)&want, n * sizeof *want));
    TB_TRY(sc_dev(sc, (void **)&y, n * sizeof *y));
    for (size_t i = 0; i < n; i++)
        want[i] = dt == TB_BF16 ? tb_f32_to_bf16(x[i]) : tb_f32_to_f16(x[i]);
    sc_case c;
    sc_case_start(&c, "%s n=%zu (edge values, then random bits)", sc_lowp_names[dt], n);
    TB_TRY(SC_FINISH(sc, &c, be->cast_f32_to_lowp(be, dt, dx, y, n), 0,
                     {.what = "bits", .want = want, .got = y, .n = n, .elem = sizeof *want}));
    return sc_release(sc);
}

int check_cast_f32_to_lowp(sc_ctx *sc)
{
    for (int dt = TB_BF16; dt <= TB_F16; dt++)
        for (size_t si = 0; si < N_EW_SIZES; si++)
            TB_TRY(cast_f32_to_lowp_one(sc, (tb_dtype)dt, ew_sizes[si] + 16));
    return TB_OK;
}

int check_cast_lowp_to_f32(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    for (int dt = TB_BF16; dt <= TB_F16; dt++) {
        size_t n = 65536; /* every bit pattern */
        uint16_t *x, *dx;
        float *want, *y;
        TB_TRY(sc_host(sc, (void **)&x, n * sizeof *x));
        for (size_t i = 0; i < n; i++)
            x[i] = (uint16_t)i;
        TB_TRY(sc_upload(sc, (void **)&dx, x, n * sizeof *x));
        TB_TRY(sc_outf(sc, &want, &y, n));
        for (size_t i = 0; i < n; i++)
            want[i] = dt == TB_BF16 ? tb_bf16_to_f32(x[i]) : tb_f16_to_f32(x[i]);
        sc_case c;
        sc_case_start(&c, "%s all 65536 bit patterns", sc_lowp_names[dt]);
        TB_TRY(SC_FINISH(sc, &c, be->cast_lowp_to_f32(be, (tb_dtype)dt, dx, y, n), 0,
                         {.what = "values", .want = want, .got = y, .n = n,
                          .elem = sizeof *want}));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

/* 517 x 768 and 4673 x 33: bias_grad's column sums with several row chunks
 * and past the chunk cap; 70001 x 3: more rows than a 2-D grid's y (bias_add). */
static const int bias_shapes[][2] = {{1, 1}, {37, 129}, {300, 65}, {517, 768}, {4673, 33},
                                     {70001, 3}};

static int bias_add_one(sc_ctx *sc, int rows, int cols)
{
    tb_backend *be = sc->be;
    size_t n = (size_t)rows * cols;
    float *y, *dy, *bias, *dbias;
    TB_TRY(sc_randf(sc, &y, &dy, n, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &bias, &dbias, (size_t)cols, -1.0f, 1.0f));
    tb_ref_bias_add(y, bias, rows, cols);
    sc_case c;
    sc_case_start(&c, "%dx%d", rows, cols);
    return SC_FINISH(sc, &c, be->bias_add(be, dy, dbias, rows, cols), 0,
                     {"y", y, dy, n, TOL_EXACT});
}

static int bias_grad_one(sc_ctx *sc, int rows, int cols)
{
    tb_backend *be = sc->be;
    for (int acc = 0; acc < 2; acc++) {
        float *g, *dg, *want, *out;
        TB_TRY(sc_randf(sc, &g, &dg, (size_t)rows * cols, -1.0f, 1.0f));
        TB_TRY(sc_inoutf(sc, &want, &out, (size_t)cols, acc));
        tb_ref_bias_grad(g, want, rows, cols, acc);
        sc_case c;
        sc_case_start(&c, "%dx%d accumulate=%d", rows, cols, acc);
        TB_TRY(SC_FINISH(sc, &c, be->bias_grad(be, dg, out, rows, cols, acc), 0,
                         {"dbias", want, out, (size_t)cols, TOL_SUM}));
    }
    return TB_OK;
}

int check_bias_add(sc_ctx *sc) { return SC_EACH_SHAPE(sc, bias_shapes, bias_add_one); }
int check_bias_grad(sc_ctx *sc) { return SC_EACH_SHAPE(sc, bias_shapes, bias_grad_one); }

/* ------------------------------------------------------------ loss, reductions */

/* 70001 x 3: more rows than the backward's 2-D grid has in y. */
static const int xent_shapes[][2] = {{1, 10}, {7, 10}, {33, 1001}, {70001, 3}};

static int xent_labels(sc_ctx *sc, int rows, int classes, int32_t **host, int32_t **dev)
{
    TB_TRY(sc_host(sc, (void **)host, (size_t)rows * sizeof **host));
    for (int r = 0; r < rows; r++)
        (*host)[r] = (int32_t)(tb_rng_next_u64(&sc->rng) % (uint64_t)classes);
    return sc_upload(sc, (void **)dev, *host, (size_t)rows * sizeof **host);
}

static int xent_fwd_one(sc_ctx *sc, int rows, int classes)
{
    tb_backend *be = sc->be;
    size_t n = (size_t)rows * classes;
    float *z, *dz, *pr, *dpr, *l, *dl;
    int32_t *lab, *dlab;
    TB_TRY(sc_randf(sc, &z, &dz, n, -4.0f, 4.0f));
    TB_TRY(xent_labels(sc, rows, classes, &lab, &dlab));
    TB_TRY(sc_outf(sc, &pr, &dpr, n));
    TB_TRY(sc_outf(sc, &l, &dl, (size_t)rows));
    TB_TRY(tb_ref_softmax_xent_fwd(z, lab, rows, classes, pr, l));
    sc_case c;
    sc_case_start(&c, "rows=%d classes=%d", rows, classes);
    return SC_FINISH(sc, &c, be->softmax_xent_fwd(be, dz, dlab, rows, classes, dpr, dl), 0,
                     {"probs", pr, dpr, n, TOL_SUM}, {"loss", l, dl, (size_t)rows, TOL_SUM});
}

/* The backward's probs are the reference forward's. */
static int xent_bwd_one(sc_ctx *sc, int rows, int classes)
{
    tb_backend *be = sc->be;
    size_t n = (size_t)rows * classes;
    float *z, *pr, *dpr, *l, *want, *out;
    int32_t *lab, *dlab;
    TB_TRY(sc_host(sc, (void **)&pr, n * sizeof *pr));
    TB_TRY(sc_host(sc, (void **)&l, (size_t)rows * sizeof *l));
    TB_TRY(sc_host_randf(sc, &z, n, -4.0f, 4.0f));
    TB_TRY(xent_labels(sc, rows, classes, &lab, &dlab));
    TB_TRY(tb_ref_softmax_xent_fwd(z, lab, rows, classes, pr, l));
    TB_TRY(sc_upload(sc, (void **)&dpr, pr, n * sizeof *pr));
    TB_TRY(sc_outf(sc, &want, &out, n));
    float scale = 1.0f / (float)rows;
    tb_ref_softmax_xent_bwd(pr, lab, rows, classes, scale, want);
    sc_case c;
    sc_case_start(&c, "rows=%d classes=%d scale=1/%d", rows, classes, rows);
    return SC_FINISH(sc, &c, be->softmax_xent_bwd(be, dpr, dlab, rows, classes, scale, out), 0,
                     {"dlogits", want, out, n, TOL_ROUND});
}

int check_softmax_xent_fwd(sc_ctx *sc) { return SC_EACH_SHAPE(sc, xent_shapes, xent_fwd_one); }
int check_softmax_xent_bwd(sc_ctx *sc) { return SC_EACH_SHAPE(sc, xent_shapes, xent_bwd_one); }

/* The lse form: the same shapes plus GPT-2's 50,257 classes (an odd
 * width past any block size). */
static const int xent_lse_shapes[][2] = {{1, 10}, {7, 10}, {33, 1001}, {3, 50257}};

static int xent_lse_fwd_one(sc_ctx *sc, int rows, int classes)
{
    tb_backend *be = sc->be;
    size_t n = (size_t)rows * classes;
    float *z, *dz, *l, *dl, *lse, *dlse;
    int32_t *lab, *dlab;
    TB_TRY(sc_randf(sc, &z, &dz, n, -4.0f, 4.0f));
    TB_TRY(xent_labels(sc, rows, classes, &lab, &dlab));
    TB_TRY(sc_outf(sc, &l, &dl, (size_t)rows));
    TB_TRY(sc_outf(sc, &lse, &dlse, (size_t)rows));
    tb_ref_xent_lse_fwd(z, lab, rows, classes, l, lse);
    sc_case c;
    sc_case_start(&c, "rows=%d classes=%d", rows, classes);
    return SC_FINISH(sc, &c, be->xent_lse_fwd(be, dz, dlab, rows, classes, dl, dlse), 0,
                     {"loss", l, dl, (size_t)rows, TOL_SUM},
                     {"lse", lse, dlse, (size_t)rows, TOL_SUM});
}

/* The backward from the reference forward's lse, out of place and in place
 * (dlogits == logits, as GPT-2's head runs it). */
static int xent_lse_bwd_one(sc_ctx *sc, int rows, int classes)
{
    tb_backend *be = sc->be;
    size_t n = (size_t)rows * classes;
    float *z, *dz, *l, *lse, *dlse, *want, *out, *inplace;
    int32_t *lab, *dlab;
    TB_TRY(sc_randf(sc, &z, &dz, n, -4.0f, 4.0f));
    TB_TRY(xent_labels(sc, rows, classes, &lab, &dlab));
    TB_TRY(sc_host(sc, (void **)&l, (size_t)rows * sizeof *l));
    TB_TRY(sc_host(sc, (void **)&lse, (size_t)rows * sizeof *lse));
    tb_ref_xent_lse_fwd(z, lab, rows, classes, l, lse);
    TB_TRY(sc_upload(sc, (void **)&dlse, lse, (size_t)rows * sizeof *lse));
    TB_TRY(sc_outf(sc, &want, &out, n));
    TB_TRY(sc_upload(sc, (void **)&inplace, z, n * sizeof *z));
    float scale = 1.0f / (float)rows;
    tb_ref_xent_lse_bwd(z, lse, lab, rows, classes, scale, want);
    sc_case c;
    sc_case_start(&c, "rows=%d classes=%d scale=1/%d", rows, classes, rows);
    TB_TRY(SC_FINISH(sc, &c,
                     be->xent_lse_bwd(be, dz, dlse, dlab, rows, classes, scale, out), 0,
                     {"dlogits", want, out, n, TOL_ROUND}));
    sc_case_start(&c, "rows=%d classes=%d scale=1/%d in place", rows, classes, rows);
    return SC_FINISH(sc, &c,
                     be->xent_lse_bwd(be, inplace, dlse, dlab, rows, classes, scale, inplace), 0,
                     {"dlogits", want, inplace, n, TOL_ROUND});
}

int check_xent_lse_fwd(sc_ctx *sc) { return SC_EACH_SHAPE(sc, xent_lse_shapes, xent_lse_fwd_one); }
int check_xent_lse_bwd(sc_ctx *sc) { return SC_EACH_SHAPE(sc, xent_lse_shapes, xent_lse_bwd_one); }

int check_reduce_sum(sc_ctx *sc)
{
    tb_backend *be = sc->be;
    static const size_t sizes[] = {1, 1003, 65537, 1000003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        float *x, *dx, want, *out;
        TB_TRY(sc_randf(sc, &x, &dx, n, 0.1f, 1.0f)); /* positive: no cancellation */
        TB_TRY(sc_dev(sc, (void **)&out, sizeof *out));
        tb_ref_reduce_sum(x, n, &want);
        sc_case c;
        sc_case_start(&c, "n=%zu", n);
        TB_TRY(SC_FINISH(sc, &c, be->reduce_sum(be, dx, n, out), 0,
                         {"sum", &want, out, 1, TOL_SUM}));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int count_nonfinite_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    float *x, *dx, want, *out;
    TB_TRY(sc_host_randf(sc, &x, n, -1.0f, 1.0f));
    if (n >= 4) { /* a NaN and both infinities; n == 1 checks a count of 0 */
        x[1] = NAN;
        x[n / 2] = INFINITY;
        x[n - 1] = -INFINITY;
    }
    TB_TRY(sc_upload(sc, (void **)&dx, x, n * sizeof *x));
    TB_TRY(sc_dev(sc, (void **)&out, sizeof *out));
    tb_ref_count_nonfinite(x, n, &want);
    sc_case c;
    sc_case_start(&c, "n=%zu nonfinite=%g", n, want);
    return SC_FINISH(sc, &c, be->count_nonfinite(be, dx, n, out), 0,
                     {"count", &want, out, 1, TOL_EXACT});
}

int check_count_nonfinite(sc_ctx *sc) { return ew_each_size(sc, count_nonfinite_one); }

/* ------------------------------------------------------------ dropout */

static const float dropout_ps[] = {0.1f, 0.5f};
#define DROPOUT_SEED 0x64726f70ull
/* Just below 2^32, so the larger sizes cross into the next block key of
 * kernels/rng_math.h. */
#define DROPOUT_OFFSET ((1ull << 32) - 1000)

static int dropout_fwd_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    for (int k = 0; k < 2; k++) {
        float p = dropout_ps[k], *x, *dx, *y, *dy;
        uint8_t *m, *dm;
        TB_TRY(sc_randf(sc, &x, &dx, n, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &y, &dy, n));
        TB_TRY(sc_host(sc, (void **)&m, n));
        TB_TRY(sc_dev(sc, (void **)&dm, n));
        tb_ref_dropout_fwd(p, DROPOUT_SEED, DROPOUT_OFFSET, x, y, m, n);
        sc_case c;
        sc_case_start(&c, "p=%g n=%zu offset=2^32-1000", p, n);
        TB_TRY(SC_FINISH(sc, &c,
                         be->dropout_fwd(be, p, DROPOUT_SEED, DROPOUT_OFFSET, dx, dy, dm, n), 0,
                         {"y", y, dy, n, TOL_EXACT},
                         {.what = "mask", .want = m, .got = dm, .n = n, .elem = 1}));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

static int dropout_bwd_one(sc_ctx *sc, size_t n)
{
    tb_backend *be = sc->be;
    for (int k = 0; k < 2; k++) {
        float p = dropout_ps[k], *x, *y, *g, *dg, *want, *out;
        uint8_t *m, *dm;
        TB_TRY(sc_host(sc, (void **)&y, n * sizeof *y));
        TB_TRY(sc_host(sc, (void **)&m, n));
        TB_TRY(sc_host_randf(sc, &x, n, -1.0f, 1.0f));
        tb_ref_dropout_fwd(p, DROPOUT_SEED, DROPOUT_OFFSET, x, y, m, n);
        TB_TRY(sc_upload(sc, (void **)&dm, m, n));
        TB_TRY(sc_randf(sc, &g, &dg, n, -1.0f, 1.0f));
        TB_TRY(sc_outf(sc, &want, &out, n));
        tb_ref_dropout_bwd(p, m, g, want, n);
        sc_case c;
        sc_case_start(&c, "p=%g n=%zu", p, n);
        TB_TRY(SC_FINISH(sc, &c, be->dropout_bwd(be, p, dm, dg, out, n), 0,
                         {"dx", want, out, n, TOL_EXACT}));
        TB_TRY(sc_release(sc));
    }
    return TB_OK;
}

int check_dropout_fwd(sc_ctx *sc) { return ew_each_size(sc, dropout_fwd_one); }
int check_dropout_bwd(sc_ctx *sc) { return ew_each_size(sc, dropout_bwd_one); }

/* ------------------------------------------------------------ optimizers */

typedef struct opt_case {
    const char *name;
    tb_opt_hparams hp;
    int required; /* else TB_ERR_UNSUPPORTED (from the backend or the reference) is n/a */
} opt_case;

static const opt_case opt_cases[] = {
    {"sgd momentum=0.9 wd=1e-4",
     {.kind = TB_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .grad_scale = 1.0f},
     1},
    {"sgd momentum=0 grad_scale=1024",
     {.kind = TB_OPT_SGD, .lr = 0.05f, .grad_scale = 1024.0f},
     1},
    {"adamw wd=0.01",
     {.kind = TB_OPT_ADAMW, .lr = 1e-3f, .weight_decay = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
      .eps = 1e-8f, .grad_scale = 1.0f},
     1},
    {"lars",
     {.kind = TB_OPT_LARS, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f,
      .trust_coef = 1e-3f, .eps = 1e-8f, .grad_scale = 1.0f},
     1},
    {"lars momentum=0 grad_scale=512",
     {.kind = TB_OPT_LARS, .lr = 0.1f, .weight_decay = 1e-4f, .trust_coef = 1e-3f, .eps = 1e-8f,
      .grad_scale = 512.0f},
     1},
    {"lamb",
     {.kind = TB_OPT_LAMB, .lr = 1e-3f, .weight_decay = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
      .eps = 1e-6f, .grad_scale = 1.0f},
     1},
    {"novograd",
     {.kind = TB_OPT_NOVOGRAD, .lr = 1e-3f, .weight_decay = 1e-3f, .beta1 = 0.95f,
      .beta2 = 0.98f, .eps = 1e-8f, .grad_scale = 1.0f},
     1},
};
#define N_OPT_CASES (sizeof opt_cases / sizeof opt_cases[0])

/* The last tensor spans three of the multi-tensor kernels' chunks (65,536
 * elements), the third partly; the second (one element, as a bias) is
 * unadapted (tb_param_view.no_adapt: LARS and LAMB give it no trust ratio
 * and no weight decay), so both paths and a chunk boundary are compared. */
enum { OPT_TENSORS = 4, OPT_UNADAPTED = 1 };
static const size_t opt_sizes[OPT_TENSORS] = {1003, 1, 37, 131073};

/* Which state buffers an optimizer keeps (NULL in the view otherwise). */
static int opt_has_state1(const tb_opt_hparams *hp)
{
    return hp->kind != TB_OPT_SGD || hp->momentum != 0.0f;
}
static int opt_has_state2(const tb_opt_hparams *hp)
{
    return hp->kind == TB_OPT_ADAMW || hp->kind == TB_OPT_LAMB;
}
/* NovoGrad's one float per tensor (tb_param_view.tensor_state) */
static int opt_has_tensor_state(const tb_opt_hparams *hp) { return hp->kind == TB_OPT_NOVOGRAD; }

static void opt_views(tb_param_view *v, float *p, float *g, float *s1, float *s2, float *ts)
{
    size_t off = 0;
    for (int t = 0; t < OPT_TENSORS; t++) {
        v[t] = (tb_param_view){p + off, g + off, s1 ? s1 + off : NULL, s2 ? s2 + off : NULL,
                               opt_sizes[t], ts ? ts + t : NULL, t == OPT_UNADAPTED};
        off += opt_sizes[t];
    }
}

/* Steps 3 and 4 (so bias correction is not trivial) on the reference
 * (views hv) and the backend (views dv). *ran: both ran, the outputs are
 * to be compared; else c says why not (failed, or n/a). */
static int opt_steps(sc_ctx *sc, const opt_case *oc, int fused, tb_param_view *hv,
                     tb_param_view *dv, sc_case *c, int *ran)
{
    tb_backend *be = sc->be;
    tb_opt_hparams hp = oc->hp;
    *ran = 1;
    for (int step = 3; step <= 4 && *ran; step++) {
        hp.step = step;
        int rc = tb_ref_opt_step(&hp, hv, OPT_TENSORS);
        if (rc == TB_ERR_UNSUPPORTED && !oc->required) {
            c->na = 1;
            snprintf(c->why, sizeof c->why, "no reference yet: %s", tb_error_message());
            tb_error_clear();
            *ran = 0;
            return TB_OK;
        }
        TB_TRY(rc);
        *ran = sc_ran(sc, c, be->opt_step(be, &hp, dv, OPT_TENSORS, fused), !oc->required);
    }
    return TB_OK;
}

/* Two steps from random parameters, gradients and optimizer state. */
static int opt_one(sc_ctx *sc, const opt_case *oc, int fused)
{
    size_t total = 0;
    for (int t = 0; t < OPT_TENSORS; t++)
        total += opt_sizes[t];
    int h1 = opt_has_state1(&oc->hp), h2 = opt_has_state2(&oc->hp);
    int hts = opt_has_tensor_state(&oc->hp);
    float *p, *dp, *g, *dg, *s1 = NULL, *ds1 = NULL, *s2 = NULL, *ds2 = NULL;
    float *ts = NULL, *dts = NULL;
    TB_TRY(sc_randf(sc, &p, &dp, total, -1.0f, 1.0f));
    TB_TRY(sc_randf(sc, &g, &dg, total, -oc->hp.grad_scale, oc->hp.grad_scale));
    if (h1)
        TB_TRY(sc_randf(sc, &s1, &ds1, total, -0.1f, 0.1f));
    if (h2)
        TB_TRY(sc_randf(sc, &s2, &ds2, total, 1e-4f, 1e-2f)); /* a second moment: positive */
    if (hts) /* a squared gradient norm: positive, near sum g^2 of the tensors */
        TB_TRY(sc_randf(sc, &ts, &dts, OPT_TENSORS, 1.0f, 300.0f));
    tb_param_view hv[OPT_TENSORS], dv[OPT_TENSORS];
    opt_views(hv, p, g, s1, s2, ts);
    opt_views(dv, dp, dg, ds1, ds2, dts);
    sc_case c;
    sc_case_start(&c, "%s fused=%d tensors=1003,1(unadapted),37,131073 steps=3,4", oc->name,
                  fused);
    int ran;
    TB_TRY(opt_steps(sc, oc, fused, hv, dv, &c, &ran));
    if (ran) /* s1, s2, ts NULL: the optimizer keeps no such state */
        TB_TRY(SC_CMP_ALL(sc, &c, {"param", p, dp, total, TOL_SUM},
                          {"state1", s1, ds1, total, TOL_SUM}, {"state2", s2, ds2, total, TOL_SUM},
                          {"tensor_state", ts, dts, OPT_TENSORS, TOL_SUM}));
    sc_case_end(sc, &c);
    return sc_release(sc);
}

int check_opt_step(sc_ctx *sc)
{
    for (size_t i = 0; i < N_OPT_CASES; i++)
        for (int fused = 0; fused < 2; fused++)
            TB_TRY(opt_one(sc, &opt_cases[i], fused));
    return TB_OK;
}

