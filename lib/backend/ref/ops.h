/*
 * ops.h - plain C reference of every op of the CPU own-kernel families
 * (lib/backend/cpu/ops_common.c lists them): simple loops, one thread, sums in double. The oracle of lib/backend/cpu/ops_test.c and of
 * bench:selfcheck (CUDA against this), and the float64 ops that layer
 * tests use for finite-difference gradient checks. Slow on purpose.
 *
 * Signatures are the backend slots' (lib/backend/backend.h) without the backend.
 *
 * Precision, and which to call:
 *   - Batch norm, pooling and softmax cross-entropy are defined in double
 *     (the *_f64 functions). A gradient check calls them directly: build
 *     the loss L = sum(w * y) for fixed random w in double, perturb one
 *     input by +-h (h ~ 1e-6 relative), and compare (L+ - L-) / 2h with the
 *     backward's output for dy = w; in double the two agree to ~1e-8.
 *     The float versions (same names without _f64) widen the inputs,
 *     call the _f64 function and round each output once, so they are as
 *     exact as float storage allows; they allocate, hence return a status.
 *   - The element-wise ops, reductions, dropout and the optimizers take
 *     float and compute each element in double (sums in double too), then
 *     round once.
 *   - Dropout's mask is defined by kernels/rng_math.h; the reference
 *     evaluates tb_dropout_keep_at for each element, with none of the fast
 *     path's hoisting.
 *
 * Layouts follow lib/backend/backend.h: batch norm x[(n*C + c)*hw + i] (NCHW) or
 * x[(n*hw + i)*C + c] (NHWC); pooling x (N,C,H,W) or (N,H,W,C) and y
 * (N,C,P,Q) or (N,P,Q,C). A max-pooling argmax is the flat index into x,
 * in x's layout. Tested through lib/backend/cpu/ops_test.c.
 */
#ifndef TB_OPS_REF_H
#define TB_OPS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- element-wise and reductions ---- */
void tb_ref_relu_fwd(const float *x, float *y, size_t n);
void tb_ref_relu_bwd(const float *y, const float *dy, float *dx, size_t n);
void tb_ref_add(const float *a, const float *b, float *y, size_t n);
/* beta == 0 writes y without reading it */
void tb_ref_axpby(float alpha, const float *x, float beta, float *y, size_t n);
void tb_ref_bias_add(float *y, const float *bias, int rows, int cols);
void tb_ref_bias_grad(const float *dy, float *dbias, int rows, int cols, int accumulate);
void tb_ref_reduce_sum(const float *x, size_t n, float *out);
void tb_ref_count_nonfinite(const float *x, size_t n, float *out);

/* ---- dropout. REQUIRES: 0 <= p <= 1. ---- */
void tb_ref_dropout_fwd(float p, uint64_t seed, uint64_t offset, const float *x, float *y,
                        uint8_t *mask, size_t n);
void tb_ref_dropout_bwd(float p, const uint8_t *mask, const float *dy, float *dx, size_t n);

/* ---- batch norm in double. REQUIRES: training with n * hw >= 2. ---- */
void tb_ref_bn_fwd_train_f64(const tb_bn_desc *d, const double *x, const double *gamma,
                             const double *beta, double *y, double *running_mean,
                             double *running_var, double *save_mean, double *save_invstd);
void tb_ref_bn_fwd_infer_f64(const tb_bn_desc *d, const double *x, const double *gamma,
                             const double *beta, const double *running_mean,
                             const double *running_var, double *y);
/* dx written; dgamma/dbeta written or added to when accumulate */
void tb_ref_bn_bwd_f64(const tb_bn_desc *d, const double *x, const double *dy,
                       const double *gamma, const double *save_mean, const double *save_invstd,
                       double *dx, double *dgamma, double *dbeta, int accumulate);

/* ---- batch norm in float (through the _f64 functions) ---- */
int tb_ref_bn_fwd_train(const tb_bn_desc *d, const float *x, const float *gamma,
                        const float *beta, float *y, float *running_mean, float *running_var,
                        float *save_mean, float *save_invstd);
int tb_ref_bn_fwd_infer(const tb_bn_desc *d, const float *x, const float *gamma,
                        const float *beta, const float *running_mean, const float *running_var,
                        float *y);
int tb_ref_bn_bwd(const tb_bn_desc *d, const float *x, const float *dy, const float *gamma,
                  const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                  float *dbeta, int accumulate);

/* ---- pooling. Output size P x Q (floor mode); TB_ERR_INVALID for a
 * descriptor the backend also refuses (pad > window / 2, window larger
 * than the padded input, ...). ---- */
int tb_ref_pool_out(const tb_pool_desc *d, int *p, int *q);
int tb_ref_pool_fwd_f64(const tb_pool_desc *d, const double *x, double *y, int32_t *argmax);
/* dx written (zeroed first) */
int tb_ref_pool_bwd_f64(const tb_pool_desc *d, const double *dy, const int32_t *argmax,
                        double *dx);
int tb_ref_pool_fwd(const tb_pool_desc *d, const float *x, float *y, int32_t *argmax);
int tb_ref_pool_bwd(const tb_pool_desc *d, const float *dy, const int32_t *argmax, float *dx);

/* ---- softmax cross-entropy. REQUIRES: 0 <= labels[r] < classes. ---- */
void tb_ref_softmax_xent_fwd_f64(const double *logits, const int32_t *labels, int rows,
                                 int classes, double *probs, double *loss);
void tb_ref_softmax_xent_bwd_f64(const double *probs, const int32_t *labels, int rows,
                                 int classes, double scale, double *dlogits);
int tb_ref_softmax_xent_fwd(const float *logits, const int32_t *labels, int rows, int classes,
                            float *probs, float *loss);
void tb_ref_softmax_xent_bwd(const float *probs, const int32_t *labels, int rows, int classes,
                             float scale, float *dlogits);

/* ---- cross-entropy from the logsumexp (xent_lse_fwd/bwd): each row in
 * double from the float logits, rounded once. REQUIRES: 0 <= labels[r] <
 * classes. ---- */
/* lse[r] = logsumexp(logits[r, :]) (max subtracted first), loss[r] = lse[r] - logits[r, label] */
void tb_ref_xent_lse_fwd(const float *logits, const int32_t *labels, int rows, int classes,
                         float *loss, float *lse);
/* dlogits = scale (exp(logits - lse) - onehot), with the float lse given;
 * dlogits may be logits (each element is read before it is written). */
void tb_ref_xent_lse_bwd(const float *logits, const float *lse, const int32_t *labels, int rows,
                         int classes, float scale, float *dlogits);

/* ---- optimizers: PyTorch's formulas (kernels/optim_math.h states them)
 * per element in double, state rounded to float after each step; LARS,
 * LAMB and NovoGrad with their per-tensor norms in double.
 * TB_ERR_UNSUPPORTED for an unknown kind. ---- */
int tb_ref_opt_step(const tb_opt_hparams *hp, const tb_param_view *tensors, int count);

#ifdef __cplusplus
}
#endif
#endif
