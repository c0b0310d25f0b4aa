/*
 * batchnorm.c - the CPU backend's batch norm: bn_fwd_train, bn_fwd_infer, bn_bwd,
 * NCHW and NHWC (kernels/bn_math.h).
 *
 * Determinism (fixed splits, see ops_common.h):
 *   NCHW   one thread owns each channel and sums its rows in order, in double;
 *          planes under BN_SMALL_HW pixels: sums per position over the batch
 *          in order, then per channel over its positions in order
 *   NHWC   up to BN_ROW_CHUNKS fixed row ranges, partial sums in double,
 *          added in chunk order
 * The per-channel (NCHW) and per-row-range (NHWC) loops are compiled for
 * x86-64-v4 (AVX-512), v3 (AVX2) and the baseline (SSE2), picked at load
 * time (BN_CLONES): the double sums ran 2 lanes wide on SSE2, and batch
 * norm was ~18% of a small-CNN step. The vector width sets the order of
 * the sums inside a row, so the statistics' last bits may differ between
 * CPUs of different ISA levels; on one CPU they do not depend on threads.
 */
#include <math.h>
#include <string.h>

#include "kernels/bn_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

#define BN_ROW_CHUNKS ((size_t)64) /* NHWC batch norm: fixed row chunks of the sums */

/* Under TSan (tools/sanitize.sh) one version: it instruments the ifunc
 * resolver target_clones adds, which runs before TSan's runtime is up. */
#ifdef __SANITIZE_THREAD__
#define BN_CLONES
#else
#define BN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

/* The per-channel finishers below are inlined into their callers: the
 * BN_CLONES loops call them once a channel, and a call from AVX code into
 * this file's SSE code ran with the vector registers' upper halves dirty
 * (tools/avx_exits.py, the avx_exits test). */
#define BN_FINISH static inline __attribute__((always_inline))

/* Batch statistics done: rounds them, saves mean and invstd, moves the
 * running statistics. */
BN_FINISH void bn_finish_channel(const tb_bn_desc *d, int c, double mean, double var,
                                 float *running_mean, float *running_var, float *save_mean,
                                 float *save_invstd)
{
    double m = (double)d->n * d->hw;
    save_mean[c] = (float)mean;
    save_invstd[c] = tb_bn_invstd_f((float)var, d->eps);
    running_mean[c] = tb_bn_running_f(running_mean[c], (float)mean, d->momentum);
    running_var[c] = tb_bn_running_f(running_var[c], (float)tb_bn_unbiased(var, m), d->momentum);
}

/* NCHW: channel c is n runs of hw floats, C * hw apart. The statistics in
 * one pass over x, sum and sum of squares in double: var = E[x^2] - mean^2
 * loses ~1e-16 * mean^2 / var of var to cancellation, far below the float
 * it is rounded to for any activation (a pass fewer than mean, then
 * squared deviations: batch norm forward on ResNet-50 is ~5% of a step). */
BN_CLONES static void bn_train_channel_nchw(const tb_bn_desc *d, int c, const float *x, const float *gamma,
                                  const float *beta, float *y, float *rm, float *rv, float *sm,
                                  float *si)
{
    size_t hw = (size_t)d->hw, stride = (size_t)d->c * hw;
    double m = (double)d->n * hw, s = 0.0, q = 0.0;
    const float *xc = x + (size_t)c * hw;
    for (int n = 0; n < d->n; n++) {
        const float *xr = xc + n * stride;
        double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
        for (size_t i = 0; i < hw; i++) {
            double v = xr[i];
            a += v;
            b += v * v;
        }
        s += a;
        q += b;
    }
    double mean = s / m, var = q / m - mean * mean;
    bn_finish_channel(d, c, mean, var > 0.0 ? var : 0.0, rm, rv, sm, si);
    float mu = sm[c], inv = si[c], g = gamma[c], b = beta[c];
    for (int n = 0; n < d->n; n++) {
        const float *xr = xc + n * stride;
        float *yr = y + (size_t)c * hw + n * stride;
#pragma omp simd
        for (size_t i = 0; i < hw; i++)
            yr[i] = tb_bn_fwd_f(xr[i], mu, inv, g, b);
    }
}

