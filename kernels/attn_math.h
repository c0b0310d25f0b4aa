/*
 * attn_math.h - per-element attention math shared by the CPU backend
 * (lib/backend/cpu/attention.c) and the CUDA kernels (kernels/attention.cu): masking,
 * softmax weights, the online-softmax update, logsumexp and the softmax
 * backward. The CPU tests (lib/backend/cpu/attention_test.c) run it against the double
 * reference (lib/backend/ref/attention.c).
 *
 * Online softmax (the fused variant): a query row keeps a running max m and
 * a running sum l of exp(s - m) over the key tiles seen so far, and an
 * output accumulator o. A new tile with max mt gives m' = max(m, mt); the
 * old l and o are multiplied by exp(m - m') (tb_attn_rescale_f) before the
 * tile's weights exp(s - m') are added. At the end out = o / l and the
 * row's logsumexp lse = m + log(l) is saved, so the backward recomputes
 * every probability as exp(s - lse) (tb_attn_prob_f) without the T x T
 * matrix.
 *
 * Masked scores are -inf. Every exponential's argument is <= 0, so exp is
 * kernels/gelu_math.h's tb_exp_neg_f (vectorizable polynomial, ~2 ulp, the
 * same on host and GPU); a masked score gets weight exactly 0 without
 * evaluating exp(-inf - -inf), which would be NaN.
 *
 * Header only; include it from C (static inline) or CUDA (__host__
 * __device__ inline).
 */
#ifndef TB_ATTN_MATH_H
#define TB_ATTN_MATH_H

#include <math.h>

#include "kernels/gelu_math.h" /* tb_exp_neg_f */
#include "kernels/host_device.h"

/* Score of query i and key j: scale * dot, or -inf where the causal mask
 * hides key j (j > i). */
TB_HD float tb_attn_mask_f(float dot, float scale, int causal, int i, int j)
{
    return causal && j > i ? -INFINITY : dot * scale;
}

TB_HD float tb_attn_max_f(float a, float b) { return a > b ? a : b; }

/* exp(s - m) for a row whose max is m >= s; 0 for a masked score. */
TB_HD float tb_attn_weight_f(float s, float m) { return s == -INFINITY ? 0.0f : tb_exp_neg_f(m - s); }

/* exp(m_old - m_new): rescales a running sum and output made with max
 * m_old when the max grows to m_new >= m_old. 0 when nothing was seen yet
 * (m_old = -inf), where the sum and output are 0 anyway. */
TB_HD float tb_attn_rescale_f(float m_old, float m_new)
{
    return m_old == -INFINITY ? 0.0f : tb_exp_neg_f(m_new - m_old);
}

/* l' = l * rescale + tile_sum */
TB_HD float tb_attn_sum_update_f(float l, float rescale, float tile_sum)
{
    return l * rescale + tile_sum;
}

/* The row's logsumexp, saved by the fused forward. REQUIRES: l >= 1 (the
 * max's own weight is 1), so lse >= m >= every score of the row. */
TB_HD float tb_attn_lse_f(float m, float l) { return m + logf(l); }

/* Probability exp(s - lse), recomputed in the fused backward. */
TB_HD float tb_attn_prob_f(float s, float lse) { return s == -INFINITY ? 0.0f : tb_exp_neg_f(lse - s); }

/* Softmax backward: dS = P * (dP - rowdot), rowdot = sum_j P dP (manual)
 * or, equal in exact arithmetic, sum_d dO * O (fused). */
TB_HD float tb_attn_dscore_f(float p, float dp, float rowdot) { return p * (dp - rowdot); }

#endif
