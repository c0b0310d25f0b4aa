/*
 * layer_linear.c - fully connected layer: y = x W^T + b, W is (out, in) as
 * in PyTorch, the input flattened from (C, H, W) to C*H*W features.
 *
 * Forward is one GEMM plus bias_add; backward is two GEMMs (dx = dy W,
 * dW = dy^T x) and bias_grad. dW is written (beta 0) or added to (beta 1)
 * as ctx->grad_accumulate says. With autocast (ctx->amp, lib/nn/amp.h) the
 * three GEMMs are gemm_lowp on bf16/fp16 casts of x, W and dy (fp32 out);
 * a bf16 input (the conv trunk's, ctx->act) is taken as it is, and its
 * gradient is rounded to bf16 for the trunk. The output stays fp32.
 * An NHWC input is flattened as (h, w, c): the model permutes the weight's
 * columns to match (model.c), so both layouts compute the same function.
 *
 * Tests: bazel test //lib/nn:gradcheck_test
 */
#include <math.h>

#include "lib/nn/amp.h"
#include "lib/nn/layers.h"

typedef struct linear_layer {
    tb_layer base;
    int in_f, out_f;
    tb_tensor y;        /* (N, out, 1, 1) */
    tb_tensor dx;       /* (N, C, H, W): in features */
    const tb_tensor *x;
    void *x_lowp;       /* (N, in) autocast copies of x and W of the last */
    void *w_lowp;       /* (out, in) forward, and of dy; NULL with AMP off */
    void *dy_lowp;      /* (N, out) */
    const void *x_in;   /* x_lowp, or a low-precision x itself */
    tb_tensor dx_lowp;  /* (N, C, H, W) dx rounded for a low-precision input;
                           allocated with bf16 activations (ctx->act) only */
} linear_layer;

static int linear_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    linear_layer *li = (linear_layer *)l;
    tb_backend *be = l->ctx->be;
    int n = x->n;
    TB_TRY(tb_tensor_set_batch(&li->y, n));
    li->x_in = li->x_lowp;
    if (x->dtype != TB_F32 && x->dtype != l->ctx->amp)
        return TB_FAIL(TB_ERR_INTERNAL, "linear %s: input dtype %d under autocast %d", l->name,
                       (int)x->dtype, (int)l->ctx->amp);
    if (tb_amp_on(l->ctx)) {
        if (x->dtype == TB_F32)
            TB_TRY(tb_amp_cast(l->ctx, x->data, li->x_lowp, tb_tensor_numel(x)));
        else
            li->x_in = x->data;
        TB_TRY(tb_amp_cast(l->ctx, l->params[0].w, li->w_lowp, l->params[0].n));
    }
    TB_TRY(tb_amp_gemm(l->ctx, 0, 1, n, li->out_f, li->in_f, x->data, li->x_in, l->params[0].w,
                       li->w_lowp, 0.0f, li->y.data));
    TB_TRY(be->bias_add(be, li->y.data, l->params[1].w, n, li->out_f));
    li->x = x;
    *y = &li->y;
    return TB_OK;
}

