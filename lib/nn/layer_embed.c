/*
 * layer_embed.c - GPT-2's input and output ends: the token + position
 * embedding, and the vocabulary head tied to the token embedding.
 *
 * Embedding: (1, T, 1) int32 token ids (the input tensor's dtype is TB_I32;
 * its data pointer holds int32) -> (1, T, d), y = wte[token] + wpe[t], with
 * parameters wte (vocab, d) then wpe (context, d), both N(0, 0.02^2) as
 * GPT-2 and nanoGPT initialize them; T <= context. One embedding_fwd over
 * the N*T rows forward, one embedding_bwd backward (lib/backend/backend.h).
 * Token ids have no gradient: backward returns dx NULL. dwpe is written or
 * added as ctx->grad_accumulate says; rows T .. context-1 of dwpe get no
 * gradient at this T and are zeroed when writing (the backend op touches
 * rows [0, T) only; a second call on no rows zeroes them). dwte likewise,
 * except under a tied head: the head's backward runs first and writes (or
 * adds) dwte, so the embedding always adds.
 *
 * Tied head: (1, T, d) -> (1, T, vocab) logits = x wte^T, no bias and no
 * parameters of its own: it reads the embedding's wte (w and g, bound by
 * then) at every call, so one tensor and one gradient serve both ends
 * (124,439,808 parameters for GPT-2 small instead of 163 M). Backward:
 * dwte = (or +=, ctx->grad_accumulate) dlogits^T x, and dx = dlogits wte.
 * Under autocast (ctx->amp, lib/nn/amp.h) the three GEMMs run as
 * layer_linear.c's do: gemm_lowp on bf16/fp16 copies of x, wte (cast once
 * per forward) and dlogits, fp32 out, through the same tb_amp_gemm.
 *
 * FLOPs per sample (vtbl->flops): the embedding's adds are element-wise,
 * T*d forward and 2*T*d backward (one add per element of dy into each
 * table); the head is a GEMM, 2*T*d*V forward, 2*T*d*V for dwte backward
 * plus 2*T*d*V for dx when need_dx.
 *
 * Tests: bazel test //lib/nn:embed_test (float64 finite differences of
 * both layers, alone and tied, grad_accumulate 0 and 1)
 */
#include <string.h>

#include "lib/nn/amp.h"
#include "lib/nn/layers.h"

#define GPT2_INIT_STD 0.02f

/* ---- token + position embedding ---- */
typedef struct embed_layer {
    tb_layer base;
    int vocab, dim, context, seq; /* seq: T of the input, <= context */
    int tied;                     /* a tied head writes or adds dwte first */
    tb_tensor y;                  /* (N, 1, T, d) */
    const tb_tensor *x;           /* (N, 1, T, 1) int32 ids of the last forward */
} embed_layer;

static int embed_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    embed_layer *e = (embed_layer *)l;
    tb_backend *be = l->ctx->be;
    if (x->dtype != TB_I32 || x->c != 1 || x->h != e->seq || x->w != 1)
        return TB_FAIL(TB_ERR_INVALID, "embedding: input (%d, %d, %d) of dtype %d, want "
                       "(1, %d, 1) int32 token ids (TB_I32)", x->c, x->h, x->w, (int)x->dtype,
                       e->seq);
    TB_TRY(tb_tensor_set_batch(&e->y, x->n));
    TB_TRY(be->embedding_fwd(be, (const int32_t *)x->data, l->params[0].w, l->params[1].w,
                             x->n * e->seq, e->seq, e->dim, e->vocab, e->y.data));
    e->x = x;
    *y = &e->y;
    return TB_OK;
}

static int embed_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    embed_layer *e = (embed_layer *)l;
    tb_backend *be = l->ctx->be;
    int acc = l->ctx->grad_accumulate;
    *dx = NULL;
    TB_TRY(be->embedding_bwd(be, (const int32_t *)e->x->data, dy->data, dy->n * e->seq, e->seq,
                             e->dim, e->vocab, l->params[0].g, e->tied || acc, l->params[1].g,
                             acc));
    if (acc || e->seq == e->context)
        return TB_OK;
    /* Rows T .. context-1 of dwpe: zeroed by the op itself, called on no
     * rows with those rows as its position table (write mode) and dwte
     * left alone (add mode, nothing to add): on the backend's compute
     * stream, where be->memset without a stream would wait for the device
     * (and break CUDA graph capture). */
    return be->embedding_bwd(be, (const int32_t *)e->x->data, dy->data, 0,
                             e->context - e->seq, e->dim, e->vocab, l->params[0].g, 1,
                             l->params[1].g + (size_t)e->seq * e->dim, 0);
}

