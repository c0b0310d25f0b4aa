/*
 * layer_bn.c - batch normalization over N and pixels, per channel.
 *
 * Training: batch statistics, running mean/var updated with PyTorch's rule
 * (momentum 0.1, unbiased variance), mean and 1/std saved for backward.
 * Evaluation: running statistics. eps = 1e-5. gamma/beta are parameters
 * (in the flat buffer); running statistics are buffers of the layer. Its
 * input, output and gradients are in the trunk's activation dtype (ctx->act:
 * bf16 under autocast where the backend has it, lib/nn/amp.h); its
 * parameters, statistics and arithmetic stay fp32.
 *
 * Tests: bazel test //lib/nn:gradcheck_test
 */
#include "lib/nn/layers.h"

typedef struct bn_layer {
    tb_layer base;
    float *running_mean, *running_var; /* (C) */
    float *save_mean, *save_invstd;    /* (C) */
    float *rerun_stats;                /* (2C) checkpointing: the running statistics
                                          a recompute updates and drops */
    tb_tensor y;                       /* (N, C, H, W) */
    tb_tensor dx;                      /* (N, C, H, W) */
    const tb_tensor *x;
} bn_layer;

static tb_bn_desc bn_desc(const tb_layer *l, int n)
{
    tb_bn_desc d = {.n = n, .c = l->in.c, .hw = l->in.h * l->in.w, .layout = l->ctx->layout,
                    .eps = 1e-5f, .momentum = 0.1f, .dtype = l->ctx->act};
    return d;
}

static int bn_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    bn_layer *bn = (bn_layer *)l;
    tb_backend *be = l->ctx->be;
    tb_bn_desc d = bn_desc(l, x->n);
    TB_TRY(tb_layer_act_check(l, x));
    TB_TRY(tb_tensor_set_batch(&bn->y, x->n));
    int rerun = l->ctx->acts.recomputing && bn->rerun_stats;
    float *rmean = rerun ? bn->rerun_stats : bn->running_mean;
    float *rvar = rerun ? bn->rerun_stats + l->in.c : bn->running_var;
    if (l->ctx->training)
        TB_TRY(be->bn_fwd_train(be, &d, x->data, l->params[0].w, l->params[1].w, bn->y.data,
                                rmean, rvar, bn->save_mean, bn->save_invstd));
    else
        TB_TRY(be->bn_fwd_infer(be, &d, x->data, l->params[0].w, l->params[1].w,
                                bn->running_mean, bn->running_var, bn->y.data));
    bn->x = x;
    *y = &bn->y;
    return TB_OK;
}

static int bn_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    bn_layer *bn = (bn_layer *)l;
    tb_backend *be = l->ctx->be;
    tb_bn_desc d = bn_desc(l, dy->n);
    TB_TRY(tb_tensor_set_batch(&bn->dx, dy->n));
    TB_TRY(be->bn_bwd(be, &d, bn->x->data, dy->data, l->params[0].w, bn->save_mean,
                      bn->save_invstd, bn->dx.data, l->params[0].g, l->params[1].g,
                      l->ctx->grad_accumulate));
    *dx = &bn->dx;
    return TB_OK;
}

/* running_mean = 0, running_var = 1, as PyTorch starts them. */
static int bn_stats_init(tb_layer *l)
{
    bn_layer *bn = (bn_layer *)l;
    tb_backend *be = l->ctx->be;
    int c = l->in.c;
    float ones[c];
    for (int i = 0; i < c; i++)
        ones[i] = 1.0f;
    TB_TRY(be->memset(be, bn->running_mean, 0, (size_t)c * sizeof(float), NULL));
    return be->copy_h2d(be, bn->running_var, ones, (size_t)c * sizeof(float), NULL);
}

static int bn_alloc(tb_layer *l, int max_batch)
{
    bn_layer *bn = (bn_layer *)l;
    tb_backend *be = l->ctx->be;
    size_t bytes = (size_t)l->in.c * sizeof(float);
    float **bufs[4] = {&bn->running_mean, &bn->running_var, &bn->save_mean, &bn->save_invstd};
    for (int i = 0; i < 4; i++)
        TB_TRY(be->dev_alloc(be, (void **)bufs[i], bytes));
    TB_TRY(bn_stats_init(l));
    if (l->checkpoint)
        TB_TRY(be->dev_alloc(be, (void **)&bn->rerun_stats, 2 * bytes));
    TB_TRY(tb_layer_out_tensor_as(l, max_batch, l->ctx->act, &bn->y));
    return tb_layer_tensor_as(l, max_batch, l->in, l->ctx->act, &bn->dx);
}

static void bn_release(tb_layer *l)
{
    bn_layer *bn = (bn_layer *)l;
    tb_backend *be = l->ctx->be;
    float *bufs[4] = {bn->running_mean, bn->running_var, bn->save_mean, bn->save_invstd};
    for (int i = 0; i < 4; i++)
        if (bufs[i])
            be->dev_free(be, bufs[i]);
    if (bn->rerun_stats)
        be->dev_free(be, bn->rerun_stats);
    tb_tensor_free(&bn->y);
    tb_tensor_free(&bn->dx);
}

/* Per element, training mode, as the formulas read (per-channel work such
 * as 1/sqrt(var + eps) and the running statistics is left out):
 *   forward 8:  the mean's sum 1; the variance's subtract, square, sum 3;
 *               y = (x - mean) * invstd * gamma + beta 4;
 *   backward 9: dbeta = sum dy 1; xhat = (x - mean) * invstd 2, dgamma =
 *               sum dy xhat 2; dx = gamma invstd (dy - dbeta/M - xhat
 *               dgamma/M) 4 (BN always computes dx). */
#define BN_FWD_FLOPS 8
#define BN_BWD_FLOPS 9
static void bn_flops(const tb_layer *l, tb_flops *f)
{
    double n = (double)tb_shape_numel(l->in);
    f->fwd[TB_FLOPS_NORM] += BN_FWD_FLOPS * n;
    f->bwd[TB_FLOPS_NORM] += BN_BWD_FLOPS * n;
}

static const tb_layer_vtbl bn_vtbl = {
    .kind = "batchnorm",
    .forward = bn_forward,
    .backward = bn_backward,
    .alloc = bn_alloc,
    .release = bn_release,
    .flops = bn_flops,
};

int tb_layer_batchnorm_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out)
{
    tb_layer *l;
    TB_TRY(tb_layer_new(ctx, &bn_vtbl, sizeof(bn_layer), in, in, &l));
    tb_layer_add_param(l, "gamma", (size_t)in.c, TB_INIT_ONES, 0);
    tb_layer_add_param(l, "beta", (size_t)in.c, TB_INIT_ZEROS, 0);
    *out = l;
    return TB_OK;
}
