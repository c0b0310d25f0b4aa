/*
 * elementwise.cu - the CUDA backend's simple element-wise ops: ReLU forward
 * and backward, add, axpby, bias_add, and dropout forward and backward.
 *
 * Variants: none at run time, one kernel per op. The per-element math is
 * kernels/elementwise_math.h (and kernels/rng_math.h for the dropout mask),
 * shared with the CPU backend (lib/backend/cpu/elementwise.c) whose tests check it; the
 * dropout mask is a pure function of (seed, offset + i), so the GPU draws
 * bitwise the CPU's mask.
 *
 * Kernels are grid-stride loops (kernels/launch.cuh); the unary and binary
 * ones go over float4 when every pointer is 16-byte aligned, as
 * kernels/gelu.cu does. Memory-bound: judge them by effective bandwidth.
 * axpby, y = alpha x + beta y, runs in place (no __restrict__); its beta == 0
 * form writes y without reading it, so garbage (NaN) in y does not leak.
 *
 * Build check (no GPU needed): bazel build //kernels:ops_cuda; nvcc's
 * resource report must show no spills (tools/nvcc_wrap.sh enforces it).
 */
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>

#include "kernels/elementwise.h"
#include "kernels/elementwise_math.h"
#include "kernels/launch.cuh"
#include "kernels/map.cuh"
#include "kernels/rng_math.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

struct op_scale {
    float alpha;
    __device__ float operator()(float x) const { return alpha * x; }
};
struct op_axpby {
    float alpha, beta;
    __device__ float operator()(float x, float y) const { return tb_axpby_f(alpha, x, beta, y); }
};

/* 2-D: no per-element division to find the column. */
__global__ void bias_add_kernel(float *y, const float *bias, size_t rows, int cols)
{
    TB_ROWS_COLS_2D(r, c, rows, cols)
    {
        size_t i = r * cols + c;
        y[i] = tb_add_f(y[i], bias[c]);
    }
}

__global__ void dropout_fwd_kernel(uint64_t seed, uint64_t offset, uint32_t threshold,
                                   float scale, const float *x, float *y, uint8_t *mask,
                                   size_t n)
{
    TB_GRID_STRIDE(i, n)
    {
        uint8_t keep = tb_dropout_keep_at(seed, offset + i, threshold);
        mask[i] = keep;
        y[i] = tb_dropout_apply_f(x[i], keep, scale);
    }
}

__global__ void dropout_bwd_kernel(float scale, const uint8_t *mask, const float *dy, float *dx,
                                   size_t n)
{
    TB_GRID_STRIDE(i, n)
        dx[i] = tb_dropout_apply_f(dy[i], mask[i], scale);
}

/* ---- launchers ---- */

extern "C" int tb_cuda_relu_fwd(const float *x, float *y, size_t n, void *stream)
{
    return tb_launch_unary(x, y, n, tb_fn1<tb_relu_f>{}, stream);
}

extern "C" int tb_cuda_relu_bwd(const float *y, const float *dy, float *dx, size_t n, void *stream)
{
    return tb_launch_binary(y, dy, dx, n, tb_fn2<tb_relu_bwd_f>{}, stream);
}

extern "C" int tb_cuda_add(const float *a, const float *b, float *y, size_t n, void *stream)
{
    return tb_launch_binary(a, b, y, n, tb_fn2<tb_add_f>{}, stream);
}

extern "C" int tb_cuda_axpby(float alpha, const float *x, float beta, float *y, size_t n,
                             void *stream)
{
    if (beta == 0.0f)
        return tb_launch_unary(x, y, n, op_scale{alpha}, stream);
    return tb_launch_binary(x, y, y, n, op_axpby{alpha, beta}, stream);
}

extern "C" int tb_cuda_bias_add(float *y, const float *bias, size_t rows, size_t cols,
                                void *stream)
{
    if (rows == 0 || cols == 0)
        return TB_OK;
    if (cols > (size_t)INT_MAX / 2)
        return TB_FAIL(TB_ERR_INVALID, "bias_add: %zu columns; at most %d", cols, INT_MAX / 2);
    bias_add_kernel<<<tb_grid_2d(rows, cols), TB_BLOCK, 0, (cudaStream_t)stream>>>(y, bias, rows,
                                                                                  (int)cols);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_dropout_fwd(uint64_t seed, uint64_t offset, uint32_t threshold, float scale,
                                   const float *x, float *y, uint8_t *mask, size_t n,
                                   void *stream)
{
    if (n == 0)
        return TB_OK;
    dropout_fwd_kernel<<<tb_grid_for(n), TB_BLOCK, 0, (cudaStream_t)stream>>>(
        seed, offset, threshold, scale, x, y, mask, n);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_dropout_bwd(float scale, const uint8_t *mask, const float *dy, float *dx,
                                   size_t n, void *stream)
{
    if (n == 0)
        return TB_OK;
    dropout_bwd_kernel<<<tb_grid_for(n), TB_BLOCK, 0, (cudaStream_t)stream>>>(scale, mask, dy, dx,
                                                                             n);
    TB_CHECK_LAUNCH();
    return TB_OK;
}
