/*
 * gelu_math.h - the per-element GELU math that the CPU code (lib/backend/cpu/gelu.c)
 * and the CUDA kernels (kernels/gelu.cu) share, so that the CPU tests
 * (lib/backend/cpu/gelu_test.c) prove the GPU's arithmetic without a GPU.
 *
 * The GELU first here is the exact-erf form, PyTorch's default (approximate='none'):
 *   gelu(x)  = 0.5 x (1 + erf(x / sqrt2))
 *   gelu'(x) = 0.5 (1 + erf(x / sqrt2)) + x exp(-x^2 / 2) / sqrt(2 pi)
 *
 * Every formula is written as the sequence of steps the unfused variant
 * runs as separate passes (the tb_gelu_step_* functions below); the fused
 * functions run the same steps in the same order in registers. So fused and
 * unfused give bitwise the same result on one device, and the benchmark's
 * fused-vs-unfused check can say "exact".
 *
 * Same numbers everywhere: every multiply-add inside erf and exp is an
 * explicit fmaf (one rounding) on the host and on the GPU, division is IEEE
 * on both, and on the GPU the remaining multiplies and adds use
 * __fmul_rn/__fadd_rn so nvcc cannot contract them into FMAs that the host
 * would not do. The AVX-512 code in lib/backend/cpu/gelu.c repeats these exact
 * operations with intrinsics (same coefficients, from the macros here), and
 * its test checks it bitwise against these scalar functions.
 *
 * Accuracy (measured by lib/backend/cpu/gelu_test.c against double-precision libm
 * over a dense grid):
 *   tb_erf_f:     rational approximation x P(x^2) / Q(x^2) on [-4, 4]
 *                 (the one XLA and Eigen use), saturating to +-1 beyond;
 *                 max error 3.4e-7 absolute and relative, about 3 ulp.
 *   tb_exp_neg_f: exp(-s) for s >= 0 by Cody-Waite reduction and Cephes'
 *                 degree-6 polynomial, ~2 ulp; flushes to 0 for s > 86,
 *                 where exp(-s) < 5e-38, so no denormals are made.
 *   gelu, gelu': error below 4e-7 * max(1, |x|) absolute. For x << 0 the
 *                 relative error grows because 1 + erf(x/sqrt2) cancels, as
 *                 it does in PyTorch's own float GELU.
 *
 * The tanh GELU (approximate='tanh', GPT-2's; TB_GELU_TANH), also here:
 *   gelu_tanh(x)  = 0.5 x (1 + tanh(a)),  a = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu_tanh'(x) = 0.5 (1 + tanh(a)) + 0.5 x sech^2(a) sqrt(2/pi) (1 + 3 0.044715 x^2)
 * tanh and sech^2 are built from tb_exp_neg_f: with e = exp(-2|a|),
 *   tanh(a) = sign(a) (1 - e) / (1 + e),  sech^2(a) = 4 e / (1 + e)^2
 * (sech^2 straight from e rather than 1 - tanh^2, which cancels for |a| > 3).
 * Accuracy, measured by lib/backend/cpu/gelu_test.c (dense grid, double libm):
 *   tb_tanh_f:    ~1.2e-7 absolute (1 - e loses the relative accuracy of
 *                 tiny |a|; 1 + tanh, the only use, cannot see it).
 *   tb_sech2_f:   ~4 ulp relative; 0 for |a| > 43.
 *   gelu_tanh, gelu_tanh': error below 1e-6 * max(1, |x|) absolute, against
 *                 the double formula (the tanh GELU itself, not the erf one).
 *
 * FLOPs per element (lib/nn/flops.c, elementwise family), counting each
 * multiply, add and division as one and tb_erf_f, tb_exp_neg_f, tanh and
 * sech^2 as one each; the fused and unfused variants run the same steps,
 * so they count the same (unfused moves more memory, not more FLOPs):
 *   erf GELU:  forward 5, backward 10 (the steps of tb_gelu_fwd_f / _bwd_f)
 *   tanh GELU: forward 9 (cube 2, scale, add, scale, tanh, add one, halve,
 *              multiply), backward 18 (a: 5; 0.5 (1 + tanh): 3;
 *              0.5 x sech^2: 3; da/dx: 4; two multiplies and an add).
 *
 * Why not libm's erff: it is scalar, and a GELU built on it is
 * compute-bound: under 1 GB/s on a 2-core CPU where this polynomial, vectorized,
 * reaches memory bandwidth.
 *
 * Header only; include it from C (static inline) or CUDA (__host__
 * __device__ inline).
 */
