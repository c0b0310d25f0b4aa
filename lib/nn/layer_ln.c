/*
 * layer_ln.c - layer norm over the features of each token (nn.LayerNorm(d),
 * eps 1e-5, gamma 1 and beta 0 at init) on token tensors (1, T, d): the
 * N*T tokens are the rows of the backend's layernorm_fwd / layernorm_bwd.
 *
 * The variant comes from ctx->layernorm at each call: TB_LN_UNFUSED (eager
 * PyTorch's several passes, the default) or TB_LN_FUSED (apex
 * FusedLayerNorm, one pass). Both give the same result within float
 * rounding (lib/backend/cpu/attention_test.c). The row statistics are the layer's own
 * memory, not tb_layer_tensor: the forward writes them under no_grad too.
 *
 * Tests: bazel test //lib/train:transformer_test (float64 gradient check)
 */
#include "lib/nn/layers.h"

#define LN_EPS 1e-5f

typedef struct ln_layer {
    tb_layer base;
    int rows_per_sample, cols;
    tb_tensor y;        /* (N, 1, T, d) */
    tb_tensor dx;       /* (N, 1, T, d) */
    tb_tensor stats;    /* (N, 2, T, 1): row means, then row 1/std, per sample block */
    const tb_tensor *x; /* input of the last forward */
} ln_layer;

/* Means of all N*T rows first, then the 1/std: two (N*T) arrays. */
static float *ln_mean(ln_layer *ln) { return ln->stats.data; }
static float *ln_rstd(ln_layer *ln)
{
    return ln->stats.data + (size_t)ln->stats.cap_n * ln->rows_per_sample;
}

static int ln_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    ln_layer *ln = (ln_layer *)l;
    tb_backend *be = l->ctx->be;
    TB_TRY(tb_tensor_set_batch(&ln->y, x->n));
    TB_TRY(be->layernorm_fwd(be, l->ctx->layernorm, x->data, l->params[0].w, l->params[1].w,
                             LN_EPS, x->n * ln->rows_per_sample, ln->cols, ln->y.data,
                             ln_mean(ln), ln_rstd(ln)));
    ln->x = x;
    *y = &ln->y;
    return TB_OK;
}

static int ln_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    ln_layer *ln = (ln_layer *)l;
    tb_backend *be = l->ctx->be;
    TB_TRY(tb_tensor_set_batch(&ln->dx, dy->n));
    TB_TRY(be->layernorm_bwd(be, l->ctx->layernorm, ln->x->data, dy->data, l->params[0].w,
                             ln_mean(ln), ln_rstd(ln), dy->n * ln->rows_per_sample, ln->cols,
                             ln->dx.data, l->params[0].g, l->params[1].g,
                             l->ctx->grad_accumulate));
    *dx = &ln->dx;
    return TB_OK;
}

static int ln_alloc(tb_layer *l, int max_batch)
{
    ln_layer *ln = (ln_layer *)l;
    TB_TRY(tb_layer_out_tensor(l, max_batch, &ln->y));
    TB_TRY(tb_layer_tensor(l, max_batch, l->in, &ln->dx));
    return tb_tensor_alloc(l->ctx->be, max_batch, 2, ln->rows_per_sample, 1, &ln->stats);
}

static void ln_release(tb_layer *l)
{
    ln_layer *ln = (ln_layer *)l;
    tb_tensor_free(&ln->y);
    tb_tensor_free(&ln->dx);
    tb_tensor_free(&ln->stats);
}

/* Per element of x, the math whichever variant runs it (the fused kernel
 * makes one pass, the unfused several; the count is the same):
 *   forward 7: sum for the mean (1), x - mean (1), square and sum for the
 *     variance (2), times 1/std (1), times gamma plus beta (2);
 *   backward 13: xhat = (x - mean) / std again from the saved statistics
 *     (2), g = dy gamma (1), sum g (1), sum g xhat (2), dgamma += dy xhat
 *     (2), dbeta += dy (1), dx = (g - mean g - xhat mean(g xhat)) / std (4).
 * The per-row scalars (divisions by d, eps, the square root) are O(rows),
 * not counted. The input gradient is always computed (no need_dx skip). */
#define LN_FWD_PER_ELEM 7.0
#define LN_BWD_PER_ELEM 13.0

static void ln_flops(const tb_layer *l, tb_flops *f)
{
    double n = (double)tb_shape_numel(l->in);
    f->fwd[TB_FLOPS_NORM] += LN_FWD_PER_ELEM * n;
    f->bwd[TB_FLOPS_NORM] += LN_BWD_PER_ELEM * n;
}

static const tb_layer_vtbl ln_vtbl = {
    .kind = "layernorm", .forward = ln_forward, .backward = ln_backward,
    .alloc = ln_alloc, .release = ln_release, .flops = ln_flops,
};

int tb_layer_layernorm_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out)
{
    if (in.c < 1 || in.h < 1 || in.w < 1)
        return TB_FAIL(TB_ERR_INVALID, "layernorm: input (%d, %d, %d)", in.c, in.h, in.w);
    TB_TRY(tb_layer_new(ctx, &ln_vtbl, sizeof(ln_layer), in, in, out));
    ln_layer *ln = (ln_layer *)*out;
    ln->rows_per_sample = in.c * in.h;
    ln->cols = in.w;
    tb_layer_add_param(*out, "gamma", (size_t)in.w, TB_INIT_ONES, 0.0f);
    tb_layer_add_param(*out, "beta", (size_t)in.w, TB_INIT_ZEROS, 0.0f);
    return TB_OK;
}
