/*
 * layer_attn.c - multi-head self-attention on token tensors (1, T, d), as
 * nn.MultiheadAttention(d, heads) without dropout: one input projection
 * (weight (3d, d), bias (3d): q, k, v rows in that order, head h at rows
 * h*D of each, D = d / heads), attention, output projection (d, d), (d).
 *
 * The backend's attention wants contiguous (B, H, T, D) tensors, and the
 * tokens arrive as (N*T, d) rows. Instead of a transpose, the projection
 * GEMMs write one head at a time: slice j of the 3H (q, k, v) x heads
 * slices is X W_j^T (N*T x D, dense), so q, k and v land as (H, N, T, D).
 * Attention treats every (batch, head) pair alike, so that is an attention
 * of "batch" H and "heads" N. The output projection reads the (H, N, T, D)
 * result head by head (y = sum_h O_h Wo[:, hD:hD+D]^T, the GEMM's leading
 * dimensions pick the columns). 3H + H GEMMs forward, twice that backward.
 *
 * This is nanoGPT's CausalSelfAttention layout too: c_attn = Linear(d, 3d)
 * whose output splits into q, k, v (rows 0, d, 2d of the weight) and each of
 * those into heads of D (rows h*D), and c_proj = Linear(d, d) on the heads
 * concatenated (columns h*D of Wo), so its weights load as they are.
 *
 * The variant comes from ctx->attention at each call: TB_ATTN_MANUAL (the
 * scores materialized, the default) or TB_ATTN_FUSED (tiled, online
 * softmax). Non-causal (the image transformer) or causal (GPT-2: token t
 * sees tokens <= t; the backend masks, the layer only passes the flag).
 * q, k, v, the attention output and its saved
 * buffer are the layer's own memory (not tb_layer_tensor): the forward needs
 * them under no_grad too. With autocast (ctx->amp, lib/nn/amp.h) the
 * projections' GEMMs are gemm_lowp on bf16/fp16 casts of x, the weights, the
 * attention output, dy and dq/dk/dv (fp32 out), as PyTorch runs c_attn and
 * c_proj; the manual attention's products run on low-precision copies too
 * (mha_call_desc), the fused variant stays fp32 (the backends' kernels are).
 * Under checkpointing (ctx->acts.ckpt_attn) the manual variant's
 * probabilities go to one buffer all attention layers share, and each
 * backward runs its attention forward again to get them back: one
 * (B, H, T, T) buffer instead of one per layer (GPT-2 small at context
 * 1024, batch 4: 201 MB a layer), for one more attention forward a layer.
 *
 * Tests: bazel test //lib/train:transformer_test (float64 gradient check,
 * causal and not), //lib/nn:gpt2_test (causality of the whole model)
 */
#include <math.h>

#include "lib/nn/amp.h"
#include "lib/nn/layers.h"

typedef struct mha_layer {
    tb_layer base;
    int tokens, dim, heads, head_dim;
    int causal;         /* 1: query t attends to keys <= t */
    tb_tensor y;        /* (N, 1, T, d) */
    tb_tensor dx;       /* (N, 1, T, d) */
    tb_tensor qkv;      /* 3H slices (N*T, D): q, k, v each (H, N, T, D) */
    tb_tensor o;        /* (H, N, T, D) attention output */
    tb_tensor dqkv;     /* as qkv */
    tb_tensor dout;     /* as o */
    float *saved;       /* attention_fwd's saved buffer for the largest batch */
    const tb_tensor *x; /* (N, 1, T, d) input of the last forward */
    /* autocast copies (NULL with AMP off): of the last forward's x, W_in,
     * attention output and W_out (reused by backward), and of backward's dy
     * and dq/dk/dv */
    void *x_lowp, *w_in_lowp, *o_lowp, *w_out_lowp, *dy_lowp, *dqkv_lowp;
} mha_layer;

#define MHA_W_IN 0
#define MHA_B_IN 1
#define MHA_W_OUT 2
#define MHA_B_OUT 3

static tb_attn_desc mha_desc(const mha_layer *a, int n)
{
    return (tb_attn_desc){.batch = a->heads, .heads = n, .seq = a->tokens,
                          .head_dim = a->head_dim, .causal = a->causal,
                          .scale = 1.0f / sqrtf((float)a->head_dim)};
}

/* The desc a call of the layer's variant runs: the manual variant's
 * products in the model's GEMM math, and under autocast on copies in its
 * dtype (autocast's bmm; lib/backend/backend.h, tb_attn_desc); the fused
 * variant's kernels are fp32. */
