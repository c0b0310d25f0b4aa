/*
 * attention.c - the CPU backend's layer norm and attention slots
 * (lib/backend/backend.h, "attention and layer norm"):
 *
 *   layernorm_fwd/bwd  TB_LN_UNFUSED: eager PyTorch's decomposition, one
 *                      OpenMP pass over the whole tensor per step (mean,
 *                      center, square, variance, rstd, normalize, scale,
 *                      shift; twelve passes backward), temporaries from
 *                      dev_alloc as PyTorch's allocator would hand them out.
 *                      TB_LN_FUSED: one task per row that keeps the row in
 *                      cache (apex's FusedLayerNorm), plus one column pass
 *                      for dgamma/dbeta in the backward.
 *                      Both run kernels/layernorm_math.h's steps in the same
 *                      order with the same sums, compiled for the baseline
 *                      ISA (no FMA contraction): bitwise equal results.
 *   attention_*        TB_ATTN_MANUAL: as eager PyTorch's
 *                      softmax(q @ k.transpose * scale + mask) @ v: the
 *                      backend's gemm (oneDNN) per head into a materialized
 *                      (B, H, T, T) probability buffer, softmax in place;
 *                      backward dP = dO V^T into a (B, H, T, T) temporary.
 *                      TB_ATTN_FUSED: flash-attention tiles of ATTN_BQ
 *                      queries x ATTN_BK keys with online softmax
 *                      (kernels/attn_math.h); saves only each row's
 *                      logsumexp. The backward recomputes P tile by tile.
 *
 * Fused attention, how the work is split:
 *   forward   one OpenMP task per (b, h, query tile), dynamic schedule
 *             (causal tiles differ in work); every task is independent.
 *   backward  one task per (b, h), flash-attention v1's order: outer loop
 *             over key tiles keeping dK, dV for the tile, inner loop over
 *             query tiles adding into dQ. Five tile products per tile pair,
 *             like the GPU's, no atomics, and results independent of the
 *             thread count; the cost is that B*H < threads leaves threads
 *             idle (the CUDA kernels split dK/dV and dQ instead).
 *   tiles     64 x 64 and D padded to DP, a multiple of 64; one thread's
 *             buffers are 12 tiles of 64 x DP floats plus T floats (196 KB
 *             at D = 64, T = 1024), which stay in this CPU's 1 MB per-core
 *             L2.
 *   speed     the tile products are written with GCC vector extensions
 *             (16-float vectors, accumulators in registers). They and the
 *             softmax rows (whose exp is fmaf polynomials, a libm call
 *             without FMA) are compiled three times with target_clones
 *             for the x86-64-v4 (AVX-512), v3 (AVX2 + FMA) and baseline
 *             ISA levels, picked at load time by cpuid: no -march=native.
 *             Levels, not arch= names: an arch= clone asks whether the CPU
 *             IS that model, which a VM's "Intel Xeon Processor" is not.
 *
 * Determinism: every sum has a fixed order that depends on the sizes only;
 * results are the same for any thread count. Tested against the double
 * reference (lib/backend/ref/attention.c) by lib/backend/cpu/attention_test.c.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_math.h"
#include "kernels/layernorm_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

#define LN_COL_BLOCK 64         /* dgamma/dbeta columns per task */
#define ATTN_BQ 64              /* query rows per tile */
#define ATTN_BK 64              /* keys per tile */
#define ATTN_DC 64              /* head-dim columns per register block; D pads to it */

/* Under TSan (tools/sanitize.sh) one version: it instruments the resolver
 * that target_clones adds, which the loader runs before TSan's runtime is up
 * (SIGSEGV before main). */
#ifdef __SANITIZE_THREAD__
#define ATTN_CLONES
#else
#define ATTN_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

typedef float v16f __attribute__((vector_size(64)));

/* ================================================================ layer norm */

/* Row sums use ops_common.h's sum_f64, one function for both variants, so
 * their row statistics are the same bits. */

/* ---- fused: one row at a time ---- */

static void ln_row_fwd(const float *x, const float *gamma, const float *beta, float eps, int cols,
                       float *y, float *mean_out, float *rstd_out)
{
    float mean = (float)(sum_f64(x, cols) / cols);
    double v = 0.0;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < cols; c++)
        v += tb_ln_square_f(tb_ln_center_f(x[c], mean));
    float rstd = tb_ln_rstd_f((float)(v / cols), eps);
