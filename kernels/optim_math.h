/*
 * optim_math.h - per-element optimizer math, shared by the CPU backend
 * (lib/backend/cpu/optim.c) and the CUDA kernels, so that the CPU tests
 * (lib/backend/cpu/ops_test.c) check the GPU's arithmetic.
 *
 * PyTorch semantics (torch.optim, foreach=False, dampening 0, nesterov off;
 * the large-batch optimizers at the end say whose semantics they follow):
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

#include "kernels/host_device.h"
#include "lib/backend/backend.h" /* tb_opt_hparams */

/* ---- the steps: one PyTorch in-place op each ---- */
TB_HD float tb_opt_step_mul(float a, float k) { return a * k; }                      /* a.mul_(k) */
TB_HD float tb_opt_step_add(float a, float b, float k) { return a + k * b; }         /* a.add_(b, alpha=k) */
TB_HD float tb_opt_step_addcmul(float a, float b, float c, float k) { return a + k * b * c; }
TB_HD float tb_opt_step_sqrt(float a) { return sqrtf(a); }
TB_HD float tb_opt_step_div(float a, float k) { return a / k; }
TB_HD float tb_opt_step_add_scalar(float a, float k) { return a + k; }
TB_HD float tb_opt_step_addcdiv(float a, float b, float c, float k) { return a + k * b / c; }

/* ---- what SGD, LARS, LAMB and NovoGrad derive alike from one step's
 * hyperparameters ---- */
typedef struct tb_opt_base {
    float inv_scale;    /* 1 / grad_scale */
    float weight_decay; /* SGD, LARS: coupled, added to the gradient */
    float eps;          /* 0 for SGD, which has none */
    float neg_lr;
    int first;          /* step <= 1: a momentum buffer starts as d */
} tb_opt_base;

TB_HD tb_opt_base tb_opt_base_make(float lr, float weight_decay, float eps, int step,
                                   float grad_scale)
{
    tb_opt_base b;
    b.inv_scale = (float)(1.0 / (double)grad_scale);
    b.weight_decay = weight_decay;
    b.eps = eps;
    b.neg_lr = -lr;
    b.first = step <= 1;
    return b;
}

/* ---- SGD with momentum ---- */
typedef struct tb_sgd_coef {
    tb_opt_base b;
    float momentum;     /* 0: no buffer */
} tb_sgd_coef;

TB_HD tb_sgd_coef tb_sgd_coef_make(float lr, float momentum, float weight_decay, int step,
                                   float grad_scale)
{
    tb_sgd_coef k;
    k.b = tb_opt_base_make(lr, weight_decay, 0.0f, step, grad_scale);
    k.momentum = momentum;
    return k;
}

