/*
 * xent_math.h - per-element math of the lse cross-entropy (xent_lse_fwd/bwd,
 * lib/backend/backend.h), shared by the CPU backend (lib/backend/cpu/xent.c)
 * and the CUDA kernels (kernels/xent.cu), so the CPU tests
 * (bazel test //lib/backend/cpu:cpu_ops_test) check the GPU's arithmetic.
 *
 * Every exponential is exp(-s), s >= 0, by kernels/gelu_math.h's
 * tb_exp_neg_f (~2 ulp, vectorizable, the same bits on the host and the
 * GPU): the forward's terms exp(z - max) and the backward's softmax
 * exp(z - lse). For the backward, lse >= max(z) up to the rounding of lse
 * to float, so s may be a few ulp below 0, where tb_exp_neg_f is still
 * exact to ~2 ulp.
 *
 * The forward's sum of one row runs in a fixed split that depends only on
 * the number of classes (TB_XENT_LANES interleaved float partial sums over
 * blocks of TB_XENT_BLOCK elements, each block's partials added in lane
 * order into a double), so the CPU's ISA paths all give the same bits; the
 * GPU sums in another order (within float tolerance of the CPU).
 *
 * Header only; include it from C (static inline) or CUDA (__host__
 * __device__ inline). Compile host code with -ffp-contract=off.
 */
#ifndef TB_XENT_MATH_H
#define TB_XENT_MATH_H

#include "kernels/gelu_math.h" /* tb_exp_neg_f */
#include "kernels/host_device.h"

#define TB_XENT_LANES 16   /* one AVX-512 vector of floats */
#define TB_XENT_BLOCK 1024 /* elements per float partial sum, a multiple of the lanes */

/* One term of the forward's sum: exp(z - mx), mx the row's max. */
TB_HD float tb_xent_lse_term_f(float z, float mx) { return tb_exp_neg_f(TB_ADD(mx, -z)); }

/* dlogit = scale * (exp(z - lse) - onehot), as tb_xent_grad_f with the
 * softmax recomputed from the forward's lse. */
TB_HD float tb_xent_lse_grad_f(float z, float lse, int is_label, float scale)
{
    float p = tb_exp_neg_f(TB_ADD(lse, -z));
    return TB_MUL(scale, TB_ADD(p, -(float)(is_label != 0)));
}

#endif