#pragma omp simd
    for (int c = 0; c < cols; c++)
        y[c] = tb_ln_affine_f(tb_ln_normalize_f(tb_ln_center_f(x[c], mean), rstd), gamma[c],
                              beta[c]);
    *mean_out = mean;
    *rstd_out = rstd;
}

static void ln_row_bwd(const float *x, const float *dy, const float *gamma, float mean,
                       float rstd, int cols, float *dx)
{
    double a = 0.0, c2 = 0.0;
#pragma omp simd reduction(+ : a, c2)
    for (int c = 0; c < cols; c++) {
        float xhat = tb_ln_normalize_f(tb_ln_center_f(x[c], mean), rstd);
        float g = TB_MUL(dy[c], gamma[c]);
        a += g;
        c2 += TB_MUL(g, xhat);
    }
    float af = (float)(a / cols), cf = (float)(c2 / cols);
#pragma omp simd
    for (int c = 0; c < cols; c++) {
        float xhat = tb_ln_normalize_f(tb_ln_center_f(x[c], mean), rstd);
        dx[c] = tb_ln_dx_f(TB_MUL(dy[c], gamma[c]), xhat, af, cf, rstd);
    }
}

/* dgamma, dbeta over columns [c0, c0 + cw): rows in order, in double.
 * xhat == NULL: recomputed from x and the saved statistics (fused);
 * otherwise dy * xhat is read from prod (unfused). */
static void ln_param_grad_block(const float *x, const float *dy, const float *prod,
                                const float *mean, const float *rstd, int rows, int cols, int c0,
                                int cw, float *dgamma, float *dbeta, int accumulate)
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

static void ln_pass_row(tb_ln_pass k, const float *a, const float *b, float rv, const float *col,
                        float *out, int cols)
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

/* out[r] = mean of row r of a, one reduction pass. */
static void ln_row_means(int t, const float *a, float *out, int rows, int cols)
{
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++)
        out[r] = (float)(sum_f64(a + (size_t)r * cols, cols) / cols);
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

/* ================================================================ attention */

static size_t attn_heads(const tb_attn_desc *d) { return (size_t)d->batch * d->heads; }

/* ---- fused: one thread's tiles ---- */

typedef struct attn_tiles {
    float *kt, *vt;   /* (D, BK): the key tile's K and V transposed, 0 beyond nk */
    float *kp, *vp;   /* (BK, DP): K and V rows, 0 padded */
    float *s, *dp;    /* (BQ, BK): scores, then P; dP, then dS */
    float *pt, *dst;  /* (BK, BQ): P and dS transposed */
    float *qp, *dop;  /* (BQ, DP): Q and dO rows, 0 padded */
    float *o;         /* (BQ, DP): output accumulator */
    float *dk, *dv;   /* (BK, DP): the key tile's gradients */
    float *m, *l;     /* (BQ): running max and sum */
    float *rowdot;    /* (T): rowsum(dO * O) of the head */
} attn_tiles;

static int attn_dp(int D) { return (D + ATTN_DC - 1) / ATTN_DC * ATTN_DC; }

/* Floats of one thread's tiles, each rounded to 16 (64 bytes). */
static size_t attn_tile_floats(int T, int D)
{
    size_t dp = (size_t)attn_dp(D), r16 = 15;
    size_t n = 2 * (((size_t)D * ATTN_BK + r16) & ~r16) + 6 * ATTN_BK * dp + 4 * ATTN_BQ * ATTN_BK;
    return n + 2 * ATTN_BQ + (((size_t)T + r16) & ~r16);
}

