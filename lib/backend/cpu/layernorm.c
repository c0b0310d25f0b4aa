/*
 * layernorm.c - the CPU backend's layer norm slots (lib/backend/backend.h,
 * "attention and layer norm"):
 *
 *   TB_LN_UNFUSED  eager PyTorch's decomposition, one OpenMP pass over the
 *                  whole tensor per step (mean, center, square, variance,
 *                  rstd, normalize, scale, shift; twelve passes backward),
 *                  temporaries from dev_alloc as PyTorch's allocator would
 *                  hand them out.
 *   TB_LN_FUSED    one task per row that keeps the row in cache (apex's
 *                  FusedLayerNorm), plus one column pass for dgamma/dbeta in
 *                  the backward.
 *
 * Both run kernels/layernorm_math.h's steps in the same order with the same
 * sums: bitwise equal results. Row sums (mean, variance, and the backward's
 * two) are in double over LN_LANES lanes in a fixed order (ln_row_sum), so
 * they are the same bits on every ISA; the file is built with
 * -ffp-contract=off, so no FMA changes a rounding either. The row loops are
 * compiled per ISA (LN_CLONES: AVX-512, AVX2, baseline) and the loader
 * picks the best. Before this file had its own flags, the rows ran on the
 * baseline ISA with one two-double accumulator per sum, at ~40-50% of the
 * copy ceiling on GPT-2's rows (bench:train --trace, family layernorm).
 *
 * Test: bazel test //lib/backend/cpu:cpu_attn_test (fused = unfused bitwise,
 * both against the double reference).
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/layernorm_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

#define LN_COL_BLOCK 64 /* dgamma/dbeta columns per task */
#define LN_LANES 8      /* row sums: double partial sums, one per lane */

/* Under TSan (tools/sanitize.sh) one version: TSan breaks on the ifunc
 * resolver target_clones adds (see attention.c). */
#ifdef __SANITIZE_THREAD__
#define LN_CLONES
#else
#define LN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#define LN_INLINE static inline __attribute__((always_inline))

typedef float ln_v8f __attribute__((vector_size(LN_LANES * sizeof(float))));
typedef double ln_v8d __attribute__((vector_size(LN_LANES * sizeof(double))));

/* ---- row sums, the same order for both variants and every ISA ---- */

/* What a row sum adds, per element c (the unfused variant sums stored
 * arrays, LN_TERM_X; the fused one computes the same floats on the fly):
 *   X      x[c]
 *   SQ     (x[c] - mean)^2
 *   G      dy[c] gamma[c]
 *   GXHAT  dy[c] gamma[c] xhat[c], xhat = (x[c] - mean) rstd */
typedef enum ln_term { LN_TERM_X, LN_TERM_SQ, LN_TERM_G, LN_TERM_GXHAT } ln_term;

typedef struct ln_row {
    const float *x, *dy, *gamma;
    float mean, rstd;
} ln_row;

/* Elements c .. c + LN_LANES - 1 into *t: the same operations as
 * ln_term1. (Vectors by pointer: by value they would change the baseline
 * clone's ABI, and GCC warns even though these are inlined.) */
LN_INLINE void ln_term8(ln_term k, const ln_row *r, int c, ln_v8f *t)
{
    ln_v8f x, dy, g;
    memcpy(&x, r->x + c, sizeof x);
    if (k == LN_TERM_X) {
        *t = x;
        return;
    }
    ln_v8f xc = x + -r->mean;
    if (k == LN_TERM_SQ) {
        *t = xc * xc;
        return;
    }
    memcpy(&dy, r->dy + c, sizeof dy);
    memcpy(&g, r->gamma + c, sizeof g);
    *t = k == LN_TERM_G ? dy * g : dy * g * (xc * r->rstd);
}

LN_INLINE float ln_term1(ln_term k, const ln_row *r, int c)
{
    switch (k) {
    case LN_TERM_X: return r->x[c];
    case LN_TERM_SQ: return tb_ln_square_f(tb_ln_center_f(r->x[c], r->mean));
    case LN_TERM_G: return TB_MUL(r->dy[c], r->gamma[c]);
    default:
        return TB_MUL(TB_MUL(r->dy[c], r->gamma[c]),
                      tb_ln_normalize_f(tb_ln_center_f(r->x[c], r->mean), r->rstd));
    }
}

