/*
 * xent.cu - softmax cross-entropy forward and backward: the CUDA backend's
 * softmax_xent_fwd/bwd.
 *
 * Variants: none at run time.
 *   forward: one warp per row (8 rows a block). The row's max, then
 *     exp(z - max) with the sum in double, then probs = e / sum and
 *     loss = log(sum) - (z[label] - max), in double: the CPU backend's
 *     formula (lib/backend/cpu/xent.c), accurate where probs[label] underflows.
 *     Warp reductions are xor butterflies, so every lane ends with the same
 *     value and the order is fixed: deterministic.
 *   backward: element-wise, kernels/elementwise_math.h's tb_xent_grad_f,
 *     shared with the CPU backend and checked by its tests.
 * The forward differs from the CPU's only in summation order and in expf's
 * last bit (CUDA's expf is within 2 ulp): within float tolerance.
 *
 *
 * The lse form (xent_lse_fwd/bwd: one float per row kept, no probs):
 *   forward: one block per row (XENT_LSE_THREADS threads). Block max, then
 *     each thread sums exp(z - max) over its strided elements in float and
 *     the block adds the threads' sums in double, in a fixed tree (warp
 *     butterflies, then the warps in order): deterministic. lse = max +
 *     log(sum), loss = lse - z[label] in double. Each exp is
 *     kernels/xent_math.h's tb_xent_lse_term_f, the CPU's own; only the
 *     summation order differs from lib/backend/cpu/xent.c.
 *   backward: one block per row, tb_xent_lse_grad_f per element (the same
 *     bits as the CPU for the same lse). Each element is read and then
 *     written by one thread, so dlogits may be logits (in place).
 *
 * Build check (no GPU needed): bazel build //kernels:ops_cuda.
 */
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "kernels/elementwise_math.h"
#include "kernels/xent_math.h"
#include "kernels/launch.cuh"
#include "kernels/xent.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

#define XENT_WARPS 8
#define FULL_MASK 0xffffffffu

__device__ float warp_max(float v)
{
    for (int d = 16; d > 0; d /= 2) {
        float o = __shfl_xor_sync(FULL_MASK, v, d);
        v = o > v ? o : v;
    }
    return v;
}

__device__ double warp_sum(double v)
{
    for (int d = 16; d > 0; d /= 2)
        v += __shfl_xor_sync(FULL_MASK, v, d);
    return v;
}

__global__ void __launch_bounds__(XENT_WARPS * 32)
    xent_fwd_kernel(const float *logits, const int32_t *labels, int rows, int classes,
                    float *probs, float *loss)
{
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * XENT_WARPS + threadIdx.x / 32;
    if (row >= rows) /* whole warps leave together: the shuffles stay full */
        return;
    const float *z = logits + (size_t)row * classes;
    float *p = probs + (size_t)row * classes;
    float mx = -INFINITY;
    for (int j = lane; j < classes; j += 32)
        mx = z[j] > mx ? z[j] : mx;
    mx = warp_max(mx);
    double s = 0.0;
    for (int j = lane; j < classes; j += 32) {
        float e = expf(z[j] - mx);
        p[j] = e;
        s += e;
    }
    s = warp_sum(s);
    for (int j = lane; j < classes; j += 32)
        p[j] = (float)(p[j] / s);
    if (lane == 0) {
        int label = labels[row];
        loss[row] = label >= 0 && label < classes
                        ? (float)(log(s) - ((double)z[label] - mx))
                        : __int_as_float(0x7fc00000); /* NaN: bad label */
    }
}

/* 2-D: rows on y, classes on x, no per-element division. */
__global__ void xent_bwd_kernel(const float *probs, const int32_t *labels, int rows, int classes,
                                float scale, float *dlogits)
{
    TB_ROWS_COLS_2D(r, j, rows, classes)
    {
        size_t i = r * classes + j;
        dlogits[i] = tb_xent_grad_f(probs[i], j == labels[r], scale);
    }
}

/* ---- the lse form ---- */

#define XENT_LSE_THREADS 256
#define XENT_LSE_WARPS (XENT_LSE_THREADS / 32)

