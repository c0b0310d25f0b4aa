/*
 * conv.h - plain reference convolution (forward, backward-data,
 * backward-filter) and GEMM: straight C loops with double accumulators.
 *
 * They are the oracle the fast paths (oneDNN in lib/backend/cpu/conv.c, cuDNN and
 * cuBLAS on the GPU) are tested against, and nothing else: they are slow on
 * purpose, so that they are obviously right. Layouts follow lib/backend/backend.h:
 * x (N,C,H,W) or (N,H,W,C); w (K,C,R,S) or (K,R,S,C); y (N,K,P,Q) or
 * (N,P,Q,K), chosen by d->layout. Tested through lib/backend/cpu/dnnl_test.c.
 */
#ifndef TB_CONV_REF_H
#define TB_CONV_REF_H

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = conv(x, w) + bias. bias may be NULL. REQUIRES: d->dtype == TB_F32. */
int tb_conv_ref_fwd(const tb_conv_desc *d, const float *x, const float *w, const float *bias,
                    float *y);
/* dx = conv_transpose(dy, w), written. */
int tb_conv_ref_bwd_data(const tb_conv_desc *d, const float *dy, const float *w, float *dx);
/* dw (and dbias unless NULL) written, or added to when accumulate. */
int tb_conv_ref_bwd_filter(const tb_conv_desc *d, const float *x, const float *dy, float *dw,
                           float *dbias, int accumulate);
/* Row-major C(m x n) = alpha op(A) op(B) + beta C, as the gemm slot in
 * lib/backend/backend.h; beta == 0 writes C without reading it. */
int tb_gemm_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc);

#ifdef __cplusplus
}
#endif
#endif
