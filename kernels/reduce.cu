/*
 * reduce.cu - the CUDA backend's reductions: reduce_sum (the loss sum),
 * count_nonfinite (anomaly detection, AMP's inf check) and bias_grad
 * (column sums of a linear layer's output gradient).
 *
 * Variants: none at run time. All are deterministic by construction:
 *   reduce_sum, count_nonfinite  two passes over a FIXED grid of
 *       TB_CUDA_REDUCE_PARTIALS blocks of RED_THREADS threads, whatever the
 *       device: thread t of block b sums elements t + b*RED_THREADS + k*stride
 *       in order, in double; each block halves its 256 partials in a fixed
 *       tree; the second pass (one block) does the same over the block
 *       partials. A fixed grid leaves big GPUs a little idle on small inputs
 *       and is still bandwidth-bound on large ones; the price of results that
 *       do not change with the GPU.
 *   bias_grad  kernels/colsum.cuh's two-stage column sum: blocks of 32
 *       columns by row chunks write double partials, then one thread per
 *       column adds its chunks in order. The row chunking depends on rows
 *       only, so the result does not change with the GPU either.
 * Summing in double matches the CPU backend (lib/backend/cpu/reduce.c), which also sums
 * in double; the per-element test is kernels/elementwise_math.h's
 * tb_nonfinite_f, checked by the CPU tests.
 *
 * Build check (no GPU needed): bazel build //kernels:ops_cuda.
 */
#include <cuda_runtime.h>

#include "kernels/colsum.cuh"
#include "kernels/elementwise_math.h"
#include "kernels/launch.cuh"
#include "kernels/reduce.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

#define RED_THREADS 256

struct term_value {
    __device__ double operator()(float x) const { return (double)x; }
};
struct term_nonfinite {
    __device__ double operator()(float x) const { return (double)tb_nonfinite_f(x); }
};

/* Sums s[0..RED_THREADS) into s[0], halving in a fixed order. */
__device__ void block_tree_sum(double *s)
{
    for (int half = RED_THREADS / 2; half > 0; half /= 2) {
        __syncthreads();
        if ((int)threadIdx.x < half)
            s[threadIdx.x] += s[threadIdx.x + half];
    }
    __syncthreads();
}

/* Pass 1: part[b] = block b's sum of term(x[i]). */
template <class Term>
__global__ void __launch_bounds__(RED_THREADS)
    reduce_partial_kernel(const float *x, size_t n, double *part, Term term)
{
    __shared__ double s[RED_THREADS];
    double acc = 0.0;
    size_t stride = (size_t)TB_CUDA_REDUCE_PARTIALS * RED_THREADS;
    for (size_t i = (size_t)blockIdx.x * RED_THREADS + threadIdx.x; i < n; i += stride)
        acc += term(x[i]);
    s[threadIdx.x] = acc;
    block_tree_sum(s);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s[0];
}

/* Pass 2, one block: out[0] = sum of the partials, rounded to float once. */
__global__ void __launch_bounds__(RED_THREADS) reduce_final_kernel(const double *part, float *out)
{
    __shared__ double s[RED_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < TB_CUDA_REDUCE_PARTIALS; i += RED_THREADS)
        acc += part[i];
    s[threadIdx.x] = acc;
    block_tree_sum(s);
    if (threadIdx.x == 0)
        out[0] = (float)s[0];
}

/* bias_grad's term: dy itself. */
struct term_dy {
    const float *dy;
    __device__ void operator()(int, size_t i, double *acc) const { acc[0] += dy[i]; }
};

template <class Term>
static int launch_reduce(const float *x, size_t n, float *out, double *part, Term term,
                         cudaStream_t s)
{
    reduce_partial_kernel<<<TB_CUDA_REDUCE_PARTIALS, RED_THREADS, 0, s>>>(x, n, part, term);
    TB_CHECK_LAUNCH();
    reduce_final_kernel<<<1, RED_THREADS, 0, s>>>(part, out);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_reduce_sum(const float *x, size_t n, float *out, double *partials,
                                  void *stream)
{
    return launch_reduce(x, n, out, partials, term_value{}, (cudaStream_t)stream);
}

extern "C" int tb_cuda_count_nonfinite(const float *x, size_t n, float *out, double *partials,
                                       void *stream)
{
    return launch_reduce(x, n, out, partials, term_nonfinite{}, (cudaStream_t)stream);
}

extern "C" size_t tb_cuda_bias_grad_partials(int rows, int cols)
{
    return tb_colsum_partials(1, rows, cols);
}

extern "C" int tb_cuda_bias_grad(const float *dy, float *dbias, int rows, int cols,
                                 int accumulate, double *partials, void *stream)
{
    if (cols <= 0 || rows < 0)
        return TB_OK;
    tb_colsum_out<1> out = {{dbias}};
    return tb_colsum_launch<1>(term_dy{dy}, rows, cols, partials, out, accumulate,
                               (cudaStream_t)stream);
}