/* One element; buf is ignored when momentum == 0. */
TB_HD void tb_sgd_elem(const tb_sgd_coef *k, float *p, float g, float *buf)
{
    float d = tb_opt_step_mul(g, k->b.inv_scale);
    if (k->b.weight_decay != 0.0f)
        d = tb_opt_step_add(d, *p, k->b.weight_decay);
    if (k->momentum != 0.0f) {
        *buf = k->b.first ? d : tb_opt_step_add(tb_opt_step_mul(*buf, k->momentum), d, 1.0f);
        d = *buf;
    }
    *p = tb_opt_step_add(*p, d, k->b.neg_lr);
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

/* ---- large-batch optimizers: LARS, LAMB, NovoGrad ----
 * Each needs a norm per tensor before it can update any element, so each is
 * two phases: phase 1 reduces sums of squares over a tensor (in double on
 * the CPU; float partials per CUDA block, summed in double per tensor),
 * a per-tensor scalar is computed from them (the *_trust / *_denom
 * functions), and phase 2 updates every element with that scalar.
 *   A tensor marked no_adapt (norms' gamma and beta, biases: MLPerf's LARS,
 *   BERT's LAMB) gets neither the trust ratio (1) nor weight decay
 *   (tb_lb_for_tensor, tb_lb_scalar_unadapted); NovoGrad adapts every one.
 *   LARS (You et al. 2017, torchlars / apex semantics):
 *     g = grad / grad_scale; trust = eta |p| / (|g| + wd |p| + eps) when
 *     |p| > 0 and |g| > 0, else 1; d = trust (g + wd p);
 *     buf = d on the first step, else momentum buf + d; p -= lr buf
 *   LAMB (You et al. 2019, bias-corrected, decoupled weight decay in u):
 *     m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *     u = (m / bc1) / (sqrt(v / bc2) + eps) + wd p;
 *     trust = |p| / |u| when both > 0, else 1; p -= lr trust u
 *     (phase 1 writes m, v and reduces |p|^2, |u|^2; phase 2 recomputes u
 *     from the new m, v with the same function, so no u buffer is kept)
 *   NovoGrad (Ginsburg et al. 2019, OpenSeq2Seq without grad averaging):
 *     per-tensor scalar v = |g|^2 on the first step, else
 *     b2 v + (1-b2) |g|^2 (tb_param_view.tensor_state);
 *     d = g / (sqrt(v) + eps) + wd p; m = b1 m + d; p -= lr m */

/* The unscaled gradient element, whose square phase 1 sums. */
TB_HD float tb_lb_unscale(float g_raw, float inv_scale) { return tb_opt_step_mul(g_raw, inv_scale); }

typedef struct tb_lars_coef {
    tb_opt_base b;
    float momentum, trust_coef;
} tb_lars_coef;

TB_HD float tb_lars_trust(const tb_lars_coef *k, float w_norm, float g_norm)
{
    if (w_norm > 0.0f && g_norm > 0.0f)
        return k->trust_coef * w_norm / (g_norm + k->b.weight_decay * w_norm + k->b.eps);
    return 1.0f;
}

/* One element; buf ignored when momentum == 0. */
TB_HD void tb_lars_elem(const tb_lars_coef *k, float trust, float *p, float g_raw, float *buf)
{
    float d = tb_opt_step_add(tb_lb_unscale(g_raw, k->b.inv_scale), *p, k->b.weight_decay);
    d = tb_opt_step_mul(d, trust);
    if (k->momentum != 0.0f) {
        *buf = k->b.first ? d : tb_opt_step_add(tb_opt_step_mul(*buf, k->momentum), d, 1.0f);
        d = *buf;
    }
    *p = tb_opt_step_add(*p, d, k->b.neg_lr);
}

typedef struct tb_lamb_coef {
    tb_opt_base b;
    float beta1, one_minus_beta1, beta2, one_minus_beta2;
    float bc1, bc2;           /* 1 - beta^step, computed in double */
} tb_lamb_coef;

/* Phase 1, per element: the moments. */
TB_HD void tb_lamb_moments(const tb_lamb_coef *k, float g_raw, float *m, float *v)
{
    float g = tb_lb_unscale(g_raw, k->b.inv_scale);
    *m = tb_opt_step_add(tb_opt_step_mul(*m, k->beta1), g, k->one_minus_beta1);
    *v = tb_opt_step_addcmul(tb_opt_step_mul(*v, k->beta2), g, g, k->one_minus_beta2);
}

/* The update direction u from the (new) moments and the parameter. */
TB_HD float tb_lamb_dir(const tb_lamb_coef *k, float p, float m, float v)
{
    float denom = tb_opt_step_add_scalar(tb_opt_step_sqrt(tb_opt_step_div(v, k->bc2)), k->b.eps);
    return tb_opt_step_add(tb_opt_step_div(tb_opt_step_div(m, k->bc1), denom), p,
                           k->b.weight_decay);
}

/* The per-tensor step scale -lr * trust. */
TB_HD float tb_lamb_scale(const tb_lamb_coef *k, float w_norm, float u_norm)
{
    float trust = (w_norm > 0.0f && u_norm > 0.0f) ? w_norm / u_norm : 1.0f;
    return k->b.neg_lr * trust;
}

TB_HD void tb_lamb_apply(const tb_lamb_coef *k, float scale, float *p, float m, float v)
{
    *p = tb_opt_step_add(*p, tb_lamb_dir(k, *p, m, v), scale);
}

typedef struct tb_novograd_coef {
    tb_opt_base b;
    float beta1, beta2, one_minus_beta2;
} tb_novograd_coef;

/* The tensor's new second moment from the old one and |g|^2. */
TB_HD float tb_novograd_v(const tb_novograd_coef *k, float v_old, float g_norm2)
{
    return k->b.first
               ? g_norm2
               : tb_opt_step_add(tb_opt_step_mul(v_old, k->beta2), g_norm2, k->one_minus_beta2);
}

TB_HD float tb_novograd_denom(const tb_novograd_coef *k, float v)
{
    return tb_opt_step_add_scalar(tb_opt_step_sqrt(v), k->b.eps);
}

TB_HD void tb_novograd_elem(const tb_novograd_coef *k, float denom, float *p, float g_raw,
                            float *m)
{
    float d = tb_opt_step_div(tb_lb_unscale(g_raw, k->b.inv_scale), denom);
    d = tb_opt_step_add(d, *p, k->b.weight_decay);
    *m = tb_opt_step_add(tb_opt_step_mul(*m, k->beta1), d, 1.0f);
    *p = tb_opt_step_add(*p, *m, k->b.neg_lr);
}

/* ---- one opt_step's coefficients from its hyperparameters (both backends) ---- */

/* The large-batch optimizers' coefficients, all three; kind picks. */
typedef struct tb_lb_coefs {
    int kind;                 /* tb_opt_kind: TB_OPT_LARS, TB_OPT_LAMB, TB_OPT_NOVOGRAD */
    tb_lars_coef lars;
    tb_lamb_coef lamb;
    tb_novograd_coef novo;
} tb_lb_coefs;

/* REQUIRES: hp->step >= 1 (LAMB's bias corrections). */
TB_HD tb_lb_coefs tb_lb_coefs_make(const tb_opt_hparams *hp)
{
    tb_lb_coefs k;
    tb_opt_base b =
        tb_opt_base_make(hp->lr, hp->weight_decay, hp->eps, hp->step, hp->grad_scale);
    float one_minus_beta2 = (float)(1.0 - (double)hp->beta2);
    k.kind = (int)hp->kind;
    k.lars.b = b;
    k.lars.momentum = hp->momentum;
    k.lars.trust_coef = hp->trust_coef;
    k.lamb.b = b;
    k.lamb.beta1 = hp->beta1;
    k.lamb.one_minus_beta1 = (float)(1.0 - (double)hp->beta1);
    k.lamb.beta2 = hp->beta2;
    k.lamb.one_minus_beta2 = one_minus_beta2;
    k.lamb.bc1 = (float)(1.0 - pow((double)hp->beta1, (double)hp->step));
    k.lamb.bc2 = (float)(1.0 - pow((double)hp->beta2, (double)hp->step));
    k.novo.b = b;
    k.novo.beta1 = hp->beta1;
    k.novo.beta2 = hp->beta2;
    k.novo.one_minus_beta2 = one_minus_beta2;
    return k;
}

/* A tensor LARS and LAMB leave unadapted (tb_param_view.no_adapt: batch
 * and layer norm's gamma and beta, biases; MLPerf's LARS, BERT's LAMB):
 * no weight decay, and a trust ratio of 1 (tb_lb_scalar_unadapted). The
 * coefficients for such a tensor; k itself for any other, and for
 * NovoGrad, which adapts every tensor. */
TB_HD tb_lb_coefs tb_lb_for_tensor(const tb_lb_coefs *k, int no_adapt)
{
    tb_lb_coefs c = *k;
    if (no_adapt && k->kind == TB_OPT_LARS)
        c.lars.b.weight_decay = 0.0f;
    if (no_adapt && k->kind == TB_OPT_LAMB)
        c.lamb.b.weight_decay = 0.0f;
    return c;
}

/* 1 when the tensor's per-tensor scalar is fixed: trust 1 (LARS: 1; LAMB:
 * -lr), into *scalar. */
TB_HD int tb_lb_scalar_unadapted(const tb_lb_coefs *k, int no_adapt, float *scalar)
{
    if (!no_adapt || k->kind == TB_OPT_NOVOGRAD)
        return 0;
    *scalar = k->kind == TB_OPT_LARS ? 1.0f : k->lamb.b.neg_lr;
    return 1;
}

/* SGD's and AdamW's coefficients, both; hp->kind picks. */
typedef struct tb_opt_coefs {
    tb_sgd_coef sgd;
    tb_adamw_coef adamw;
} tb_opt_coefs;

TB_HD tb_opt_coefs tb_opt_coefs_make(const tb_opt_hparams *hp)
{
    tb_opt_coefs k;
    k.sgd = tb_sgd_coef_make(hp->lr, hp->momentum, hp->weight_decay, hp->step, hp->grad_scale);
    k.adamw = tb_adamw_coef_make(hp->lr, hp->weight_decay, hp->beta1, hp->beta2, hp->eps,
                                 hp->step, hp->grad_scale);
    return k;
}

#endif
