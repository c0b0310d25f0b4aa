/*
 * batchnorm.c - the CPU backend's batch norm: bn_fwd_train, bn_fwd_infer, bn_bwd,
 * NCHW and NHWC (kernels/bn_math.h), on fp32 or bf16 activations.
 *
 * Element types (tb_bn_desc.dtype): x, y, dy and dx are fp32, or bf16 as
 * PyTorch's autocast runs batch norm on the CPU (gamma, beta, the
 * statistics, dgamma and dbeta stay fp32, and so does the arithmetic). The
 * bf16 variants are whole kernels that read and write the 2-byte elements
 * in the same vectorized loops, widening on load and rounding to nearest
 * even (kernels/cast_math.h's bits) on store, rather than a cast of the
 * tensor to fp32 around the fp32 kernel: they move half the bytes.
 * batchnorm_body.h holds the loops over activations, written once and
 * included below once per element type; this file holds what does not
 * depend on it (splits, per-channel finishers) and the entry points. bf16
 * outputs are rounded through a small stage (bf16_rows.h: AVX512_BF16
 * where the CPU has it).
 *
 * Speed, 2 threads on a 2-core Zen 4 (ms, fp32 / bf16): where the tensors
 * come from DRAM bf16 is faster (the small CNN's 32x16x28x28 NCHW, each
 * call on tensors evicted by the ones before: fwd 0.151 / 0.086, bwd
 * 0.208 / 0.160; 128x64x1024, 33 MB a tensor: 1.2-1.7x). Where they stay
 * in L2 (the same 32x16x28x28 called again and again) the op is bound by
 * arithmetic, not bytes: bf16 adds the widening and the rounding, and with
 * its NCHW statistics summed in float runs (BN_FLOAT_RUNS, below) it is
 * 0.85-1.0x as fast (fwd 0.045 / 0.050), 0.65-0.95x with them in double.
 *
 * Determinism (fixed splits, see ops_common.h; the same for both types):
 *   NCHW   one thread owns each channel and sums its rows in order, in double;
 *          planes under BN_SMALL_HW pixels: sums per position over the batch
 *          in order, then per channel over its positions in order
 *   NHWC   up to BN_ROW_CHUNKS fixed row ranges, partial sums in double,
 *          added in chunk order
 * The loops over activations are compiled for x86-64-v4 (AVX-512), v3
 * (AVX2) and the baseline (SSE2), picked at load time (BN_CLONES): the
 * double sums ran 2 lanes wide on SSE2, and batch norm was ~18% of a
 * small-CNN step; the bf16 conversions want the wide integer ops too. The
 * vector width sets the order of the sums inside a row, so the
 * statistics' last bits may differ between CPUs of different ISA levels;
 * on one CPU they do not depend on threads. The element-wise passes round
 * op by op (-ffp-contract=off) and give the same bits on every ISA.
 *
 * Tests: bazel test //lib/backend/cpu:cpu_ops_test (both types against
 * lib/backend/ref/ops.c, 1 and 2 threads).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/bn_math.h"
#include "kernels/cast_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/bf16_rows.h"
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

/* NCHW with small planes (hw < BN_SMALL_HW: ResNet-50's last two stages at
 * 64x64 have 4x4 and 2x2): the per-channel loops run hw-long inner
 * loops, all overhead at hw = 4. Here every pass streams through one image
 * of L = C * hw contiguous elements at a time against per-element arrays:
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

/* Fixed position ranges of about BN_PLANE_CHUNK floats for threads. */
#define BN_PLANE_CHUNK ((size_t)2048)

static size_t bn_plane_chunks(size_t L) { return (L + BN_PLANE_CHUNK - 1) / BN_PLANE_CHUNK; }

static double bn_plane_channel(const double *a, size_t c, size_t hw)
{
    double s = 0.0;
    for (size_t i = 0; i < hw; i++)
        s += a[c * hw + i];
    return s;
}

/* Where backward writes: dx always (elements of tb_bn_desc.dtype);
 * dgamma/dbeta written or added to. */