/* NHWC rows are C contiguous channels: every pass streams through memory
 * row by row. Statistics are per-chunk partial sums over at most
 * BN_ROW_CHUNKS fixed row ranges of at least BN_CHUNK_ROWS rows (fixed by
 * the shape, not the thread count), added in chunk order: deterministic,
 * and each thread reads whole cache lines. The sums run in tasks of one
 * chunk and one block of BN_COMBINE_COLS channels, so that a short, wide
 * layer (ResNet-50's last stage at 64x64: 64 rows of 2048 channels) has
 * work for every thread without a partial sum per row: with one-row
 * chunks there, the partial sums (2 MB of doubles) outweighed x, and
 * adding them up was 1.2% of the channels-last bf16 step. */
#define BN_CHUNK_ROWS ((size_t)16)
#define BN_COMBINE_COLS ((size_t)256)
static size_t bn_row_chunks(size_t rows)
{
    size_t kc = rows / BN_CHUNK_ROWS;
    return kc < 1 ? 1 : kc > BN_ROW_CHUNKS ? BN_ROW_CHUNKS : kc;
}

/* Rows [lo, hi) of chunk k of rows split into kc chunks. */
static void bn_chunk(size_t rows, size_t kc, size_t k, size_t *lo, size_t *hi)
{
    *lo = rows * k / kc;
    *hi = rows * (k + 1) / kc;
}

/* Channels [lo, hi) of block b. */
static void bn_cols(size_t C, size_t b, size_t *lo, size_t *hi)
{
    *lo = b * BN_COMBINE_COLS;
    *hi = *lo + BN_COMBINE_COLS < C ? *lo + BN_COMBINE_COLS : C;
}

static size_t bn_col_blocks(size_t C) { return (C + BN_COMBINE_COLS - 1) / BN_COMBINE_COLS; }

/* part[c] = sum over rows [lo, hi) of x[r][c], part[C + c] = of x[r][c]^2,
 * for channels [c0, c1), in double (the NCHW statistics' one pass,
 * bn_train_channel_nchw says why the cancellation is harmless). */
BN_CLONES static void nhwc_rows_sum(const float *x, size_t C, size_t c0, size_t c1, size_t lo,
                                    size_t hi, double *part)
{
    double *sq = part + C;
    memset(part + c0, 0, (c1 - c0) * sizeof *part);
    memset(sq + c0, 0, (c1 - c0) * sizeof *sq);
    for (size_t r = lo; r < hi; r++) {
        const float *xr = x + r * C;
#pragma omp simd
        for (size_t c = c0; c < c1; c++) {
            double v = xr[c];
            part[c] += v;
            sq[c] += v * v;
        }
    }
}

/* out[c] = sum of part[k][c] over the kc chunks, in chunk order, for
 * blocks of BN_COMBINE_COLS columns in parallel: each column's sum is the
 * same whichever thread adds it. */
static void bn_combine(int t, const double *part, size_t kc, size_t C, double *out)
{
#pragma omp parallel for num_threads(t) schedule(static) if (kc * C >= PAR_MIN)
    for (size_t b = 0; b < bn_col_blocks(C); b++) {
        size_t lo, hi;
        bn_cols(C, b, &lo, &hi);
        memset(out + lo, 0, (hi - lo) * sizeof *out);
        for (size_t k = 0; k < kc; k++)
            for (size_t c = lo; c < hi; c++)
                out[c] += part[k * C + c];
    }
}

