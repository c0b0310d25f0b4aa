/*
 * elementwise.h - launchers for kernels/elementwise.cu, callable from C
 * without CUDA headers (lib/backend/cuda/elementwise.c and dropout.c call
 * them for the CUDA backend's relu_fwd/bwd, add, axpby, bias_add and
 * dropout_fwd/bwd slots).
 *
 * Pointers are device memory; stream is a cudaStream_t. Launches are
 * asynchronous. n == 0 (or rows/cols == 0) launches nothing. Returns TB_OK,
 * or TB_ERR_CUDA with file and line on the error chain when the launch
 * fails (e.g. no driver). Semantics are those of the slots in lib/backend/backend.h.
 */
#ifndef TB_KERNELS_ELEMENTWISE_H
#define TB_KERNELS_ELEMENTWISE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int tb_cuda_relu_fwd(const float *x, float *y, size_t n, void *stream);
int tb_cuda_relu_bwd(const float *y, const float *dy, float *dx, size_t n, void *stream);
int tb_cuda_add(const float *a, const float *b, float *y, size_t n, void *stream);
/* y = alpha x + beta y; beta == 0 never reads y. */
int tb_cuda_axpby(float alpha, const float *x, float beta, float *y, size_t n, void *stream);
/* y(rows x cols) += bias(cols) */
int tb_cuda_bias_add(float *y, const float *bias, size_t rows, size_t cols, void *stream);
/* keep = rng_math's tb_dropout_keep_at(seed, offset + i, threshold);
 * scale = 1 / (1 - p) (elementwise_math's tb_dropout_scale). */
int tb_cuda_dropout_fwd(uint64_t seed, uint64_t offset, uint32_t threshold, float scale,
                        const float *x, float *y, uint8_t *mask, size_t n, void *stream);
int tb_cuda_dropout_bwd(float scale, const uint8_t *mask, const float *dy, float *dx, size_t n,
                        void *stream);

#ifdef __cplusplus
}
#endif
#endif
