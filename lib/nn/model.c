/*
 * model.c - building models from descriptions, flat parameter buffers,
 * forward/backward through the whole network. See model.h.
 */
#include "lib/nn/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/rng.h"
#include "lib/nn/model_build.h"
#include "lib/nn/tensor.h"

const tb_layer_spec tb_spec_small_cnn[] = {
    {TB_SPEC_CONV_BN_RELU, 16, 3, 1},
    {TB_SPEC_MAXPOOL, 0, 2, 2},
    {TB_SPEC_RESBLOCK, 16, 3, 1},
    {TB_SPEC_CONV_BN_RELU, 32, 3, 2},
    {TB_SPEC_RESBLOCK, 32, 3, 1},
    {TB_SPEC_LINEAR, 64, 0, 0},
    {TB_SPEC_GELU, 0, 0, 0},
    {TB_SPEC_LINEAR, 0, 0, 0},
    {TB_SPEC_END, 0, 0, 0},
};

const tb_layer_spec tb_spec_wide_cnn[] = {
    {TB_SPEC_CONV_BN_RELU, 32, 3, 1},
    {TB_SPEC_RESBLOCK, 32, 3, 1},
    {TB_SPEC_AVGPOOL, 0, 2, 2},
    {TB_SPEC_CONV_BN_RELU, 64, 3, 1},
    {TB_SPEC_RESBLOCK, 64, 3, 1},
    {TB_SPEC_CONV_BN_RELU, 128, 3, 2},
    {TB_SPEC_RESBLOCK, 128, 3, 1},
    {TB_SPEC_GLOBAL_AVGPOOL, 0, 0, 0},
    {TB_SPEC_LINEAR, 128, 0, 0},
    {TB_SPEC_GELU, 0, 0, 0},
    {TB_SPEC_DROPOUT, 0, 0, 0},
    {TB_SPEC_LINEAR, 0, 0, 0},
    {TB_SPEC_END, 0, 0, 0},
};

const tb_layer_spec tb_spec_transformer[] = {
    {TB_SPEC_TOKEN_LINEAR, 64, 0, 0},
    {TB_SPEC_TBLOCK, 4, 128, 0},
    {TB_SPEC_LAYERNORM, 0, 0, 0},
    {TB_SPEC_TOKEN_MEAN, 0, 0, 0},
    {TB_SPEC_LINEAR, 0, 0, 0},
    {TB_SPEC_END, 0, 0, 0},
};

/* ---- a growing list of layers, destroyed on failure ---- */
typedef struct layer_list {
    tb_layer *items[64];
    int n;
} layer_list;

static int list_push(layer_list *ls, tb_layer *l, const char *name, int index)
{
    if (ls->n == (int)(sizeof ls->items / sizeof ls->items[0])) {
        tb_layer_destroy(l);
        return TB_FAIL(TB_ERR_INVALID, "model description has too many layers");
    }
    snprintf(l->name, sizeof l->name, "%s%d", name, index);
    ls->items[ls->n++] = l;
    return TB_OK;
}

static void list_clear(layer_list *ls)
{
    for (int i = 0; i < ls->n; i++)
        tb_layer_destroy(ls->items[i]);
    ls->n = 0;
}

static tb_shape list_out(const layer_list *ls, tb_shape in)
{
    return ls->n ? ls->items[ls->n - 1]->out : in;
}

/* conv r x r (pad r/2) + BN + ReLU, appended to ls. */
static int add_conv_bn_relu(tb_layer_ctx *ctx, layer_list *ls, tb_shape in, int k, int r,
                            int stride, int relu, int bias, int index)
{
    tb_layer *l;
    TB_TRY(tb_layer_conv2d_create(ctx, in, k, r, stride, r / 2, bias, &l));
    TB_TRY(list_push(ls, l, "conv", index));
    TB_TRY(tb_layer_batchnorm_create(ctx, l->out, &l));
    TB_TRY(list_push(ls, l, "bn", index));
    if (!relu)
        return TB_OK;
    TB_TRY(tb_layer_relu_create(ctx, l->out, &l));
    return list_push(ls, l, "relu", index);
}