static int embed_alloc(tb_layer *l, int max_batch)
{
    return tb_layer_out_tensor(l, max_batch, &((embed_layer *)l)->y);
}

static void embed_release(tb_layer *l) { tb_tensor_free(&((embed_layer *)l)->y); }

static void embed_flops(const tb_layer *l, tb_flops *f)
{
    const embed_layer *e = (const embed_layer *)l;
    double td = (double)e->seq * e->dim;
    f->fwd[TB_FLOPS_ELEMENTWISE] += td;
    f->bwd[TB_FLOPS_ELEMENTWISE] += 2 * td;
}

/* Only the rows of wte and wpe the tokens pick are touched: forward reads
 * two rows and writes one per token; backward reads dy and adds into the
 * two gradient rows (read and write). */
static double embed_bytes(const tb_layer *l, int n, int backward)
{
    const embed_layer *e = (const embed_layer *)l;
    double td = (double)n * e->seq * e->dim;
    return 4.0 * td * (backward ? 5.0 : 3.0);
}

static const tb_layer_vtbl embed_vtbl = {
    .kind = "embedding", .forward = embed_forward, .backward = embed_backward,
    .alloc = embed_alloc, .release = embed_release, .flops = embed_flops,
    .bytes = embed_bytes,
};

int tb_layer_embedding_create(tb_layer_ctx *ctx, tb_shape in, int vocab, int dim, int context,
                              tb_layer **out)
{
    *out = NULL;
    if (in.c != 1 || in.w != 1 || in.h < 1 || in.h > context || vocab < 1 || dim < 1)
        return TB_FAIL(TB_ERR_INVALID, "embedding: input (%d, %d, %d) is not (1, T, 1) with "
                       "1 <= T <= context %d, or vocab %d, dim %d", in.c, in.h, in.w, context,
                       vocab, dim);
    tb_shape o = {1, in.h, dim};
    TB_TRY(tb_layer_new(ctx, &embed_vtbl, sizeof(embed_layer), in, o, out));
    embed_layer *e = (embed_layer *)*out;
    e->vocab = vocab;
    e->dim = dim;
    e->context = context;
    e->seq = in.h;
    (*out)->need_dx = 0;
    tb_layer_add_param(*out, "weight", (size_t)vocab * dim, TB_INIT_NORMAL, GPT2_INIT_STD);
    tb_layer_add_param(*out, "weight", (size_t)context * dim, TB_INIT_NORMAL, GPT2_INIT_STD);
    return TB_OK;
}

/* ---- the output head tied to the token embedding ---- */
typedef struct tied_head {
    tb_layer base;
    embed_layer *embed; /* borrowed: its params[0] is wte (vocab, d) */
    int tokens, dim, vocab;
    tb_tensor y;        /* (N, 1, T, vocab) logits */
    tb_tensor dx;       /* (N, 1, T, d) */
    const tb_tensor *x; /* (N, 1, T, d) input of the last forward */
    void *x_lowp;       /* autocast copies of x (N*T, d), wte (vocab, d) and */
    void *w_lowp;       /* dlogits (N*T, vocab); NULL with autocast off */
    void *dy_lowp;
} tied_head;

static int head_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    tied_head *h = (tied_head *)l;
    const tb_param *wte = &h->embed->base.params[0];
    int rows = x->n * h->tokens;
    TB_TRY(tb_tensor_set_batch(&h->y, x->n));
    if (tb_amp_on(l->ctx)) {
        TB_TRY(tb_amp_cast(l->ctx, x->data, h->x_lowp, tb_tensor_numel(x)));
        TB_TRY(tb_amp_cast(l->ctx, wte->w, h->w_lowp, wte->n));
    }
    TB_TRY(tb_amp_gemm(l->ctx, 0, 1, rows, h->vocab, h->dim, x->data, h->x_lowp, wte->w, h->w_lowp,
                       0.0f, h->y.data));
    h->x = x;
    *y = &h->y;
    return TB_OK;
}

