/*
 * layer_linear.c - fully connected layer: y = x W^T + b, W is (out, in) as
 * in PyTorch, the input flattened from (C, H, W) to C*H*W features.
 *
 * Forward is one GEMM plus bias_add; backward is two GEMMs (dx = dy W,
 * dW = dy^T x) and bias_grad. dW is written (beta 0) or added to (beta 1)
 * as ctx->grad_accumulate says.
 *
 * Tests: bazel test //lib:gradcheck_test
 */
#include <math.h>

#include "lib/layers.h"

typedef struct linear_layer {
    tb_layer base;
    int in_f, out_f;
    tb_tensor y;        /* (N, out, 1, 1) */
    tb_tensor dx;       /* (N, C, H, W): in features */
    const tb_tensor *x;
} linear_layer;

static int linear_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    linear_layer *li = (linear_layer *)l;
    tb_backend *be = l->ctx->be;
    int n = x->n;
    TB_TRY(tensor_set_batch(&li->y, n));
    TB_TRY(be->gemm(be, 0, 1, n, li->out_f, li->in_f, 1.0f, x->data, li->in_f, l->params[0].w,
                    li->in_f, 0.0f, li->y.data, li->out_f, l->ctx->math));
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
    TB_TRY(be->gemm(be, 1, 0, li->out_f, li->in_f, n, 1.0f, dy->data, li->out_f, li->x->data,
                    li->in_f, acc ? 1.0f : 0.0f, l->params[0].g, li->in_f, l->ctx->math));
    TB_TRY(be->bias_grad(be, dy->data, l->params[1].g, n, li->out_f, acc));
    *dx = NULL;
    if (!l->need_dx)
        return TB_OK;
    TB_TRY(tensor_set_batch(&li->dx, n));
    TB_TRY(be->gemm(be, 0, 0, n, li->in_f, li->out_f, 1.0f, dy->data, li->out_f, l->params[0].w,
                    li->in_f, 0.0f, li->dx.data, li->in_f, l->ctx->math));
    *dx = &li->dx;
    return TB_OK;
}

static int linear_alloc(tb_layer *l, int max_batch)
{
    linear_layer *li = (linear_layer *)l;
    TB_TRY(layer_out_tensor(l, max_batch, &li->y));
    if (l->need_dx)
        TB_TRY(layer_tensor(l, max_batch, l->in, &li->dx));
    return TB_OK;
}

static void linear_release(tb_layer *l)
{
    linear_layer *li = (linear_layer *)l;
    tensor_free(&li->y);
    tensor_free(&li->dx);
}

static const tb_layer_vtbl linear_vtbl = {
    .kind = "linear", .forward = linear_forward, .backward = linear_backward,
    .alloc = linear_alloc, .release = linear_release,
};

int layer_linear_create(tb_layer_ctx *ctx, tb_shape in, int out_features, tb_layer **out)
{
    if (out_features <= 0)
        return TB_FAIL(TB_ERR_INVALID, "linear: %d output features", out_features);
    tb_shape o = {out_features, 1, 1};
    TB_TRY(layer_new(ctx, &linear_vtbl, sizeof(linear_layer), in, o, out));
    linear_layer *li = (linear_layer *)*out;
    li->in_f = (int)shape_numel(in);
    li->out_f = out_features;
    float bound = 1.0f / sqrtf((float)li->in_f);
    layer_add_param(*out, "weight", (size_t)li->in_f * out_features, TB_INIT_UNIFORM, bound);
    layer_add_param(*out, "bias", (size_t)out_features, TB_INIT_UNIFORM, bound);
    return TB_OK;
}
