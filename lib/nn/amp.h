/*
 * amp.h - automatic mixed precision: the autocast policy of tunebench's
 * layers, and the casts the low-precision layers share.
 *
 * Autocast policy (ctx->amp = TB_BF16 or TB_F16; TB_F32 = off), in the
 * spirit of PyTorch's autocast op lists:
 *   run in low precision (inputs cast, fp32 accumulation, fp32 outputs):
 *     conv2d  forward: x and w cast; backward: dy cast, the forward's casts
 *             of x (for dw) and w (for dx) reused; the backend's bf16/fp16
 *             convolution (tb_conv_desc.dtype, TB_MATH_LOWP)
 *     linear  the same with gemm_lowp (x W^T, dy^T x, dy W); also the
 *             transformer's per-token linear (GPT-2's MLP) and attention's
 *             input and output projections (GPT-2's c_attn, c_proj), as
 *             PyTorch runs their nn.Linear in low precision
 *     attention's products, manual variant (--fused-attention off, eager
 *             PyTorch's q @ k.transpose and p @ v): Q K^T and P V and their
 *             four backward products on low-precision copies of their
 *             operands (tb_attn_desc.lowp), the softmax in fp32 as autocast
 *             runs softmax
 *   stay fp32 here, unlike PyTorch (its scaled_dot_product_attention runs
 *   in low precision under autocast): the fused attention variant, whose
 *   kernels (the backends' own) are fp32 only
 *   compute in fp32 (PyTorch's "autocast to float32" list and the ops it
 *   leaves alone): batch norm, softmax cross-entropy, reductions (sum, the
 *   loss sum, count_nonfinite), GELU, ReLU, dropout, pooling, residual adds,
 *   the optimizer; the master weights and their gradients are fp32.
 * Activations. As in PyTorch, where a bf16 convolution's output stays bf16
 * through batch norm, ReLU, pooling and the residual adds (which compute in
 * fp32 on it), the conv trunk of an image model keeps its activations and
 * their gradients in bf16 (ctx->act, layers.h) where the backend has
 * low-precision activations (be->relu_fwd_lowp: the CPU; CUDA not yet):
 * those layers then read and write half the bytes, the next convolution
 * takes its input without a cast, and the activations take half the
 * memory. The images enter the first convolution in fp32 (cast there); the
 * first linear layer takes the trunk's bf16 output and returns fp32, as
 * does every other layer (the token models' activations are all fp32, so
 * AMP there saves compute, not memory). The convolutions write their bf16
 * outputs themselves (tb_conv_desc.lowp_out). fp16 autocast and anomaly detection (tb_model_opts.fp32_acts) keep fp32
 * activations.
 * fp16 needs dynamic loss scaling (lib/nn/loss_scaler.h, the trainer does it);
 * bf16 has fp32's range and runs without, as in PyTorch.
 *
 * Tests: bazel test //lib/train:amp_test
 */
#ifndef TB_AMP_H
#define TB_AMP_H

#include <stddef.h>

#include "lib/nn/layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of one low-precision element (bf16 and fp16). */
#define TB_LOWP_BYTES 2

/* 1 when ctx's autocast is on. */
static inline int tb_amp_on(const tb_layer_ctx *ctx) { return ctx->amp != TB_F32; }

/* Allocates a buffer of n low-precision elements for layer l (NULL with
 * autocast off). Free it with tb_amp_buf_free. */
int tb_amp_buf_alloc(tb_layer *l, size_t n, void **buf);
void tb_amp_buf_free(tb_layer *l, void **buf);

/* lowp[0..n) = x[0..n) cast to ctx->amp. REQUIRES: tb_amp_on(ctx). */
int tb_amp_cast(tb_layer_ctx *ctx, const float *x, void *lowp, size_t n);

/* Row-major C (m x n) = op(A) op(B), written (beta 0) or added to (beta 1),
 * for the GEMM layers (linear, the tied head): in fp32 with ctx->math, or
 * under autocast on the low-precision copies a_lowp, b_lowp (already cast,
 * tb_amp_cast) with fp32 accumulation. Leading dimensions are those of
 * dense operands: lda = ta ? m : k, ldb = tb ? k : n, ldc = n. */
int tb_amp_gemm(tb_layer_ctx *ctx, int ta, int tb, int m, int n, int k, const float *a,
                const void *a_lowp, const float *b, const void *b_lowp, float beta, float *c);
/* tb_amp_gemm with leading dimensions of its own (operands that are
 * slices of a larger matrix: attention's heads); a_lowp and b_lowp point at
 * the slices' first elements in the low-precision copies. */
int tb_amp_gemm_ld(tb_layer_ctx *ctx, int ta, int tb, int m, int n, int k, const float *a,
                   const void *a_lowp, int lda, const float *b, const void *b_lowp, int ldb,
                   float beta, float *c, int ldc);
/* Element i of a low-precision buffer (NULL stays NULL: autocast off). */
static inline void *tb_amp_at(void *lowp, size_t i)
{
    return lowp ? (char *)lowp + i * TB_LOWP_BYTES : NULL;
}

/* Checks that be can run autocast in dtype (a one-element gemm_lowp):
 * TB_ERR_UNSUPPORTED with the backend's reason when it cannot (the CPU
 * backend and fp16). TB_F32 always passes. */
int tb_amp_probe(tb_backend *be, tb_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
