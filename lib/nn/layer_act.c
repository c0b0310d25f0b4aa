/*
 * layer_act.c - element-wise layers: ReLU, GELU (fused or unfused), dropout.
 *
 * ReLU keeps its output (relu_bwd masks on y > 0); GELU keeps its input
 * (gelu' needs x); dropout keeps its mask. The GELU variant is read from
 * ctx->gelu at every call, so one model runs either way (the fused GELU
 * toggle); its form from ctx->gelu_approx (exact erf, or GPT-2's tanh),
 * which the model fixes when it is built. Dropout draws its mask from
 * (ctx->dropout_seed, offset): each layer starts at its own offset region
 * and moves on by the element count per forward, so masks never repeat and
 * never depend on the thread count. ReLU's input, output and gradients are
 * in the trunk's activation dtype (ctx->act, lib/nn/amp.h); GELU and
 * dropout, which follow linear layers, stay fp32.
 *
 * Tests: bazel test //lib/nn:gradcheck_test
 */
#include "lib/nn/layers.h"

typedef struct act_layer {
    tb_layer base;
    tb_tensor y;          /* (N, C, H, W) */
    tb_tensor dx;         /* (N, C, H, W) */
    const tb_tensor *x;   /* GELU: input of the last forward */
    float p;              /* dropout probability */
    uint8_t *mask;        /* dropout: (N, C, H, W) */
    uint64_t offset;      /* dropout: next counter value */
    int identity;         /* dropout ran as the identity (evaluation or p == 0) */
} act_layer;

static int act_alloc(tb_layer *l, int max_batch)
{
    act_layer *a = (act_layer *)l;
    TB_TRY(tb_layer_out_tensor(l, max_batch, &a->y));
    return tb_layer_tensor(l, max_batch, l->in, &a->dx);
}

static int relu_alloc(tb_layer *l, int max_batch)
{
    act_layer *a = (act_layer *)l;
    TB_TRY(tb_layer_out_tensor_as(l, max_batch, l->ctx->act, &a->y));
    return tb_layer_tensor_as(l, max_batch, l->in, l->ctx->act, &a->dx);
}

static void act_release(tb_layer *l)
{
    act_layer *a = (act_layer *)l;
    if (a->mask)
        l->ctx->be->dev_free(l->ctx->be, a->mask);
    tb_tensor_free(&a->y);
    tb_tensor_free(&a->dx);
}

/* Sets the batch of y and dx-to-be for an input of n samples. */
static int act_prepare(act_layer *a, int n)
{
    TB_TRY(tb_tensor_set_batch(&a->y, n));
    return tb_tensor_set_batch(&a->dx, n);
}

/* ---- ReLU ---- */
static int relu_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    act_layer *a = (act_layer *)l;
    TB_TRY(tb_layer_act_check(l, x));
    TB_TRY(act_prepare(a, x->n));
    TB_TRY(tb_act_relu_fwd(l->ctx, x->data, a->y.data, tb_tensor_numel(x)));
    *y = &a->y;
    return TB_OK;
}

static int relu_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    act_layer *a = (act_layer *)l;
    TB_TRY(tb_act_relu_bwd(l->ctx, a->y.data, dy->data, a->dx.data, tb_tensor_numel(dy)));
    *dx = &a->dx;
    return TB_OK;
}

/* One operation per element each way (max(x, 0); dy where y > 0). */
static void relu_flops(const tb_layer *l, tb_flops *f)
{
    double n = (double)tb_shape_numel(l->in);
    f->fwd[TB_FLOPS_ELEMENTWISE] += n;
    f->bwd[TB_FLOPS_ELEMENTWISE] += n;
}

static const tb_layer_vtbl relu_vtbl = {
    .kind = "relu", .forward = relu_forward, .backward = relu_backward,
    .alloc = relu_alloc, .release = act_release, .flops = relu_flops,
};

int tb_layer_relu_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out)
{
    return tb_layer_new(ctx, &relu_vtbl, sizeof(act_layer), in, in, out);
}

/* ---- GELU ---- */
static int gelu_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    act_layer *a = (act_layer *)l;
    tb_backend *be = l->ctx->be;
    TB_TRY(act_prepare(a, x->n));
    if (l->ctx->gelu_approx == TB_GELU_TANH)
        TB_TRY(be->gelu_tanh_fwd(be, l->ctx->gelu, x->data, a->y.data, tb_tensor_numel(x)));
    else
        TB_TRY(be->gelu_fwd(be, l->ctx->gelu, x->data, a->y.data, tb_tensor_numel(x)));
    a->x = x;
    *y = &a->y;
    return TB_OK;
}

static int gelu_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    act_layer *a = (act_layer *)l;
    tb_backend *be = l->ctx->be;
    if (l->ctx->gelu_approx == TB_GELU_TANH)
        TB_TRY(be->gelu_tanh_bwd(be, l->ctx->gelu, a->x->data, dy->data, a->dx.data,
                                 tb_tensor_numel(dy)));
    else
        TB_TRY(be->gelu_bwd(be, l->ctx->gelu, a->x->data, dy->data, a->dx.data,
                            tb_tensor_numel(dy)));
    *dx = &a->dx;
    return TB_OK;
}

