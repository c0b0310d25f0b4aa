/*
 * attention.h - launchers for kernels/attention.cu, callable from C without
 * CUDA headers (lib/backend/cuda/attention.c: the CUDA backend's attention_* slots).
 *
 * Tensors are contiguous (B, H, T, D) as lib/backend/backend.h's tb_attn_desc says;
 * pointers are device memory; stream is a cudaStream_t; launches are
 * asynchronous. Returns TB_OK, TB_ERR_UNSUPPORTED (fused with D > 128:
 * the kernels keep a row of D in registers), or TB_ERR_CUDA with file and
 * line on the error chain.
 */
#ifndef TB_KERNELS_ATTENTION_H
#define TB_KERNELS_ATTENTION_H

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest head size the fused kernels take. */
#define TB_CUDA_ATTN_MAX_D 128

/* ---- fused (flash attention) ---- */
/* out and lse (B, H, T) from q, k, v. */
int tb_cuda_attn_fused_fwd(const tb_attn_desc *d, const float *q, const float *k,
                           const float *v, float *out, float *lse, void *stream);
/* dq, dk, dv written; rowdot: (B, H, T) floats of scratch. */
int tb_cuda_attn_fused_bwd(const tb_attn_desc *d, const float *q, const float *k,
                           const float *v, const float *out, const float *dout,
                           const float *lse, float *rowdot, float *dq, float *dk, float *dv,
                           void *stream);

/* ---- manual: the softmax steps between the cuBLAS batched GEMMs ---- */
/* p (rows x T, rows = B H T; row r is query r % T) holds scale * q.k: mask
 * (causal) and softmax each row in place. */
int tb_cuda_attn_softmax_fwd(float *p, long rows, int T, int causal, void *stream);
/* ds holds dP = dO V^T: becomes dS = P (dP - rowsum(P dP)) in place. */
int tb_cuda_attn_softmax_bwd(const float *p, float *ds, long rows, int T, void *stream);

#ifdef __cplusplus
}
#endif
#endif