/* conv-BN-ReLU-conv-BN plus the identity, then ReLU. */
static int make_resblock(tb_layer_ctx *ctx, tb_shape in, const tb_layer_spec *s, int bias,
                         int index, tb_layer **out)
{
    if (s->k != in.c || s->stride != 1)
        return TB_FAIL(TB_ERR_INVALID, "resblock %d: k=%d stride=%d on %d channels; only the "
                       "identity shortcut is built", index, s->k, s->stride, in.c);
    layer_list path = {0};
    int rc;
    TB_TRY_GOTO(rc, add_conv_bn_relu(ctx, &path, in, s->k, s->r, 1, 1, bias, 1), out_clear);
    TB_TRY_GOTO(rc, add_conv_bn_relu(ctx, &path, list_out(&path, in), s->k, s->r, 1, 0, bias, 2),
                out_clear);
    tb_layer *seq;
    TB_TRY(tb_layer_seq_create(ctx, path.items, path.n, &seq));
    return tb_layer_residual_create(ctx, seq, NULL, out);

out_clear:
    list_clear(&path);
    return rc;
}

/* x + f(x) with f = the layers of path as a sequence; takes path's layers. */
static int add_residual_seq(tb_layer_ctx *ctx, layer_list *path, tb_layer **out)
{
    tb_layer *seq;
    int n = path->n;
    path->n = 0;
    TB_TRY(tb_layer_seq_create(ctx, path->items, n, &seq));
    return tb_layer_add_residual_create(ctx, seq, out);
}

/* Pre-norm transformer block on (1, T, d): x + MHA(LN(x)), then
 * x + Linear(GELU(Linear(LN(x)))), appended to ls as two residual adds. */
static int add_tblock(tb_layer_ctx *ctx, layer_list *ls, tb_shape in, const tb_layer_spec *s,
                      int index)
{
    layer_list p = {0};
    tb_layer *l;
    int rc;
    TB_TRY_GOTO(rc, tb_layer_layernorm_create(ctx, in, &l), out_clear);
    TB_TRY_GOTO(rc, list_push(&p, l, "ln", 1), out_clear);
    TB_TRY_GOTO(rc, tb_layer_mha_create(ctx, in, s->k, &l), out_clear);
    TB_TRY_GOTO(rc, list_push(&p, l, "mha", 1), out_clear);
    TB_TRY(add_residual_seq(ctx, &p, &l));
    TB_TRY(list_push(ls, l, "attn", index));
    TB_TRY_GOTO(rc, tb_layer_layernorm_create(ctx, in, &l), out_clear);
    TB_TRY_GOTO(rc, list_push(&p, l, "ln", 2), out_clear);
    TB_TRY_GOTO(rc, tb_layer_token_linear_create(ctx, in, s->r, &l), out_clear);
    TB_TRY_GOTO(rc, list_push(&p, l, "fc", 1), out_clear);
    TB_TRY_GOTO(rc, tb_layer_gelu_create(ctx, l->out, &l), out_clear);
    TB_TRY_GOTO(rc, list_push(&p, l, "gelu", 1), out_clear);
    TB_TRY_GOTO(rc, tb_layer_token_linear_create(ctx, l->out, in.w, &l), out_clear);
    TB_TRY_GOTO(rc, list_push(&p, l, "fc", 2), out_clear);
    TB_TRY(add_residual_seq(ctx, &p, &l));
    return list_push(ls, l, "mlp", index);

out_clear:
    list_clear(&p);
    return rc;
}