/* GELU per element, a transcendental (erf, exp, tanh) counting one FLOP;
 * the fused and unfused variants run the same math and count the same.
 * Exact form, y = 0.5 x (1 + erf(x / sqrt 2)):
 *   forward 5: x / sqrt 2, erf, + 1, times x, times 0.5;
 *   backward 11: dy (Phi(x) + x phi(x)) with Phi = 0.5 (1 + erf(x / sqrt 2))
 *     (4), phi = exp(-x^2 / 2) / sqrt(2 pi) (x^2, times -0.5, exp, times
 *     the constant: 4), x phi (1), the sum (1), times dy (1).
 * Tanh form, y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3):
 *   forward 9: x^3 (2), times 0.044715 (1), + x (1), times sqrt(2/pi) (1),
 *     tanh (1), + 1 (1), times x (1), times 0.5 (1);
 *   backward 18: dy (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 *
 *     0.044715 x^2)) with t = tanh(u) again (u from x^2 and x^3: 5, tanh
 *     1), 0.5 (1 + t) (2), 1 - t^2 (2), sqrt(2/pi) (1 + 0.134145 x^2) with
 *     x^2 reused (3), 0.5 x (1), the product of three factors (2), the sum
 *     (1), times dy (1). */
#define GELU_ERF_FWD 5.0
#define GELU_ERF_BWD 11.0
#define GELU_TANH_FWD 9.0
#define GELU_TANH_BWD 18.0

static void gelu_flops(const tb_layer *l, tb_flops *f)
{
    double n = (double)tb_shape_numel(l->in);
    int tanh_form = l->ctx->gelu_approx == TB_GELU_TANH;
    f->fwd[TB_FLOPS_ELEMENTWISE] += (tanh_form ? GELU_TANH_FWD : GELU_ERF_FWD) * n;
    f->bwd[TB_FLOPS_ELEMENTWISE] += (tanh_form ? GELU_TANH_BWD : GELU_ERF_BWD) * n;
}

static const tb_layer_vtbl gelu_vtbl = {
    .kind = "gelu", .forward = gelu_forward, .backward = gelu_backward,
    .alloc = act_alloc, .release = act_release, .flops = gelu_flops,
};

int tb_layer_gelu_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out)
{
    if (ctx->gelu_approx != TB_GELU_ERF && ctx->gelu_approx != TB_GELU_TANH)
        return TB_FAIL(TB_ERR_INVALID, "gelu: unknown form %d", (int)ctx->gelu_approx);
    if (ctx->gelu_approx == TB_GELU_TANH && (!ctx->be->gelu_tanh_fwd || !ctx->be->gelu_tanh_bwd))
        return TB_FAIL(TB_ERR_UNSUPPORTED, "gelu: the %s backend has no tanh GELU",
                       ctx->be->name);
    return tb_layer_new(ctx, &gelu_vtbl, sizeof(act_layer), in, in, out);
}

/* ---- dropout ---- */
static int dropout_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    act_layer *a = (act_layer *)l;
    tb_backend *be = l->ctx->be;
    size_t n = tb_tensor_numel(x);
    TB_TRY(act_prepare(a, x->n));
    a->identity = !l->ctx->training || a->p == 0.0f;
    if (a->identity) {
        *y = x;
        return TB_OK;
    }
    TB_TRY(be->dropout_fwd(be, a->p, l->ctx->dropout_seed, a->offset, x->data, a->y.data,
                           a->mask, n));
    a->offset += n;
    *y = &a->y;
    return TB_OK;
}

static int dropout_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    act_layer *a = (act_layer *)l;
    if (a->identity) {
        *dx = dy;
        return TB_OK;
    }
    TB_TRY(l->ctx->be->dropout_bwd(l->ctx->be, a->p, a->mask, dy->data, a->dx.data,
                                   tb_tensor_numel(dy)));
    *dx = &a->dx;
    return TB_OK;
}

static int dropout_alloc(tb_layer *l, int max_batch)
{
    act_layer *a = (act_layer *)l;
    TB_TRY(act_alloc(l, max_batch));
    return l->ctx->be->dev_alloc(l->ctx->be, (void **)&a->mask,
                                 (size_t)max_batch * tb_shape_numel(l->in));
}

/* In training with p > 0, one multiply per element each way (x or dy
 * times the mask's 0 or 1 / (1 - p)); drawing the mask is not arithmetic
 * on the data. p == 0 runs the identity: nothing. */
static void dropout_flops(const tb_layer *l, tb_flops *f)
{
    const act_layer *a = (const act_layer *)l;
    if (a->p == 0.0f)
        return;
    double n = (double)tb_shape_numel(l->in);
    f->fwd[TB_FLOPS_ELEMENTWISE] += n;
    f->bwd[TB_FLOPS_ELEMENTWISE] += n;
}

static const tb_layer_vtbl dropout_vtbl = {
    .kind = "dropout", .forward = dropout_forward, .backward = dropout_backward,
    .alloc = dropout_alloc, .release = act_release, .flops = dropout_flops,
};

int tb_layer_dropout_create(tb_layer_ctx *ctx, tb_shape in, float p, tb_layer **out)
{
    if (!(p >= 0.0f && p < 1.0f))
        return TB_FAIL(TB_ERR_INVALID, "dropout probability %g not in [0, 1)", (double)p);
    TB_TRY(tb_layer_new(ctx, &dropout_vtbl, sizeof(act_layer), in, in, out));
    act_layer *a = (act_layer *)*out;
    a->p = p;
    /* Each dropout layer of a model gets its own 2^40-element counter
     * region, numbered in creation order: the same model built twice draws
     * the same masks. */
    a->offset = (uint64_t)ctx->dropout_layers++ << 40;
    return TB_OK;
}