static void attn_tiles_carve(float *base, int T, int D, attn_tiles *w)
{
    size_t dp = (size_t)attn_dp(D), kt = ((size_t)D * ATTN_BK + 15) & ~(size_t)15;
    float *p = base;
    w->kt = p, p += kt;
    w->vt = p, p += kt;
    w->kp = p, p += ATTN_BK * dp;
    w->vp = p, p += ATTN_BK * dp;
    w->dk = p, p += ATTN_BK * dp;
    w->dv = p, p += ATTN_BK * dp;
    w->qp = p, p += ATTN_BQ * dp;
    w->dop = p, p += ATTN_BQ * dp;
    w->s = p, p += ATTN_BQ * ATTN_BK;
    w->dp = p, p += ATTN_BQ * ATTN_BK;
    w->pt = p, p += ATTN_BK * ATTN_BQ;
    w->dst = p, p += ATTN_BK * ATTN_BQ;
    w->m = p, p += ATTN_BQ;
    w->l = p, p += ATTN_BQ;
    w->rowdot = p;
    w->o = w->qp; /* the forward never uses qp; o shares it */
    (void)T;
}

/* s(m, BK) = a(m, D) bt(D, BK): one row of a at a time, the BK outputs in
 * four 16-float registers. */
ATTN_CLONES static void tile_scores(const float *a, int lda, int m, int D, const float *bt,
                                    float *s)
{
    for (int i = 0; i < m; i++) {
        const float *ai = a + (size_t)i * lda;
        v16f c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
        for (int e = 0; e < D; e++) {
            const v16f *b = (const v16f *)(bt + (size_t)e * ATTN_BK);
            float x = ai[e];
            c0 += x * b[0];
            c1 += x * b[1];
            c2 += x * b[2];
            c3 += x * b[3];
        }
        v16f *si = (v16f *)(s + (size_t)i * ATTN_BK);
        si[0] = c0, si[1] = c1, si[2] = c2, si[3] = c3;
    }
}

/* c(m, ncols) += alpha a(m, kk) b(kk, DP): b's rows are DP floats
 * (64-aligned, padded); 64 output columns at a time in registers. */
ATTN_CLONES static void tile_acc_rows(float alpha, const float *a, int lda, int m, int kk,
                                      const float *b, int DP, float *c, int ldc, int ncols)
{
    for (int i = 0; i < m; i++) {
        const float *ai = a + (size_t)i * lda;
        for (int d0 = 0; d0 < ncols; d0 += ATTN_DC) {
            v16f c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            for (int l = 0; l < kk; l++) {
                const v16f *bl = (const v16f *)(b + (size_t)l * DP + d0);
                float x = ai[l];
                c0 += x * bl[0];
                c1 += x * bl[1];
                c2 += x * bl[2];
                c3 += x * bl[3];
            }
            float acc[ATTN_DC] __attribute__((aligned(64)));
            v16f *av = (v16f *)acc;
            av[0] = alpha * c0, av[1] = alpha * c1, av[2] = alpha * c2, av[3] = alpha * c3;
            int w = ncols - d0 < ATTN_DC ? ncols - d0 : ATTN_DC;
            float *ci = c + (size_t)i * ldc + d0;
            for (int j = 0; j < w; j++)
                ci[j] += acc[j];
        }
    }
}

/* dst(D, BK) = src(n, D) transposed, columns n..BK zero. */
static void load_transposed(const float *src, int n, int D, float *dst)
{
    for (int e = 0; e < D; e++) {
        float *de = dst + (size_t)e * ATTN_BK;
        for (int j = 0; j < n; j++)
            de[j] = src[(size_t)j * D + e];
        for (int j = n; j < ATTN_BK; j++)
            de[j] = 0.0f;
    }
}

/* dst(rows, DP) = src(n, D) with zero padding to rows x DP. */
static void load_padded(const float *src, int n, int rows, int D, int DP, float *dst)
{
    for (int j = 0; j < rows; j++) {
        float *dj = dst + (size_t)j * DP;
        int w = j < n ? D : 0;
        if (w)
            memcpy(dj, src + (size_t)j * D, sizeof(float) * D);
        memset(dj + w, 0, sizeof(float) * (DP - w));
    }
}

/* dst(BK, BQ)[j][i] = src(m, BK)[i][j] for i < m. */
static void transpose_tile(const float *src, int m, float *dst)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ATTN_BK; j++)
            dst[(size_t)j * ATTN_BQ + i] = src[(size_t)i * ATTN_BK + j];
}

typedef struct attn_geom {
    int T, D, DP, causal;
    float scale;
} attn_geom;