/* The token-tensor kinds of add_spec. */
static int add_token_spec(tb_layer_ctx *ctx, layer_list *ls, tb_shape in, const tb_layer_spec *s,
                          int index)
{
    tb_layer *l = NULL;
    switch (s->kind) {
    case TB_SPEC_TOKEN_LINEAR:
        TB_TRY(tb_layer_token_linear_create(ctx, in, s->k, &l));
        return list_push(ls, l, "embed", index);
    case TB_SPEC_TBLOCK:
        return add_tblock(ctx, ls, in, s, index);
    case TB_SPEC_LAYERNORM:
        TB_TRY(tb_layer_layernorm_create(ctx, in, &l));
        return list_push(ls, l, "ln", index);
    case TB_SPEC_TOKEN_MEAN:
        TB_TRY(tb_layer_token_mean_create(ctx, in, &l));
        return list_push(ls, l, "tokmean", index);
    default:
        break;
    }
    return TB_FAIL(TB_ERR_INVALID, "model description: unknown layer kind %d", (int)s->kind);
}

static int add_spec(tb_layer_ctx *ctx, layer_list *ls, tb_shape in, const tb_layer_spec *s,
                    const tb_model_opts *o, int index)
{
    tb_layer *l = NULL;
    switch (s->kind) {
    case TB_SPEC_CONV_BN_RELU:
        return add_conv_bn_relu(ctx, ls, in, s->k, s->r, s->stride, 1, o->conv_bias, index);
    case TB_SPEC_RESBLOCK:
        TB_TRY(make_resblock(ctx, in, s, o->conv_bias, index, &l));
        return list_push(ls, l, "res", index);
    case TB_SPEC_MAXPOOL:
    case TB_SPEC_AVGPOOL: {
        int max = s->kind == TB_SPEC_MAXPOOL;
        TB_TRY(tb_layer_pool_create(ctx, in, max ? TB_POOL_MAX : TB_POOL_AVG, s->r, s->stride,
                                    s->pad, &l));
        return list_push(ls, l, max ? "maxpool" : "avgpool", index);
    }
    case TB_SPEC_BOTTLENECK: /* lib/nn/model_resnet.c */
        TB_TRY(tb_resnet_bottleneck_create(ctx, in, s->k, s->stride, o->conv_bias, &l));
        return list_push(ls, l, "bottleneck", index);
    case TB_SPEC_GLOBAL_AVGPOOL:
        TB_TRY(tb_layer_global_avgpool_create(ctx, in, &l));
        return list_push(ls, l, "gap", index);
    case TB_SPEC_LINEAR:
        TB_TRY(tb_layer_linear_create(ctx, in, s->k ? s->k : o->classes, &l));
        return list_push(ls, l, "fc", index);
    case TB_SPEC_RELU:
        TB_TRY(tb_layer_relu_create(ctx, in, &l));
        return list_push(ls, l, "relu", index);
    case TB_SPEC_GELU:
        TB_TRY(tb_layer_gelu_create(ctx, in, &l));
        return list_push(ls, l, "gelu", index);
    case TB_SPEC_DROPOUT:
        TB_TRY(tb_layer_dropout_create(ctx, in, o->dropout, &l));
        return list_push(ls, l, "dropout", index);
    case TB_SPEC_END:
        break;
    default:
        return add_token_spec(ctx, ls, in, s, index);
    }
    return TB_FAIL(TB_ERR_INVALID, "model description: unknown layer kind %d", (int)s->kind);
}

static int build_net(tb_model *m, const tb_layer_spec *spec, const tb_model_opts *o)
{
    layer_list ls = {0};
    int rc;
    for (int i = 0; spec[i].kind != TB_SPEC_END; i++)
        TB_TRY_GOTO(rc, add_spec(&m->ctx, &ls, list_out(&ls, o->in), &spec[i], o, i), out_clear);
    tb_shape out = list_out(&ls, o->in);
    if (out.c != o->classes || out.h != 1 || out.w != 1) {
        rc = TB_FAIL(TB_ERR_INVALID, "model ends in (%d, %d, %d), not %d classes", out.c, out.h,
                     out.w, o->classes);
        goto out_clear;
    }
    /* Nothing needs the gradient of the images. */
    ls.items[0]->need_dx = ls.items[0]->nchildren > 0;
    return tb_layer_seq_create(&m->ctx, ls.items, ls.n, &m->net);

out_clear:
    list_clear(&ls);
    return rc;
}