static int bn_fwd_train_nhwc(tb_backend *be, const tb_bn_desc *d, const float *x,
                             const float *gamma, const float *beta, float *y, float *rm, float *rv,
                             float *sm, float *si)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, rows = (size_t)d->n * d->hw, kc = bn_row_chunks(rows);
    float *ws = NULL;
    TB_TRY(ws_floats(be, 2 * (2 * kc * C + 2 * C), &ws));
    double *part = (double *)ws, *mean = part + 2 * kc * C, *var = mean + C;
    int par = rows * C >= PAR_MIN;
    size_t nb = bn_col_blocks(C);
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t task = 0; task < kc * nb; task++) {
        size_t k = task / nb, lo, hi, c0, c1;
        bn_chunk(rows, kc, k, &lo, &hi);
        bn_cols(C, task % nb, &c0, &c1);
        nhwc_rows_sum(x, C, c0, c1, lo, hi, part + 2 * k * C);
    }
    /* chunk k's sums are part[2kC, 2kC + C), its squares the C after them:
     * bn_combine over 2C-wide chunks adds both in chunk order */
    bn_combine(t, part, kc, 2 * C, mean); /* mean[0, C): sums, var = mean + C: squares */
    for (size_t c = 0; c < C; c++) {
        mean[c] /= (double)rows;
        double v = var[c] / (double)rows - mean[c] * mean[c];
        var[c] = v > 0.0 ? v : 0.0;
    }
    for (size_t c = 0; c < C; c++)
        bn_finish_channel(d, (int)c, mean[c], var[c], rm, rv, sm, si);
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t r = 0; r < rows; r++) {
#pragma omp simd
        for (size_t c = 0; c < C; c++)
            y[r * C + c] = tb_bn_fwd_f(x[r * C + c], sm[c], si[c], gamma[c], beta[c]);
    }
    return TB_OK;
}

/* NCHW with small planes (hw < BN_SMALL_HW: ResNet-50's last two stages at
 * 64x64 have 4x4 and 2x2): the per-channel loops above run hw-long inner
 * loops, all overhead at hw = 4. Here every pass streams through one image
 * of L = C * hw contiguous floats at a time against per-element arrays:
 * sums over the batch per position j (each position its own, so any
 * split of j gives the same bits), then per channel over its hw positions
 * in order; the per-channel coefficients expanded to L entries so the
 * element-wise pass is one contiguous loop. Statistics alone, best of 30,
 * 1 thread: N16 C2048 hw4 0.52 -> 0.06 ms, N16 C1024 hw16 0.34 -> 0.15 ms;
 * at hw 64 the per-channel loops win (0.25 vs 0.31 ms). */
#define BN_SMALL_HW 32

/* out[c * hw + i] = v[c] for every i < hw */
static void bn_expand(const float *v, size_t C, size_t hw, float *out)
{
    for (size_t c = 0; c < C; c++)
        for (size_t i = 0; i < hw; i++)
            out[c * hw + i] = v[c];
}

/* a[j] = sum over images of u[j], b[j] = sum of u[j] * w[j] (w == NULL: of
 * u[j]^2; else w[j] = x[j] - mean_e[j]), for j in [lo, hi) of the L. */
BN_CLONES static void bn_plane_sums(const float *u, const float *x, const float *mean_e,
                                    size_t N, size_t L, size_t lo, size_t hi, double *a,
                                    double *b)
{
    for (size_t j = lo; j < hi; j++)
        a[j] = b[j] = 0.0;
    for (size_t n = 0; n < N; n++) {
        const float *un = u + n * L, *xn = x ? x + n * L : NULL;
        if (!xn) {
#pragma omp simd
            for (size_t j = lo; j < hi; j++) {
                double v = un[j];
                a[j] += v;
                b[j] += v * v;
            }
        } else {
#pragma omp simd
            for (size_t j = lo; j < hi; j++) {
                a[j] += un[j];
                b[j] += un[j] * (xn[j] - mean_e[j]);
            }
        }
    }
}

/* Fixed position ranges of about BN_PLANE_CHUNK floats for threads. */
#define BN_PLANE_CHUNK ((size_t)2048)

static size_t bn_plane_chunks(size_t L) { return (L + BN_PLANE_CHUNK - 1) / BN_PLANE_CHUNK; }

/* Both sums of bn_plane_sums over all L positions, in parallel. */
static void bn_plane_sums_all(int t, const float *u, const float *x, const float *mean_e,
                              size_t N, size_t L, double *a, double *b)
{
    size_t kc = bn_plane_chunks(L);
#pragma omp parallel for num_threads(t) schedule(static) if (N * L >= PAR_MIN)
    for (size_t k = 0; k < kc; k++) {
        size_t lo = k * BN_PLANE_CHUNK, hi = lo + BN_PLANE_CHUNK < L ? lo + BN_PLANE_CHUNK : L;
        bn_plane_sums(u, x, mean_e, N, L, lo, hi, a, b);
    }
}