/* Online-softmax update of query row i with the key tile's raw dots
 * srow[0..BK) (keys j0 + j, valid for j < nk): srow becomes the weights. */
ATTN_CLONES static void online_softmax_row(const attn_geom *g, float *srow, int i, int j0,
                                           int nk, float *m, float *l, float *orow)
{
    float mt = -INFINITY;
#pragma omp simd reduction(max : mt)
    for (int j = 0; j < ATTN_BK; j++) {
        float sc = j < nk ? tb_attn_mask_f(srow[j], g->scale, g->causal, i, j0 + j) : -INFINITY;
        srow[j] = sc;
        mt = tb_attn_max_f(mt, sc);
    }
    float mn = tb_attn_max_f(*m, mt), r = tb_attn_rescale_f(*m, mn), sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < ATTN_BK; j++) {
        srow[j] = tb_attn_weight_f(srow[j], mn);
        sum += srow[j];
    }
    *l = tb_attn_sum_update_f(*l, r, sum);
    *m = mn;
#pragma omp simd
    for (int d = 0; d < g->DP; d++)
        orow[d] *= r;
}

/* Query rows [i0, i0 + nq) of one head: out and lse. */
static void attn_fwd_tile(const attn_geom *g, const float *q, const float *k, const float *v,
                          float *out, float *lse, int i0, int nq, attn_tiles *w)
{
    int T = g->T, D = g->D, DP = g->DP;
    memset(w->o, 0, sizeof(float) * (size_t)nq * DP);
    for (int ii = 0; ii < nq; ii++)
        w->m[ii] = -INFINITY, w->l[ii] = 0.0f;
    int kend = g->causal && i0 + nq < T ? i0 + nq : T;
    for (int j0 = 0; j0 < kend; j0 += ATTN_BK) {
        int nk = kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK;
        load_transposed(k + (size_t)j0 * D, nk, D, w->kt);
        load_padded(v + (size_t)j0 * D, nk, ATTN_BK, D, DP, w->vp);
        tile_scores(q + (size_t)i0 * D, D, nq, D, w->kt, w->s);
        for (int ii = 0; ii < nq; ii++)
            online_softmax_row(g, w->s + (size_t)ii * ATTN_BK, i0 + ii, j0, nk, &w->m[ii],
                               &w->l[ii], w->o + (size_t)ii * DP);
        tile_acc_rows(1.0f, w->s, ATTN_BK, nq, nk, w->vp, DP, w->o, DP, D);
    }
    for (int ii = 0; ii < nq; ii++) {
        float *orow = out + (size_t)(i0 + ii) * D;
        const float *acc = w->o + (size_t)ii * DP;
        float l = w->l[ii];
#pragma omp simd
        for (int d = 0; d < D; d++)
            orow[d] = acc[d] / l;
        lse[i0 + ii] = tb_attn_lse_f(w->m[ii], l);
    }
}

/* P and dS of query rows [i0, i0 + nq) against the key tile at j0: s holds
 * the raw dots, dp the raw dO.V products; both are overwritten. */
ATTN_CLONES static void attn_bwd_probs(const attn_geom *g, const float *lse,
                                       const float *rowdot, int i0, int nq, int j0, int nk,
                                       float *s, float *dp)
{
    for (int ii = 0; ii < nq; ii++) {
        int i = i0 + ii;
        float *srow = s + (size_t)ii * ATTN_BK, *dprow = dp + (size_t)ii * ATTN_BK;
        float li = lse[i], di = rowdot[i];
#pragma omp simd
        for (int j = 0; j < ATTN_BK; j++) {
            float sc = j < nk ? tb_attn_mask_f(srow[j], g->scale, g->causal, i, j0 + j)
                              : -INFINITY;
            float p = tb_attn_prob_f(sc, li);
            srow[j] = p;
            dprow[j] = tb_attn_dscore_f(p, dprow[j], di);
        }
    }
}

/* The key tile at j0 against query rows [i0, i0 + nq): adds to the tile's
 * dK, dV accumulators and to dq's rows. */
