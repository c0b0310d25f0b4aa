/*
 * pool.cu - max and average pooling, forward and backward, NCHW and NHWC:
 * the CUDA backend's pool_fwd/pool_bwd (cuDNN's pooling keeps no argmax, and
 * the CPU backend's contract needs one).
 *
 * Variants, picked at run time from tb_pool_geom: kind (max with int32
 * argmax, or average with count_include_pad) x layout (NCHW or NHWC). One
 * kernel each way; the layout only changes how a flat index splits into
 * (n, c, h, w).
 *
 * Same numbers as the CPU backend (lib/backend/cpu/pool.c), bit for bit:
 *   forward: one thread per output; the window is visited row by row in
 *     the CPU's order; max keeps the first of equal values and takes any
 *     NaN it meets (PyTorch's rule); average sums in that order and divides
 *     by window * window.
 *   backward: a GATHER, one thread per input element, so no atomics: it
 *     adds, over the outputs whose window covers it in ascending (p, q)
 *     order, dy (max: where argmax names this element) or dy / area
 *     (average) -- the order in which the CPU scatters them.
 *
 * Index math is 32-bit (the slot's checks keep tensors under 2^31
 * elements, as the int32 argmax needs; the launchers check it again): a
 * flat index splits with 32-bit divisions, not 64-bit ones.
 *
 * Build check (no GPU needed): bazel build //kernels:ops_cuda.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/launch.cuh"
#include "kernels/pool.h"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

/* Where (n, c, h, w) lives in a tensor of height hh and width ww. */
__device__ size_t pool_index(const tb_pool_geom &g, int n, int c, int h, int w, int hh, int ww)
{
    if (g.layout == TB_NHWC)
        return (((size_t)n * hh + h) * ww + w) * g.c + c;
    return (((size_t)n * g.c + c) * hh + h) * ww + w;
}

/* Splits a flat index of a tensor of height hh and width ww. */
__device__ void pool_split(const tb_pool_geom &g, unsigned i, unsigned hh, unsigned ww, int *n,
                           int *c, int *h, int *w)
{
    unsigned gc = (unsigned)g.c;
    if (g.layout == TB_NHWC) {
        *c = (int)(i % gc);
        i /= gc;
        *w = (int)(i % ww);
        i /= ww;
        *h = (int)(i % hh);
        *n = (int)(i / hh);
        return;
    }
    *w = (int)(i % ww);
    i /= ww;
    *h = (int)(i % hh);
    i /= hh;
    *c = (int)(i % gc);
    *n = (int)(i / gc);
}

__global__ void pool_fwd_kernel(tb_pool_geom g, const float *x, float *y, int32_t *argmax,
                                unsigned total)
{
    for (unsigned o = blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += gridDim.x * blockDim.x) {
        int n, c, p, q;
        pool_split(g, o, g.p, g.q, &n, &c, &p, &q);
        int h0 = p * g.stride - g.pad, w0 = q * g.stride - g.pad;
        int h1 = min(h0 + g.window, g.h), w1 = min(w0 + g.window, g.w);
        h0 = max(h0, 0);
        w0 = max(w0, 0);
        float best = 0.0f, sum = 0.0f;
        int32_t bi = -1;
        for (int h = h0; h < h1; h++) {
            for (int w = w0; w < w1; w++) {
                size_t i = pool_index(g, n, c, h, w, g.h, g.w);
                float v = x[i];
                sum += v;
                if (bi < 0 || v > best || v != v) {
                    best = v;
                    bi = (int32_t)i;
                }
            }
        }
        if (g.kind == TB_POOL_MAX) {
            y[o] = best;
            argmax[o] = bi;
        } else {
            y[o] = sum / g.area;
        }
    }
}

/* First and last output row (or column) whose window covers input row h. */
__device__ void covering(int h, int stride, int pad, int window, int outs, int *lo, int *hi)
{
    *lo = h + pad < window ? 0 : (h + pad - window) / stride + 1;
    *hi = min((h + pad) / stride, outs - 1);
}

__global__ void pool_bwd_kernel(tb_pool_geom g, const float *dy, const int32_t *argmax, float *dx,
                                unsigned total)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        int n, c, h, w, p0, p1, q0, q1;
        pool_split(g, i, g.h, g.w, &n, &c, &h, &w);
        covering(h, g.stride, g.pad, g.window, g.p, &p0, &p1);
        covering(w, g.stride, g.pad, g.window, g.q, &q0, &q1);
        float acc = 0.0f;
        for (int p = p0; p <= p1; p++) {
            for (int q = q0; q <= q1; q++) {
                size_t o = pool_index(g, n, c, p, q, g.p, g.q);
                if (g.kind == TB_POOL_MAX)
                    acc += argmax[o] == (int32_t)i ? dy[o] : 0.0f;
                else
                    acc += dy[o] / g.area;
            }
        }
        dx[i] = acc;
    }
}

/* The 32-bit index math's bound: input and output under 2^31 elements (the
 * grid-stride step, at most 2^20, cannot wrap an unsigned past that). */
static int pool_fits(const char *op, const tb_pool_geom *g)
{
    size_t in = (size_t)g->n * g->c * g->h * g->w, out = (size_t)g->n * g->c * g->p * g->q;
    if (in > (size_t)INT32_MAX || out > (size_t)INT32_MAX)
        return TB_FAIL(TB_ERR_INVALID,
                       "%s: %zu input and %zu output elements; the kernels index with 32 bits "
                       "(at most %d): split the batch",
                       op, in, out, (int)INT32_MAX);
    return TB_OK;
}

extern "C" int tb_cuda_pool_fwd(const tb_pool_geom *g, const float *x, float *y, int32_t *argmax,
                                void *stream)
{
    size_t total = (size_t)g->n * g->c * g->p * g->q;
    if (total == 0)
        return TB_OK;
    TB_TRY(pool_fits("pool_fwd", g));
    pool_fwd_kernel<<<tb_grid_for(total), TB_BLOCK, 0, (cudaStream_t)stream>>>(*g, x, y, argmax,
                                                                              (unsigned)total);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_pool_bwd(const tb_pool_geom *g, const float *dy, const int32_t *argmax,
                                float *dx, void *stream)
{
    size_t total = (size_t)g->n * g->c * g->h * g->w;
    if (total == 0)
        return TB_OK;
    TB_TRY(pool_fits("pool_bwd", g));
    pool_bwd_kernel<<<tb_grid_for(total), TB_BLOCK, 0, (cudaStream_t)stream>>>(*g, dy, argmax, dx,
                                                                              (unsigned)total);
    TB_CHECK_LAUNCH();
    return TB_OK;
}
