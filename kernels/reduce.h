/*
 * reduce.h - launchers for kernels/reduce.cu, callable from C without CUDA
 * headers (lib/backend/cuda/reduce.c: the reduce_sum, count_nonfinite and bias_grad
 * slots of the CUDA backend).
 *
 * Deterministic: the summation order depends on the sizes only, never on
 * the device or on timing (no floating-point atomics), so a result is the
 * same bit for bit run to run and GPU to GPU.
 *
 * partials: device scratch of TB_CUDA_REDUCE_PARTIALS doubles. Pointers are
 * device memory; stream is a cudaStream_t; launches are asynchronous.
 * Returns TB_OK or TB_ERR_CUDA (file and line on the error chain).
 */
#ifndef TB_KERNELS_REDUCE_H
#define TB_KERNELS_REDUCE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TB_CUDA_REDUCE_PARTIALS 256 /* blocks of the first pass */

/* out[0] = sum of x[0..n) (n == 0: 0). */
int tb_cuda_reduce_sum(const float *x, size_t n, float *out, double *partials, void *stream);
/* out[0] = number of NaN/Inf in x[0..n), as a float. */
int tb_cuda_count_nonfinite(const float *x, size_t n, float *out, double *partials,
                            void *stream);
/* Doubles of device scratch tb_cuda_bias_grad needs for (rows, cols). */
size_t tb_cuda_bias_grad_partials(int rows, int cols);
/* dbias(cols) = (accumulate ? dbias : 0) + column sums of dy(rows x cols).
 * REQUIRES: partials holds tb_cuda_bias_grad_partials(rows, cols) doubles. */
int tb_cuda_bias_grad(const float *dy, float *dbias, int rows, int cols, int accumulate,
                      double *partials, void *stream);

#ifdef __cplusplus
}
#endif
#endif
