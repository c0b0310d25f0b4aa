/*
 * checks.c - the op slots' argument rules, shared by the backends
 * (checks.h says what each requires).
 */
#include <math.h>
#include <stdint.h>

#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/core/status.h"

int tb_check_pool(const tb_pool_desc *d, int *p, int *q)
{
    if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->window < 1 || d->stride < 1 ||
        d->pad < 0 || (d->layout != TB_NCHW && d->layout != TB_NHWC) ||
        (d->kind != TB_POOL_MAX && d->kind != TB_POOL_AVG) ||
        (d->dtype != TB_F32 && d->dtype != TB_BF16))
        return TB_FAIL(TB_ERR_INVALID, "pooling: bad descriptor n=%d c=%d h=%d w=%d window=%d "
                       "stride=%d pad=%d", d->n, d->c, d->h, d->w, d->window, d->stride, d->pad);
    if (2 * d->pad > d->window)
        return TB_FAIL(TB_ERR_INVALID, "pooling: pad %d is more than half the window %d",
                       d->pad, d->window);
    if (d->h + 2 * d->pad < d->window || d->w + 2 * d->pad < d->window)
        return TB_FAIL(TB_ERR_INVALID, "pooling: window %d larger than the padded %dx%d input",
                       d->window, d->h, d->w);
    if ((double)d->n * d->c * d->h * d->w > (double)INT32_MAX)
        return TB_FAIL(TB_ERR_INVALID, "pooling: input too large for int32 argmax indices");
    *p = (d->h + 2 * d->pad - d->window) / d->stride + 1;
    *q = (d->w + 2 * d->pad - d->window) / d->stride + 1;
    return TB_OK;
}

int tb_check_bn(const tb_bn_desc *d, int training)
{
    if (d->n < 1 || d->c < 1 || d->hw < 1 || (d->layout != TB_NCHW && d->layout != TB_NHWC) ||
        (d->dtype != TB_F32 && d->dtype != TB_BF16))
        return TB_FAIL(TB_ERR_INVALID, "batch norm: bad shape n=%d c=%d hw=%d layout=%d dtype=%d",
                       d->n, d->c, d->hw, (int)d->layout, (int)d->dtype);
    if (training && (size_t)d->n * d->hw < 2)
        return TB_FAIL(TB_ERR_INVALID,
                       "batch norm: training needs more than 1 value per channel (n=%d hw=%d)",
                       d->n, d->hw);
    return TB_OK;
}

int tb_check_opt_step(const tb_opt_hparams *hp, const tb_param_view *tensors, int count)
{
    if (hp->kind < TB_OPT_SGD || hp->kind > TB_OPT_NOVOGRAD)
        return TB_FAIL(TB_ERR_INVALID, "opt_step: unknown optimizer %d", (int)hp->kind);
    if (count < 0 || (count > 0 && !tensors))
        return TB_FAIL(TB_ERR_INVALID, "opt_step: %d tensors", count);
    if (hp->step < 1 || !(hp->grad_scale > 0.0f) || isinf(hp->grad_scale))
        return TB_FAIL(TB_ERR_INVALID, "opt_step: step %d (1-based), grad_scale %g", hp->step,
                       (double)hp->grad_scale);
    int lb = hp->kind >= TB_OPT_LARS;
    int need1 = hp->kind == TB_OPT_ADAMW || (lb && hp->kind != TB_OPT_LARS) ||
                hp->momentum != 0.0f;
    int need2 = hp->kind == TB_OPT_ADAMW || hp->kind == TB_OPT_LAMB;
    int need_ts = hp->kind == TB_OPT_NOVOGRAD;
    /* trust_coef 0 would freeze every tensor with a nonzero norm (trust 0)
     * and step only the zero-norm ones: a LARS that silently never learns */
    if (hp->kind == TB_OPT_LARS && !(hp->trust_coef > 0.0f && isfinite(hp->trust_coef)))
        return TB_FAIL(TB_ERR_INVALID, "opt_step: LARS trust_coef %g must be finite and > 0 "
                       "(set tb_opt_hparams.trust_coef, e.g. 0.001)", (double)hp->trust_coef);
    for (int i = 0; i < count; i++) {
        const tb_param_view *tv = &tensors[i];
        if (tv->n && (!tv->param || !tv->grad || (need1 && !tv->state1) ||
                      (need2 && !tv->state2) || (need_ts && !tv->tensor_state)))
            return TB_FAIL(TB_ERR_INVALID, "opt_step: tensor %d lacks a buffer this optimizer "
                           "needs", i);
    }
    return TB_OK;
}