/* ---- parameters ---- */
static void collect_one(tb_param *p, void *user)
{
    tb_model *m = user;
    m->params[m->nparams++] = p;
}

static void count_params(tb_param *p, void *user)
{
    (void)p;
    (*(int *)user)++;
}

/* Box-Muller: two N(0, 1) draws from two uniforms, u1 in (0, 1] (log
 * finite) and u2 in [0, 1). */
static void normal_pair(tb_rng *r, double *z0, double *z1)
{
    double u1 = 1.0 - tb_rng_double01(r), u2 = tb_rng_double01(r);
    double rad = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
    *z0 = rad * cos(th);
    *z1 = rad * sin(th);
}

void tb_param_init_host(const tb_param *p, tb_rng *r, float *host)
{
    if (p->init == TB_INIT_NORMAL) {
        for (size_t j = 0; j < p->n; j += 2) {
            double z0, z1;
            normal_pair(r, &z0, &z1);
            host[j] = (float)(z0 * p->bound);
            if (j + 1 < p->n)
                host[j + 1] = (float)(z1 * p->bound);
        }
        return;
    }
    for (size_t j = 0; j < p->n; j++) {
        float v = p->init == TB_INIT_ONES ? 1.0f : 0.0f;
        if (p->init == TB_INIT_UNIFORM)
            v = (2.0f * tb_rng_float01(r) - 1.0f) * p->bound;
        host[j] = v;
    }
}

/* Draws of a parameter's stream per element: a normal pair takes two
 * uniforms for two elements, a uniform one; ones and zeros take none. */
static int draws_per_element(const tb_param *p)
{
    return p->init == TB_INIT_NORMAL || p->init == TB_INIT_UNIFORM;
}

/* Elements per chunk of params_init_host: even, so a normal pair never
 * straddles two chunks. */
#define INIT_CHUNK ((size_t)1 << 20)

typedef struct init_chunk {
    const tb_param *p;
    tb_rng r;      /* the parameter's stream, advanced to the chunk's first draw */
    size_t at, n;  /* where in host, how many elements */
} init_chunk;

/* Fills host with PyTorch's default init, from (seed, stream). A bias draws
 * from its own stream beside its layer's weight (2k+1 for the k-th weight,
 * 2k), so dropping a conv bias (conv_bias off) leaves every other parameter's
 * initial values unchanged: the technique changes the model, not the dice.
 * splitmix64 advances its state by a constant per draw, so a chunk starts
 * its stream at state + draws x TB_RNG_GOLDEN: the chunks run on all cores
 * and the values are the ones one thread would draw (GPT-2's 124M took 1.3 s
 * of a CUDA trainer's 4 s build on one thread). */
static void params_init_host(tb_model *m, uint64_t seed, float *host)
{
    size_t n_chunks = 0;
    for (int i = 0; i < m->nparams; i++)
        n_chunks += (m->params[i]->n + INIT_CHUNK - 1) / INIT_CHUNK;
    init_chunk *chunks = calloc(n_chunks ? n_chunks : 1, sizeof *chunks);
    size_t at = 0, c = 0;
    uint64_t weights = 0; /* non-bias parameters seen so far */
    for (int i = 0; i < m->nparams; i++) {
        const tb_param *p = m->params[i];
        int is_bias = strcmp(p->name, "bias") == 0;
        uint64_t stream = is_bias ? 2 * (weights ? weights - 1 : 0) + 1 : 2 * weights++;
        /* a splitmix64 stream per (seed, stream): a parameter's values do not
         * depend on the parameters before it */
        tb_rng r = tb_rng_seeded(seed * 0x100000001b3ull + stream * TB_RNG_GOLDEN);
        tb_rng_next_u64(&r);
        if (!chunks) { /* no memory for the plan: one thread */
            tb_param_init_host(p, &r, host + at);
        } else {
            for (size_t j = 0; j < p->n; j += INIT_CHUNK, c++) {
                tb_rng cr = {r.state + (uint64_t)(j * draws_per_element(p)) * TB_RNG_GOLDEN};
                size_t len = p->n - j < INIT_CHUNK ? p->n - j : INIT_CHUNK;
                chunks[c] = (init_chunk){p, cr, at + j, len};
            }
        }
        at += p->n;
    }
    if (!chunks)
        return;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t k = 0; k < n_chunks; k++) {
        tb_param part = *chunks[k].p;
        part.n = chunks[k].n;
        tb_rng r = chunks[k].r;
        tb_param_init_host(&part, &r, host + chunks[k].at);
    }
    free(chunks);
}

