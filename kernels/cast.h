/*
 * cast.h - launchers for kernels/cast.cu, callable from C without CUDA
 * headers (lib/backend/cuda/cast.c calls them for the CUDA backend's
 * cast_f32_to_lowp / cast_lowp_to_f32 slots, and lib/backend/cuda/conv.c for its
 * fp32 outputs of low-precision convolutions).
 *
 * Pointers are device memory; lowp is n uint16_t (bf16 or fp16 bits);
 * stream is a cudaStream_t. bf16 != 0 selects bf16, else fp16. Launches are
 * asynchronous; n == 0 launches nothing. Returns TB_OK or TB_ERR_CUDA with
 * file and line on the error chain.
 */
#ifndef TB_KERNELS_CAST_H
#define TB_KERNELS_CAST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int tb_cuda_cast_f32_to_lowp(int bf16, const float *x, uint16_t *lowp, size_t n, void *stream);
int tb_cuda_cast_lowp_to_f32(int bf16, const uint16_t *lowp, float *y, size_t n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
