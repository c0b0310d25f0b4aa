/*
 * checks.h - the argument rules of the op slots (lib/backend/backend.h),
 * one copy that every backend applies on the host before it runs anything,
 * so the CPU and CUDA backends refuse the same calls with the same message.
 * A backend adds only what its own library cannot take (cuDNN's minimum
 * batch norm eps, cuBLAS's batch count).
 *
 * Each returns TB_OK or TB_ERR_INVALID with the op and the offending values
 * on the error chain. Tested through the backends' op tests
 * (bazel test //lib/backend/cpu:cpu_ops_test //lib/backend/cpu:cpu_attn_test
 * //lib/backend/cpu:cast_test).
 */
#ifndef TB_BACKEND_CHECKS_H
#define TB_BACKEND_CHECKS_H

#include <stddef.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pooling descriptor: positive sizes, a known kind and layout, padding at
 * most half the window, a window that fits the padded input, and an input
 * small enough for int32 argmax indices. On TB_OK *p, *q is the output
 * size (PyTorch's floor mode). REQUIRES: d, p, q != NULL. */
int tb_check_pool(const tb_pool_desc *d, int *p, int *q);

/* A batch norm descriptor: positive sizes, a known layout, and in training
 * more than one value per channel. REQUIRES: d != NULL. */
int tb_check_bn(const tb_bn_desc *d, int training);

/* An optimizer step: a known kind, step >= 1, a finite grad_scale > 0, a
 * LARS trust_coef finite and > 0, and every non-empty tensor with the
 * buffers its kind needs (backend.h's tb_param_view). REQUIRES: hp != NULL. */
int tb_check_opt_step(const tb_opt_hparams *hp, const tb_param_view *tensors, int count);

/* A dropout probability in [0, 1]. */
int tb_check_dropout(float p);

/* rows >= 0 and classes >= 1 (the labels' range is the backend's to check:
 * on CUDA they live in device memory). */
int tb_check_xent(int rows, int classes);

/* A cast: dtype TB_BF16 or TB_F16, and buffers a and b when n > 0.
 * op names the slot in the message. */
int tb_check_cast(tb_dtype dtype, const void *a, const void *b, size_t n, const char *op);

/* Layer norm: rows >= 0, cols >= 1, x and gamma when rows > 0, a known
 * variant. op names the slot in the message. */
int tb_check_layernorm(const char *op, tb_ln_variant variant, const float *x,
                       const float *gamma, int rows, int cols);

/* Attention: d with B, H, T, D >= 1 and a finite scale, a known variant.
 * op names the slot in the message. */
int tb_check_attention(const char *op, tb_attn_variant variant, const tb_attn_desc *d);

/* Token + position embedding: rows >= 0, seq >= 1, d >= 1, vocab >= 1
 * (the tokens' range is the backend's to check: on CUDA they live in
 * device memory). op names the slot in the message. */
int tb_check_embedding(const char *op, int rows, int seq, int d, int vocab);

#ifdef __cplusplus
}
#endif
#endif