static void attn_bwd_pair(const attn_geom *g, const float *q, const float *dout,
                          const float *lse, float *dq, int i0, int nq, int j0, int nk,
                          attn_tiles *w)
{
    int D = g->D, DP = g->DP;
    load_padded(q + (size_t)i0 * D, nq, nq, D, DP, w->qp);
    load_padded(dout + (size_t)i0 * D, nq, nq, D, DP, w->dop);
    tile_scores(q + (size_t)i0 * D, D, nq, D, w->kt, w->s);
    tile_scores(dout + (size_t)i0 * D, D, nq, D, w->vt, w->dp);
    attn_bwd_probs(g, lse, w->rowdot, i0, nq, j0, nk, w->s, w->dp);
    transpose_tile(w->s, nq, w->pt);
    transpose_tile(w->dp, nq, w->dst);
    tile_acc_rows(1.0f, w->pt, ATTN_BQ, nk, nq, w->dop, DP, w->dv, DP, D);
    tile_acc_rows(g->scale, w->dst, ATTN_BQ, nk, nq, w->qp, DP, w->dk, DP, D);
    tile_acc_rows(g->scale, w->dp, ATTN_BK, nq, nk, w->kp, DP, dq + (size_t)i0 * D, D, D);
}

/* One head's dq, dk, dv (flash-attention v1 order). */
static void attn_bwd_head(const attn_geom *g, const float *q, const float *k, const float *v,
                          const float *o, const float *dout, const float *lse, float *dq,
                          float *dk, float *dv, attn_tiles *w)
{
    int T = g->T, D = g->D, DP = g->DP;
    for (int i = 0; i < T; i++) {
        double s = 0.0;
        for (int d = 0; d < D; d++)
            s += (double)dout[(size_t)i * D + d] * o[(size_t)i * D + d];
        w->rowdot[i] = (float)s;
    }
    memset(dq, 0, sizeof(float) * (size_t)T * D);
    for (int j0 = 0; j0 < T; j0 += ATTN_BK) {
        int nk = T - j0 < ATTN_BK ? T - j0 : ATTN_BK;
        load_transposed(k + (size_t)j0 * D, nk, D, w->kt);
        load_transposed(v + (size_t)j0 * D, nk, D, w->vt);
        load_padded(k + (size_t)j0 * D, nk, ATTN_BK, D, DP, w->kp);
        memset(w->dk, 0, sizeof(float) * ATTN_BK * DP);
        memset(w->dv, 0, sizeof(float) * ATTN_BK * DP);
        for (int i0 = g->causal ? j0 : 0; i0 < T; i0 += ATTN_BQ) {
            int nq = T - i0 < ATTN_BQ ? T - i0 : ATTN_BQ;
            attn_bwd_pair(g, q, dout, lse, dq, i0, nq, j0, nk, w);
        }
        for (int j = 0; j < nk; j++) {
            memcpy(dk + (size_t)(j0 + j) * D, w->dk + (size_t)j * DP, sizeof(float) * D);
            memcpy(dv + (size_t)(j0 + j) * D, w->dv + (size_t)j * DP, sizeof(float) * D);
        }
    }
}

static attn_geom attn_geom_of(const tb_attn_desc *d)
{
    return (attn_geom){.T = d->seq, .D = d->head_dim, .DP = attn_dp(d->head_dim),
                       .causal = !!d->causal, .scale = d->scale};
}

/* One tile set per thread, from dev_alloc (counted in mem_stats). */
static int attn_tiles_alloc(tb_backend *be, const tb_attn_desc *d, float **base)
{
    size_t per = attn_tile_floats(d->seq, d->head_dim);
    return be->dev_alloc(be, (void **)base, sizeof(float) * per * (size_t)threads_of(be));
}

static int attn_fwd_fused(tb_backend *be, const tb_attn_desc *d, const float *q,
                          const float *k, const float *v, float *out, float *lse)
{
    float *base;
    TB_TRY(attn_tiles_alloc(be, d, &base));
    attn_geom g = attn_geom_of(d);
    size_t per = attn_tile_floats(d->seq, d->head_dim), T = (size_t)d->seq, D = d->head_dim;
    int qtiles = (d->seq + ATTN_BQ - 1) / ATTN_BQ;
    long tasks = (long)attn_heads(d) * qtiles;
    int t = threads_of(be);
#pragma omp parallel num_threads(t)
    {
        attn_tiles w;
        attn_tiles_carve(base + per * (size_t)omp_get_thread_num(), d->seq, d->head_dim, &w);
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < tasks; task++) {
            size_t bh = (size_t)(task / qtiles);
            int i0 = (int)(task % qtiles) * ATTN_BQ;
            int nq = d->seq - i0 < ATTN_BQ ? d->seq - i0 : ATTN_BQ;
            size_t off = bh * T * D;
            attn_fwd_tile(&g, q + off, k + off, v + off, out + off, lse + bh * T, i0, nq, &w);
        }
    }
    return be->dev_free(be, base);
}

