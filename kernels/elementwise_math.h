/*
 * elementwise_math.h - per-element math of the simple element-wise ops,
 * shared by the CPU backend (lib/backend/cpu/elementwise.c) and the CUDA kernels, so the
 * CPU tests (lib/backend/cpu/ops_test.c) check the arithmetic the GPU runs.
 *
 * ReLU propagates NaN (x < 0 ? 0 : x), as PyTorch's clamp_min does, so
 * anomaly detection still sees a NaN after a ReLU. The non-finite test
 * looks at the exponent bits, so it is right under -ffast-math too.
 *
 * Header only; include it from C (static inline) or CUDA (__host__
 * __device__ inline).
 */
#ifndef TB_ELEMENTWISE_MATH_H
#define TB_ELEMENTWISE_MATH_H

#include <stdint.h>
#include <string.h>

/* Same tokens as kernels/gelu_math.h: identical redefinitions are legal C,
 * so either header may come first. */
#include "kernels/host_device.h"

TB_HD float tb_relu_f(float x) { return x < 0.0f ? 0.0f : x; }

/* dx = dy where the forward output y > 0, else 0. */
TB_HD float tb_relu_bwd_f(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

TB_HD float tb_add_f(float a, float b) { return a + b; }

/* y = alpha x + beta y, the beta != 0 form (beta == 0 never reads y). */
TB_HD float tb_axpby_f(float alpha, float x, float beta, float y) { return alpha * x + beta * y; }

/* 1 for NaN and +-Inf: all exponent bits set. */
TB_HD int tb_nonfinite_f(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7f800000u) == 0x7f800000u;
}

/* Softmax cross-entropy backward: scale (p - onehot). */
TB_HD float tb_xent_grad_f(float prob, int is_label, float scale)
{
    return scale * (prob - (float)(is_label != 0));
}

/* Dropout, given the mask bit (kernels/rng_math.h makes it): x * scale
 * where kept, x * 0 elsewhere, as PyTorch's input * noise (so a dropped NaN
 * stays NaN). scale = 1 / (1 - p). */
TB_HD float tb_dropout_apply_f(float x, uint8_t keep, float scale) { return x * (keep ? scale : 0.0f); }

/* 1 / (1 - p) as float, PyTorch's noise.div_(1 - p); 0 for p == 1 (all
 * dropped). */
TB_HD float tb_dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

#endif