static tb_attn_desc mha_call_desc(const tb_layer *l, int n)
{
    tb_attn_desc desc = mha_desc((const mha_layer *)l, n);
    if (l->ctx->attention == TB_ATTN_MANUAL) {
        desc.math = l->ctx->math == TB_MATH_TF32 ? TB_MATH_TF32 : TB_MATH_F32;
        desc.lowp = tb_amp_on(l->ctx) ? l->ctx->amp : TB_F32;
    }
    return desc;
}

/* Q K^T and P V at batch n: the whole T x T scores (tb_flop_family's rule). */
static double attn_flops(const mha_layer *a, int n)
{
    return 4.0 * n * (double)a->tokens * a->tokens * a->dim;
}

/* Element offset of slice j (of 3H) of a qkv-shaped buffer at batch n
 * (the fp32 buffers through slice, their low-precision copies through
 * tb_amp_at). */
static size_t slice_at(const mha_layer *a, int n, int j)
{
    return (size_t)j * n * a->tokens * a->head_dim;
}

static float *slice(const mha_layer *a, float *base, int n, int j)
{
    return base + slice_at(a, n, j);
}

/* Where attention_fwd keeps what attention_bwd reads: the layer's own
 * buffer, or under checkpointing the manual variant's shared one. */
static float *mha_saved(const mha_layer *a)
{
    const tb_layer_ctx *ctx = a->base.ctx;
    return ctx->acts.ckpt_attn && ctx->attention == TB_ATTN_MANUAL ? ctx->acts.attn_saved
                                                                    : a->saved;
}

/* q, k, v slices: X W_j^T + b_j for each of the 3H slices. */
static int mha_project_in(tb_layer *l, const tb_tensor *x)
{
    mha_layer *a = (mha_layer *)l;
    tb_backend *be = l->ctx->be;
    int rows = x->n * a->tokens, d = a->dim, hd = a->head_dim;
    const float *w = l->params[MHA_W_IN].w;
    if (tb_amp_on(l->ctx)) {
        TB_TRY(tb_amp_cast(l->ctx, x->data, a->x_lowp, (size_t)rows * d));
        TB_TRY(tb_amp_cast(l->ctx, w, a->w_in_lowp, l->params[MHA_W_IN].n));
    }
    for (int j = 0; j < 3 * a->heads; j++) {
        float *c = slice(a, a->qkv.data, x->n, j);
        size_t w_at = (size_t)j * hd * d;
        TB_TRY(tb_amp_gemm_ld(l->ctx, 0, 1, rows, hd, d, x->data, a->x_lowp, d, w + w_at,
                              tb_amp_at(a->w_in_lowp, w_at), d, 0.0f, c, hd));
        TB_TRY(be->bias_add(be, c, l->params[MHA_B_IN].w + (size_t)j * hd, rows, hd));
    }
    return TB_OK;
}

/* y = sum over heads of O_h Wo[:, hD:hD+D]^T, plus the bias. */
static int mha_project_out(tb_layer *l, int n)
{
    mha_layer *a = (mha_layer *)l;
    tb_backend *be = l->ctx->be;
    int rows = n * a->tokens, d = a->dim, hd = a->head_dim;
    const float *w = l->params[MHA_W_OUT].w;
    if (tb_amp_on(l->ctx)) {
        TB_TRY(tb_amp_cast(l->ctx, a->o.data, a->o_lowp, (size_t)rows * d));
        TB_TRY(tb_amp_cast(l->ctx, w, a->w_out_lowp, l->params[MHA_W_OUT].n));
    }
    for (int h = 0; h < a->heads; h++)
        TB_TRY(tb_amp_gemm_ld(l->ctx, 0, 1, rows, d, hd, slice(a, a->o.data, n, h),
                              tb_amp_at(a->o_lowp, slice_at(a, n, h)), hd, w + (size_t)h * hd,
                              tb_amp_at(a->w_out_lowp, (size_t)h * hd), d, h ? 1.0f : 0.0f,
                              a->y.data, d));
    return be->bias_add(be, a->y.data, l->params[MHA_B_OUT].w, rows, d);
}