/* ---- layout of the parameters (channels last) ---- */

/* (outer, c, hw) <-> (outer, hw, c) blocks: a conv weight (K, C, R*S), or a
 * linear weight (out, C, H*W). */
static void reorder_block(const float *src, float *dst, int outer, int c, int hw, int to_nhwc)
{
    for (int o = 0; o < outer; o++)
        for (int ch = 0; ch < c; ch++)
            for (int i = 0; i < hw; i++) {
                size_t nchw = ((size_t)o * c + ch) * hw + i;
                size_t nhwc = ((size_t)o * hw + i) * c + ch;
                if (to_nhwc)
                    dst[nhwc] = src[nchw];
                else
                    dst[nchw] = src[nhwc];
            }
}

static void reorder_layer(const tb_model *m, const tb_layer *l, const float *src, float *dst,
                          int to_nhwc)
{
    for (int i = 0; i < l->nchildren; i++)
        reorder_layer(m, l->children[i], src, dst, to_nhwc);
    int conv = !strcmp(l->vt->kind, "conv2d"), hw = l->in.h * l->in.w;
    if (!conv && (strcmp(l->vt->kind, "linear") || hw == 1))
        return;
    const tb_param *p = &l->params[0];
    size_t at = (size_t)(p->w - m->flat_w);
    int outer = l->out.c, inner = conv ? (int)(p->n / ((size_t)l->out.c * l->in.c)) : hw;
    reorder_block(src + at, dst + at, outer, l->in.c, inner, to_nhwc);
}

void tb_model_params_reorder(const tb_model *m, const float *src, float *dst, int to_nhwc)
{
    memcpy(dst, src, m->numel * sizeof(float));
    reorder_layer(m, m->net, src, dst, to_nhwc);
}

/* Initial values as in NCHW, then reordered for NHWC: same model either way. */
static int params_upload_init(tb_model *m, uint64_t seed)
{
    tb_backend *be = m->ctx.be;
    size_t bytes = m->numel * sizeof(float);
    float *host = malloc(bytes), *nhwc = NULL;
    int rc = TB_OK;
    if (!host)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory initializing parameters");
    params_init_host(m, seed, host);
    if (m->ctx.layout == TB_NHWC) {
        nhwc = malloc(bytes);
        if (!nhwc) {
            rc = TB_FAIL(TB_ERR_NOMEM, "out of host memory initializing parameters");
            goto out_free_host;
        }
        tb_model_params_reorder(m, host, nhwc, 1);
    }
    rc = be->copy_h2d(be, m->flat_w, nhwc ? nhwc : host, bytes, NULL);
    free(nhwc);

out_free_host:
    free(host);
    return rc;
}

