/*
 * augment.h - launchers for kernels/augment.cu, callable from C without
 * CUDA headers (lib/backend/cuda/graph.c calls them for the CUDA backend's
 * augment_u8 and labels_u8_to_i32 slots, lib/backend/backend.h).
 *
 * Pointers are device memory; stream is a cudaStream_t. Launches are
 * asynchronous; n == 0 launches nothing. Returns TB_OK or TB_ERR_CUDA with
 * file and line on the error chain.
 */
#ifndef TB_KERNELS_AUGMENT_H
#define TB_KERNELS_AUGMENT_H

#include <stdint.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst (n, C, H, W) or (n, H, W, C) float from src (n, C, H, W) uint8 and
 * params (n, 3) int32 (dy, dx, flip): one thread per output element. */
int tb_cuda_augment_u8(const tb_augment_desc *d, const uint8_t *src, const int32_t *params,
                       float *dst, int n, void *stream);

/* dst[i] = src[i], i < n. */
int tb_cuda_labels_u8_to_i32(const uint8_t *src, int32_t *dst, int n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