static int mha_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    mha_layer *a = (mha_layer *)l;
    tb_backend *be = l->ctx->be;
    int n = x->n;
    tb_attn_desc desc = mha_call_desc(l, n);
    double rows = (double)n * a->tokens, d = a->dim;
    TB_TRY(tb_tensor_set_batch(&a->y, n));
    tb_layer_op_begin(l->ctx, "qkv", "qkv_gemm", 0);
    TB_TRY(mha_project_in(l, x));
    TB_TRY(tb_layer_op_end(l->ctx, 2.0 * rows * 3 * d * d, 0));
    tb_layer_op_begin(l->ctx, "attention", "attention", 0);
    TB_TRY(be->attention_fwd(be, l->ctx->attention, &desc, slice(a, a->qkv.data, n, 0),
                             slice(a, a->qkv.data, n, a->heads),
                             slice(a, a->qkv.data, n, 2 * a->heads), a->o.data, mha_saved(a)));
    TB_TRY(tb_layer_op_end(l->ctx, attn_flops(a, n), 0));
    tb_layer_op_begin(l->ctx, "attn_proj", "attn_proj_gemm", 0);
    TB_TRY(mha_project_out(l, n));
    TB_TRY(tb_layer_op_end(l->ctx, 2.0 * rows * d * d, 0));
    a->x = x;
    *y = &a->y;
    return TB_OK;
}

/* Output projection backward: its parameter gradients and dO. */
static int mha_back_out(tb_layer *l, const tb_tensor *dy)
{
    mha_layer *a = (mha_layer *)l;
    tb_backend *be = l->ctx->be;
    int n = dy->n, rows = n * a->tokens, d = a->dim, hd = a->head_dim;
    int acc = l->ctx->grad_accumulate;
    if (tb_amp_on(l->ctx))
        TB_TRY(tb_amp_cast(l->ctx, dy->data, a->dy_lowp, (size_t)rows * d));
    for (int h = 0; h < a->heads; h++) {
        size_t at = slice_at(a, n, h);
        TB_TRY(tb_amp_gemm_ld(l->ctx, 1, 0, d, hd, rows, dy->data, a->dy_lowp, d,
                              slice(a, a->o.data, n, h), tb_amp_at(a->o_lowp, at), hd,
                              acc ? 1.0f : 0.0f, l->params[MHA_W_OUT].g + (size_t)h * hd, d));
        TB_TRY(tb_amp_gemm_ld(l->ctx, 0, 0, rows, hd, d, dy->data, a->dy_lowp, d,
                              l->params[MHA_W_OUT].w + (size_t)h * hd,
                              tb_amp_at(a->w_out_lowp, (size_t)h * hd), d, 0.0f,
                              slice(a, a->dout.data, n, h), hd));
    }
    return be->bias_grad(be, dy->data, l->params[MHA_B_OUT].g, rows, d, acc);
}

/* Input projection backward from dq, dk, dv: parameter gradients and dx. */
static int mha_back_in(tb_layer *l, int n)
{
    mha_layer *a = (mha_layer *)l;
    tb_backend *be = l->ctx->be;
    int rows = n * a->tokens, d = a->dim, hd = a->head_dim;
    int acc = l->ctx->grad_accumulate;
    if (tb_amp_on(l->ctx))
        TB_TRY(tb_amp_cast(l->ctx, a->dqkv.data, a->dqkv_lowp, 3 * (size_t)rows * d));
    for (int j = 0; j < 3 * a->heads; j++) {
        const float *dz = slice(a, a->dqkv.data, n, j);
        const void *dz_lowp = tb_amp_at(a->dqkv_lowp, slice_at(a, n, j));
        size_t w_at = (size_t)j * hd * d;
        TB_TRY(tb_amp_gemm_ld(l->ctx, 1, 0, hd, d, rows, dz, dz_lowp, hd, a->x->data,
                              a->x_lowp, d, acc ? 1.0f : 0.0f, l->params[MHA_W_IN].g + w_at, d));
        TB_TRY(be->bias_grad(be, dz, l->params[MHA_B_IN].g + (size_t)j * hd, rows, hd, acc));
        if (l->need_dx)
            TB_TRY(tb_amp_gemm_ld(l->ctx, 0, 0, rows, d, hd, dz, dz_lowp, hd,
                                  l->params[MHA_W_IN].w + w_at, tb_amp_at(a->w_in_lowp, w_at), d,
                                  j ? 1.0f : 0.0f, a->dx.data, d));
    }
    return TB_OK;
}