static int linear_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    linear_layer *li = (linear_layer *)l;
    tb_backend *be = l->ctx->be;
    int n = dy->n, acc = l->ctx->grad_accumulate;
    if (tb_amp_on(l->ctx))
        TB_TRY(tb_amp_cast(l->ctx, dy->data, li->dy_lowp, tb_tensor_numel(dy)));
    TB_TRY(tb_amp_gemm(l->ctx, 1, 0, li->out_f, li->in_f, n, dy->data, li->dy_lowp, li->x->data,
                       li->x_in, acc ? 1.0f : 0.0f, l->params[0].g));
    TB_TRY(be->bias_grad(be, dy->data, l->params[1].g, n, li->out_f, acc));
    *dx = NULL;
    if (!l->need_dx)
        return TB_OK;
    TB_TRY(tb_tensor_set_batch(&li->dx, n));
    TB_TRY(tb_amp_gemm(l->ctx, 0, 0, n, li->in_f, li->out_f, dy->data, li->dy_lowp, l->params[0].w,
                       li->w_lowp, 0.0f, li->dx.data));
    *dx = &li->dx;
    if (li->x->dtype == TB_F32)
        return TB_OK;
    if (!li->dx_lowp.data)
        return TB_FAIL(TB_ERR_INTERNAL, "linear %s: a low-precision input without bf16 "
                       "activations", l->name);
    TB_TRY(tb_tensor_set_batch(&li->dx_lowp, n));
    TB_TRY(tb_amp_cast(l->ctx, li->dx.data, li->dx_lowp.data, tb_tensor_numel(&li->dx)));
    *dx = &li->dx_lowp;
    return TB_OK;
}

static int linear_alloc(tb_layer *l, int max_batch)
{
    linear_layer *li = (linear_layer *)l;
    TB_TRY(tb_layer_out_tensor(l, max_batch, &li->y));
    if (l->need_dx)
        TB_TRY(tb_layer_tensor(l, max_batch, l->in, &li->dx));
    if (l->need_dx && l->ctx->act != TB_F32)
        TB_TRY(tb_layer_tensor_as(l, max_batch, l->in, l->ctx->act, &li->dx_lowp));
    TB_TRY(tb_amp_buf_alloc(l, (size_t)max_batch * li->in_f, &li->x_lowp));
    TB_TRY(tb_amp_buf_alloc(l, l->params[0].n, &li->w_lowp));
    return tb_amp_buf_alloc(l, (size_t)max_batch * li->out_f, &li->dy_lowp);
}

static void linear_release(tb_layer *l)
{
    linear_layer *li = (linear_layer *)l;
    tb_tensor_free(&li->y);
    tb_tensor_free(&li->dx);
    tb_tensor_free(&li->dx_lowp);
    tb_amp_buf_free(l, &li->x_lowp);
    tb_amp_buf_free(l, &li->w_lowp);
    tb_amp_buf_free(l, &li->dy_lowp);
}

/* Per sample: in x out multiply-adds forward, as many for dW and for dx
 * (unless need_dx is 0); the bias: one add per output each way. */
static void linear_flops(const tb_layer *l, tb_flops *f)
{
    const linear_layer *li = (const linear_layer *)l;
    double fl = 2.0 * li->in_f * li->out_f;
    f->fwd[TB_FLOPS_GEMM] += fl;
    f->bwd[TB_FLOPS_GEMM] += l->need_dx ? 2 * fl : fl;
    f->fwd[TB_FLOPS_ELEMENTWISE] += li->out_f;
    f->bwd[TB_FLOPS_ELEMENTWISE] += li->out_f;
}

static const tb_layer_vtbl linear_vtbl = {
    .kind = "linear", .forward = linear_forward, .backward = linear_backward,
    .alloc = linear_alloc, .release = linear_release, .flops = linear_flops,
};

int tb_layer_linear_create(tb_layer_ctx *ctx, tb_shape in, int out_features, tb_layer **out)
{
    if (out_features <= 0)
        return TB_FAIL(TB_ERR_INVALID, "linear: %d output features", out_features);
    tb_shape o = {out_features, 1, 1};
    TB_TRY(tb_layer_new(ctx, &linear_vtbl, sizeof(linear_layer), in, o, out));
    linear_layer *li = (linear_layer *)*out;
    li->in_f = (int)tb_shape_numel(in);
    li->out_f = out_features;
    float bound = 1.0f / sqrtf((float)li->in_f);
    tb_layer_add_param(*out, "weight", (size_t)li->in_f * out_features, TB_INIT_UNIFORM, bound);
    tb_layer_add_param(*out, "bias", (size_t)out_features, TB_INIT_UNIFORM, bound);
    return TB_OK;
}