static int params_setup(tb_model *m, uint64_t seed)
{
    tb_backend *be = m->ctx.be;
    int count = 0;
    tb_layer_for_each_param(m->net, count_params, &count);
    m->params = calloc((size_t)count + 1, sizeof *m->params);
    if (!m->params)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory listing parameters");
    tb_layer_for_each_param(m->net, collect_one, m);
    m->numel = tb_layer_param_count(m->net);
    size_t bytes = m->numel * sizeof(float);
    TB_TRY(be->dev_alloc(be, (void **)&m->flat_w, bytes));
    TB_TRY(be->dev_alloc(be, (void **)&m->flat_g, bytes));
    TB_TRY(be->memset(be, m->flat_g, 0, bytes, NULL));
    tb_layer_params_bind(m->net, m->flat_w, m->flat_g);
    return params_upload_init(m, seed);
}

int tb_model_shell_create(tb_backend *be, const tb_model_opts *o, tb_model **out)
{
    *out = NULL;
    if (o->max_batch <= 0 || o->classes <= 1)
        return TB_FAIL(TB_ERR_INVALID, "tb_model_build: batch %d, %d classes", o->max_batch,
                       o->classes);
    tb_model *m = calloc(1, sizeof *m);
    if (!m)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory building a model");
    m->ctx = (tb_layer_ctx){.be = be, .training = 1, .gelu = TB_GELU_UNFUSED,
                            .math = TB_MATH_F32, .conv_math = TB_MATH_F32,
                            .dropout_seed = o->seed,
                            .layout = o->channels_last ? TB_NHWC : TB_NCHW, .amp = o->amp,
                            .gelu_approx = o->gelu_approx};
    m->classes = o->classes;
    m->max_batch = o->max_batch;
    m->in = o->in;
    m->in_dtype = TB_F32;
    m->labels_per_sample = 1;
    *out = m;
    return TB_OK;
}

static int loss_init(tb_model *m)
{
    if (m->in_dtype != TB_I32 && m->labels_per_sample == 1)
        return tb_xent_init(&m->ctx, m->classes, m->max_batch, &m->loss);
    return tb_xent_init_lse(&m->ctx, m->classes, m->max_batch * m->labels_per_sample, &m->loss);
}

int tb_model_shell_finish(tb_model *m, const tb_model_opts *o)
{
    if (o->checkpointing)
        tb_layer_acts_mark_checkpoints(m->net);
    TB_TRY(params_setup(m, o->seed));
    TB_TRY(tb_layer_alloc(m->net, m->max_batch));
    TB_TRY(tb_layer_acts_ckpt_alloc(m->net));
    return loss_init(m);
}

/* A conv trunk that bf16 activations can run through (ctx->act): it starts
 * with a convolution (which takes the fp32 images), and no ReLU, pooling or
 * convolution comes after the first layer of the head (linear, GELU,
 * dropout, token layers), whose outputs are fp32. */
static int trunk_then_head(const tb_layer_spec *spec)
{
    int head = 0;
    if (spec[0].kind != TB_SPEC_CONV_BN_RELU)
        return 0;
    for (const tb_layer_spec *s = spec; s->kind != TB_SPEC_END; s++) {
        int trunk = s->kind == TB_SPEC_CONV_BN_RELU || s->kind == TB_SPEC_RESBLOCK ||
                    s->kind == TB_SPEC_BOTTLENECK || s->kind == TB_SPEC_MAXPOOL ||
                    s->kind == TB_SPEC_AVGPOOL || s->kind == TB_SPEC_GLOBAL_AVGPOOL ||
                    s->kind == TB_SPEC_RELU;
        if (trunk && head)
            return 0;
        head |= !trunk;
    }
    return 1;
}

int tb_model_build(tb_backend *be, const tb_layer_spec *spec, const tb_model_opts *o,
                tb_model **out)
{
    tb_model *m;
    int rc;
    TB_TRY(tb_model_shell_create(be, o, out));
    m = *out;
    *out = NULL;
    if (o->amp == TB_BF16 && be->relu_fwd_lowp && !o->fp32_acts && trunk_then_head(spec))
        m->ctx.act = TB_BF16;
    TB_TRY_GOTO(rc, build_net(m, spec, o), out_destroy);
    TB_TRY_GOTO(rc, tb_model_shell_finish(m, o), out_destroy);
    *out = m;
    return TB_OK;

out_destroy:
    tb_model_destroy(m);
    return rc;
}