/* Sum of the row's terms in double: lane l adds elements l, l + LN_LANES,
 * ... in order, the lanes combine in a fixed tree, then the tail in order. */
LN_INLINE double ln_row_sum(ln_term k, const ln_row *r, int cols)
{
    ln_v8d acc = {0};
    int c = 0;
    for (; c + LN_LANES <= cols; c += LN_LANES) {
        ln_v8f t;
        ln_term8(k, r, c, &t);
        acc += __builtin_convertvector(t, ln_v8d);
    }
    double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; c < cols; c++)
        s += (double)ln_term1(k, r, c);
    return s;
}

/* ---- fused: one row at a time ---- */

LN_CLONES static void ln_row_fwd(const float *x, const float *gamma, const float *beta,
                                 float eps, int cols, float *y, float *mean_out,
                                 float *rstd_out)
{
    ln_row r = {.x = x};
    float mean = (float)(ln_row_sum(LN_TERM_X, &r, cols) / cols);
    r.mean = mean;
    float rstd = tb_ln_rstd_f((float)(ln_row_sum(LN_TERM_SQ, &r, cols) / cols), eps);
#pragma omp simd
    for (int c = 0; c < cols; c++)
        y[c] = tb_ln_affine_f(tb_ln_normalize_f(tb_ln_center_f(x[c], mean), rstd), gamma[c],
                              beta[c]);
    *mean_out = mean;
    *rstd_out = rstd;
}

LN_CLONES static void ln_row_bwd(const float *x, const float *dy, const float *gamma,
                                 float mean, float rstd, int cols, float *dx)
{
    ln_row r = {.x = x, .dy = dy, .gamma = gamma, .mean = mean, .rstd = rstd};
    float af = (float)(ln_row_sum(LN_TERM_G, &r, cols) / cols);
    float cf = (float)(ln_row_sum(LN_TERM_GXHAT, &r, cols) / cols);
#pragma omp simd
    for (int c = 0; c < cols; c++) {
        float xhat = tb_ln_normalize_f(tb_ln_center_f(x[c], mean), rstd);
        dx[c] = tb_ln_dx_f(TB_MUL(dy[c], gamma[c]), xhat, af, cf, rstd);
    }
}

/* dgamma, dbeta over columns [c0, c0 + cw): rows in order, in double.
 * xhat == NULL: recomputed from x and the saved statistics (fused);
 * otherwise dy * xhat is read from prod (unfused). */
LN_CLONES static void ln_param_grad_block(const float *x, const float *dy, const float *prod,
                                          const float *mean, const float *rstd, int rows,
                                          int cols, int c0, int cw, float *dgamma,
                                          float *dbeta, int accumulate)
{
    double ag[LN_COL_BLOCK] = {0}, ab[LN_COL_BLOCK] = {0};
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * cols + c0;
        if (prod) {
#pragma omp simd
            for (int j = 0; j < cw; j++) {
                ag[j] += prod[o + j];
                ab[j] += dy[o + j];
            }
        } else {
            float m = mean[r], s = rstd[r];
#pragma omp simd
            for (int j = 0; j < cw; j++) {
                ag[j] += TB_MUL(dy[o + j], tb_ln_normalize_f(tb_ln_center_f(x[o + j], m), s));
                ab[j] += dy[o + j];
            }
        }
    }
    for (int j = 0; j < cw; j++) {
        dgamma[c0 + j] = (float)((accumulate ? (double)dgamma[c0 + j] : 0.0) + ag[j]);
        dbeta[c0 + j] = (float)((accumulate ? (double)dbeta[c0 + j] : 0.0) + ab[j]);
    }
}

static void ln_param_grad(int t, const float *x, const float *dy, const float *prod,
                          const float *mean, const float *rstd, int rows, int cols,
                          float *dgamma, float *dbeta, int accumulate)
{
    int blocks = (cols + LN_COL_BLOCK - 1) / LN_COL_BLOCK;
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int b = 0; b < blocks; b++) {
        int c0 = b * LN_COL_BLOCK;
        int cw = cols - c0 < LN_COL_BLOCK ? cols - c0 : LN_COL_BLOCK;
        ln_param_grad_block(x, dy, prod, mean, rstd, rows, cols, c0, cw, dgamma, dbeta,
                            accumulate);
    }
}

/* ---- unfused: one pass over the tensor per step ---- */