#ifndef TB_GELU_MATH_H
#define TB_GELU_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/host_device.h" /* TB_HD; TB_MUL, TB_ADD: no FMA contraction */

#define TB_GELU_SQRT1_2 0.70710678118654752440f      /* 1/sqrt(2) */
#define TB_GELU_INV_SQRT_2PI 0.39894228040143267794f /* 1/sqrt(2 pi) */

/* erf(x) = x P(x^2) / Q(x^2) on |x| <= 4; erf(4) rounds to 1 in float. */
#define TB_ERF_CLAMP 4.0f
#define TB_ERF_P13 -2.72614225801306e-10f
#define TB_ERF_P11 2.77068142495902e-08f
#define TB_ERF_P9 -2.10102402082508e-06f
#define TB_ERF_P7 -5.69250639462346e-05f
#define TB_ERF_P5 -7.34990630326855e-04f
#define TB_ERF_P3 -2.95459980854025e-03f
#define TB_ERF_P1 -1.60960333262415e-02f
#define TB_ERF_Q8 -1.45660718464996e-05f
#define TB_ERF_Q6 -2.13374055278905e-04f
#define TB_ERF_Q4 -1.68282697438203e-03f
#define TB_ERF_Q2 -7.37332916720468e-03f
#define TB_ERF_Q0 -1.42647390514189e-02f

/* exp(z), z = -s in [-86, 0]: z = n ln2 + r with |r| <= ln2/2 (ln2 split
 * in two for an exact reduction), exp(r) by Cephes' expf polynomial. */
#define TB_EXP_FLUSH 86.0f /* exp(-86) = 4.4e-38: still normal */
#define TB_EXP_LOG2E 1.44269504088896341f
#define TB_EXP_ROUND 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer */
#define TB_EXP_LN2_HI 0.693359375f
#define TB_EXP_LN2_LO -2.12194440e-4f
#define TB_EXP_C5 1.9875691500e-4f
#define TB_EXP_C4 1.3981999507e-3f
#define TB_EXP_C3 8.3334519073e-3f
#define TB_EXP_C2 4.1665795894e-2f
#define TB_EXP_C1 1.6666665459e-1f
#define TB_EXP_C0 5.0000001201e-1f

/* 2^n, where t = n + 1.5 * 2^23 came from rounding with TB_EXP_ROUND and
 * n is in [-126, 127]: t's low mantissa bits hold n, so 2^n's exponent
 * field is bits(t) - bits(1.5 * 2^23) + 127. Integer-only (no float-to-int
 * conversion, which is undefined for NaN in C) and easy to vectorize. */
#define TB_EXP_ROUND_BITS 0x4B400000u
TB_HD float tb_pow2_from_round_f(float t)
{
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits - TB_EXP_ROUND_BITS + 127u) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* erf(x). NaN in, NaN out. Written with ternaries, not fminf, so that GCC
 * can vectorize it and AVX-512's min/max give the same NaN behaviour. */
TB_HD float tb_erf_f(float x)
{
    float c = x > TB_ERF_CLAMP ? TB_ERF_CLAMP : x;
    c = c < -TB_ERF_CLAMP ? -TB_ERF_CLAMP : c;
    float s = TB_MUL(c, c);
    float p = fmaf(TB_ERF_P13, s, TB_ERF_P11);
    p = fmaf(p, s, TB_ERF_P9);
    p = fmaf(p, s, TB_ERF_P7);
    p = fmaf(p, s, TB_ERF_P5);
    p = fmaf(p, s, TB_ERF_P3);
    p = fmaf(p, s, TB_ERF_P1);
    float q = fmaf(TB_ERF_Q8, s, TB_ERF_Q6);
    q = fmaf(q, s, TB_ERF_Q4);
    q = fmaf(q, s, TB_ERF_Q2);
    q = fmaf(q, s, TB_ERF_Q0);
    return TB_MUL(c, p) / q;
}

