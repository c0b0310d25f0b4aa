/*
 * layer_tokens.c - the token-wise layers of the transformer model: a linear
 * layer applied to every token, the mean over tokens, and the residual add
 * of a pre-norm block (y = main(x) + x, no activation after it).
 *
 * Token tensors have the per-sample shape (1, T, d): T tokens (h) of d
 * features (w), token-major, so the N x T tokens of a batch are the rows of
 * one (N*T) x d matrix. A 1 x 28 x 28 image already is 28 tokens of 28
 * features (its rows): the model's first token linear reads it as is.
 *
 * Per-token linear: y = x W^T + b over the N*T rows (one GEMM, bias_add),
 * backward two GEMMs and bias_grad, as layer_linear.c; with autocast
 * (ctx->amp, lib/nn/amp.h) the three GEMMs are gemm_lowp on bf16/fp16 casts
 * of x, W and dy (fp32 out), as PyTorch's autocast runs nn.Linear (GPT-2's
 * MLP: c_fc, c_proj). Mean pool: (1, T, d) -> (d, 1, 1) as one GEMM with a
 * constant (T*d) x d matrix M holding I_d / T in each of its T blocks (y =
 * x M, dx = dy M^T): every backend has a GEMM, and at T*d*d the matrix is
 * small; fp32 (a mean, which autocast leaves alone).
 *
 * Tests: bazel test //lib/train:transformer_test (float64 gradient checks)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/amp.h"
#include "lib/nn/layers.h"

static int is_tokens(tb_shape s) { return s.c == 1 && s.h >= 1 && s.w >= 1; }

/* ---- per-token linear ---- */
typedef struct token_linear {
    tb_layer base;
    int tokens, in_f, out_f;
    tb_tensor y;        /* (N, 1, T, out) */
    tb_tensor dx;       /* (N, 1, T, in) */
    const tb_tensor *x; /* (N, 1, T, in) input of the last forward */
    void *x_lowp;       /* (N*T, in) autocast copies of x and W of the last */
    void *w_lowp;       /* (out, in) forward, and of dy; NULL with AMP off */
    void *dy_lowp;      /* (N*T, out) */
} token_linear;

static int tlin_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    token_linear *t = (token_linear *)l;
    tb_backend *be = l->ctx->be;
    int rows = x->n * t->tokens;
    TB_TRY(tb_tensor_set_batch(&t->y, x->n));
    if (tb_amp_on(l->ctx)) {
        TB_TRY(tb_amp_cast(l->ctx, x->data, t->x_lowp, (size_t)rows * t->in_f));
        TB_TRY(tb_amp_cast(l->ctx, l->params[0].w, t->w_lowp, l->params[0].n));
    }
    TB_TRY(tb_amp_gemm(l->ctx, 0, 1, rows, t->out_f, t->in_f, x->data, t->x_lowp,
                       l->params[0].w, t->w_lowp, 0.0f, t->y.data));
    TB_TRY(be->bias_add(be, t->y.data, l->params[1].w, rows, t->out_f));
    t->x = x;
    *y = &t->y;
    return TB_OK;
}

static int tlin_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    token_linear *t = (token_linear *)l;
    tb_backend *be = l->ctx->be;
    int rows = dy->n * t->tokens, acc = l->ctx->grad_accumulate;
    if (tb_amp_on(l->ctx))
        TB_TRY(tb_amp_cast(l->ctx, dy->data, t->dy_lowp, (size_t)rows * t->out_f));
    TB_TRY(tb_amp_gemm(l->ctx, 1, 0, t->out_f, t->in_f, rows, dy->data, t->dy_lowp, t->x->data,
                       t->x_lowp, acc ? 1.0f : 0.0f, l->params[0].g));
    TB_TRY(be->bias_grad(be, dy->data, l->params[1].g, rows, t->out_f, acc));
    *dx = NULL;
    if (!l->need_dx)
        return TB_OK;
    TB_TRY(tb_tensor_set_batch(&t->dx, dy->n));
    TB_TRY(tb_amp_gemm(l->ctx, 0, 0, rows, t->in_f, t->out_f, dy->data, t->dy_lowp,
                       l->params[0].w, t->w_lowp, 0.0f, t->dx.data));
    *dx = &t->dx;
    return TB_OK;
}

static int tlin_alloc(tb_layer *l, int max_batch)
{
    token_linear *t = (token_linear *)l;
    TB_TRY(tb_layer_out_tensor(l, max_batch, &t->y));
    if (l->need_dx)
        TB_TRY(tb_layer_tensor(l, max_batch, l->in, &t->dx));
    size_t rows = (size_t)max_batch * t->tokens;
    TB_TRY(tb_amp_buf_alloc(l, rows * t->in_f, &t->x_lowp));
    TB_TRY(tb_amp_buf_alloc(l, l->params[0].n, &t->w_lowp));
    return tb_amp_buf_alloc(l, rows * t->out_f, &t->dy_lowp);
}

