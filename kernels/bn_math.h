/*
 * bn_math.h - per-element and per-channel batch-norm math, shared by the CPU
 * backend (lib/backend/cpu/batchnorm.c) and the CUDA kernels so that the CPU tests
 * (lib/backend/cpu/ops_test.c) check the GPU's arithmetic.
 *
 * Forward (training):  mean, var = batch statistics per channel (biased var)
 *                      invstd = 1 / sqrt(var + eps)
 *                      y = (x - mean) invstd gamma + beta
 *                      running = (1 - momentum) running + momentum batch,
 *                      with the unbiased variance var m / (m - 1) (PyTorch).
 * Backward:            xhat = (x - mean) invstd
 *                      dbeta = sum dy, dgamma = sum dy xhat
 *                      dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat))
 *
 * Statistics are reduced in double on the CPU; on the GPU a kernel merges
 * per-thread partial statistics with tb_welford_merge (Chan et al.), which
 * is exact-order independent up to rounding and never cancels like
 * E[x^2] - E[x]^2 does.
 *
 * Header only; include it from C (static inline) or CUDA (__host__
 * __device__ inline).
 */
#ifndef TB_BN_MATH_H
#define TB_BN_MATH_H

#include <math.h>

#include "kernels/host_device.h"

TB_HD float tb_bn_invstd_f(float var, float eps) { return 1.0f / sqrtf(var + eps); }

TB_HD float tb_bn_fwd_f(float x, float mean, float invstd, float gamma, float beta)
{
    return (x - mean) * invstd * gamma + beta;
}

TB_HD float tb_bn_running_f(float running, float batch, float momentum)
{
    return (1.0f - momentum) * running + momentum * batch;
}

/* Unbiased from biased variance over m values; m == 1 has none (PyTorch
 * refuses to train on one value per channel, so the callers do too). */
TB_HD double tb_bn_unbiased(double var, double m) { return m > 1.0 ? var * m / (m - 1.0) : var; }

/* dx for one element. k = gamma invstd, mean_dy = sum(dy) / m,
 * mean_dy_xhat = sum(dy xhat) / m. */
TB_HD float tb_bn_bwd_dx_f(float x, float dy, float mean, float invstd, float k, float mean_dy,
                           float mean_dy_xhat)
{
    float xhat = (x - mean) * invstd;
    return k * (dy - mean_dy - xhat * mean_dy_xhat);
}

/* Running statistics of a set of values: count, mean, sum of squared
 * deviations from the mean (m2); variance = m2 / count. */
typedef struct tb_welford {
    double count, mean, m2;
} tb_welford;

TB_HD tb_welford tb_welford_merge(tb_welford a, tb_welford b)
{
    tb_welford r;
    r.count = a.count + b.count;
    if (r.count == 0.0)
        return a;
    double delta = b.mean - a.mean;
    r.mean = a.mean + delta * (b.count / r.count);
    r.m2 = a.m2 + b.m2 + delta * delta * (a.count * b.count / r.count);
    return r;
}

TB_HD tb_welford tb_welford_push(tb_welford a, double x)
{
    tb_welford one = {1.0, x, 0.0};
    return tb_welford_merge(a, one);
}

#endif