/* exp(-s) for s >= 0 (the Gaussian in gelu'); 0 for s > 86 and s = +inf. */
TB_HD float tb_exp_neg_f(float s)
{
    float c = s > TB_EXP_FLUSH ? TB_EXP_FLUSH : s;
    float z = -c;
    float t = fmaf(z, TB_EXP_LOG2E, TB_EXP_ROUND); /* n + 1.5 * 2^23, n = round(z log2 e) */
    float kf = t - TB_EXP_ROUND;
    float r = fmaf(kf, -TB_EXP_LN2_HI, z);
    r = fmaf(kf, -TB_EXP_LN2_LO, r);
    float p = fmaf(TB_EXP_C5, r, TB_EXP_C4);
    p = fmaf(p, r, TB_EXP_C3);
    p = fmaf(p, r, TB_EXP_C2);
    p = fmaf(p, r, TB_EXP_C1);
    p = fmaf(p, r, TB_EXP_C0);
    float e = fmaf(p, TB_MUL(r, r), r);
    e = TB_ADD(e, 1.0f);
    e = TB_MUL(e, tb_pow2_from_round_f(t));
    return s > TB_EXP_FLUSH ? 0.0f : e;
}

/* ---- the unfused steps: each is one pass over memory in the unfused
 * variant, one elementwise op as eager PyTorch launches it ---- */
TB_HD float tb_gelu_step_scale(float a, float k) { return TB_MUL(a, k); }
TB_HD float tb_gelu_step_erf(float a) { return tb_erf_f(a); }
TB_HD float tb_gelu_step_add_scalar(float a, float k) { return TB_ADD(a, k); }
TB_HD float tb_gelu_step_mul(float a, float b) { return TB_MUL(a, b); }
TB_HD float tb_gelu_step_add(float a, float b) { return TB_ADD(a, b); }
TB_HD float tb_gelu_step_exp_neg(float a) { return tb_exp_neg_f(a); }

/* Forward, as eager PyTorch runs x * 0.5 * (1 + erf(x * M_SQRT1_2)):
 *   t = x * M_SQRT1_2; t = erf(t); t = t + 1; u = x * 0.5; y = u * t */
TB_HD float tb_gelu_fwd_f(float x)
{
    float t = tb_gelu_step_scale(x, TB_GELU_SQRT1_2);
    t = tb_gelu_step_erf(t);
    t = tb_gelu_step_add_scalar(t, 1.0f);
    float u = tb_gelu_step_scale(x, 0.5f);
    return tb_gelu_step_mul(u, t);
}

/* gelu'(x), in the ten-pass order of the unfused backward (less its last
 * step, dx = dy * gelu'(x)):
 *   t = x * M_SQRT1_2; c = erf(t); c = c + 1; c = c * 0.5      (Phi(x))
 *   s = t * t; g = exp(-s); g = g * x; g = g * 1/sqrt(2 pi)   (x phi(x))
 *   d = c + g */
TB_HD float tb_gelu_grad_f(float x)
{
    float t = tb_gelu_step_scale(x, TB_GELU_SQRT1_2);
    float c = tb_gelu_step_erf(t);
    c = tb_gelu_step_add_scalar(c, 1.0f);
    c = tb_gelu_step_scale(c, 0.5f);
    float s = tb_gelu_step_mul(t, t);
    float g = tb_gelu_step_exp_neg(s);
    g = tb_gelu_step_mul(g, x);
    g = tb_gelu_step_scale(g, TB_GELU_INV_SQRT_2PI);
    return tb_gelu_step_add(c, g);
}

/* dx = dy * gelu'(x). */
TB_HD float tb_gelu_bwd_f(float x, float dy) { return tb_gelu_step_mul(dy, tb_gelu_grad_f(x)); }


/* ---- the tanh GELU (TB_GELU_TANH) ---- */

#define TB_GELU_TANH_K 0.79788456080286535588f   /* sqrt(2/pi) */
#define TB_GELU_TANH_C 0.044715f                 /* GPT-2's cubic coefficient */
#define TB_GELU_TANH_3C 0.134145f                /* 3 * 0.044715, d/dx of C x^3 */