static double bn_plane_channel(const double *a, size_t c, size_t hw)
{
    double s = 0.0;
    for (size_t i = 0; i < hw; i++)
        s += a[c * hw + i];
    return s;
}

static int bn_fwd_train_small(tb_backend *be, const tb_bn_desc *d, const float *x,
                              const float *gamma, const float *beta, float *y, float *rm,
                              float *rv, float *sm, float *si)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, hw = (size_t)d->hw, L = C * hw, N = (size_t)d->n;
    float *ws = NULL;
    TB_TRY(ws_floats(be, 4 * L + 4 * L, &ws));
    double *a = (double *)ws, *b = a + L;
    float *mu_e = (float *)(b + L), *inv_e = mu_e + L, *g_e = inv_e + L, *b_e = g_e + L;
    bn_plane_sums_all(t, x, NULL, NULL, N, L, a, b);
    double m = (double)N * hw;
    for (size_t c = 0; c < C; c++) {
        double mean = bn_plane_channel(a, c, hw) / m;
        double var = bn_plane_channel(b, c, hw) / m - mean * mean;
        bn_finish_channel(d, (int)c, mean, var > 0.0 ? var : 0.0, rm, rv, sm, si);
    }
    bn_expand(sm, C, hw, mu_e);
    bn_expand(si, C, hw, inv_e);
    bn_expand(gamma, C, hw, g_e);
    bn_expand(beta, C, hw, b_e);
#pragma omp parallel for num_threads(t) schedule(static) if (N * L >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
#pragma omp simd
        for (size_t j = 0; j < L; j++)
            y[n * L + j] = tb_bn_fwd_f(x[n * L + j], mu_e[j], inv_e[j], g_e[j], b_e[j]);
    }
    return TB_OK;
}

static int cpu_bn_fwd_train(tb_backend *be, const tb_bn_desc *d, const float *x, const float *gamma,
                            const float *beta, float *y, float *running_mean, float *running_var,
                            float *save_mean, float *save_invstd)
{
    TB_TRY(tb_check_bn(d, 1));
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->hw;
    if (d->layout == TB_NCHW && d->hw < BN_SMALL_HW)
        return bn_fwd_train_small(be, d, x, gamma, beta, y, running_mean, running_var,
                                  save_mean, save_invstd);
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (int c = 0; c < d->c; c++)
            bn_train_channel_nchw(d, c, x, gamma, beta, y, running_mean, running_var, save_mean,
                                  save_invstd);
        return TB_OK;
    }
    return bn_fwd_train_nhwc(be, d, x, gamma, beta, y, running_mean, running_var, save_mean,
                             save_invstd);
}

static int cpu_bn_fwd_infer(tb_backend *be, const tb_bn_desc *d, const float *x, const float *gamma,
                            const float *beta, const float *running_mean, const float *running_var,
                            float *y)
{
    TB_TRY(tb_check_bn(d, 0));
    int t = threads_of(be), C = d->c;
    size_t hw = (size_t)d->hw, total = (size_t)d->n * C * hw;
    float *inv;
    TB_TRY(ws_floats(be, (size_t)C, &inv));
    for (int c = 0; c < C; c++)
        inv[c] = tb_bn_invstd_f(running_var[c], d->eps);
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (size_t pl = 0; pl < (size_t)d->n * C; pl++) {
            int c = (int)(pl % (size_t)C);
            float mu = running_mean[c], is = inv[c], g = gamma[c], b = beta[c];
#pragma omp simd
            for (size_t i = 0; i < hw; i++)
                y[pl * hw + i] = tb_bn_fwd_f(x[pl * hw + i], mu, is, g, b);
        }
        return TB_OK;
    }
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (size_t r = 0; r < (size_t)d->n * hw; r++) {
#pragma omp simd
        for (int c = 0; c < C; c++)
            y[r * C + c] = tb_bn_fwd_f(x[r * C + c], running_mean[c], inv[c], gamma[c], beta[c]);
    }
    return TB_OK;
}

