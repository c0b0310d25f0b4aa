/*
 * layernorm.h - launchers for kernels/layernorm.cu, callable from C without
 * CUDA headers (lib/backend/cuda/attention.c: the CUDA backend's layernorm_fwd/bwd).
 *
 * variant is a tb_ln_variant (lib/backend/backend.h): TB_LN_UNFUSED (0) runs one
 * kernel per step over the temporaries tmp1, tmp2 (rows x cols floats each)
 * and rowtmp (2 rows floats, backward only); TB_LN_FUSED (1) runs one
 * kernel per row (plus the two column-sum kernels for dgamma/dbeta) and takes
 * NULL temporaries. Both variants' backward takes col_part, device scratch of
 * tb_cuda_layernorm_bwd_partials(rows, cols) doubles. Pointers are device memory; stream is a cudaStream_t;
 * launches are asynchronous. Returns TB_OK or TB_ERR_CUDA (file and line on
 * the error chain). REQUIRES: rows >= 0, cols >= 1 (the slot checks).
 */
#ifndef TB_KERNELS_LAYERNORM_H
#define TB_KERNELS_LAYERNORM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int tb_cuda_layernorm_fwd(int variant, const float *x, const float *gamma, const float *beta,
                          float eps, int rows, int cols, float *y, float *save_mean,
                          float *save_rstd, float *tmp1, float *tmp2, void *stream);

int tb_cuda_layernorm_bwd(int variant, const float *x, const float *dy, const float *gamma,
                          const float *save_mean, const float *save_rstd, int rows, int cols,
                          float *dx, float *dgamma, float *dbeta, int accumulate, float *tmp1,
                          float *tmp2, float *rowtmp, double *col_part, void *stream);

/* Doubles of col_part tb_cuda_layernorm_bwd needs for (rows, cols). */
size_t tb_cuda_layernorm_bwd_partials(int rows, int cols);

#ifdef __cplusplus
}
#endif
#endif
