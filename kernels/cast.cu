/*
 * cast.cu - fp32 <-> bf16 / fp16 casts of mixed precision (autocast's
 * conversions of activations, weights and gradients).
 *
 * Variants: one kernel per direction, the format chosen by a flag. The
 * per-element math is kernels/cast_math.h, shared with the CPU backend
 * (lib/backend/cpu/cast.c), whose tests (lib/backend/cpu/cast_test.c) check rounding to nearest
 * even, NaN, Inf, denormals and the largest finite values; it works on the
 * bits, so the GPU's result is bitwise the CPU's. Grid-stride loops
 * (kernels/launch.cuh); memory-bound, judge by effective bandwidth
 * (6 bytes an element).
 *
 * Build check (no GPU needed): bazel build //kernels:cast_cuda.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/cast.h"
#include "kernels/cast_math.h"
#include "kernels/launch.cuh"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

__global__ void f32_to_lowp_kernel(int bf16, const float *__restrict__ x,
                                   uint16_t *__restrict__ y, size_t n)
{
    TB_GRID_STRIDE(i, n)
    {
        y[i] = bf16 ? tb_f32_to_bf16(x[i]) : tb_f32_to_f16(x[i]);
    }
}

__global__ void lowp_to_f32_kernel(int bf16, const uint16_t *__restrict__ x,
                                   float *__restrict__ y, size_t n)
{
    TB_GRID_STRIDE(i, n)
    {
        y[i] = bf16 ? tb_bf16_to_f32(x[i]) : tb_f16_to_f32(x[i]);
    }
}

extern "C" int tb_cuda_cast_f32_to_lowp(int bf16, const float *x, uint16_t *lowp, size_t n,
                                        void *stream)
{
    if (n == 0)
        return TB_OK;
    f32_to_lowp_kernel<<<tb_grid_for(n), TB_BLOCK, 0, (cudaStream_t)stream>>>(bf16, x, lowp, n);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_cast_lowp_to_f32(int bf16, const uint16_t *lowp, float *y, size_t n,
                                        void *stream)
{
    if (n == 0)
        return TB_OK;
    lowp_to_f32_kernel<<<tb_grid_for(n), TB_BLOCK, 0, (cudaStream_t)stream>>>(bf16, lowp, y, n);
    TB_CHECK_LAUNCH();
    return TB_OK;
}