void tb_model_destroy(tb_model *m)
{
    if (!m)
        return;
    tb_backend *be = m->ctx.be;
    tb_xent_free(&m->loss);
    tb_layer_destroy(m->net);
    tb_layer_acts_free(&m->ctx);
    if (m->flat_w)
        be->dev_free(be, m->flat_w);
    if (m->flat_g)
        be->dev_free(be, m->flat_g);
    tb_conv_algo_cache_free(&m->ctx.algos);
    free(m->params);
    free(m);
}

int tb_model_forward(tb_model *m, const tb_tensor *x, const tb_tensor **logits)
{
    if (x->c != m->in.c || x->h != m->in.h || x->w != m->in.w || x->n > m->max_batch)
        return TB_FAIL(TB_ERR_INVALID, "model takes (<=%d, %d, %d, %d), got (%d, %d, %d, %d)",
                       m->max_batch, m->in.c, m->in.h, m->in.w, x->n, x->c, x->h, x->w);
    if (x->dtype != m->in_dtype)
        return TB_FAIL(TB_ERR_INVALID, "model takes %s input, got dtype %d",
                       m->in_dtype == TB_I32 ? "int32 token" : "fp32", (int)x->dtype);
    if (m->ctx.layout == TB_NHWC && x->c > 1 && x->layout != TB_NHWC)
        return TB_FAIL(TB_ERR_INVALID, "channels-last model given an NCHW input of %d channels",
                       x->c);
    return tb_layer_forward(m->net, x, logits);
}

int tb_model_forward_loss(tb_model *m, const tb_tensor *x, const int32_t *labels,
                       const tb_tensor **logits)
{
    const tb_tensor *out;
    TB_TRY(tb_model_forward(m, x, &out));
    if (logits)
        *logits = out;
    /* the op timeline's "xent": it reads the logits once (lse: 5 FLOPs an element) */
    double logit_n = (double)tb_tensor_numel(out);
    tb_layer_op_begin(&m->ctx, "xent", "xent", 0);
    TB_TRY(tb_xent_forward(&m->loss, out, labels));
    return tb_layer_op_end(&m->ctx, 5.0 * logit_n, 4.0 * logit_n);
}

int tb_model_backward(tb_model *m, float loss_scale)
{
    if (!m->ctx.training)
        return TB_FAIL(TB_ERR_INVALID, "tb_model_backward in evaluation mode");
    if (m->ctx.acts.no_grad)
        return TB_FAIL(TB_ERR_INVALID, "tb_model_backward under no_grad");
    const tb_tensor *d, *dx;
    double logit_n = (double)m->loss.n * m->loss.classes;
    tb_layer_op_begin(&m->ctx, "xent", "xent", 1);
    TB_TRY(tb_xent_backward(&m->loss, loss_scale / (float)m->loss.n, &d));
    /* softmax minus one-hot, in place: read and write each logit */
    TB_TRY(tb_layer_op_end(&m->ctx, 4.0 * logit_n, 8.0 * logit_n));
    TB_TRY(tb_layer_backward(m->net, d, &dx));
    m->ctx.grad_accumulate = 1;
    return TB_OK;
}

int tb_model_zero_grad(tb_model *m, int set_to_none)
{
    if (set_to_none) {
        m->ctx.grad_accumulate = 0;
        return TB_OK;
    }
    tb_backend *be = m->ctx.be;
    /* queued, as zero_grad(set_to_none=False) queues its zero_ kernels: a
     * host wait here would put a sync in every step of the technique off */
    TB_TRY(be->memset(be, m->flat_g, 0, m->numel * sizeof(float), TB_ON_COMPUTE));
    m->ctx.grad_accumulate = 1;
    return TB_OK;
}

void tb_model_train_mode(tb_model *m, int training) { m->ctx.training = training; }

