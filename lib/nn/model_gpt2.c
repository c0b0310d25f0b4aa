/*
 * model_gpt2.c - GPT-2 (Radford et al. 2019; nanoGPT's model.py) on the
 * layer library: token ids (1, T, 1) in, next-token logits (1, T, vocab) out.
 *
 *   embed        wte[token] + wpe[position]           (1, T, d)
 *   h0 .. hL-1   attn: x + MHA_causal(LN_1(x))
 *                mlp:  x + proj(GELU(fc(LN_2(x))))    fc d -> mlp, proj mlp -> d
 *   ln_f         layer norm
 *   head         x wte^T, tied to the embedding's wte  (1, T, vocab)
 *
 * The sizes are tb_gpt2_dims, so the CPU profile runs the same architecture
 * smaller; tb_gpt2_small() is the 124M model. The GELU is the one
 * o->gelu_approx names (GPT-2 trains with the tanh form). The loss is the
 * token path of tb_xent (lse, in place over the logits): a model of T
 * tokens has T labels per sample.
 *
 * Initialization is GPT-2's (nanoGPT's _init_weights): every weight and
 * both embeddings N(0, 0.02), the two projections into the residual stream
 * of each block (attention's output projection, the MLP's proj) N(0,
 * 0.02 / sqrt(2 layers)), biases 0, layer norms gamma 1 beta 0. The layers'
 * constructors declare PyTorch's uniform default, which the other models
 * keep; this builder rewrites the init of the parameters it creates.
 *
 * The flat parameter order is nanoGPT's state_dict order, shapes as
 * PyTorch's (out, in) Linear weights: wte (vocab, d), wpe (context, d); per
 * block ln_1 weight, bias; attn.c_attn weight (3d, d), bias; attn.c_proj
 * (d, d), bias; ln_2; mlp.c_fc (mlp, d), bias; mlp.c_proj (d, mlp), bias;
 * then ln_f. lm_head.weight is wte (tied), not a parameter of its own.
 * (OpenAI's checkpoints store the four block matrices transposed, as
 * Conv1D (in, out): nanoGPT's from_pretrained transposes them.)
 *
 * Tests: bazel test //lib/nn:gpt2_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/nn/model_build.h"

#define GPT2_STD 0.02f

tb_gpt2_dims tb_gpt2_small(void)
{
    return (tb_gpt2_dims){.layers = 12, .heads = 12, .dim = 768, .mlp = 3072, .context = 1024,
                          .vocab = 50257};
}

size_t tb_gpt2_param_count(const tb_gpt2_dims *g)
{
    size_t d = (size_t)g->dim, m = (size_t)g->mlp;
    size_t block = 2 * 2 * d              /* ln_1, ln_2: gamma and beta */
                   + 3 * d * d + 3 * d    /* attention's input projection */
                   + d * d + d            /* its output projection */
                   + d * m + m + m * d + d; /* fc, proj */
    /* the head is wte itself: no parameters of its own */
    return (size_t)g->vocab * d + (size_t)g->context * d + (size_t)g->layers * block + 2 * d;
}

static int check_dims(const tb_gpt2_dims *g, const tb_model_opts *o)
{
    if (g->layers < 1 || g->heads < 1 || g->dim < 1 || g->dim % g->heads || g->mlp < 1 ||
        g->context < 1 || g->vocab < 2)
        return TB_FAIL(TB_ERR_INVALID, "gpt2: %d layers, %d heads, d %d, mlp %d, context %d, "
                       "vocab %d (d a multiple of heads, all >= 1, vocab >= 2)", g->layers,
                       g->heads, g->dim, g->mlp, g->context, g->vocab);
    if (o->classes != g->vocab)
        return TB_FAIL(TB_ERR_INVALID, "gpt2: %d classes for a vocabulary of %d", o->classes,
                       g->vocab);
    return TB_OK;
}

/* GPT-2's init for parameter i of l, replacing the constructor's. */
static void init_normal(tb_layer *l, int i, float std)
{
    l->params[i].init = TB_INIT_NORMAL;
    l->params[i].bound = std;
}

static void init_zeros(tb_layer *l, int i) { l->params[i].init = TB_INIT_ZEROS; }

/* A linear-like layer (weight, bias): weight N(0, std), bias 0. */
static void init_linear(tb_layer *l, int w, int b, float std)
{
    init_normal(l, w, std);
    init_zeros(l, b);
}

static tb_layer *named(tb_layer *l, const char *name)
{
    snprintf(l->name, sizeof l->name, "%s", name);
    return l;
}

/* x + f(x), f the sequence of the n layers of path (taken, also on failure). */
static int residual(tb_layer_ctx *ctx, tb_layer **path, int n, const char *name, tb_layer **out)
{
    tb_layer *seq;
    TB_TRY(tb_layer_seq_create(ctx, path, n, &seq));
    TB_TRY(tb_layer_add_residual_create(ctx, seq, out));
    named(*out, name);
    return TB_OK;
}

static void destroy_n(tb_layer **ls, int n)
{
    for (int i = 0; i < n; i++)
        tb_layer_destroy(ls[i]);
}