LN_CLONES static void ln_pass_row(tb_ln_pass k, const float *a, const float *b, float rv,
                                  const float *col, float *out, int cols)
{
    switch (k) {
    case TB_LN_PASS_CENTER:
    case TB_LN_PASS_SUB_ROW:
#pragma omp simd
        for (int c = 0; c < cols; c++)
            out[c] = tb_ln_center_f(a[c], rv);
        break;
    case TB_LN_PASS_SQUARE:
#pragma omp simd
        for (int c = 0; c < cols; c++)
            out[c] = tb_ln_square_f(a[c]);
        break;
    case TB_LN_PASS_SCALE_ROW:
#pragma omp simd
        for (int c = 0; c < cols; c++)
            out[c] = tb_ln_normalize_f(a[c], rv);
        break;
    case TB_LN_PASS_MUL_COL:
#pragma omp simd
        for (int c = 0; c < cols; c++)
            out[c] = TB_MUL(a[c], col[c]);
        break;
    case TB_LN_PASS_ADD_COL:
#pragma omp simd
        for (int c = 0; c < cols; c++)
            out[c] = TB_ADD(a[c], col[c]);
        break;
    case TB_LN_PASS_MUL:
#pragma omp simd
        for (int c = 0; c < cols; c++)
            out[c] = TB_MUL(a[c], b[c]);
        break;
    case TB_LN_PASS_SUB:
#pragma omp simd
        for (int c = 0; c < cols; c++)
            out[c] = TB_ADD(a[c], -b[c]);
        break;
    }
}

/* One element-wise pass over rows x cols; row is per-row (may be NULL). */
static void ln_pass_all(int t, tb_ln_pass k, const float *a, const float *b, const float *row,
                        const float *col, float *out, int rows, int cols)
{
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * cols;
        ln_pass_row(k, a + o, b ? b + o : NULL, row ? row[r] : 0.0f, col, out + o, cols);
    }
}

/* The mean of one row of a: the fused rows' sums over stored terms. */
LN_CLONES static float ln_row_mean(const float *a, int cols)
{
    ln_row r = {.x = a};
    return (float)(ln_row_sum(LN_TERM_X, &r, cols) / cols);
}

/* out[r] = mean of row r of a, one reduction pass. */
static void ln_row_means(int t, const float *a, float *out, int rows, int cols)
{
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++)
        out[r] = ln_row_mean(a + (size_t)r * cols, cols);
}

static int ln_fwd_unfused(tb_backend *be, const float *x, const float *gamma, const float *beta,
                          float eps, int rows, int cols, float *y, float *mean, float *rstd)
{
    int t = threads_of(be), rc = TB_OK;
    size_t n = (size_t)rows * cols;
    float *xc, *tmp;
    TB_TRY(be->dev_alloc(be, (void **)&xc, n * sizeof(float)));
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&tmp, n * sizeof(float)), out_free_xc);
    ln_row_means(t, x, mean, rows, cols);                                     /* mean */
    ln_pass_all(t, TB_LN_PASS_CENTER, x, NULL, mean, NULL, xc, rows, cols);   /* xc = x - mean */
    ln_pass_all(t, TB_LN_PASS_SQUARE, xc, NULL, NULL, NULL, tmp, rows, cols); /* xc * xc */
    ln_row_means(t, tmp, rstd, rows, cols);                                   /* var */
    for (int r = 0; r < rows; r++)                                            /* rsqrt(var + eps) */
        rstd[r] = tb_ln_rstd_f(rstd[r], eps);
    ln_pass_all(t, TB_LN_PASS_SCALE_ROW, xc, NULL, rstd, NULL, tmp, rows, cols); /* xhat */
    ln_pass_all(t, TB_LN_PASS_MUL_COL, tmp, NULL, NULL, gamma, y, rows, cols);   /* * gamma */
    ln_pass_all(t, TB_LN_PASS_ADD_COL, y, NULL, NULL, beta, y, rows, cols);      /* + beta */
    rc = be->dev_free(be, tmp);
out_free_xc:;
    int rc2 = be->dev_free(be, xc);
    return rc != TB_OK ? rc : rc2;
}