static void tlin_release(tb_layer *l)
{
    token_linear *t = (token_linear *)l;
    tb_tensor_free(&t->y);
    tb_tensor_free(&t->dx);
    tb_amp_buf_free(l, &t->x_lowp);
    tb_amp_buf_free(l, &t->w_lowp);
    tb_amp_buf_free(l, &t->dy_lowp);
}

/* One sample of T tokens: GEMM 2 T in out forward; backward the weight
 * gradient (2 T in out) and, unless need_dx == 0, dx (2 T in out). The
 * bias add and the bias gradient are ELEMENTWISE, T out each. */
static void tlin_flops(const tb_layer *l, tb_flops *f)
{
    const token_linear *t = (const token_linear *)l;
    double mm = 2.0 * t->tokens * t->in_f * t->out_f, bias = (double)t->tokens * t->out_f;
    f->fwd[TB_FLOPS_GEMM] += mm;
    f->bwd[TB_FLOPS_GEMM] += l->need_dx ? 2.0 * mm : mm;
    f->fwd[TB_FLOPS_ELEMENTWISE] += bias;
    f->bwd[TB_FLOPS_ELEMENTWISE] += bias;
}

static const tb_layer_vtbl tlin_vtbl = {
    .kind = "token_linear", .forward = tlin_forward, .backward = tlin_backward,
    .alloc = tlin_alloc, .release = tlin_release, .flops = tlin_flops,
};

int tb_layer_token_linear_create(tb_layer_ctx *ctx, tb_shape in, int out_features, tb_layer **out)
{
    if (!is_tokens(in) || out_features <= 0)
        return TB_FAIL(TB_ERR_INVALID, "token_linear: input (%d, %d, %d) is not (1, T, d), or "
                       "%d outputs", in.c, in.h, in.w, out_features);
    tb_shape o = {1, in.h, out_features};
    TB_TRY(tb_layer_new(ctx, &tlin_vtbl, sizeof(token_linear), in, o, out));
    token_linear *t = (token_linear *)*out;
    t->tokens = in.h;
    t->in_f = in.w;
    t->out_f = out_features;
    float bound = 1.0f / sqrtf((float)in.w);
    tb_layer_add_param(*out, "weight", (size_t)in.w * out_features, TB_INIT_UNIFORM, bound);
    tb_layer_add_param(*out, "bias", (size_t)out_features, TB_INIT_UNIFORM, bound);
    return TB_OK;
}

/* ---- mean over tokens ---- */
typedef struct token_mean {
    tb_layer base;
    int tokens, dim;
    float *avg;         /* (T*d, d) I_d / T in each of T row blocks, constant */
    tb_tensor y;        /* (N, d, 1, 1) */
    tb_tensor dx;       /* (N, 1, T, d) */
} token_mean;

static int tmean_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    token_mean *p = (token_mean *)l;
    tb_backend *be = l->ctx->be;
    int td = p->tokens * p->dim;
    TB_TRY(tb_tensor_set_batch(&p->y, x->n));
    TB_TRY(be->gemm(be, 0, 0, x->n, p->dim, td, 1.0f, x->data, td, p->avg, p->dim, 0.0f,
                    p->y.data, p->dim, l->ctx->math));
    *y = &p->y;
    return TB_OK;
}

static int tmean_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    token_mean *p = (token_mean *)l;
    tb_backend *be = l->ctx->be;
    int td = p->tokens * p->dim;
    *dx = NULL;
    if (!l->need_dx)
        return TB_OK;
    TB_TRY(tb_tensor_set_batch(&p->dx, dy->n));
    TB_TRY(be->gemm(be, 0, 1, dy->n, td, p->dim, 1.0f, dy->data, p->dim, p->avg, p->dim, 0.0f,
                    p->dx.data, td, l->ctx->math));
    *dx = &p->dx;
    return TB_OK;
}

/* The constant averaging matrix, built on the host and copied once. */
static int tmean_make_avg(token_mean *p)
{
    tb_backend *be = p->base.ctx->be;
    size_t n = (size_t)p->tokens * p->dim * p->dim, bytes = n * sizeof(float);
    float *host = calloc(n, sizeof(float));
    if (!host)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the token mean matrix");
    for (int t = 0; t < p->tokens; t++)
        for (int f = 0; f < p->dim; f++)
            host[((size_t)t * p->dim + f) * p->dim + f] = 1.0f / (float)p->tokens;
    int rc = be->dev_alloc(be, (void **)&p->avg, bytes);
    if (rc == TB_OK)
        rc = be->copy_h2d(be, p->avg, host, bytes, NULL);
    free(host);
    return rc;
}

static int tmean_alloc(tb_layer *l, int max_batch)
{
    token_mean *p = (token_mean *)l;
    if (!p->avg)
        TB_TRY(tmean_make_avg(p));
    TB_TRY(tb_layer_out_tensor(l, max_batch, &p->y));
    if (l->need_dx)
        TB_TRY(tb_layer_tensor(l, max_batch, l->in, &p->dx));
    return TB_OK;
}

static void tmean_release(tb_layer *l)
{
    token_mean *p = (token_mean *)l;
    tb_tensor_free(&p->y);
    tb_tensor_free(&p->dx);
    if (p->avg)
        l->ctx->be->dev_free(l->ctx->be, p->avg);
    p->avg = NULL;
}