static int mha_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    mha_layer *a = (mha_layer *)l;
    tb_backend *be = l->ctx->be;
    int n = dy->n;
    tb_attn_desc desc = mha_call_desc(l, n);
    float *qkv = a->qkv.data, *dqkv = a->dqkv.data;
    double rows = (double)n * a->tokens, d = a->dim;
    tb_layer_op_begin(l->ctx, "attn_proj", "attn_proj_gemm", 1);
    TB_TRY(mha_back_out(l, dy));
    TB_TRY(tb_layer_op_end(l->ctx, 4.0 * rows * d * d, 0));
    tb_layer_op_begin(l->ctx, "attention", "attention", 1);
    float *saved = mha_saved(a);
    int again = saved != a->saved; /* the shared buffer holds the last layer's */
    if (again) /* the same inputs: the same o and probabilities as the forward */
        TB_TRY(be->attention_fwd(be, l->ctx->attention, &desc, slice(a, qkv, n, 0),
                                 slice(a, qkv, n, a->heads), slice(a, qkv, n, 2 * a->heads),
                                 a->o.data, saved));
    TB_TRY(be->attention_bwd(be, l->ctx->attention, &desc, slice(a, qkv, n, 0),
                             slice(a, qkv, n, a->heads), slice(a, qkv, n, 2 * a->heads), a->o.data,
                             a->dout.data, saved, slice(a, dqkv, n, 0),
                             slice(a, dqkv, n, a->heads), slice(a, dqkv, n, 2 * a->heads)));
    TB_TRY(tb_layer_op_end(l->ctx, (again ? 3.0 : 2.0) * attn_flops(a, n), 0));
    if (l->need_dx)
        TB_TRY(tb_tensor_set_batch(&a->dx, n));
    tb_layer_op_begin(l->ctx, "qkv", "qkv_gemm", 1);
    TB_TRY(mha_back_in(l, n));
    TB_TRY(tb_layer_op_end(l->ctx, (l->need_dx ? 4.0 : 2.0) * rows * 3 * d * d, 0));
    *dx = l->need_dx ? &a->dx : NULL;
    return TB_OK;
}

/* The saved buffer for the larger of the two variants, so the toggle can
 * change between steps. */
static int mha_alloc_saved(mha_layer *a, int max_batch)
{
    tb_backend *be = a->base.ctx->be;
    tb_act_mem *am = &a->base.ctx->acts;
    tb_attn_desc desc = mha_desc(a, max_batch);
    size_t manual = 0, fused = 0;
    TB_TRY(be->attention_workspace(be, TB_ATTN_MANUAL, &desc, &manual, NULL));
    TB_TRY(be->attention_workspace(be, TB_ATTN_FUSED, &desc, &fused, NULL));
    if (!am->ckpt_attn)
        return be->dev_alloc(be, (void **)&a->saved, manual > fused ? manual : fused);
    /* checkpointing: the manual probabilities go to the shared buffer, the
     * fused variant's row statistics stay the layer's own */
    if (manual > am->attn_saved_bytes) {
        if (am->attn_saved)
            be->dev_free(be, am->attn_saved);
        am->attn_saved = NULL;
        am->attn_saved_bytes = 0;
        TB_TRY(be->dev_alloc(be, (void **)&am->attn_saved, manual));
        am->attn_saved_bytes = manual;
    }
    return be->dev_alloc(be, (void **)&a->saved, fused > 0 ? fused : 1);
}


/* Frees the autocast copies (none with AMP off). */
static void mha_lowp_free(tb_layer *l)
{
    mha_layer *a = (mha_layer *)l;
    void **lowp[] = {&a->x_lowp, &a->w_in_lowp, &a->o_lowp, &a->w_out_lowp, &a->dy_lowp,
                     &a->dqkv_lowp};
    for (size_t i = 0; i < sizeof lowp / sizeof *lowp; i++)
        tb_amp_buf_free(l, lowp[i]);
}

static int mha_alloc(tb_layer *l, int max_batch)
{
    mha_layer *a = (mha_layer *)l;
    tb_backend *be = l->ctx->be;
    tb_shape qkv = {3, a->tokens, a->dim};
    TB_TRY(tb_layer_out_tensor(l, max_batch, &a->y));
    if (l->need_dx)
        TB_TRY(tb_layer_tensor(l, max_batch, l->in, &a->dx));
    TB_TRY(tb_tensor_alloc(be, max_batch, 3, a->tokens, a->dim, &a->qkv));
    TB_TRY(tb_tensor_alloc(be, max_batch, 1, a->tokens, a->dim, &a->o));
    TB_TRY(tb_layer_tensor(l, max_batch, qkv, &a->dqkv));
    TB_TRY(tb_layer_tensor(l, max_batch, l->in, &a->dout));
    if (!a->saved)
        TB_TRY(mha_alloc_saved(a, max_batch));
    size_t rows_d = (size_t)max_batch * a->tokens * a->dim;
    mha_lowp_free(l); /* a second alloc (a larger batch) replaces them */
    TB_TRY(tb_amp_buf_alloc(l, rows_d, &a->x_lowp));
    TB_TRY(tb_amp_buf_alloc(l, l->params[MHA_W_IN].n, &a->w_in_lowp));
    TB_TRY(tb_amp_buf_alloc(l, rows_d, &a->o_lowp));
    TB_TRY(tb_amp_buf_alloc(l, l->params[MHA_W_OUT].n, &a->w_out_lowp));
    TB_TRY(tb_amp_buf_alloc(l, rows_d, &a->dy_lowp));
    return tb_amp_buf_alloc(l, 3 * rows_d, &a->dqkv_lowp);
}