/* Where backward writes: dx always; dgamma/dbeta written or added to. */
typedef struct bn_grads {
    float *dx, *dgamma, *dbeta;
    int accumulate;
} bn_grads;

/* Per-channel sums done: writes dgamma/dbeta, returns the dx coefficients. */
BN_FINISH void bn_bwd_finish(const tb_bn_desc *d, int c, double sum_dy, double sum_dy_xmu,
                             const float *gamma, const float *save_invstd, const bn_grads *gr,
                             float *k, float *mean_dy, float *mean_dy_xhat)
{
    double m = (double)d->n * d->hw, inv = save_invstd[c];
    double dg = sum_dy_xmu * inv;
    gr->dbeta[c] = (float)((gr->accumulate ? (double)gr->dbeta[c] : 0.0) + sum_dy);
    gr->dgamma[c] = (float)((gr->accumulate ? (double)gr->dgamma[c] : 0.0) + dg);
    *k = gamma[c] * save_invstd[c];
    *mean_dy = (float)(sum_dy / m);
    *mean_dy_xhat = (float)(dg / m);
}

BN_CLONES static void bn_bwd_channel_nchw(const tb_bn_desc *d, int c, const float *x, const float *dy,
                                const float *gamma, const float *sm, const float *si,
                                const bn_grads *gr)
{
    size_t hw = (size_t)d->hw, stride = (size_t)d->c * hw, off = (size_t)c * hw;
    double mu = sm[c], s = 0.0, sx = 0.0;
    for (int n = 0; n < d->n; n++) {
        const float *xr = x + off + n * stride, *gr_ = dy + off + n * stride;
        double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
        for (size_t i = 0; i < hw; i++) {
            a += gr_[i];
            b += gr_[i] * (xr[i] - mu);
        }
        s += a;
        sx += b;
    }
    float k, mdy, mdyx;
    bn_bwd_finish(d, c, s, sx, gamma, si, gr, &k, &mdy, &mdyx);
    float muf = sm[c], inv = si[c];
    for (int n = 0; n < d->n; n++) {
        const float *xr = x + off + n * stride, *dyr = dy + off + n * stride;
        float *dxr = gr->dx + off + n * stride;
#pragma omp simd
        for (size_t i = 0; i < hw; i++)
            dxr[i] = tb_bn_bwd_dx_f(xr[i], dyr[i], muf, inv, k, mdy, mdyx);
    }
}

/* Backward sums over rows [lo, hi) for channels [c0, c1): part[c] =
 * sum dy, part[C + c] = sum dy (x - mean). */
BN_CLONES static void nhwc_rows_bwd_sums(const float *x, const float *dy, size_t C, size_t c0,
                                         size_t c1, size_t lo, size_t hi, const float *mean,
                                         double *part)
{
    memset(part + c0, 0, (c1 - c0) * sizeof *part);
    memset(part + C + c0, 0, (c1 - c0) * sizeof *part);
    for (size_t r = lo; r < hi; r++) {
        const float *xr = x + r * C, *dyr = dy + r * C;
#pragma omp simd
        for (size_t c = c0; c < c1; c++) {
            part[c] += dyr[c];
            part[C + c] += dyr[c] * (xr[c] - mean[c]);
        }
    }
}

