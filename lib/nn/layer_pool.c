/*
 * layer_pool.c - max and average pooling, and global average pooling.
 *
 * Max pooling keeps the argmax of each output (int32, written by pool_fwd)
 * for backward; average pooling counts padding as zeros (PyTorch's
 * count_include_pad=True). Global average pooling is average pooling with
 * one window over the whole (square) image. Input, output and gradients are
 * in the trunk's activation dtype (ctx->act, lib/nn/amp.h).
 *
 * Tests: bazel test //lib/nn:gradcheck_test
 */
#include <stdio.h>

#include "lib/nn/layers.h"

typedef struct pool_layer {
    tb_layer base;
    tb_pool_kind kind;
    int window, stride, pad;
    tb_tensor y;        /* (N, C, P, Q) */
    tb_tensor dx;       /* (N, C, H, W) */
    int32_t *argmax;    /* (N, C, P, Q); max pooling only */
} pool_layer;

static tb_pool_desc pool_desc(const pool_layer *p, int n)
{
    tb_pool_desc d = {.kind = p->kind, .n = n, .c = p->base.in.c, .h = p->base.in.h,
                      .w = p->base.in.w, .window = p->window, .stride = p->stride,
                      .pad = p->pad, .layout = p->base.ctx->layout,
                      .dtype = p->base.ctx->act};
    return d;
}

static int pool_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    pool_layer *p = (pool_layer *)l;
    tb_pool_desc d = pool_desc(p, x->n);
    TB_TRY(tb_layer_act_check(l, x));
    TB_TRY(tb_tensor_set_batch(&p->y, x->n));
    TB_TRY(l->ctx->be->pool_fwd(l->ctx->be, &d, x->data, p->y.data, p->argmax));
    *y = &p->y;
    return TB_OK;
}

static int pool_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    pool_layer *p = (pool_layer *)l;
    tb_pool_desc d = pool_desc(p, dy->n);
    TB_TRY(tb_tensor_set_batch(&p->dx, dy->n));
    TB_TRY(l->ctx->be->pool_bwd(l->ctx->be, &d, dy->data, p->argmax, p->dx.data));
    *dx = &p->dx;
    return TB_OK;
}

static int pool_alloc(tb_layer *l, int max_batch)
{
    pool_layer *p = (pool_layer *)l;
    TB_TRY(tb_layer_out_tensor_as(l, max_batch, l->ctx->act, &p->y));
    TB_TRY(tb_layer_tensor_as(l, max_batch, l->in, l->ctx->act, &p->dx));
    if (p->kind != TB_POOL_MAX)
        return TB_OK;
    return l->ctx->be->dev_alloc(l->ctx->be, (void **)&p->argmax,
                                 (size_t)max_batch * tb_shape_numel(l->out) * sizeof(int32_t));
}

static void pool_release(tb_layer *l)
{
    pool_layer *p = (pool_layer *)l;
    if (p->argmax)
        l->ctx->be->dev_free(l->ctx->be, p->argmax);
    tb_tensor_free(&p->y);
    tb_tensor_free(&p->dx);
}

/* Per output element, one operation per window tap forward (max: window^2
 * - 1 compares and a store; average: window^2 - 1 adds and the scale);
 * backward, max pooling adds dy once at the argmax, average pooling spreads
 * dy / window^2 over the window (window^2). Global average pooling is the
 * window over the whole image: h w per channel each way. */
static void pool_flops(const tb_layer *l, tb_flops *f)
{
    const pool_layer *p = (const pool_layer *)l;
    double out = (double)tb_shape_numel(l->out), taps = (double)p->window * p->window;
    f->fwd[TB_FLOPS_ELEMENTWISE] += out * taps;
    f->bwd[TB_FLOPS_ELEMENTWISE] += p->kind == TB_POOL_MAX ? out : out * taps;
}

static const tb_layer_vtbl maxpool_vtbl = {
    .kind = "maxpool", .forward = pool_forward, .backward = pool_backward,
    .alloc = pool_alloc, .release = pool_release, .flops = pool_flops,
};

static const tb_layer_vtbl avgpool_vtbl = {
    .kind = "avgpool", .forward = pool_forward, .backward = pool_backward,
    .alloc = pool_alloc, .release = pool_release, .flops = pool_flops,
};

int tb_layer_pool_create(tb_layer_ctx *ctx, tb_shape in, tb_pool_kind kind, int window, int stride,
                      int pad, tb_layer **out)
{
    if (window <= 0 || stride <= 0 || pad < 0 || 2 * pad > window)
        return TB_FAIL(TB_ERR_INVALID, "pool: bad window=%d stride=%d pad=%d", window, stride,
                       pad);
    tb_shape o = {in.c, (in.h + 2 * pad - window) / stride + 1,
                  (in.w + 2 * pad - window) / stride + 1};
    const tb_layer_vtbl *vt = kind == TB_POOL_MAX ? &maxpool_vtbl : &avgpool_vtbl;
    TB_TRY(tb_layer_new(ctx, vt, sizeof(pool_layer), in, o, out));
    pool_layer *p = (pool_layer *)*out;
    p->kind = kind;
    p->window = window;
    p->stride = stride;
    p->pad = pad;
    return TB_OK;
}

int tb_layer_global_avgpool_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out)
{
    if (in.h != in.w)
        return TB_FAIL(TB_ERR_INVALID, "global average pooling needs a square image, got %dx%d",
                       in.h, in.w);
    TB_TRY(tb_layer_pool_create(ctx, in, TB_POOL_AVG, in.h, in.h, 0, out));
    snprintf((*out)->name, sizeof (*out)->name, "global_avgpool");
    return TB_OK;
}
