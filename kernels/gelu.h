/*
 * gelu.h - launchers for the CUDA GELU kernels (kernels/gelu.cu), callable
 * from C without CUDA headers: the CUDA backend (lib/backend/cuda/backend.c) calls
 * them for its gelu_fwd/gelu_bwd slots.
 *
 * variant is a tb_gelu_variant (lib/backend/backend.h): TB_GELU_UNFUSED (0) runs
 * separate kernels over the temporaries tmp1 and tmp2 (n floats each, device
 * memory, distinct from the other buffers), TB_GELU_FUSED (1) one kernel;
 * tmp1/tmp2 may be NULL for it. stream is a cudaStream_t (NULL: the legacy
 * default stream). Launches are asynchronous: results are ready after the
 * stream synchronizes. Returns TB_OK, TB_ERR_INVALID for bad arguments, or
 * TB_ERR_CUDA (with file and line on the error chain) when a launch fails,
 * e.g. with no driver (cudaErrorInsufficientDriver, 35).
 */
#ifndef TB_KERNELS_GELU_H
#define TB_KERNELS_GELU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y = gelu(x). y may equal x. */
int tb_cuda_gelu_fwd(int variant, const float *x, float *y, size_t n, float *tmp1, float *tmp2,
                     void *stream);

/* dx = dy * gelu'(x), written, not accumulated. dx may equal x or dy. */
int tb_cuda_gelu_bwd(int variant, const float *x, const float *dy, float *dx, size_t n,
                     float *tmp1, float *tmp2, void *stream);

/* The tanh form (TB_GELU_TANH), the same contracts: y = gelu_tanh(x);
 * dx = dy * gelu_tanh'(x). The unfused backward needs a third temporary,
 * tmp3 (n floats); the fused variant none. */
int tb_cuda_gelu_tanh_fwd(int variant, const float *x, float *y, size_t n, float *tmp1,
                          float *tmp2, void *stream);
int tb_cuda_gelu_tanh_bwd(int variant, const float *x, const float *dy, float *dx, size_t n,
                          float *tmp1, float *tmp2, float *tmp3, void *stream);

#ifdef __cplusplus
}
#endif
#endif