static int bn_bwd_nhwc(tb_backend *be, const tb_bn_desc *d, const float *x, const float *dy,
                       const float *gamma, const float *sm, const float *si, const bn_grads *gr)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, rows = (size_t)d->n * d->hw, kc = bn_row_chunks(rows);
    float *ws = NULL;
    TB_TRY(ws_floats(be, 2 * (2 * kc * C + 2 * C) + 3 * C, &ws));
    double *part = (double *)ws, *sums = part + 2 * kc * C;
    float *k = (float *)(sums + 2 * C), *mdy = k + C, *mdyx = mdy + C;
    float *dx = gr->dx;
    int par = rows * C >= PAR_MIN;
    size_t nb = bn_col_blocks(C);
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t task = 0; task < kc * nb; task++) {
        size_t q = task / nb, lo, hi, c0, c1;
        bn_chunk(rows, kc, q, &lo, &hi);
        bn_cols(C, task % nb, &c0, &c1);
        nhwc_rows_bwd_sums(x, dy, C, c0, c1, lo, hi, sm, part + 2 * q * C);
    }
    bn_combine(t, part, kc, 2 * C, sums);
    for (size_t c = 0; c < C; c++)
        bn_bwd_finish(d, (int)c, sums[c], sums[C + c], gamma, si, gr, &k[c], &mdy[c], &mdyx[c]);
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t r = 0; r < rows; r++) {
#pragma omp simd
        for (size_t c = 0; c < C; c++)
            dx[r * C + c] = tb_bn_bwd_dx_f(x[r * C + c], dy[r * C + c], sm[c], si[c], k[c],
                                           mdy[c], mdyx[c]);
    }
    return TB_OK;
}

/* bn_fwd_train_small's backward: the sums per position, then per channel,
 * then dx in one contiguous pass per image. */
static int bn_bwd_small(tb_backend *be, const tb_bn_desc *d, const float *x, const float *dy,
                        const float *gamma, const float *sm, const float *si, const bn_grads *gr)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, hw = (size_t)d->hw, L = C * hw, N = (size_t)d->n;
    float *ws = NULL;
    TB_TRY(ws_floats(be, 4 * L + 5 * L + 3 * C, &ws));
    double *a = (double *)ws, *b = a + L;
    float *mu_e = (float *)(b + L), *inv_e = mu_e + L, *k_e = inv_e + L, *mdy_e = k_e + L,
          *mdyx_e = mdy_e + L, *k = mdyx_e + L, *mdy = k + C, *mdyx = mdy + C;
    bn_expand(sm, C, hw, mu_e);
    bn_expand(si, C, hw, inv_e);
    bn_plane_sums_all(t, dy, x, mu_e, N, L, a, b);
    for (size_t c = 0; c < C; c++)
        bn_bwd_finish(d, (int)c, bn_plane_channel(a, c, hw), bn_plane_channel(b, c, hw), gamma,
                      si, gr, &k[c], &mdy[c], &mdyx[c]);
    bn_expand(k, C, hw, k_e);
    bn_expand(mdy, C, hw, mdy_e);
    bn_expand(mdyx, C, hw, mdyx_e);
    float *dx = gr->dx;
#pragma omp parallel for num_threads(t) schedule(static) if (N * L >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
#pragma omp simd
        for (size_t j = 0; j < L; j++)
            dx[n * L + j] = tb_bn_bwd_dx_f(x[n * L + j], dy[n * L + j], mu_e[j], inv_e[j],
                                           k_e[j], mdy_e[j], mdyx_e[j]);
    }
    return TB_OK;
}

static int cpu_bn_bwd(tb_backend *be, const tb_bn_desc *d, const float *x, const float *dy,
                      const float *gamma, const float *save_mean, const float *save_invstd,
                      float *dx, float *dgamma, float *dbeta, int accumulate)
{
    TB_TRY(tb_check_bn(d, 1));
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->hw;
    bn_grads gr = {dx, dgamma, dbeta, accumulate};
    if (d->layout == TB_NCHW && d->hw < BN_SMALL_HW)
        return bn_bwd_small(be, d, x, dy, gamma, save_mean, save_invstd, &gr);
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (int c = 0; c < d->c; c++)
            bn_bwd_channel_nchw(d, c, x, dy, gamma, save_mean, save_invstd, &gr);
        return TB_OK;
    }
    return bn_bwd_nhwc(be, d, x, dy, gamma, save_mean, save_invstd, &gr);
}

void tb_cpu_install_batchnorm(tb_backend *be)
{
    be->bn_fwd_train = cpu_bn_fwd_train;
    be->bn_fwd_infer = cpu_bn_fwd_infer;
    be->bn_bwd = cpu_bn_bwd;
}
