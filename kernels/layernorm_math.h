/*
 * layernorm_math.h - per-element layer norm math shared by the CPU backend
 * (lib/backend/cpu/layernorm.c) and the CUDA kernels (kernels/layernorm.cu), so the CPU
 * tests (lib/backend/cpu/attention_test.c) check the arithmetic the GPU runs.
 *
 * Forward, per row of `cols` values (F.layer_norm with an affine):
 *   mean = sum(x) / cols                      (sum in double, rounded once)
 *   xc   = x - mean
 *   var  = sum(xc * xc) / cols                (biased; xc*xc rounded to float,
 *                                              summed in double: two-pass, so no
 *                                              cancellation as in E[x^2] - mean^2)
 *   rstd = 1 / sqrt(var + eps)
 *   y    = (xc * rstd) * gamma + beta
 * Backward, with xhat = xc * rstd and g = dy * gamma:
 *   a    = sum(g) / cols,  c = sum(g * xhat) / cols      (double, rounded once)
 *   dx   = ((g - a) - xhat * c) * rstd
 *   dgamma = sum over rows of dy * xhat,  dbeta = sum over rows of dy
 * The fused and unfused variants run these same steps; the unfused one
 * stores each step's result to memory (one pass each), the fused one keeps
 * them in registers. Every multiply and add goes through TB_MUL / TB_ADD
 * (kernels/host_device.h) so nvcc does not contract them into FMAs; on the
 * host GCC may still contract the fused path's steps, so fused and unfused
 * agree within an ulp or two per step, not bitwise.
 *
 * Header only; include it from C (static inline) or CUDA (__host__
 * __device__ inline).
 */
#ifndef TB_LAYERNORM_MATH_H
#define TB_LAYERNORM_MATH_H

#include <math.h>

#include "kernels/host_device.h"

/* The unfused variant's passes, one element-wise step each over a
 * (rows x cols) tensor: element (r, c) of a and b, row[r], col[c]. */
typedef enum tb_ln_pass {
    TB_LN_PASS_CENTER,    /* out = a - row[r] */
    TB_LN_PASS_SQUARE,    /* out = a * a */
    TB_LN_PASS_SCALE_ROW, /* out = a * row[r] */
    TB_LN_PASS_MUL_COL,   /* out = a * col[c] */
    TB_LN_PASS_ADD_COL,   /* out = a + col[c] */
    TB_LN_PASS_MUL,       /* out = a * b */
    TB_LN_PASS_SUB_ROW,   /* out = a - row[r] (same op as CENTER) */
    TB_LN_PASS_SUB,       /* out = a - b */
} tb_ln_pass;

/* x - mean */
TB_HD float tb_ln_center_f(float x, float mean) { return TB_ADD(x, -mean); }

/* xc * xc, the variance's summand */
TB_HD float tb_ln_square_f(float xc) { return TB_MUL(xc, xc); }

/* 1 / sqrt(var + eps); IEEE division and square root on host and GPU. */
TB_HD float tb_ln_rstd_f(float var, float eps) { return 1.0f / sqrtf(TB_ADD(var, eps)); }

/* xhat = xc * rstd */
TB_HD float tb_ln_normalize_f(float xc, float rstd) { return TB_MUL(xc, rstd); }

/* y = xhat * gamma + beta: two roundings, the unfused variant's mul then add. */
TB_HD float tb_ln_affine_f(float xhat, float gamma, float beta)
{
    return TB_ADD(TB_MUL(xhat, gamma), beta);
}

/* dx = ((g - a) - xhat * c) * rstd, in the unfused variant's pass order. */
TB_HD float tb_ln_dx_f(float g, float xhat, float a, float c, float rstd)
{
    float t = TB_ADD(g, -a);
    t = TB_ADD(t, -TB_MUL(xhat, c));
    return TB_MUL(t, rstd);
}

#endif