static int attn_bwd_fused(tb_backend *be, const tb_attn_desc *d, const float *q,
                          const float *k, const float *v, const float *o, const float *dout,
                          const float *lse, float *dq, float *dk, float *dv)
{
    float *base;
    TB_TRY(attn_tiles_alloc(be, d, &base));
    attn_geom g = attn_geom_of(d);
    size_t per = attn_tile_floats(d->seq, d->head_dim), T = (size_t)d->seq, D = d->head_dim;
    long heads = (long)attn_heads(d);
    int t = threads_of(be);
#pragma omp parallel num_threads(t)
    {
        attn_tiles w;
        attn_tiles_carve(base + per * (size_t)omp_get_thread_num(), d->seq, d->head_dim, &w);
#pragma omp for schedule(dynamic, 1)
        for (long bh = 0; bh < heads; bh++) {
            size_t off = (size_t)bh * T * D;
            attn_bwd_head(&g, q + off, k + off, v + off, o + off, dout + off, lse + bh * T,
                          dq + off, dk + off, dv + off, &w);
        }
    }
    return be->dev_free(be, base);
}

/* ---- manual: materialized scores through the backend's gemm ---- */

/* Row r of the (B*H*T, T) probability matrix: mask, then softmax in place
 * (scores already scaled by the gemm's alpha). */
ATTN_CLONES static void manual_softmax_row(float *p, int T, int causal, int i)
{
    float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < T; j++) {
        p[j] = tb_attn_mask_f(p[j], 1.0f, causal, i, j);
        mx = tb_attn_max_f(mx, p[j]);
    }
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < T; j++) {
        p[j] = tb_attn_weight_f(p[j], mx);
        sum += p[j];
    }
#pragma omp simd
    for (int j = 0; j < T; j++)
        p[j] = p[j] / sum;
}

/* dP becomes dS = P (dP - rowsum(P dP)): PyTorch's softmax backward. */
ATTN_CLONES static void manual_softmax_bwd_row(const float *p, float *dp, int T)
{
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < T; j++)
        dot += p[j] * dp[j];
#pragma omp simd
    for (int j = 0; j < T; j++)
        dp[j] = tb_attn_dscore_f(p[j], dp[j], dot);
}

static int attn_fwd_manual(tb_backend *be, const tb_attn_desc *d, const float *q,
                           const float *k, const float *v, float *out, float *p)
{
    int T = d->seq, D = d->head_dim, t = threads_of(be);
    size_t heads = attn_heads(d), hd = (size_t)T * D, tt = (size_t)T * T;
    for (size_t bh = 0; bh < heads; bh++) /* S = scale Q K^T */
        TB_TRY(be->gemm(be, 0, 1, T, T, D, d->scale, q + bh * hd, D, k + bh * hd, D, 0.0f,
                        p + bh * tt, T, TB_MATH_F32));
    long rows = (long)(heads * T);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * T >= PAR_MIN)
    for (long r = 0; r < rows; r++)
        manual_softmax_row(p + (size_t)r * T, T, d->causal, (int)(r % T));
    for (size_t bh = 0; bh < heads; bh++) /* out = P V */
        TB_TRY(be->gemm(be, 0, 0, T, D, T, 1.0f, p + bh * tt, T, v + bh * hd, D, 0.0f,
                        out + bh * hd, D, TB_MATH_F32));
    return TB_OK;
}