static int head_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    tied_head *h = (tied_head *)l;
    const tb_param *wte = &h->embed->base.params[0];
    int rows = dy->n * h->tokens;
    float beta = l->ctx->grad_accumulate ? 1.0f : 0.0f;
    if (tb_amp_on(l->ctx))
        TB_TRY(tb_amp_cast(l->ctx, dy->data, h->dy_lowp, tb_tensor_numel(dy)));
    TB_TRY(tb_amp_gemm(l->ctx, 1, 0, h->vocab, h->dim, rows, dy->data, h->dy_lowp, h->x->data,
                       h->x_lowp, beta, wte->g));
    *dx = NULL;
    if (!l->need_dx)
        return TB_OK;
    TB_TRY(tb_tensor_set_batch(&h->dx, dy->n));
    TB_TRY(tb_amp_gemm(l->ctx, 0, 0, rows, h->dim, h->vocab, dy->data, h->dy_lowp, wte->w,
                       h->w_lowp, 0.0f, h->dx.data));
    *dx = &h->dx;
    return TB_OK;
}

static int head_alloc(tb_layer *l, int max_batch)
{
    tied_head *h = (tied_head *)l;
    size_t rows = (size_t)max_batch * h->tokens;
    TB_TRY(tb_layer_out_tensor(l, max_batch, &h->y));
    if (l->need_dx)
        TB_TRY(tb_layer_tensor(l, max_batch, l->in, &h->dx));
    TB_TRY(tb_amp_buf_alloc(l, rows * h->dim, &h->x_lowp));
    TB_TRY(tb_amp_buf_alloc(l, (size_t)h->vocab * h->dim, &h->w_lowp));
    return tb_amp_buf_alloc(l, rows * h->vocab, &h->dy_lowp);
}

static void head_release(tb_layer *l)
{
    tied_head *h = (tied_head *)l;
    tb_tensor_free(&h->y);
    tb_tensor_free(&h->dx);
    tb_amp_buf_free(l, &h->x_lowp);
    tb_amp_buf_free(l, &h->w_lowp);
    tb_amp_buf_free(l, &h->dy_lowp);
}

static void head_flops(const tb_layer *l, tb_flops *f)
{
    const tied_head *h = (const tied_head *)l;
    double gemm = 2.0 * h->tokens * h->dim * h->vocab;
    f->fwd[TB_FLOPS_GEMM] += gemm;
    f->bwd[TB_FLOPS_GEMM] += l->need_dx ? 2 * gemm : gemm;
}

static const tb_layer_vtbl head_vtbl = {
    .kind = "tied_head", .forward = head_forward, .backward = head_backward,
    .alloc = head_alloc, .release = head_release, .flops = head_flops,
};

int tb_layer_tied_head_create(tb_layer_ctx *ctx, tb_shape in, tb_layer *embedding,
                              tb_layer **out)
{
    *out = NULL;
    if (!embedding || embedding->vt != &embed_vtbl)
        return TB_FAIL(TB_ERR_INVALID, "tied_head: tied to a %s layer, not an embedding",
                       embedding ? embedding->vt->kind : "NULL");
    embed_layer *e = (embed_layer *)embedding;
    if (in.c != 1 || in.h < 1 || in.w != e->dim)
        return TB_FAIL(TB_ERR_INVALID, "tied_head: input (%d, %d, %d) is not (1, T, %d), the "
                       "embedding's width", in.c, in.h, in.w, e->dim);
    tb_shape o = {1, in.h, e->vocab};
    TB_TRY(tb_layer_new(ctx, &head_vtbl, sizeof(tied_head), in, o, out));
    tied_head *h = (tied_head *)*out;
    h->embed = e;
    h->tokens = in.h;
    h->dim = e->dim;
    h->vocab = e->vocab;
    e->tied = 1;
    return TB_OK;
}
