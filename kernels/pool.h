/*
 * pool.h - launchers for kernels/pool.cu, callable from C without CUDA
 * headers (lib/backend/cuda/pool.c: the CUDA backend's pool_fwd and pool_bwd).
 *
 * g describes a problem already checked by the caller (lib/backend/cuda/pool.c
 * applies the CPU backend's rules: window fits the padded input, pad at
 * most half the window, indices fit int32). kind and layout take the
 * values of tb_pool_kind and tb_layout (lib/backend/backend.h). Pointers are device
 * memory; stream is a cudaStream_t; launches are asynchronous. Returns
 * TB_OK or TB_ERR_CUDA (file and line on the error chain).
 */
#ifndef TB_KERNELS_POOL_H
#define TB_KERNELS_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_pool_geom {
    int kind, layout;
    int n, c, h, w;
    int window, stride, pad;
    int p, q;              /* output height and width (floor mode) */
    float area;            /* window * window: padding counts as zeros */
} tb_pool_geom;

/* y, and for max pooling argmax (flat input index per output). */
int tb_cuda_pool_fwd(const tb_pool_geom *g, const float *x, float *y, int32_t *argmax,
                     void *stream);
/* dx written (every element), from dy and, for max pooling, argmax. */
int tb_cuda_pool_bwd(const tb_pool_geom *g, const float *dy, const int32_t *argmax, float *dx,
                     void *stream);

#ifdef __cplusplus
}
#endif
#endif