/* attn: x + MHA_causal(LN_1(x)). */
static int make_attn(tb_layer_ctx *ctx, tb_shape x, const tb_gpt2_dims *g, tb_layer **out)
{
    tb_layer *p[2];
    int rc;
    TB_TRY(tb_layer_layernorm_create(ctx, x, &p[0]));
    named(p[0], "ln_1");
    TB_TRY_GOTO(rc, tb_layer_mha_causal_create(ctx, x, g->heads, 1, &p[1]), out_destroy);
    named(p[1], "mha");
    init_linear(p[1], 0, 1, GPT2_STD);
    init_linear(p[1], 2, 3, GPT2_STD / sqrtf(2.0f * (float)g->layers));
    return residual(ctx, p, 2, "attn", out);

out_destroy:
    destroy_n(p, 1);
    return rc;
}

/* mlp: x + proj(GELU(fc(LN_2(x)))). */
static int make_mlp(tb_layer_ctx *ctx, tb_shape x, const tb_gpt2_dims *g, tb_layer **out)
{
    tb_layer *p[4];
    int n = 0, rc;
    TB_TRY(tb_layer_layernorm_create(ctx, x, &p[n]));
    named(p[n++], "ln_2");
    TB_TRY_GOTO(rc, tb_layer_token_linear_create(ctx, x, g->mlp, &p[n]), out_destroy);
    init_linear(named(p[n++], "fc"), 0, 1, GPT2_STD);
    TB_TRY_GOTO(rc, tb_layer_gelu_create(ctx, p[n - 1]->out, &p[n]), out_destroy);
    named(p[n++], "gelu");
    TB_TRY_GOTO(rc, tb_layer_token_linear_create(ctx, p[n - 1]->out, g->dim, &p[n]), out_destroy);
    init_linear(named(p[n++], "proj"), 0, 1, GPT2_STD / sqrtf(2.0f * (float)g->layers));
    return residual(ctx, p, n, "mlp", out);

out_destroy:
    destroy_n(p, n);
    return rc;
}

/* Block i: attn then mlp, as one sequence named h<i>. */
static int make_block(tb_layer_ctx *ctx, tb_shape x, const tb_gpt2_dims *g, int i,
                      tb_layer **out)
{
    tb_layer *p[2];
    char name[16];
    TB_TRY(make_attn(ctx, x, g, &p[0]));
    int rc = make_mlp(ctx, x, g, &p[1]);
    if (rc != TB_OK) {
        tb_layer_destroy(p[0]);
        return rc;
    }
    TB_TRY(tb_layer_seq_create(ctx, p, 2, out));
    snprintf(name, sizeof name, "h%d", i);
    named(*out, name);
    return TB_OK;
}

/* embed, h0 .. h(L-1), ln_f, head into ls (L + 3 slots); *n counts them. */
static int make_layers(tb_layer_ctx *ctx, const tb_gpt2_dims *g, tb_layer **ls, int *n)
{
    tb_shape ids = {1, g->context, 1}, x = {1, g->context, g->dim};
    tb_layer *embed;
    TB_TRY(tb_layer_embedding_create(ctx, ids, g->vocab, g->dim, g->context, &embed));
    ls[(*n)++] = named(embed, "embed");
    for (int i = 0; i < embed->nparams; i++)
        init_normal(embed, i, GPT2_STD);
    for (int i = 0; i < g->layers; i++) {
        TB_TRY(make_block(ctx, x, g, i, &ls[*n]));
        (*n)++;
    }
    TB_TRY(tb_layer_layernorm_create(ctx, x, &ls[*n]));
    named(ls[(*n)++], "ln_f");
    TB_TRY(tb_layer_tied_head_create(ctx, x, embed, &ls[*n]));
    named(ls[(*n)++], "head");
    return TB_OK;
}

static int build_net(tb_model *m, const tb_gpt2_dims *g)
{
    int n = 0, rc;
    tb_layer **ls = calloc((size_t)g->layers + 3, sizeof *ls);
    if (!ls)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory building GPT-2");
    rc = make_layers(&m->ctx, g, ls, &n);
    if (rc != TB_OK) {
        destroy_n(ls, n);
        free(ls);
        return rc;
    }
    /* token ids have no gradient */
    ls[0]->need_dx = 0;
    rc = tb_layer_seq_create(&m->ctx, ls, n, &m->net);
    free(ls);
    return rc;
}

int tb_model_build_gpt2(tb_backend *be, const tb_gpt2_dims *g, const tb_model_opts *o,
                        tb_model **out)
{
    tb_model *m;
    int rc;
    *out = NULL;
    TB_TRY(check_dims(g, o));
    TB_TRY(tb_model_shell_create(be, o, &m));
    m->in = (tb_shape){1, g->context, 1};
    m->in_dtype = TB_I32;
    m->labels_per_sample = g->context;
    TB_TRY_GOTO(rc, build_net(m, g), out_destroy);
    TB_TRY_GOTO(rc, tb_model_shell_finish(m, o), out_destroy);
    *out = m;
    return TB_OK;

out_destroy:
    tb_model_destroy(m);
    return rc;
}