/* The mean's math, not the GEMM that computes it here (2 T d^2 with the
 * constant matrix): forward one add per input element (the division by T
 * folds in), backward dy / T broadcast to every element unless need_dx == 0.
 * ELEMENTWISE, T d each. */
static void tmean_flops(const tb_layer *l, tb_flops *f)
{
    double n = (double)tb_shape_numel(l->in);
    f->fwd[TB_FLOPS_ELEMENTWISE] += n;
    if (l->need_dx)
        f->bwd[TB_FLOPS_ELEMENTWISE] += n;
}

static const tb_layer_vtbl tmean_vtbl = {
    .kind = "token_mean", .forward = tmean_forward, .backward = tmean_backward,
    .alloc = tmean_alloc, .release = tmean_release, .flops = tmean_flops,
};

int tb_layer_token_mean_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out)
{
    if (!is_tokens(in))
        return TB_FAIL(TB_ERR_INVALID, "token_mean: input (%d, %d, %d) is not (1, T, d)", in.c,
                       in.h, in.w);
    tb_shape o = {in.w, 1, 1};
    TB_TRY(tb_layer_new(ctx, &tmean_vtbl, sizeof(token_mean), in, o, out));
    token_mean *p = (token_mean *)*out;
    p->tokens = in.h;
    p->dim = in.w;
    p->base.need_dx = 1;
    return TB_OK;
}

/* ---- residual add: y = main(x) + x ---- */
typedef struct add_residual {
    tb_layer base;      /* children[0] = the main path */
    tb_tensor y;        /* (N, C, H, W) */
    tb_tensor dx;       /* (N, C, H, W) */
} add_residual;

static int addres_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    add_residual *r = (add_residual *)l;
    tb_backend *be = l->ctx->be;
    const tb_tensor *m;
    TB_TRY(tb_layer_forward(l->children[0], x, &m));
    TB_TRY(tb_tensor_set_batch(&r->y, x->n));
    TB_TRY(be->add(be, m->data, x->data, r->y.data, tb_tensor_numel(&r->y)));
    *y = &r->y;
    return TB_OK;
}

static int addres_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    add_residual *r = (add_residual *)l;
    tb_backend *be = l->ctx->be;
    const tb_tensor *dm;
    TB_TRY(tb_layer_backward(l->children[0], dy, &dm));
    TB_TRY(tb_tensor_set_batch(&r->dx, dy->n));
    TB_TRY(be->add(be, dm->data, dy->data, r->dx.data, tb_tensor_numel(&r->dx)));
    *dx = &r->dx;
    return TB_OK;
}

static int addres_alloc(tb_layer *l, int max_batch)
{
    add_residual *r = (add_residual *)l;
    TB_TRY(tb_layer_alloc(l->children[0], max_batch));
    TB_TRY(tb_layer_out_tensor(l, max_batch, &r->y));
    return tb_layer_tensor(l, max_batch, l->in, &r->dx);
}

static void addres_release(tb_layer *l)
{
    add_residual *r = (add_residual *)l;
    tb_tensor_free(&r->y);
    tb_tensor_free(&r->dx);
}

/* The container's own work (tb_flops_layer adds the main path's): the add,
 * one per element forward, and the two gradients' sum backward. */
static void addres_flops(const tb_layer *l, tb_flops *f)
{
    double n = (double)tb_shape_numel(l->out);
    f->fwd[TB_FLOPS_ELEMENTWISE] += n;
    f->bwd[TB_FLOPS_ELEMENTWISE] += n;
}

static const tb_layer_vtbl addres_vtbl = {
    .kind = "add_residual", .forward = addres_forward, .backward = addres_backward,
    .alloc = addres_alloc, .release = addres_release, .flops = addres_flops,
};

int tb_layer_add_residual_create(tb_layer_ctx *ctx, tb_layer *main_path, tb_layer **out)
{
    *out = NULL;
    tb_shape a = main_path->in, b = main_path->out;
    int rc = TB_OK;
    if (a.c != b.c || a.h != b.h || a.w != b.w) {
        rc = TB_FAIL(TB_ERR_INVALID, "add_residual: main path maps (%d, %d, %d) to (%d, %d, %d)",
                     a.c, a.h, a.w, b.c, b.h, b.w);
        goto out_destroy_main;
    }
    TB_TRY_GOTO(rc, tb_layer_new(ctx, &addres_vtbl, sizeof(add_residual), a, b, out),
                out_destroy_main);
    (*out)->children = calloc(1, sizeof(tb_layer *));
    if (!(*out)->children) {
        free(*out);
        *out = NULL;
        rc = TB_FAIL(TB_ERR_NOMEM, "out of host memory creating a residual add");
        goto out_destroy_main;
    }
    (*out)->children[0] = main_path;
    (*out)->nchildren = 1;
    (*out)->need_dx = 1;
    main_path->need_dx = 1;
    return TB_OK;

out_destroy_main:
    tb_layer_destroy(main_path);
    return rc;
}