int tb_model_set_no_grad(tb_model *m, int on)
{
    return tb_layer_acts_no_grad(m->net, on);
}

void tb_model_no_grad_release(tb_model *m)
{
    tb_layer_acts_no_grad_release(m->net);
}

/* Same layers, shapes and parameter sizes (GPT-2's blocks after the first). */
static int same_structure(const tb_layer *a, const tb_layer *b)
{
    if (a->vt != b->vt || a->nparams != b->nparams || a->nchildren != b->nchildren ||
        a->in.c != b->in.c || a->in.h != b->in.h || a->in.w != b->in.w ||
        a->out.c != b->out.c || a->out.h != b->out.h || a->out.w != b->out.w)
        return 0;
    for (int i = 0; i < a->nparams; i++)
        if (a->params[i].n != b->params[i].n)
            return 0;
    for (int i = 0; i < a->nchildren; i++)
        if (!same_structure(a->children[i], b->children[i]))
            return 0;
    return 1;
}

static size_t layer_params(const tb_layer *l)
{
    size_t n = 0;
    for (int i = 0; i < l->nparams; i++)
        n += l->params[i].n;
    for (int i = 0; i < l->nchildren; i++)
        n += layer_params(l->children[i]);
    return n;
}

/* One line per layer with the parameters of its subtree; a container
 * repeating its previous sibling (GPT-2's h1 .. h11) prints one line,
 * "as <first of the run>", without its children; a sequence that is its
 * parent's only child (a residual's main path) is left out, its layers
 * printed in its place. */
static void print_layers(const tb_layer *const *ls, int n, FILE *f, int depth)
{
    if (n == 1 && ls[0]->nchildren > 0 && !strcmp(ls[0]->vt->kind, "seq")) {
        print_layers((const tb_layer *const *)ls[0]->children, ls[0]->nchildren, f, depth);
        return;
    }
    int first = 0;
    for (int i = 0; i < n; i++) {
        const tb_layer *l = ls[i];
        int repeat = i > 0 && l->nchildren > 0 && same_structure(ls[first], l);
        if (!repeat)
            first = i;
        fprintf(f, "%*s%-16s (%d, %d, %d)  %zu params%s%s\n", 2 * depth, "", l->name, l->out.c,
                l->out.h, l->out.w, layer_params(l), repeat ? ", as " : "",
                repeat ? ls[first]->name : "");
        if (!repeat)
            print_layers((const tb_layer *const *)l->children, l->nchildren, f, depth + 1);
    }
}

void tb_model_print(const tb_model *m, FILE *f)
{
    print_layers((const tb_layer *const *)m->net->children, m->net->nchildren, f, 0);
    fprintf(f, "total: %zu parameters in %d tensors\n", m->numel, m->nparams);
}

int tb_model_weights_to_host(const tb_model *m, float **w)
{
    tb_backend *be = m->ctx.be;
    size_t bytes = m->numel * sizeof(float);
    *w = malloc(bytes);
    if (!*w)
        return TB_FAIL(TB_ERR_NOMEM, "%zu bytes of weights on the host", bytes);
    int rc = be->copy_d2h(be, *w, m->flat_w, bytes, NULL);
    if (rc == TB_OK)
        rc = be->sync(be);
    if (rc != TB_OK) {
        free(*w);
        *w = NULL;
    }
    return rc;
}

int tb_model_nudge_weights(tb_model *m, double rel, uint64_t seed)
{
    tb_backend *be = m->ctx.be;
    float *w;
    TB_TRY(tb_model_weights_to_host(m, &w));
    uint64_t x = seed ? seed : 1;
    for (size_t i = 0; i < m->numel; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        w[i] *= (float)(x >> 63 ? 1.0 + rel : 1.0 - rel);
    }
    int rc = be->copy_h2d(be, m->flat_w, w, m->numel * sizeof(float), NULL);
    if (rc == TB_OK)
        rc = be->sync(be);
    free(w);
    return rc;
}