/* The block's max of v, on every thread: warps, then warp 0 over the warps. */
__device__ float block_max(float v, float *shared)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_max(v);
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    v = lane < XENT_LSE_WARPS ? shared[lane] : -INFINITY;
    v = warp_max(v);
    __syncthreads(); /* shared is reused by the next reduction */
    return v;
}

/* The block's sum of v, on every thread, in a fixed order. */
__device__ double block_sum(double v, double *shared)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    v = lane < XENT_LSE_WARPS ? shared[lane] : 0.0;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

__global__ void __launch_bounds__(XENT_LSE_THREADS)
    xent_lse_fwd_kernel(const float *logits, const int32_t *labels, int classes, float *loss,
                        float *lse)
{
    __shared__ float smax[XENT_LSE_WARPS];
    __shared__ double ssum[XENT_LSE_WARPS];
    size_t row = blockIdx.x;
    const float *z = logits + row * (size_t)classes;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < classes; j += XENT_LSE_THREADS)
        mx = z[j] > mx ? z[j] : mx;
    mx = block_max(mx, smax);
    float acc = 0.0f;
    for (int j = threadIdx.x; j < classes; j += XENT_LSE_THREADS)
        acc = __fadd_rn(acc, tb_xent_lse_term_f(z[j], mx));
    double total = block_sum((double)acc, ssum);
    if (threadIdx.x == 0) {
        double l = (double)mx + log(total);
        int label = labels[row];
        lse[row] = (float)l;
        loss[row] = label >= 0 && label < classes ? (float)(l - (double)z[label])
                                                  : __int_as_float(0x7fc00000); /* NaN: bad label */
    }
}

__global__ void __launch_bounds__(XENT_LSE_THREADS)
    xent_lse_bwd_kernel(const float *logits, const float *lse, const int32_t *labels,
                        int classes, float scale, float *dlogits)
{
    size_t row = blockIdx.x;
    const float *z = logits + row * (size_t)classes;
    float *d = dlogits + row * (size_t)classes;
    float l = lse[row];
    int label = labels[row];
    for (int j = threadIdx.x; j < classes; j += XENT_LSE_THREADS)
        d[j] = tb_xent_lse_grad_f(z[j], l, j == label, scale);
}

extern "C" int tb_cuda_xent_lse_fwd(const float *logits, const int32_t *labels, int rows,
                                    int classes, float *loss, float *lse, void *stream)
{
    if (rows <= 0 || classes <= 0)
        return TB_OK;
    xent_lse_fwd_kernel<<<(unsigned)rows, XENT_LSE_THREADS, 0, (cudaStream_t)stream>>>(
        logits, labels, classes, loss, lse);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_xent_lse_bwd(const float *logits, const float *lse, const int32_t *labels,
                                    int rows, int classes, float scale, float *dlogits,
                                    void *stream)
{
    if (rows <= 0 || classes <= 0)
        return TB_OK;
    xent_lse_bwd_kernel<<<(unsigned)rows, XENT_LSE_THREADS, 0, (cudaStream_t)stream>>>(
        logits, lse, labels, classes, scale, dlogits);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_softmax_xent_fwd(const float *logits, const int32_t *labels, int rows,
                                        int classes, float *probs, float *loss, void *stream)
{
    if (rows <= 0 || classes <= 0)
        return TB_OK;
    unsigned grid = (unsigned)((rows + XENT_WARPS - 1) / XENT_WARPS);
    xent_fwd_kernel<<<grid, XENT_WARPS * 32, 0, (cudaStream_t)stream>>>(logits, labels, rows,
                                                                       classes, probs, loss);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_softmax_xent_bwd(const float *probs, const int32_t *labels, int rows,
                                        int classes, float scale, float *dlogits, void *stream)
{
    if (rows <= 0 || classes <= 0)
        return TB_OK;
    if (classes > INT_MAX / 2)
        return TB_FAIL(TB_ERR_INVALID, "softmax_xent_bwd: %d classes; at most %d", classes,
                       INT_MAX / 2);
    xent_bwd_kernel<<<tb_grid_2d(rows, classes), TB_BLOCK, 0, (cudaStream_t)stream>>>(
        probs, labels, rows, classes, scale, dlogits);
    TB_CHECK_LAUNCH();
    return TB_OK;
}