/* native_layer_norm_backward's decomposition, one pass per line. */
static int ln_bwd_unfused(tb_backend *be, const float *x, const float *dy, const float *gamma,
                          const float *mean, const float *rstd, int rows, int cols, float *dx,
                          float *dgamma, float *dbeta, int accumulate)
{
    int t = threads_of(be), rc = TB_OK;
    size_t n = (size_t)rows * cols;
    float *xhat, *g, *rowv;
    TB_TRY(be->dev_alloc(be, (void **)&xhat, n * sizeof(float)));
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g, n * sizeof(float)), out_free_xhat);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&rowv, 2 * (size_t)rows * sizeof(float) + 1),
                out_free_g);
    float *a = rowv, *c = rowv + rows;
    ln_pass_all(t, TB_LN_PASS_CENTER, x, NULL, mean, NULL, xhat, rows, cols);       /* x - mean */
    ln_pass_all(t, TB_LN_PASS_SCALE_ROW, xhat, NULL, rstd, NULL, xhat, rows, cols); /* xhat */
    ln_pass_all(t, TB_LN_PASS_MUL, dy, xhat, NULL, NULL, dx, rows, cols);           /* dy * xhat */
    ln_param_grad(t, x, dy, dx, mean, rstd, rows, cols, dgamma, dbeta, accumulate);
    ln_pass_all(t, TB_LN_PASS_MUL_COL, dy, NULL, NULL, gamma, g, rows, cols); /* g = dy * gamma */
    ln_row_means(t, g, a, rows, cols); /* a = mean(g) */
    ln_pass_all(t, TB_LN_PASS_MUL, g, xhat, NULL, NULL, dx, rows, cols); /* g * xhat */
    ln_row_means(t, dx, c, rows, cols); /* c = mean(g xhat) */
    ln_pass_all(t, TB_LN_PASS_SUB_ROW, g, NULL, a, NULL, g, rows, cols); /* g - a */
    ln_pass_all(t, TB_LN_PASS_SCALE_ROW, xhat, NULL, c, NULL, dx, rows, cols); /* xhat * c */
    ln_pass_all(t, TB_LN_PASS_SUB, g, dx, NULL, NULL, g, rows, cols); /* (g - a) - xhat c */
    ln_pass_all(t, TB_LN_PASS_SCALE_ROW, g, NULL, rstd, NULL, dx, rows, cols); /* * rstd */
    rc = be->dev_free(be, rowv);
out_free_g:;
    int rc2 = be->dev_free(be, g);
    rc = rc != TB_OK ? rc : rc2;
out_free_xhat:
    rc2 = be->dev_free(be, xhat);
    return rc != TB_OK ? rc : rc2;
}

static int cpu_layernorm_fwd(tb_backend *be, tb_ln_variant variant, const float *x,
                             const float *gamma, const float *beta, float eps, int rows, int cols,
                             float *y, float *save_mean, float *save_rstd)
{
    TB_TRY(tb_check_layernorm("layernorm_fwd", variant, x, gamma, rows, cols));
    if (!(eps > 0.0f))
        return TB_FAIL(TB_ERR_INVALID, "layernorm_fwd: eps %g", (double)eps);
    if (variant == TB_LN_UNFUSED)
        return ln_fwd_unfused(be, x, gamma, beta, eps, rows, cols, y, save_mean, save_rstd);
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * cols;
        ln_row_fwd(x + o, gamma, beta, eps, cols, y + o, &save_mean[r], &save_rstd[r]);
    }
    return TB_OK;
}

static int cpu_layernorm_bwd(tb_backend *be, tb_ln_variant variant, const float *x,
                             const float *dy, const float *gamma, const float *save_mean,
                             const float *save_rstd, int rows, int cols, float *dx,
                             float *dgamma, float *dbeta, int accumulate)
{
    TB_TRY(tb_check_layernorm("layernorm_bwd", variant, x, gamma, rows, cols));
    if (variant == TB_LN_UNFUSED)
        return ln_bwd_unfused(be, x, dy, gamma, save_mean, save_rstd, rows, cols, dx, dgamma,
                              dbeta, accumulate);
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * cols;
        ln_row_bwd(x + o, dy + o, gamma, save_mean[r], save_rstd[r], cols, dx + o);
    }
    ln_param_grad(t, x, dy, NULL, save_mean, save_rstd, rows, cols, dgamma, dbeta, accumulate);
    return TB_OK;
}

int tb_cpu_install_ln_ops(tb_backend *be)
{
    be->layernorm_fwd = cpu_layernorm_fwd;
    be->layernorm_bwd = cpu_layernorm_bwd;
    return TB_OK;
}
