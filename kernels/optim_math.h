/*
 * optim_math.h - per-element optimizer math, shared by the CPU backend
 * (lib/cpu_ops.c) and the CUDA kernels, so that the CPU tests
 * (lib/cpu_ops_test.c) check the GPU's arithmetic.
 *
 * PyTorch semantics (torch.optim, foreach=False, dampening 0, nesterov off):
 *   SGD:   d = g (+ wd p); buf = d on the first step, else momentum buf + d;
 *          p -= lr buf (momentum 0: p -= lr d, no buffer)
 *   AdamW: p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 *          p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps),
 *          bc1 = 1 - b1^step, bc2 = 1 - b2^step (computed in double, as
 *          PyTorch's Python scalars are).
 * g is the stored gradient times inv_scale = 1 / grad_scale first (AMP's
 * unscale; 1 when not scaling, and g * 1 == g exactly).
 *
 * As in kernels/gelu_math.h, each formula is written as the steps
 * (tb_opt_step_*) that the per-tensor variant runs as separate passes over
 * memory, one per PyTorch in-place op; the fused functions run the same
 * steps in registers. On the CPU, which has no FMA contraction at the
 * baseline ISA, fused and per-tensor are bitwise equal; nvcc may contract
 * a * b + c into an FMA, which stays within float rounding.
 *
 * Header only; include it from C (static inline) or CUDA (__host__
 * __device__ inline).
 */
#ifndef TB_OPTIM_MATH_H
#define TB_OPTIM_MATH_H

#include <math.h>

#ifndef TB_HD
#ifdef __CUDACC__
#define TB_HD __host__ __device__ inline
#else
#define TB_HD static inline
#endif
#endif

/* ---- the steps: one PyTorch in-place op each ---- */
TB_HD float tb_opt_step_mul(float a, float k) { return a * k; }                      /* a.mul_(k) */
TB_HD float tb_opt_step_add(float a, float b, float k) { return a + k * b; }         /* a.add_(b, alpha=k) */
TB_HD float tb_opt_step_addcmul(float a, float b, float c, float k) { return a + k * b * c; }
TB_HD float tb_opt_step_sqrt(float a) { return sqrtf(a); }
TB_HD float tb_opt_step_div(float a, float k) { return a / k; }
TB_HD float tb_opt_step_add_scalar(float a, float k) { return a + k; }
TB_HD float tb_opt_step_addcdiv(float a, float b, float c, float k) { return a + k * b / c; }

/* ---- SGD with momentum ---- */
typedef struct tb_sgd_coef {
    float inv_scale;    /* 1 / grad_scale */
    float weight_decay; /* coupled: added to the gradient */
    float momentum;     /* 0: no buffer */
    float neg_lr;
    int first;          /* first step: buf = d */
} tb_sgd_coef;

TB_HD tb_sgd_coef tb_sgd_coef_make(float lr, float momentum, float weight_decay, int step,
                                   float grad_scale)
{
    tb_sgd_coef k;
    k.inv_scale = (float)(1.0 / (double)grad_scale);
    k.weight_decay = weight_decay;
    k.momentum = momentum;
    k.neg_lr = -lr;
    k.first = step <= 1;
    return k;
}

/* One element; buf is ignored when momentum == 0. */
TB_HD void tb_sgd_elem(const tb_sgd_coef *k, float *p, float g, float *buf)
{
    float d = tb_opt_step_mul(g, k->inv_scale);
    if (k->weight_decay != 0.0f)
        d = tb_opt_step_add(d, *p, k->weight_decay);
    if (k->momentum != 0.0f) {
        *buf = k->first ? d : tb_opt_step_add(tb_opt_step_mul(*buf, k->momentum), d, 1.0f);
        d = *buf;
    }
    *p = tb_opt_step_add(*p, d, k->neg_lr);
}

/* ---- AdamW ---- */
typedef struct tb_adamw_coef {
    float inv_scale;
    float decay;              /* 1 - lr wd */
    float beta1, one_minus_beta1;
    float beta2, one_minus_beta2;
    float bc2_sqrt;           /* sqrt(1 - beta2^step) */
    float eps;
    float neg_step_size;      /* -lr / (1 - beta1^step) */
} tb_adamw_coef;

/* REQUIRES: step >= 1. */
TB_HD tb_adamw_coef tb_adamw_coef_make(float lr, float weight_decay, float beta1, float beta2,
                                       float eps, int step, float grad_scale)
{
    tb_adamw_coef k;
    double bc1 = 1.0 - pow((double)beta1, (double)step);
    double bc2 = 1.0 - pow((double)beta2, (double)step);
    k.inv_scale = (float)(1.0 / (double)grad_scale);
    k.decay = (float)(1.0 - (double)lr * (double)weight_decay);
    k.beta1 = beta1;
    k.one_minus_beta1 = (float)(1.0 - (double)beta1);
    k.beta2 = beta2;
    k.one_minus_beta2 = (float)(1.0 - (double)beta2);
    k.bc2_sqrt = (float)sqrt(bc2);
    k.eps = eps;
    k.neg_step_size = (float)(-(double)lr / bc1);
    return k;
}

/* One element, the per-tensor passes in order:
 *   p.mul_(decay); m.mul_(b1).add_(g, 1-b1); v.mul_(b2).addcmul_(g, g, 1-b2);
 *   denom = v.sqrt() / bc2_sqrt + eps; p.addcdiv_(m, denom, -step_size) */
TB_HD void tb_adamw_elem(const tb_adamw_coef *k, float *p, float g_raw, float *m, float *v)
{
    float g = tb_opt_step_mul(g_raw, k->inv_scale);
    float pp = tb_opt_step_mul(*p, k->decay);
    float mm = tb_opt_step_add(tb_opt_step_mul(*m, k->beta1), g, k->one_minus_beta1);
    float vv = tb_opt_step_addcmul(tb_opt_step_mul(*v, k->beta2), g, g, k->one_minus_beta2);
    float denom = tb_opt_step_sqrt(vv);
    denom = tb_opt_step_div(denom, k->bc2_sqrt);
    denom = tb_opt_step_add_scalar(denom, k->eps);
    *p = tb_opt_step_addcdiv(pp, mm, denom, k->neg_step_size);
    *m = mm;
    *v = vv;
}

#endif