typedef struct bn_grads {
    void *dx;
    float *dgamma, *dbeta;
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

/* The loops over activations, once per element type (batchnorm_body.h). */
#define BN_T float
#define BN_LOAD(p, i) ((p)[i])
#define BN_NAME(f) f##_f32
#include "lib/backend/cpu/batchnorm_body.h"

#define BN_T uint16_t
#define BN_LOAD(p, i) tb_bf16_to_f32((p)[i])
/* The bf16 NCHW statistics sum runs of 256 elements of a row in float
 * (16 lanes of 16 values: each run's sums within ~2^-20 of exact, relative
 * to the run's magnitude), added into double: var = E[x^2] - mean^2 is then
 * off by ~1e-6 E[x^2], far below the bf16 output's rounding (2^-9) for any
 * channel whose mean is not hundreds of its deviations; and 16 float lanes
 * instead of 8 double ones, without the conversions. The small CNN's
 * layers in cache (2 threads, the vCPUs together, ms, double -> float
 * runs; fp32's in brackets): 32x16x28x28 fwd 0.063 -> 0.050 (0.045), bwd
 * 0.100 -> 0.071 (0.069); 32x16x14x14 0.021 -> 0.017 (0.015), 0.031 ->
 * 0.023 (0.023); 32x32x7x7 0.017 -> 0.015 (0.013), 0.023 -> 0.018 (0.016). */
#define BN_FLOAT_RUNS ((size_t)256)
#define BN_NAME(f) f##_bf16
#include "lib/backend/cpu/batchnorm_body.h"

/* The slots take float pointers; with dtype TB_BF16, x, y, dy and dx hold
 * bf16 bits (lib/backend/backend.h). */
static int cpu_bn_fwd_train(tb_backend *be, const tb_bn_desc *d, const float *x, const float *gamma,
                            const float *beta, float *y, float *running_mean, float *running_var,
                            float *save_mean, float *save_invstd)
{
    TB_TRY(tb_check_bn(d, 1));
    if (d->dtype == TB_BF16)
        return bn_fwd_train_bf16(be, d, (const uint16_t *)x, gamma, beta, (uint16_t *)y,
                                 running_mean, running_var, save_mean, save_invstd);
    return bn_fwd_train_f32(be, d, x, gamma, beta, y, running_mean, running_var, save_mean,
                            save_invstd);
}

static int cpu_bn_fwd_infer(tb_backend *be, const tb_bn_desc *d, const float *x, const float *gamma,
                            const float *beta, const float *running_mean, const float *running_var,
                            float *y)
{
    TB_TRY(tb_check_bn(d, 0));
    float *inv = NULL;
    TB_TRY(ws_floats(be, (size_t)d->c, &inv));
    for (int c = 0; c < d->c; c++)
        inv[c] = tb_bn_invstd_f(running_var[c], d->eps);
    if (d->dtype == TB_BF16)
        bn_fwd_infer_bf16(be, d, (const uint16_t *)x, gamma, beta, running_mean, inv,
                          (uint16_t *)y);
    else
        bn_fwd_infer_f32(be, d, x, gamma, beta, running_mean, inv, y);
    return TB_OK;
}

static int cpu_bn_bwd(tb_backend *be, const tb_bn_desc *d, const float *x, const float *dy,
                      const float *gamma, const float *save_mean, const float *save_invstd,
                      float *dx, float *dgamma, float *dbeta, int accumulate)
{
    TB_TRY(tb_check_bn(d, 1));
    bn_grads gr = {dx, dgamma, dbeta, accumulate};
    if (d->dtype == TB_BF16)
        return bn_bwd_bf16(be, d, (const uint16_t *)x, (const uint16_t *)dy, gamma, save_mean,
                           save_invstd, &gr);
    return bn_bwd_f32(be, d, x, dy, gamma, save_mean, save_invstd, &gr);
}

void tb_cpu_install_batchnorm(tb_backend *be)
{
    be->bn_fwd_train = cpu_bn_fwd_train;
    be->bn_fwd_infer = cpu_bn_fwd_infer;
    be->bn_bwd = cpu_bn_bwd;
}