int tb_check_dropout(float p)
{
    if (!(p >= 0.0f && p <= 1.0f))
        return TB_FAIL(TB_ERR_INVALID, "dropout probability %g is outside [0, 1]", (double)p);
    return TB_OK;
}

int tb_check_xent(int rows, int classes)
{
    if (rows < 0 || classes < 1)
        return TB_FAIL(TB_ERR_INVALID, "softmax cross-entropy: rows %d, classes %d", rows,
                       classes);
    return TB_OK;
}

int tb_check_cast(tb_dtype dtype, const void *a, const void *b, size_t n, const char *op)
{
    if (dtype != TB_BF16 && dtype != TB_F16)
        return TB_FAIL(TB_ERR_INVALID, "%s: dtype %d is not bf16 or fp16", op, (int)dtype);
    if (n > 0 && (!a || !b))
        return TB_FAIL(TB_ERR_INVALID, "%s: NULL buffer for %zu elements", op, n);
    return TB_OK;
}

int tb_check_layernorm(const char *op, tb_ln_variant variant, const float *x,
                       const float *gamma, int rows, int cols)
{
    if (rows < 0 || cols < 1)
        return TB_FAIL(TB_ERR_INVALID, "%s: rows %d, cols %d", op, rows, cols);
    if (rows > 0 && (!x || !gamma))
        return TB_FAIL(TB_ERR_INVALID, "%s: NULL input or gamma", op);
    if (variant != TB_LN_UNFUSED && variant != TB_LN_FUSED)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown variant %d", op, (int)variant);
    return TB_OK;
}

int tb_check_attention(const char *op, tb_attn_variant variant, const tb_attn_desc *d)
{
    if (!d || d->batch < 1 || d->heads < 1 || d->seq < 1 || d->head_dim < 1)
        return TB_FAIL(TB_ERR_INVALID, "%s: B %d, H %d, T %d, D %d (all must be >= 1)", op,
                       d ? d->batch : 0, d ? d->heads : 0, d ? d->seq : 0,
                       d ? d->head_dim : 0);
    if (variant != TB_ATTN_MANUAL && variant != TB_ATTN_FUSED)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown variant %d", op, (int)variant);
    if (!isfinite(d->scale))
        return TB_FAIL(TB_ERR_INVALID, "%s: scale %g", op, (double)d->scale);
    if ((d->math != TB_MATH_F32 && d->math != TB_MATH_TF32) ||
        (d->lowp != TB_F32 && d->lowp != TB_BF16 && d->lowp != TB_F16))
        return TB_FAIL(TB_ERR_INVALID, "%s: math %d, lowp %d (math F32 or TF32; lowp F32, BF16 "
                       "or F16)", op, (int)d->math, (int)d->lowp);
    if (variant == TB_ATTN_FUSED && (d->math != TB_MATH_F32 || d->lowp != TB_F32))
        return TB_FAIL(TB_ERR_UNSUPPORTED, "%s: the fused variant runs fp32 only (math %d, "
                       "lowp %d asked)", op, (int)d->math, (int)d->lowp);
    return TB_OK;
}

int tb_check_embedding(const char *op, int rows, int seq, int d, int vocab)
{
    if (rows < 0 || seq < 1 || d < 1 || vocab < 1)
        return TB_FAIL(TB_ERR_INVALID, "%s: rows %d, seq %d, d %d, vocab %d (rows >= 0, the "
                       "others >= 1)", op, rows, seq, d, vocab);
    return TB_OK;
}