static int attn_bwd_manual_with(tb_backend *be, const tb_attn_desc *d, const float *q,
                                const float *k, const float *v, const float *dout,
                                const float *p, float *ds, float *dq, float *dk, float *dv)
{
    int T = d->seq, D = d->head_dim, t = threads_of(be);
    size_t heads = attn_heads(d), hd = (size_t)T * D, tt = (size_t)T * T;
    for (size_t bh = 0; bh < heads; bh++) {
        /* dV = P^T dO; dP = dO V^T */
        TB_TRY(be->gemm(be, 1, 0, T, D, T, 1.0f, p + bh * tt, T, dout + bh * hd, D, 0.0f,
                        dv + bh * hd, D, TB_MATH_F32));
        TB_TRY(be->gemm(be, 0, 1, T, T, D, 1.0f, dout + bh * hd, D, v + bh * hd, D, 0.0f,
                        ds + bh * tt, T, TB_MATH_F32));
    }
    long rows = (long)(heads * T);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * T >= PAR_MIN)
    for (long r = 0; r < rows; r++)
        manual_softmax_bwd_row(p + (size_t)r * T, ds + (size_t)r * T, T);
    for (size_t bh = 0; bh < heads; bh++) {
        /* dQ = scale dS K; dK = scale dS^T Q */
        TB_TRY(be->gemm(be, 0, 0, T, D, T, d->scale, ds + bh * tt, T, k + bh * hd, D, 0.0f,
                        dq + bh * hd, D, TB_MATH_F32));
        TB_TRY(be->gemm(be, 1, 0, T, D, T, d->scale, ds + bh * tt, T, q + bh * hd, D, 0.0f,
                        dk + bh * hd, D, TB_MATH_F32));
    }
    return TB_OK;
}

static int attn_bwd_manual(tb_backend *be, const tb_attn_desc *d, const float *q,
                           const float *k, const float *v, const float *dout, const float *p,
                           float *dq, float *dk, float *dv)
{
    float *ds;
    TB_TRY(be->dev_alloc(be, (void **)&ds, sizeof(float) * attn_heads(d) * d->seq * d->seq));
    int rc = attn_bwd_manual_with(be, d, q, k, v, dout, p, ds, dq, dk, dv);
    int rc2 = be->dev_free(be, ds);
    return rc != TB_OK ? rc : rc2;
}

/* ---- the slots ---- */

static int cpu_attention_workspace(tb_backend *be, tb_attn_variant variant,
                                   const tb_attn_desc *d, size_t *saved_bytes,
                                   size_t *temp_bytes)
{
    TB_TRY(tb_check_attention("attention_workspace", variant, d));
    size_t rows = attn_heads(d) * d->seq;
    size_t saved = sizeof(float) * rows * (variant == TB_ATTN_MANUAL ? (size_t)d->seq : 1);
    size_t temp = variant == TB_ATTN_MANUAL
                      ? sizeof(float) * rows * d->seq
                      : sizeof(float) * attn_tile_floats(d->seq, d->head_dim) * threads_of(be);
    if (saved_bytes)
        *saved_bytes = saved;
    if (temp_bytes)
        *temp_bytes = temp;
    return TB_OK;
}

static int cpu_attention_fwd(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                             const float *q, const float *k, const float *v, float *out,
                             float *saved)
{
    TB_TRY(tb_check_attention("attention_fwd", variant, d));
    if (variant == TB_ATTN_MANUAL)
        return attn_fwd_manual(be, d, q, k, v, out, saved);
    return attn_fwd_fused(be, d, q, k, v, out, saved);
}

static int cpu_attention_bwd(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                             const float *q, const float *k, const float *v, const float *out,
                             const float *dout, const float *saved, float *dq, float *dk,
                             float *dv)
{
    TB_TRY(tb_check_attention("attention_bwd", variant, d));
    if (variant == TB_ATTN_MANUAL)
        return attn_bwd_manual(be, d, q, k, v, dout, saved, dq, dk, dv);
    return attn_bwd_fused(be, d, q, k, v, out, dout, saved, dq, dk, dv);
}

int tb_cpu_install_attn_ops(tb_backend *be)
{
    be->layernorm_fwd = cpu_layernorm_fwd;
    be->layernorm_bwd = cpu_layernorm_bwd;
    be->attention_workspace = cpu_attention_workspace;
    be->attention_fwd = cpu_attention_fwd;
    be->attention_bwd = cpu_attention_bwd;
    return TB_OK;
}