static void mha_release(tb_layer *l)
{
    mha_layer *a = (mha_layer *)l;
    tb_tensor_free(&a->y);
    tb_tensor_free(&a->dx);
    tb_tensor_free(&a->qkv);
    tb_tensor_free(&a->o);
    tb_tensor_free(&a->dqkv);
    tb_tensor_free(&a->dout);
    if (a->saved)
        l->ctx->be->dev_free(l->ctx->be, a->saved);
    a->saved = NULL;
    mha_lowp_free(l);
}

/* Softmax of the attention scores, per score (H x T x T of them per
 * sample): forward scale, max, subtract, exp, sum, divide (6); backward
 * dP * P, its row sum, subtract, times P, scale (5). */
#define SOFTMAX_FWD_PER_SCORE 6.0
#define SOFTMAX_BWD_PER_SCORE 5.0

/* One sample, T tokens of d features, H heads:
 *   GEMM:      forward the input projection 2 T d 3d and the output one
 *              2 T d d (8 T d^2); backward their weight gradients (the
 *              same 8 T d^2), dO (2 T d^2) and, unless need_dx == 0, dx
 *              from dq, dk, dv (6 T d^2);
 *   ATTENTION: Q K^T and P V, 2 T T d each forward (over all heads: H
 *              heads of d/H); backward dP, dV, dQ, dK, 2 T T d each. The
 *              whole T x T matrix, causal or not (PaLM's convention);
 *   ELEMENTWISE: the softmax per score (above), the 4d biases per token
 *              forward (bias add) and backward (bias gradient). */
static void mha_flops(const tb_layer *l, tb_flops *f)
{
    const mha_layer *a = (const mha_layer *)l;
    double t = a->tokens, d = a->dim, scores = (double)a->heads * t * t;
    f->fwd[TB_FLOPS_GEMM] += 8.0 * t * d * d;
    f->bwd[TB_FLOPS_GEMM] += (l->need_dx ? 16.0 : 10.0) * t * d * d;
    f->fwd[TB_FLOPS_ATTENTION] += 4.0 * t * t * d;
    f->bwd[TB_FLOPS_ATTENTION] += 8.0 * t * t * d;
    f->fwd[TB_FLOPS_ELEMENTWISE] += SOFTMAX_FWD_PER_SCORE * scores + 4.0 * t * d;
    f->bwd[TB_FLOPS_ELEMENTWISE] += SOFTMAX_BWD_PER_SCORE * scores + 4.0 * t * d;
}

static const tb_layer_vtbl mha_vtbl = {
    .kind = "mha", .forward = mha_forward, .backward = mha_backward,
    .alloc = mha_alloc, .release = mha_release, .flops = mha_flops,
};

int tb_layer_mha_create(tb_layer_ctx *ctx, tb_shape in, int heads, tb_layer **out)
{
    return tb_layer_mha_causal_create(ctx, in, heads, 0, out);
}

int tb_layer_mha_causal_create(tb_layer_ctx *ctx, tb_shape in, int heads, int causal,
                               tb_layer **out)
{
    if (in.c != 1 || heads < 1 || in.w % heads)
        return TB_FAIL(TB_ERR_INVALID, "mha: input (%d, %d, %d) is not (1, T, d) with d a "
                       "multiple of %d heads", in.c, in.h, in.w, heads);
    TB_TRY(tb_layer_new(ctx, &mha_vtbl, sizeof(mha_layer), in, in, out));
    mha_layer *a = (mha_layer *)*out;
    a->tokens = in.h;
    a->dim = in.w;
    a->heads = heads;
    a->head_dim = in.w / heads;
    a->causal = !!causal;
    float bound = 1.0f / sqrtf((float)in.w);
    size_t d = (size_t)in.w;
    tb_layer_add_param(*out, "weight", 3 * d * d, TB_INIT_UNIFORM, bound);
    tb_layer_add_param(*out, "bias", 3 * d, TB_INIT_UNIFORM, bound);
    tb_layer_add_param(*out, "weight", d * d, TB_INIT_UNIFORM, bound);
    tb_layer_add_param(*out, "bias", d, TB_INIT_UNIFORM, bound);
    return TB_OK;
}
