/*
 * layer_conv.c - 2-D convolution, square r x r filters, bias optional, NCHW
 * or NHWC (ctx->layout; weights KCRS or KRSC to match), fp32 or autocast
 * (ctx->amp, lib/nn/amp.h: x, w and dy in bf16/fp16). Under autocast with
 * low-precision activations (ctx->act) its output and input gradient are
 * bf16 tensors too (the backend writes them so, tb_conv_desc.lowp_out), and
 * a bf16 input or output gradient is taken as it is (no cast). Otherwise
 * outputs are fp32 and x, dy are cast.
 *
 * The backend computes; this file builds the descriptor for the batch at
 * hand and asks tb_conv_algo_lookup (layers.c) for each direction's algorithm:
 * the backend's default, or with the autotuner on the fastest one measured
 * for exactly this descriptor (batch size included). Backward writes or
 * adds the weight gradient as ctx->grad_accumulate says and skips the
 * input gradient for the first layer of a model (nothing needs it).
 *
 * Tests: bazel test //lib/nn:gradcheck_test
 */
#include <math.h>

#include "lib/nn/amp.h"
#include "lib/nn/layers.h"

typedef struct conv_layer {
    tb_layer base;
    int k, r, stride, pad, bias;
    tb_tensor y;        /* (N, K, P, Q) */
    tb_tensor dx;       /* (N, C, H, W) */
    const tb_tensor *x; /* input of the last forward, (N, C, H, W) */
    void *x_lowp;       /* (N, C, H, W) autocast copies: x, w of the last forward, */
    void *w_lowp;       /* (K, C, R, S) reused by backward; */
    void *dy_lowp;      /* (N, K, P, Q) the output gradient. NULL with AMP off */
    const void *x_in;   /* the low-precision x of the last forward: x_lowp or x itself */
    int max_batch;      /* of alloc: x_lowp's size when it is made on first use */
} conv_layer;

static tb_conv_desc conv_desc(const conv_layer *cv, int n)
{
    tb_conv_desc d = {
        .n = n, .c = cv->base.in.c, .h = cv->base.in.h, .w = cv->base.in.w,
        .k = cv->k, .r = cv->r, .s = cv->r, .stride = cv->stride, .pad = cv->pad,
        .layout = cv->base.ctx->layout, .dtype = TB_F32, .math = cv->base.ctx->conv_math,
        .deterministic = cv->base.ctx->conv_deterministic,
    };
    if (tb_amp_on(cv->base.ctx)) {
        d.dtype = cv->base.ctx->amp;
        d.math = TB_MATH_LOWP;
        d.lowp_out = cv->base.ctx->act != TB_F32;
    }
    return d;
}

/* The forward's inputs as the backend takes them: fp32, or their autocast
 * copies (made here; a low-precision x as it is). */
static int conv_inputs(conv_layer *cv, const tb_tensor *x, const float **xin, const float **win)
{
    tb_layer *l = &cv->base;
    *xin = x->data;
    *win = l->params[0].w;
    if (!tb_amp_on(l->ctx))
        return TB_OK;
    if (x->dtype == TB_F32 && !cv->x_lowp) /* low-precision activations: the images */
        TB_TRY(tb_amp_buf_alloc(l, (size_t)cv->max_batch * tb_shape_numel(l->in), &cv->x_lowp));
    if (x->dtype == TB_F32)
        TB_TRY(tb_amp_cast(l->ctx, x->data, cv->x_lowp, tb_tensor_numel(x)));
    else if (x->dtype != l->ctx->amp)
        return TB_FAIL(TB_ERR_INTERNAL, "conv2d %s: input dtype %d under autocast %d", l->name,
                       (int)x->dtype, (int)l->ctx->amp);
    TB_TRY(tb_amp_cast(l->ctx, l->params[0].w, cv->w_lowp, l->params[0].n));
    cv->x_in = x->dtype == TB_F32 ? cv->x_lowp : (const void *)x->data;
    *xin = cv->x_in;
    *win = cv->w_lowp;
    return TB_OK;
}

static float *bias_of(conv_layer *cv, int grad)
{
    if (!cv->bias)
        return NULL;
    return grad ? cv->base.params[1].g : cv->base.params[1].w;
}

static int conv_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    conv_layer *cv = (conv_layer *)l;
    tb_backend *be = l->ctx->be;
    tb_conv_desc d = conv_desc(cv, x->n);
    int algo;
    TB_TRY(tb_conv_algo_lookup(l->ctx, &d, TB_CONV_FWD, &algo));
    TB_TRY(tb_tensor_set_batch(&cv->y, x->n));
    const float *xin, *win;
    TB_TRY(conv_inputs(cv, x, &xin, &win));
    TB_TRY(be->conv_fwd(be, &d, algo, xin, win, bias_of(cv, 0), cv->y.data));
    cv->x = x;
    *y = &cv->y;
    return TB_OK;
}

