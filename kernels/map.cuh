/*
 * map.cuh - element-wise map kernels: out[i] = op(a[i]) or op(a[i], b[i])
 * for a functor op, grid-stride over n floats, four at a time through
 * float4 when every pointer is 16-byte aligned. One template serves every
 * element-wise op of kernels/elementwise.cu and every step of the unfused
 * GELU in kernels/gelu.cu (CUDA only; C code never includes it).
 *
 * No __restrict__: the unfused GELU runs some steps in place (out == a).
 */
#ifndef TB_KERNELS_MAP_CUH
#define TB_KERNELS_MAP_CUH

#include <cuda_runtime.h>
#include <stddef.h>

#include "kernels/launch.cuh"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

template <class Op>
__global__ void tb_map_unary_kernel(const float *a, float *out, size_t n, int vec4, Op op)
{
    size_t head = 0;
    if (vec4) {
        size_t n4 = n / 4;
        const float4 *a4 = (const float4 *)a;
        float4 *o4 = (float4 *)out;
        TB_GRID_STRIDE(i, n4)
        {
            float4 v = a4[i];
            o4[i] = make_float4(op(v.x), op(v.y), op(v.z), op(v.w));
        }
        head = n4 * 4;
    }
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t i = head + tid; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = op(a[i]);
}

template <class Op>
__global__ void tb_map_binary_kernel(const float *a, const float *b, float *out, size_t n,
                                     int vec4, Op op)
{
    size_t head = 0;
    if (vec4) {
        size_t n4 = n / 4;
        const float4 *a4 = (const float4 *)a;
        const float4 *b4 = (const float4 *)b;
        float4 *o4 = (float4 *)out;
        TB_GRID_STRIDE(i, n4)
        {
            float4 u = a4[i], v = b4[i];
            o4[i] = make_float4(op(u.x, v.x), op(u.y, v.y), op(u.z, v.z), op(u.w, v.w));
        }
        head = n4 * 4;
    }
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t i = head + tid; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = op(a[i], b[i]);
}

/* Functors for the map kernels from the plain per-element functions of the
 * kernels/ *_math.h headers: tb_fn1<tb_relu_f>{}, tb_fn2<tb_add_f>{}. */
template <float (*F)(float)>
struct tb_fn1 {
    __device__ float operator()(float x) const { return F(x); }
};
template <float (*F)(float, float)>
struct tb_fn2 {
    __device__ float operator()(float a, float b) const { return F(a, b); }
};

/* out = op(a) on stream; nothing launched for n == 0. */
template <class Op>
static int tb_launch_unary(const float *a, float *out, size_t n, Op op, void *stream)
{
    if (n == 0)
        return TB_OK;
    int vec4 = tb_aligned16(a) && tb_aligned16(out);
    tb_map_unary_kernel<<<tb_grid_for(vec4 ? n / 4 + n % 4 : n), TB_BLOCK, 0,
                          (cudaStream_t)stream>>>(a, out, n, vec4, op);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

/* out = op(a, b) on stream; nothing launched for n == 0. */
template <class Op>
static int tb_launch_binary(const float *a, const float *b, float *out, size_t n, Op op,
                            void *stream)
{
    if (n == 0)
        return TB_OK;
    int vec4 = tb_aligned16(a) && tb_aligned16(b) && tb_aligned16(out);
    tb_map_binary_kernel<<<tb_grid_for(vec4 ? n / 4 + n % 4 : n), TB_BLOCK, 0,
                           (cudaStream_t)stream>>>(a, b, out, n, vec4, op);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

#endif