/* tanh(a) = sign(a) (1 - e) / (1 + e), e = exp(-2|a|): 1 for |a| > 43
 * (e flushes to 0), NaN in, NaN out. Ternaries, not fabsf/copysignf, so
 * GCC vectorizes it and the AVX-512 code can repeat it with compares. */
TB_HD float tb_tanh_f(float a)
{
    float s = a < 0.0f ? -a : a;
    float e = tb_exp_neg_f(TB_ADD(s, s));
    float r = TB_ADD(1.0f, -e) / TB_ADD(1.0f, e);
    return a < 0.0f ? -r : r;
}

/* sech^2(a) = 1 - tanh^2(a) = 4 e / (1 + e)^2, e = exp(-2|a|): accurate
 * where 1 - tanh^2 would cancel; 0 for |a| > 43. */
TB_HD float tb_sech2_f(float a)
{
    float s = a < 0.0f ? -a : a;
    float e = tb_exp_neg_f(TB_ADD(s, s));
    float q = TB_ADD(1.0f, e);
    return TB_MUL(e, 4.0f) / TB_MUL(q, q);
}

/* The tanh GELU's own unfused steps (the others are shared above). */
TB_HD float tb_gelu_step_cube(float a) { return TB_MUL(TB_MUL(a, a), a); } /* torch.pow(x, 3.0) */
TB_HD float tb_gelu_step_tanh(float a) { return tb_tanh_f(a); }
TB_HD float tb_gelu_step_sech2(float a) { return tb_sech2_f(a); }

/* a = sqrt(2/pi) (x + 0.044715 x^3), as nanoGPT's NewGELU writes it:
 *   c = x^3; c = c * 0.044715; c = x + c; a = c * sqrt(2/pi) */
TB_HD float tb_gelu_tanh_arg_f(float x)
{
    float c = tb_gelu_step_cube(x);
    c = tb_gelu_step_scale(c, TB_GELU_TANH_C);
    c = tb_gelu_step_add(x, c);
    return tb_gelu_step_scale(c, TB_GELU_TANH_K);
}

/* Forward, as eager PyTorch runs 0.5 * x * (1.0 + torch.tanh(a)):
 *   a (4 steps above); t = tanh(a); t = t + 1; u = x * 0.5; y = u * t */
TB_HD float tb_gelu_tanh_fwd_f(float x)
{
    float t = tb_gelu_step_tanh(tb_gelu_tanh_arg_f(x));
    t = tb_gelu_step_add_scalar(t, 1.0f);
    float u = tb_gelu_step_scale(x, 0.5f);
    return tb_gelu_step_mul(u, t);
}

/* gelu_tanh'(x), in the order of the unfused backward's passes (less the
 * last, dx = dy * gelu_tanh'(x)):
 *   a (4 steps)
 *   t = tanh(a); t = t + 1; t = t * 0.5          0.5 (1 + tanh(a))
 *   h = sech2(a); h = h * x; h = h * 0.5         0.5 x sech^2(a)
 *   s = x * x; s = s * 3C; s = s + 1; s = s * K   da/dx
 *   h = h * s; d = t + h */
TB_HD float tb_gelu_tanh_grad_f(float x)
{
    float a = tb_gelu_tanh_arg_f(x);
    float t = tb_gelu_step_tanh(a);
    t = tb_gelu_step_add_scalar(t, 1.0f);
    t = tb_gelu_step_scale(t, 0.5f);
    float h = tb_gelu_step_sech2(a);
    h = tb_gelu_step_mul(h, x);
    h = tb_gelu_step_scale(h, 0.5f);
    float s = tb_gelu_step_mul(x, x);
    s = tb_gelu_step_scale(s, TB_GELU_TANH_3C);
    s = tb_gelu_step_add_scalar(s, 1.0f);
    s = tb_gelu_step_scale(s, TB_GELU_TANH_K);
    h = tb_gelu_step_mul(h, s);
    return tb_gelu_step_add(t, h);
}

/* dx = dy * gelu_tanh'(x). */
TB_HD float tb_gelu_tanh_bwd_f(float x, float dy)
{
    return tb_gelu_step_mul(dy, tb_gelu_tanh_grad_f(x));
}

#endif