static int conv_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    conv_layer *cv = (conv_layer *)l;
    tb_backend *be = l->ctx->be;
    tb_conv_desc d = conv_desc(cv, dy->n);
    int algo;
    const float *xin = cv->x->data, *win = l->params[0].w, *dyin = dy->data;
    if (tb_amp_on(l->ctx)) {
        if (dy->dtype == TB_F32 && !cv->dy_lowp)
            return TB_FAIL(TB_ERR_INTERNAL, "conv2d %s: an fp32 output gradient where its "
                           "output is %s", l->name, cv->y.dtype == TB_F32 ? "fp32" : "bf16");
        if (dy->dtype == TB_F32)
            TB_TRY(tb_amp_cast(l->ctx, dy->data, cv->dy_lowp, tb_tensor_numel(dy)));
        xin = cv->x_in;
        win = cv->w_lowp;
        dyin = dy->dtype == TB_F32 ? cv->dy_lowp : dy->data;
    }
    TB_TRY(tb_conv_algo_lookup(l->ctx, &d, TB_CONV_BWD_FILTER, &algo));
    int algo_data = -1;
    if (l->need_dx) {
        TB_TRY(tb_conv_algo_lookup(l->ctx, &d, TB_CONV_BWD_DATA, &algo_data));
        TB_TRY(tb_tensor_set_batch(&cv->dx, dy->n));
    }
    if (l->need_dx && be->conv_bwd) { /* both from one read of dy */
        TB_TRY(be->conv_bwd(be, &d, algo, algo_data, xin, dyin, win, l->params[0].g,
                            bias_of(cv, 1), l->ctx->grad_accumulate, cv->dx.data));
    } else {
        TB_TRY(be->conv_bwd_filter(be, &d, algo, xin, dyin, l->params[0].g, bias_of(cv, 1),
                                   l->ctx->grad_accumulate));
        if (l->need_dx)
            TB_TRY(be->conv_bwd_data(be, &d, algo_data, dyin, win, cv->dx.data));
    }
    *dx = l->need_dx ? &cv->dx : NULL;
    return TB_OK;
}

static int conv_alloc(tb_layer *l, int max_batch)
{
    conv_layer *cv = (conv_layer *)l;
    tb_dtype act = l->ctx->act;
    size_t in = (size_t)max_batch * tb_shape_numel(l->in);
    size_t out = (size_t)max_batch * tb_shape_numel(l->out);
    cv->max_batch = max_batch;
    TB_TRY(tb_layer_out_tensor_as(l, max_batch, act, &cv->y));
    if (l->need_dx)
        TB_TRY(tb_layer_tensor_as(l, max_batch, l->in, act, &cv->dx));
    TB_TRY(tb_amp_buf_alloc(l, l->params[0].n, &cv->w_lowp));
    if (act != TB_F32) /* x_lowp only for an fp32 input (the images: made on
                          first use); no dy_lowp (dy is bf16) */
        return TB_OK;
    TB_TRY(tb_amp_buf_alloc(l, in, &cv->x_lowp));
    return tb_amp_buf_alloc(l, out, &cv->dy_lowp);
}

static void conv_release(tb_layer *l)
{
    conv_layer *cv = (conv_layer *)l;
    tb_tensor_free(&cv->y);
    tb_tensor_free(&cv->dx);
    tb_amp_buf_free(l, &cv->x_lowp);
    tb_amp_buf_free(l, &cv->w_lowp);
    tb_amp_buf_free(l, &cv->dy_lowp);
}

/* Per sample: K C R S P Q multiply-adds (2 FLOPs each; padded taps count
 * too, the usual convention) forward, as many for the filter gradient and
 * again for the data gradient unless need_dx is 0. A bias: one add per
 * output element forward, one per element summed into its gradient. */
static void conv_flops(const tb_layer *l, tb_flops *f)
{
    const conv_layer *cv = (const conv_layer *)l;
    double out = (double)tb_shape_numel(l->out);
    double fl = 2.0 * out * l->in.c * cv->r * cv->r;
    f->fwd[TB_FLOPS_CONV] += fl;
    f->bwd[TB_FLOPS_CONV] += l->need_dx ? 2 * fl : fl;
    if (cv->bias) {
        f->fwd[TB_FLOPS_ELEMENTWISE] += out;
        f->bwd[TB_FLOPS_ELEMENTWISE] += out;
    }
}

static const tb_layer_vtbl conv_vtbl = {
    .kind = "conv2d",
    .forward = conv_forward,
    .backward = conv_backward,
    .alloc = conv_alloc,
    .release = conv_release,
    .flops = conv_flops,
};

int tb_layer_conv2d_create(tb_layer_ctx *ctx, tb_shape in, int k, int r, int stride, int pad,
                        int bias, tb_layer **out)
{
    if (k <= 0 || r <= 0 || stride <= 0 || pad < 0)
        return TB_FAIL(TB_ERR_INVALID, "conv2d: bad k=%d r=%d stride=%d pad=%d", k, r, stride,
                       pad);
    tb_shape o = {k, (in.h + 2 * pad - r) / stride + 1, (in.w + 2 * pad - r) / stride + 1};
    tb_layer *l;
    TB_TRY(tb_layer_new(ctx, &conv_vtbl, sizeof(conv_layer), in, o, &l));
    conv_layer *cv = (conv_layer *)l;
    cv->k = k;
    cv->r = r;
    cv->stride = stride;
    cv->pad = pad;
    cv->bias = bias;
    /* PyTorch's default init: kaiming_uniform(a=sqrt(5)) gives 1/sqrt(fan_in)
     * for the weight, and the bias uses the same bound. */
    float bound = 1.0f / sqrtf((float)(in.c * r * r));
    tb_layer_add_param(l, "weight", (size_t)k * in.c * r * r, TB_INIT_UNIFORM, bound);
    if (bias)
        tb_layer_add_param(l, "bias", (size_t)k, TB_INIT_UNIFORM, bound);
    *out = l;
    return TB_OK;
}
