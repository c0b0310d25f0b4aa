/*
 * attention.h - plain C reference of layer norm and multi-head attention:
 * simple loops, one thread, everything in double. The oracle of
 * lib/backend/cpu/attention_test.c and of bench:selfcheck for the attention and layer
 * norm slots of lib/backend/backend.h, and the float64 ops a finite-difference
 * gradient check calls directly. Slow on purpose: attention materializes
 * one row of scores at a time in double and recomputes it in the backward.
 *
 * Shapes and formulas are the slots' (lib/backend/backend.h): layer norm over rows
 * of x (rows x cols); attention on contiguous (B, H, T, D) tensors with
 * scores scale * q.k, masked to -inf above the diagonal when causal.
 * The float versions widen the inputs, call the _f64 function and round
 * each output once; they allocate, hence return a status.
 */
#ifndef TB_ATTN_REF_H
#define TB_ATTN_REF_H

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- layer norm. REQUIRES: rows >= 0, cols >= 1, eps > 0. ---- */
void tb_ref_layernorm_fwd_f64(const double *x, const double *gamma, const double *beta,
                              double eps, int rows, int cols, double *y, double *save_mean,
                              double *save_rstd);
/* dx written; dgamma/dbeta written or added to when accumulate */
void tb_ref_layernorm_bwd_f64(const double *x, const double *dy, const double *gamma,
                              const double *save_mean, const double *save_rstd, int rows,
                              int cols, double *dx, double *dgamma, double *dbeta,
                              int accumulate);
int tb_ref_layernorm_fwd(const float *x, const float *gamma, const float *beta, float eps,
                         int rows, int cols, float *y, float *save_mean, float *save_rstd);
/* Recomputes the statistics in double from x and eps (the forward's), not
 * from the saved float ones: the exact gradient at the float inputs. */
int tb_ref_layernorm_bwd(const float *x, const float *dy, const float *gamma, float eps,
                         int rows, int cols, float *dx, float *dgamma, float *dbeta,
                         int accumulate);

/* ---- attention. lse (B, H, T): each row's logsumexp of its scores; may be
 * NULL. ---- */
int tb_ref_attention_fwd_f64(const tb_attn_desc *d, const double *q, const double *k,
                             const double *v, double *out, double *lse);
/* dq, dk, dv written */
int tb_ref_attention_bwd_f64(const tb_attn_desc *d, const double *q, const double *k,
                             const double *v, const double *dout, double *dq, double *dk,
                             double *dv);
int tb_ref_attention_fwd(const tb_attn_desc *d, const float *q, const float *k, const float *v,
                         float *out, float *lse);
int tb_ref_attention_bwd(const tb_attn_desc *d, const float *q, const float *k, const float *v,
                         const float *dout, float *dq, float *dk, float *dv);

#ifdef __cplusplus
}
#endif
#endif
