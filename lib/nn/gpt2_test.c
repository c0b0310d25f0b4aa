/*
 * gpt2_test.c - GPT-2 (lib/nn/model_gpt2.c) as a whole model on the CPU
 * backend: parameter counts, the loss at init, causality, a float64
 * gradient check through every layer (the tied head included), fused vs
 * manual attention, and one SGD step.
 *
 *   counts     the full GPT-2 small built at batch 1 has exactly 124,439,808
 *              parameters (the published count) = tb_gpt2_param_count; four
 *              other dims (odd sizes) match the closed form too; the print
 *              of the 12-block model stays short (repeated blocks one line);
 *              the flat parameters are in nanoGPT's state_dict order.
 *   init       GPT-2's init: weights' std 0.02, the residual projections'
 *              0.02 / sqrt(2 layers) (within 10%), biases 0, gamma 1.
 *              Small GPT-2s (2 layers, 2 and 4 heads, d 64, context 32,
 *              vocab 97, batch 2), GPT-2's init: loss within 0.1 of
 *              ln(vocab) (at N(0, 0.02) the logits have std ~0.02 sqrt(d) =
 *              0.16, which adds ~0.013), every gradient finite and some
 *              nonzero.
 *   reference  random parameters of O(1) effect (so attention is far from
 *              uniform and GELU far from linear), random tokens and labels:
 *              the fp32 loss within 1e-5 (relative; measured <= 6e-8) of a
 *              float64 model written here from the definition (embedding,
 *              pre-norm blocks, causal softmax attention, GELU, tied head,
 *              mean cross-entropy); then central differences (h = 1e-5) of that
 *              float64 loss for sampled entries of wte (rows the input uses
 *              and rows only the head reads), wpe, a layer norm gamma, the
 *              q, k and v parts of an attention input projection, an output
 *              projection, MLP weights and bias, ln_f: max |fp32 - fd| over
 *              max |fd| per group <= 1e-4 (measured <= 1.6e-6: fp32 rounding
 *              through every layer; the erf GELU where tanh is due, a
 *              difference of ~1e-3 in the activation, already fails it, and
 *              a wrong formula is off by O(1)). Gradients start as 1e30 with
 *              set_to_none: the first backward must write them all.
 *              Four sizes (1 to 3 layers, 1 to 4 heads, odd d and T), both
 *              GELU forms, both attention variants.
 *   causality  changing sample 0's token at position t changes none of its
 *              logits at positions < t, bit for bit (every op is row-wise or
 *              causal: masked scores are exact zeros), does change position
 *              t, and leaves sample 1 alone; both attention variants.
 *   variants   fused vs manual attention: losses within 1e-5 relative,
 *              gradients within 1e-4 (online softmax rounds differently).
 *   sgd        one SGD step (lr 0.1) on a batch lowers that batch's loss.
 *   memory     --checkpointing (the GELUs recomputed) gives bitwise the same
 *              loss, logits and gradients; no_grad the same loss and logits.
 *
 * Run: bazel test //lib/nn:gpt2_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/core/rng.h"
#include "lib/nn/model.h"
#include "lib/nn/nn_testing.h"
#include "lib/nn/tensor.h"

#define FD_H 1e-5
#define TOL_LOSS 1e-5
#define TOL_GRAD 1e-4
#define TOL_VARIANT_LOSS 1e-5
#define TOL_VARIANT_GRAD 1e-4
#define MAX_LAYERS 4
#define GPT2_SMALL_PARAMS 124439808u

static tb_rng rng = {0x6a09e667f3bcc908ull};
static double urand(void) /* [-1, 1) */
{
    return tb_rng_uniform(&rng, -1, 1);
}

/* ---- a model and a batch on the device ---- */
typedef struct run {
    tb_model *m;
    tb_gpt2_dims g;
    int n;                /* batch */
    tb_tensor x;          /* (n, 1, T, 1) int32 token ids */
    int32_t *labels;      /* (n * T) device */
    int32_t *tok, *lab;   /* host copies */
} run;

/* A model of dims g built with o (classes, batch n and gelu_approx set
 * here), random tokens and labels. */
static int run_open_opts(tb_backend *be, const tb_gpt2_dims *g, int n, tb_gelu_approx approx,
                         tb_model_opts o, run *r)
{
    memset(r, 0, sizeof *r);
    r->g = *g;
    r->n = n;
    o.classes = g->vocab;
    o.max_batch = n;
    o.gelu_approx = approx;
    size_t rows = (size_t)n * g->context;
    TB_TRY(tb_model_build_gpt2(be, g, &o, &r->m));
    TB_TRY(tb_tensor_alloc(be, n, 1, g->context, 1, &r->x));
    r->x.dtype = TB_I32;
    TB_TRY(be->dev_alloc(be, (void **)&r->labels, rows * sizeof(int32_t)));
    r->tok = malloc(rows * sizeof(int32_t));
    r->lab = malloc(rows * sizeof(int32_t));
    if (!r->tok || !r->lab)
        return TB_FAIL(TB_ERR_NOMEM, "token buffers");
    for (size_t i = 0; i < rows; i++) {
        r->tok[i] = (int32_t)tb_rng_below(&rng, (uint32_t)g->vocab);
        r->lab[i] = (int32_t)tb_rng_below(&rng, (uint32_t)g->vocab);
    }
    return TB_OK;
}

static int run_open(tb_backend *be, const tb_gpt2_dims *g, int n, tb_gelu_approx approx,
                    uint64_t seed, run *r)
{
    return run_open_opts(be, g, n, approx, (tb_model_opts){.seed = seed}, r);
}

static void run_close(tb_backend *be, run *r)
{
    tb_model_destroy(r->m);
    tb_tensor_free(&r->x);
    if (r->labels)
        be->dev_free(be, r->labels);
    free(r->tok);
    free(r->lab);
}

static size_t run_rows(const run *r) { return (size_t)r->n * r->g.context; }

static int upload_batch(tb_backend *be, run *r)
{
    size_t bytes = run_rows(r) * sizeof(int32_t);
    TB_TRY(be->copy_h2d(be, r->x.data, r->tok, bytes, NULL));
    return be->copy_h2d(be, r->labels, r->lab, bytes, NULL);
}

/* Forward and loss; logits_host (rows x vocab) may be NULL. */
static int forward_loss(tb_backend *be, run *r, float *loss, float *logits_host)
{
    const tb_tensor *logits;
    TB_TRY(upload_batch(be, r));
    TB_TRY(tb_model_forward_loss(r->m, &r->x, r->labels, &logits));
    if (logits_host)
        TB_TRY(tb_tensor_to_host(logits, logits_host));
    return tb_xent_read_loss(&r->m->loss, loss);
}

/* Loss and gradients (written into garbage: set_to_none contract). */
static int loss_and_grad(tb_backend *be, run *r, float *loss, float *grad_host)
{
    tb_model *m = r->m;
    size_t bytes = m->numel * sizeof(float);
    for (size_t i = 0; i < m->numel; i++)
        grad_host[i] = 1e30f;
    TB_TRY(be->copy_h2d(be, m->flat_g, grad_host, bytes, NULL));
    TB_TRY(tb_model_zero_grad(m, 1));
    TB_TRY(forward_loss(be, r, loss, NULL));
    TB_TRY(tb_model_backward(m, 1.0f));
    return be->copy_d2h(be, grad_host, m->flat_g, bytes, NULL);
}

/* ---- float64 GPT-2, from the definition ---- */
typedef struct ref_block {
    size_t ln1[2], attn[4], ln2[2], fc[2], proj[2]; /* offsets into the flat parameters */
} ref_block;

typedef struct ref_model {
    tb_gpt2_dims g;
    tb_gelu_approx approx;
    size_t wte, wpe, lnf[2];
    ref_block blk[MAX_LAYERS];
} ref_model;

static size_t off(const tb_model *m, const tb_layer *l, int i)
{
    return (size_t)(l->params[i].w - m->flat_w);
}

/* Offsets from the layer tree: embed, h<i> = seq(attn = x + seq(ln_1,
 * mha), mlp = x + seq(ln_2, fc, gelu, proj)), ln_f, head. */
static void ref_from_model(const run *r, tb_gelu_approx approx, ref_model *rm)
{
    const tb_model *m = r->m;
    tb_layer *const *top = m->net->children;
    rm->g = r->g;
    rm->approx = approx;
    rm->wte = off(m, top[0], 0);
    rm->wpe = off(m, top[0], 1);
    for (int b = 0; b < r->g.layers; b++) {
        tb_layer *const *attn = top[1 + b]->children[0]->children[0]->children;
        tb_layer *const *mlp = top[1 + b]->children[1]->children[0]->children;
        ref_block *k = &rm->blk[b];
        for (int i = 0; i < 2; i++) {
            k->ln1[i] = off(m, attn[0], i);
            k->ln2[i] = off(m, mlp[0], i);
            k->fc[i] = off(m, mlp[1], i);
            k->proj[i] = off(m, mlp[3], i);
            rm->lnf[i] = off(m, top[1 + r->g.layers], i);
        }
        for (int i = 0; i < 4; i++)
            k->attn[i] = off(m, attn[1], i);
    }
}

static void ref_ln(const double *x, const double *gamma, const double *beta, int rows, int d,
                   double *y)
{
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * d;
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++)
            mean += xr[i];
        mean /= d;
        for (int i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        double rstd = 1.0 / sqrt(var / d + 1e-5);
        for (int i = 0; i < d; i++)
            y[(size_t)r * d + i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
    }
}

static double ref_gelu(double x, tb_gelu_approx approx)
{
    if (approx == TB_GELU_TANH)
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

/* o (rows, d) = causal softmax attention of qkv (rows, 3d: q | k | v, head
 * h at columns h*D of each), per sample and head. */
static void ref_attn(const ref_model *rm, int n, const double *qkv, double *o, double *s)
{
    int T = rm->g.context, d = rm->g.dim, H = rm->g.heads, D = d / H;
    double scale = (double)(1.0f / sqrtf((float)D)); /* the layer's float scale */
    for (int b = 0; b < n; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * 3 * d + h * D;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * 3 * d + d + h * D;
                    double dot = 0;
                    for (int e = 0; e < D; e++)
                        dot += q[e] * k[e];
                    s[j] = dot * scale;
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= i; j++)
                    sum += s[j] = exp(s[j] - mx);
                double *out = o + ((size_t)b * T + i) * d + h * D;
                for (int e = 0; e < D; e++) {
                    double acc = 0;
                    for (int j = 0; j <= i; j++)
                        acc += s[j] * qkv[((size_t)b * T + j) * 3 * d + 2 * d + h * D + e];
                    out[e] = acc / sum;
                }
            }
}

typedef struct ref_bufs {
    double *x, *h;        /* (rows, d): the residual stream, a layer's output */
    double *big;          /* (rows, max(3d, mlp, vocab)) */
    double *o, *s;        /* (rows, d) attention output, (T) one row of scores */
} ref_bufs;

/* y += f where f = x W^T + b (rows, d). */
static void add_linear(int rows, int in, int out, const double *x, const double *w,
                       const double *b, double *tmp, double *y)
{
    tb_linear_ref_f64(rows, in, out, x, w, b, tmp);
    for (size_t i = 0; i < (size_t)rows * out; i++)
        y[i] += tmp[i];
}

static void ref_block_fwd(const ref_model *rm, const ref_block *k, const double *w, int n,
                          ref_bufs *bf)
{
    int rows = n * rm->g.context, d = rm->g.dim, mlp = rm->g.mlp;
    ref_ln(bf->x, w + k->ln1[0], w + k->ln1[1], rows, d, bf->h);
    tb_linear_ref_f64(rows, d, 3 * d, bf->h, w + k->attn[0], w + k->attn[1], bf->big);
    ref_attn(rm, n, bf->big, bf->o, bf->s);
    add_linear(rows, d, d, bf->o, w + k->attn[2], w + k->attn[3], bf->h, bf->x);
    ref_ln(bf->x, w + k->ln2[0], w + k->ln2[1], rows, d, bf->h);
    tb_linear_ref_f64(rows, d, mlp, bf->h, w + k->fc[0], w + k->fc[1], bf->big);
    for (size_t i = 0; i < (size_t)rows * mlp; i++)
        bf->big[i] = ref_gelu(bf->big[i], rm->approx);
    add_linear(rows, mlp, d, bf->big, w + k->proj[0], w + k->proj[1], bf->h, bf->x);
}

/* Mean cross-entropy over the n x T positions of tokens tok, labels lab. */
static double ref_loss(const ref_model *rm, const double *w, int n, const int32_t *tok,
                       const int32_t *lab, ref_bufs *bf)
{
    int T = rm->g.context, d = rm->g.dim, V = rm->g.vocab, rows = n * T;
    for (int r = 0; r < rows; r++)
        for (int e = 0; e < d; e++)
            bf->x[(size_t)r * d + e] =
                w[rm->wte + (size_t)tok[r] * d + e] + w[rm->wpe + (size_t)(r % T) * d + e];
    for (int b = 0; b < rm->g.layers; b++)
        ref_block_fwd(rm, &rm->blk[b], w, n, bf);
    ref_ln(bf->x, w + rm->lnf[0], w + rm->lnf[1], rows, d, bf->h);
    double total = 0;
    for (int r = 0; r < rows; r++) {
        double *lg = bf->big, mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) {
            double dot = 0;
            for (int e = 0; e < d; e++)
                dot += bf->h[(size_t)r * d + e] * w[rm->wte + (size_t)v * d + e];
            lg[v] = dot;
            mx = fmax(mx, dot);
        }
        for (int v = 0; v < V; v++)
            sum += exp(lg[v] - mx);
        total += mx + log(sum) - lg[lab[r]];
    }
    return total / rows;
}

static int ref_bufs_alloc(const tb_gpt2_dims *g, int n, ref_bufs *bf)
{
    size_t rows = (size_t)n * g->context, wide = 3 * (size_t)g->dim;
    if ((size_t)g->mlp > wide)
        wide = (size_t)g->mlp;
    if ((size_t)g->vocab > wide)
        wide = (size_t)g->vocab;
    bf->x = malloc(rows * g->dim * sizeof(double));
    bf->h = malloc(rows * g->dim * sizeof(double));
    bf->big = malloc(rows * wide * sizeof(double));
    bf->o = malloc(rows * g->dim * sizeof(double));
    bf->s = malloc((size_t)g->context * sizeof(double));
    if (!bf->x || !bf->h || !bf->big || !bf->o || !bf->s)
        return TB_FAIL(TB_ERR_NOMEM, "reference buffers");
    return TB_OK;
}

static void ref_bufs_free(ref_bufs *bf)
{
    free(bf->x), free(bf->h), free(bf->big), free(bf->o), free(bf->s);
}

/* ---- random parameters of O(1) effect ---- */
static int randomize_params(tb_backend *be, run *r, const ref_model *rm, float *host)
{
    tb_model *m = r->m;
    size_t at = 0;
    for (int i = 0; i < m->nparams; i++) {
        const tb_param *p = m->params[i];
        int gamma = !strcmp(p->name, "gamma"), shift = !strcmp(p->name, "beta") ||
                                                      !strcmp(p->name, "bias");
        for (size_t j = 0; j < p->n; j++)
            host[at + j] = (float)(gamma ? 1.0 + 0.3 * urand() : (shift ? 0.1 : 0.2) * urand());
        at += p->n;
    }
    for (size_t j = 0; j < (size_t)r->g.vocab * r->g.dim; j++)
        host[rm->wte + j] = (float)(0.5 * urand());
    for (size_t j = 0; j < (size_t)r->g.context * r->g.dim; j++)
        host[rm->wpe + j] = (float)(0.5 * urand());
    return be->copy_h2d(be, m->flat_w, host, m->numel * sizeof(float), NULL);
}

/* ---- the float64 gradient check ---- */
typedef struct fd_group {
    const char *name;
    size_t idx[12];       /* flat indices */
    int n;
} fd_group;

static void group_add(fd_group *gr, size_t i)
{
    if (gr->n < (int)(sizeof gr->idx / sizeof gr->idx[0]))
        gr->idx[gr->n++] = i;
}

/* k random entries of [base, base + count) */
static void group_sample(fd_group *gr, size_t base, size_t count, int k)
{
    for (int i = 0; i < k; i++)
        group_add(gr, base + tb_rng_index(&rng, count));
}

/* wte entries of rows the input uses (embedding + head) and rows it does
 * not (head only). */
static void group_wte(fd_group *used, fd_group *unused, const run *r, const ref_model *rm)
{
    int V = r->g.vocab, d = r->g.dim;
    char *seen = calloc((size_t)V, 1);
    for (size_t i = 0; i < run_rows(r); i++)
        seen[r->tok[i]] = 1;
    for (int tries = 0; tries < 10000 && (used->n < 6 || unused->n < 6); tries++) {
        int v = (int)tb_rng_below(&rng, (uint32_t)V);
        fd_group *gr = seen[v] ? used : unused;
        if (gr->n < 6)
            group_add(gr, rm->wte + (size_t)v * d + tb_rng_below(&rng, (uint32_t)d));
    }
    free(seen);
}

static double check_group(const ref_model *rm, const run *r, double *w, const float *grad,
                          const fd_group *gr, ref_bufs *bf)
{
    double num = 0, den = 1e-30;
    for (int i = 0; i < gr->n; i++) {
        size_t j = gr->idx[i];
        double keep = w[j];
        w[j] = keep + FD_H;
        double lp = ref_loss(rm, w, r->n, r->tok, r->lab, bf);
        w[j] = keep - FD_H;
        double lm = ref_loss(rm, w, r->n, r->tok, r->lab, bf);
        w[j] = keep;
        double fd = (lp - lm) / (2 * FD_H);
        num = fmax(num, fabs(grad[j] - fd));
        den = fmax(den, fabs(fd));
    }
    return num / den;
}

static int make_groups(const run *r, const ref_model *rm, fd_group *gr)
{
    int d = r->g.dim, L = r->g.layers, n = 0;
    const ref_block *b0 = &rm->blk[0], *bl = &rm->blk[L - 1];
    size_t dd = (size_t)d * d;
    gr[n].name = "wte, rows in the input";
    gr[n + 1].name = "wte, rows only the head reads";
    group_wte(&gr[n], &gr[n + 1], r, rm);
    n += 2;
    gr[n].name = "wpe";
    group_sample(&gr[n++], rm->wpe, (size_t)r->g.context * d, 4);
    gr[n].name = "h0 ln_1 gamma";
    group_sample(&gr[n++], b0->ln1[0], (size_t)d, 4);
    gr[n].name = "h0 attention W_in (q, k, v)";
    for (int s = 0; s < 3; s++)
        group_sample(&gr[n], b0->attn[0] + s * dd, dd, 2);
    n++;
    gr[n].name = "last block attention W_out";
    group_sample(&gr[n++], bl->attn[2], dd, 4);
    gr[n].name = "h0 mlp fc weight";
    group_sample(&gr[n++], b0->fc[0], (size_t)d * r->g.mlp, 4);
    gr[n].name = "last block mlp proj bias";
    group_sample(&gr[n++], bl->proj[1], (size_t)d, 3);
    gr[n].name = "ln_f gamma, beta";
    group_sample(&gr[n], rm->lnf[0], (size_t)d, 3);
    group_sample(&gr[n++], rm->lnf[1], (size_t)d, 2);
    return n;
}

typedef struct fd_case {
    tb_gpt2_dims g;
    int n;
    tb_gelu_approx approx;
    tb_attn_variant attn;
} fd_case;

static void describe(const fd_case *c, char *buf, size_t len)
{
    snprintf(buf, len, "L%d H%d d%d mlp%d T%d V%d batch %d, %s GELU, %s attention", c->g.layers,
             c->g.heads, c->g.dim, c->g.mlp, c->g.context, c->g.vocab, c->n,
             c->approx == TB_GELU_TANH ? "tanh" : "erf",
             c->attn == TB_ATTN_FUSED ? "fused" : "manual");
}

static int check_fd_case(tb_backend *be, const fd_case *c)
{
    run r;
    ref_model rm;
    ref_bufs bf = {0};
    fd_group gr[10];
    char what[256], name[160];
    float loss, *host = NULL, *grad = NULL;
    double *w = NULL;
    int rc;
    memset(gr, 0, sizeof gr);
    describe(c, name, sizeof name);
    TB_TRY_GOTO(rc, run_open(be, &c->g, c->n, c->approx, 11, &r), out_close);
    r.m->ctx.attention = c->attn;
    ref_from_model(&r, c->approx, &rm);
    host = malloc(r.m->numel * sizeof(float));
    grad = malloc(r.m->numel * sizeof(float));
    w = malloc(r.m->numel * sizeof(double));
    if (!host || !grad || !w) {
        rc = TB_FAIL(TB_ERR_NOMEM, "parameter copies");
        goto out_close;
    }
    TB_TRY_GOTO(rc, ref_bufs_alloc(&c->g, c->n, &bf), out_close);
    TB_TRY_GOTO(rc, randomize_params(be, &r, &rm, host), out_close);
    for (size_t i = 0; i < r.m->numel; i++)
        w[i] = host[i];
    TB_TRY_GOTO(rc, loss_and_grad(be, &r, &loss, grad), out_close);
    double ref = ref_loss(&rm, w, c->n, r.tok, r.lab, &bf);
    double e = fabs(loss - ref) / fabs(ref);
    snprintf(what, sizeof what, "%s: loss %.6f vs float64 %.6f, rel err %.1e <= %.0e", name,
             loss, ref, e, TOL_LOSS);
    CHECK_WHAT(e <= TOL_LOSS, what);
    int ng = make_groups(&r, &rm, gr);
    for (int i = 0; i < ng; i++) {
        e = check_group(&rm, &r, w, grad, &gr[i], &bf);
        snprintf(what, sizeof what, "%s: d loss / d %s (%d entries) rel err %.1e <= %.0e",
                 name, gr[i].name, gr[i].n, e, TOL_GRAD);
        CHECK_WHAT(e <= TOL_GRAD, what);
    }

out_close:
    free(host);
    free(grad);
    free(w);
    ref_bufs_free(&bf);
    run_close(be, &r);
    return rc;
}

static tb_gpt2_dims small_dims(int heads)
{
    return (tb_gpt2_dims){.layers = 2, .heads = heads, .dim = 64, .mlp = 256, .context = 32,
                          .vocab = 97};
}

static int check_gradients(tb_backend *be)
{
    const fd_case cases[] = {
        {small_dims(4), 2, TB_GELU_TANH, TB_ATTN_MANUAL},
        {small_dims(2), 2, TB_GELU_TANH, TB_ATTN_FUSED},
        {{.layers = 3, .heads = 3, .dim = 24, .mlp = 40, .context = 7, .vocab = 13}, 3,
         TB_GELU_ERF, TB_ATTN_MANUAL},
        {{.layers = 1, .heads = 1, .dim = 9, .mlp = 17, .context = 5, .vocab = 31}, 1,
         TB_GELU_TANH, TB_ATTN_FUSED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        TB_TRY(check_fd_case(be, &cases[i]));
    return TB_OK;
}

/* ---- counts and print ---- */
static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static int check_print(const tb_model *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return TB_FAIL(TB_ERR_NOMEM, "open_memstream");
    tb_model_print(m, f);
    fclose(f);
    char what[160];
    int lines = count_lines(buf);
    snprintf(what, sizeof what, "GPT-2 small prints in %d lines (<= 30), h11 \"as h0\"", lines);
    CHECK_WHAT(lines <= 30 && strstr(buf, "h11") && strstr(buf, "as h0") &&
                   strstr(buf, "124439808 parameters"), what);
    if (tb_test_verbose)
        fputs(buf, stdout);
    free(buf);
    return TB_OK;
}

static int check_counts(tb_backend *be)
{
    tb_gpt2_dims small = tb_gpt2_small();
    char what[160];
    snprintf(what, sizeof what, "tb_gpt2_param_count(GPT-2 small) = %zu (124,439,808)",
             tb_gpt2_param_count(&small));
    CHECK_WHAT(tb_gpt2_param_count(&small) == GPT2_SMALL_PARAMS, what);
    const tb_gpt2_dims dims[] = {
        small,
        {.layers = 1, .heads = 1, .dim = 8, .mlp = 12, .context = 5, .vocab = 11},
        {.layers = 3, .heads = 4, .dim = 32, .mlp = 64, .context = 7, .vocab = 50},
        {.layers = 2, .heads = 3, .dim = 21, .mlp = 5, .context = 1, .vocab = 2},
        small_dims(4),
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        tb_model *m;
        tb_model_opts o = {.classes = dims[i].vocab, .max_batch = 1, .seed = 1,
                           .gelu_approx = TB_GELU_TANH};
        TB_TRY(tb_model_build_gpt2(be, &dims[i], &o, &m));
        size_t want = tb_gpt2_param_count(&dims[i]);
        snprintf(what, sizeof what, "GPT-2 L%d H%d d%d mlp%d T%d V%d: %zu parameters built = "
                 "%zu closed form; int32 input (1, %d, 1), %d labels per sample",
                 dims[i].layers, dims[i].heads, dims[i].dim, dims[i].mlp, dims[i].context,
                 dims[i].vocab, m->numel, want, dims[i].context, dims[i].context);
        CHECK_WHAT(m->numel == want && m->in_dtype == TB_I32 && m->in.c == 1 &&
                       m->in.h == dims[i].context && m->in.w == 1 &&
                       m->labels_per_sample == dims[i].context, what);
        int rc = i == 0 ? check_print(m) : TB_OK;
        tb_model_destroy(m);
        TB_TRY(rc);
    }
    return TB_OK;
}

/* The flat buffer holds nanoGPT's state_dict order: wte, wpe, per block
 * ln_1 (w, b), c_attn (w, b), c_proj (w, b), ln_2, c_fc, mlp c_proj, then
 * ln_f, each of its PyTorch size, back to back. */
static int check_order(tb_backend *be)
{
    tb_gpt2_dims g = {.layers = 2, .heads = 2, .dim = 6, .mlp = 10, .context = 5, .vocab = 7};
    size_t d = (size_t)g.dim, m = (size_t)g.mlp;
    run r;
    ref_model rm;
    int rc, ok = 1;
    TB_TRY_GOTO(rc, run_open(be, &g, 1, TB_GELU_TANH, 1, &r), out_close);
    ref_from_model(&r, TB_GELU_TANH, &rm);
    size_t want[2 + 12 * 2 + 2][2], at = 0; /* offset, size */
    int n = 0;
#define NEXT(off, size) (want[n][0] = (off), want[n][1] = (size), n++)
    NEXT(rm.wte, g.vocab * d);
    NEXT(rm.wpe, g.context * d);
    for (int b = 0; b < g.layers; b++) {
        const ref_block *k = &rm.blk[b];
        NEXT(k->ln1[0], d), NEXT(k->ln1[1], d);
        NEXT(k->attn[0], 3 * d * d), NEXT(k->attn[1], 3 * d);
        NEXT(k->attn[2], d * d), NEXT(k->attn[3], d);
        NEXT(k->ln2[0], d), NEXT(k->ln2[1], d);
        NEXT(k->fc[0], m * d), NEXT(k->fc[1], m);
        NEXT(k->proj[0], d * m), NEXT(k->proj[1], d);
    }
    NEXT(rm.lnf[0], d), NEXT(rm.lnf[1], d);
#undef NEXT
    ok = r.m->nparams == n;
    for (int i = 0; i < n && ok; i++) {
        ok = want[i][0] == at && r.m->params[i]->n == want[i][1];
        at += want[i][1];
    }
    CHECK(ok && at == r.m->numel, "flat parameters in nanoGPT's state_dict order and sizes "
          "(%d tensors)", n);

out_close:
    run_close(be, &r);
    return rc;
}

/* Bad dims, a vocabulary that is not o->classes, an fp32 input: refused. */
static int check_refusals(tb_backend *be)
{
    tb_gpt2_dims g = small_dims(4);
    tb_model_opts o = {.classes = g.vocab + 1, .max_batch = 1};
    tb_model *m = NULL;
    CHECK(tb_model_build_gpt2(be, &g, &o, &m) == TB_ERR_INVALID && !m,
          "o->classes != vocab refused");
    g.heads = 5;
    o.classes = g.vocab;
    CHECK(tb_model_build_gpt2(be, &g, &o, &m) == TB_ERR_INVALID && !m,
          "d not a multiple of heads refused");
    g.heads = 4;
    int (*lse_fwd)(tb_backend *, const float *, const int32_t *, int, int, float *, float *) =
        be->xent_lse_fwd;
    size_t before, after;
    TB_TRY(be->mem_stats(be, &before, NULL));
    be->xent_lse_fwd = NULL; /* a backend without the token loss */
    int built = tb_model_build_gpt2(be, &g, &o, &m);
    be->xent_lse_fwd = lse_fwd;
    TB_TRY(be->mem_stats(be, &after, NULL));
    CHECK(built == TB_ERR_UNSUPPORTED && !m && after == before,
          "a backend without xent_lse_fwd refused (TB_ERR_UNSUPPORTED), its device memory "
          "freed (%zu bytes in use before and %zu after)", before, after);
    tb_error_clear();
    run r;
    int rc;
    TB_TRY_GOTO(rc, run_open(be, &(tb_gpt2_dims){1, 1, 8, 8, 4, 5}, 1, TB_GELU_TANH, 1, &r),
                out_close);
    const tb_tensor *logits;
    r.x.dtype = TB_F32;
    CHECK(tb_model_forward(r.m, &r.x, &logits) == TB_ERR_INVALID, "fp32 input refused");
    tb_error_clear();

out_close:
    run_close(be, &r);
    return rc;
}

/* ---- at init ---- */

/* sqrt(mean(x^2)) of n floats, and whether all are exactly v when v >= 0 */
static double rms(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return sqrt(s / (double)n);
}

static int all_equal(const float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != v)
            return 0;
    return 1;
}

/* GPT-2's init: N(0, 0.02) weights and embeddings, residual projections
 * N(0, 0.02 / sqrt(2 layers)), zero biases, layer norms 1 and 0. The
 * smallest sampled tensor has 4096 values: its std estimate is within ~2%
 * (1/sqrt(2n)); 10% tells 0.02 from 0.01 and from the uniform default. */
/* The embedding of a vocabulary of 40,000 x d 64 (2.56M values, three of
 * params_init_host's chunks of 2^20) holds exactly what one sequential draw
 * of its stream gives (wte is the first weight: stream 0), so drawing the
 * chunks on several threads changed no value. */
static int check_init_chunks(tb_backend *be)
{
    tb_gpt2_dims g = {.layers = 1, .heads = 1, .dim = 64, .mlp = 64, .context = 4,
                      .vocab = 40000};
    const uint64_t seed = 5;
    tb_model *m;
    tb_model_opts o = {.classes = g.vocab, .max_batch = 1, .seed = seed,
                       .gelu_approx = TB_GELU_TANH};
    TB_TRY(tb_model_build_gpt2(be, &g, &o, &m));
    size_t n = (size_t)g.vocab * g.dim;
    float *got = malloc(m->numel * sizeof *got), *want = malloc(n * sizeof *want);
    int rc = got && want ? TB_OK : TB_FAIL(TB_ERR_NOMEM, "init chunk buffers");
    if (rc == TB_OK)
        rc = be->copy_d2h(be, got, m->flat_w, m->numel * sizeof(float), NULL);
    if (rc == TB_OK) {
        tb_param p = *m->params[0];
        tb_rng r = tb_rng_seeded(seed * 0x100000001b3ull);
        tb_rng_next_u64(&r);
        tb_param_init_host(&p, &r, want);
        CHECK(p.n == n && memcmp(got, want, n * sizeof *want) == 0,
              "init: wte's %zu values drawn in chunks on all threads = one sequential draw", n);
    }
    free(got);
    free(want);
    tb_model_destroy(m);
    return rc;
}

static int check_init_values(tb_backend *be)
{
    tb_gpt2_dims g = small_dims(4);
    run r;
    ref_model rm;
    float *w = NULL;
    char what[200];
    int rc, d = g.dim;
    size_t dd = (size_t)d * d;
    TB_TRY_GOTO(rc, run_open(be, &g, 1, TB_GELU_TANH, 3, &r), out_close);
    ref_from_model(&r, TB_GELU_TANH, &rm);
    w = malloc(r.m->numel * sizeof(float));
    if (!w) {
        rc = TB_FAIL(TB_ERR_NOMEM, "parameter copy");
        goto out_close;
    }
    TB_TRY_GOTO(rc, be->copy_d2h(be, w, r.m->flat_w, r.m->numel * sizeof(float), NULL),
                out_close);
    double resid = 0.02 / sqrt(2.0 * g.layers);
    const struct { const char *name; size_t at, n; double std; } t[] = {
        {"wte", rm.wte, (size_t)g.vocab * d, 0.02},
        {"wpe", rm.wpe, (size_t)g.context * d, 0.02},
        {"h0 attention W_in", rm.blk[0].attn[0], 3 * dd, 0.02},
        {"h0 attention W_out", rm.blk[0].attn[2], dd, resid},
        {"h1 mlp fc", rm.blk[1].fc[0], (size_t)d * g.mlp, 0.02},
        {"h1 mlp proj", rm.blk[1].proj[0], (size_t)d * g.mlp, resid},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        double s = rms(w + t[i].at, t[i].n);
        snprintf(what, sizeof what, "init: %s std %.5f within 10%% of %.5f", t[i].name, s,
                 t[i].std);
        CHECK_WHAT(fabs(s - t[i].std) <= 0.1 * t[i].std, what);
    }
    int zeros = 1, ones = 1;
    for (int b = 0; b < g.layers; b++) {
        const ref_block *k = &rm.blk[b];
        zeros &= all_equal(w + k->attn[1], 3 * (size_t)d, 0) &&
                 all_equal(w + k->attn[3], (size_t)d, 0) &&
                 all_equal(w + k->fc[1], (size_t)g.mlp, 0) &&
                 all_equal(w + k->proj[1], (size_t)d, 0) &&
                 all_equal(w + k->ln1[1], (size_t)d, 0) && all_equal(w + k->ln2[1], (size_t)d, 0);
        ones &= all_equal(w + k->ln1[0], (size_t)d, 1) && all_equal(w + k->ln2[0], (size_t)d, 1);
    }
    zeros &= all_equal(w + rm.lnf[1], (size_t)d, 0);
    ones &= all_equal(w + rm.lnf[0], (size_t)d, 1);
    CHECK(zeros && ones, "init: every bias and layer norm beta 0, every gamma 1");

out_close:
    free(w);
    run_close(be, &r);
    return rc;
}
static int check_init(tb_backend *be, int heads)
{
    tb_gpt2_dims g = small_dims(heads);
    run r;
    float loss, *grad = NULL;
    char what[200];
    int rc;
    TB_TRY_GOTO(rc, run_open(be, &g, 2, TB_GELU_TANH, 5, &r), out_close);
    grad = malloc(r.m->numel * sizeof(float));
    if (!grad) {
        rc = TB_FAIL(TB_ERR_NOMEM, "gradient copy");
        goto out_close;
    }
    TB_TRY_GOTO(rc, loss_and_grad(be, &r, &loss, grad), out_close);
    size_t finite = 0, nonzero = 0;
    for (size_t i = 0; i < r.m->numel; i++) {
        finite += isfinite(grad[i]) != 0;
        nonzero += grad[i] != 0;
    }
    double lnv = log((double)g.vocab);
    snprintf(what, sizeof what, "init (%d heads): loss %.4f within 0.1 of ln(%d) = %.4f; "
             "%zu/%zu gradients finite, %zu nonzero", heads, loss, g.vocab, lnv, finite,
             r.m->numel, nonzero);
    CHECK_WHAT(isfinite(loss) && fabs(loss - lnv) < 0.1 && finite == r.m->numel &&
                   nonzero > r.m->numel / 2, what);

out_close:
    free(grad);
    run_close(be, &r);
    return rc;
}

/* ---- causality ---- */
static int check_causal(tb_backend *be, tb_attn_variant variant)
{
    tb_gpt2_dims g = small_dims(2);
    run r;
    ref_model rm;
    int T = g.context, V = g.vocab, t = T / 2, rc;
    size_t per = (size_t)T * V, total = 2 * per;
    float loss, *a = malloc(total * sizeof(float)), *b = malloc(total * sizeof(float));
    float *host = NULL;
    char what[200];
    TB_TRY_GOTO(rc, run_open(be, &g, 2, TB_GELU_TANH, 7, &r), out_close);
    r.m->ctx.attention = variant;
    host = malloc(r.m->numel * sizeof(float));
    if (!a || !b || !host) {
        rc = TB_FAIL(TB_ERR_NOMEM, "logit copies");
        goto out_close;
    }
    ref_from_model(&r, TB_GELU_TANH, &rm);
    TB_TRY_GOTO(rc, randomize_params(be, &r, &rm, host), out_close);
    TB_TRY_GOTO(rc, forward_loss(be, &r, &loss, a), out_close);
    r.tok[t] = (r.tok[t] + 1 + (int32_t)tb_rng_below(&rng, (uint32_t)V - 1)) % V;
    TB_TRY_GOTO(rc, forward_loss(be, &r, &loss, b), out_close);
    size_t before = 0, at_t = 0, other = 0;
    for (size_t i = 0; i < (size_t)t * V; i++)
        before += a[i] != b[i];
    for (size_t i = (size_t)t * V; i < (size_t)(t + 1) * V; i++)
        at_t += a[i] != b[i];
    for (size_t i = per; i < total; i++)
        other += a[i] != b[i];
    snprintf(what, sizeof what, "causal (%s): token %d changed: %zu logits differ before it "
             "(0), %zu of %d at it (> 0), %zu in the other sample (0)",
             variant == TB_ATTN_FUSED ? "fused" : "manual", t, before, at_t, V, other);
    CHECK_WHAT(before == 0 && at_t > 0 && other == 0, what);

out_close:
    free(a);
    free(b);
    free(host);
    run_close(be, &r);
    return rc;
}

/* ---- fused vs manual attention ---- */
static double max_rel(const float *a, const float *b, size_t n)
{
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return num / den;
}

static int check_variants(tb_backend *be)
{
    tb_gpt2_dims g = small_dims(4);
    run r;
    float lm, lf, *gm = NULL, *gf = NULL;
    char what[200];
    int rc;
    TB_TRY_GOTO(rc, run_open(be, &g, 2, TB_GELU_TANH, 9, &r), out_close);
    gm = malloc(r.m->numel * sizeof(float));
    gf = malloc(r.m->numel * sizeof(float));
    if (!gm || !gf) {
        rc = TB_FAIL(TB_ERR_NOMEM, "gradient copies");
        goto out_close;
    }
    r.m->ctx.attention = TB_ATTN_MANUAL;
    TB_TRY_GOTO(rc, loss_and_grad(be, &r, &lm, gm), out_close);
    r.m->ctx.attention = TB_ATTN_FUSED;
    TB_TRY_GOTO(rc, loss_and_grad(be, &r, &lf, gf), out_close);
    double el = fabs((double)lf - lm) / fabs((double)lm), eg = max_rel(gf, gm, r.m->numel);
    snprintf(what, sizeof what, "fused vs manual attention: loss rel diff %.1e <= %.0e, "
             "gradients %.1e <= %.0e", el, TOL_VARIANT_LOSS, eg, TOL_VARIANT_GRAD);
    CHECK_WHAT(el <= TOL_VARIANT_LOSS && eg <= TOL_VARIANT_GRAD, what);

out_close:
    free(gm);
    free(gf);
    run_close(be, &r);
    return rc;
}

/* ---- activation memory: no_grad and checkpointing change no result ---- */

static int count_checkpointed(const tb_layer *l)
{
    int n = l->checkpoint;
    for (int i = 0; i < l->nchildren; i++)
        n += count_checkpointed(l->children[i]);
    return n;
}

/* Logits (host, rows x vocab), loss and gradients of a fresh small model
 * built with checkpointing ckpt (*marked: its checkpointed layers); under
 * no_grad when no_grad (no gradients). The same tokens every call. */
static int mem_run(tb_backend *be, int ckpt, int no_grad, float *logits, float *loss,
                   float *grad, int *marked, size_t *built_bytes)
{
    tb_gpt2_dims g = small_dims(4);
    run r;
    int rc;
    tb_rng keep = rng;
    size_t before = 0, after = 0, peak;
    TB_TRY(be->mem_stats(be, &before, &peak));
    TB_TRY_GOTO(rc, run_open_opts(be, &g, 2, TB_GELU_TANH,
                                  (tb_model_opts){.seed = 21, .checkpointing = ckpt}, &r),
                out_close);
    TB_TRY_GOTO(rc, be->mem_stats(be, &after, &peak), out_close);
    *built_bytes = after - before;
    rng = keep;
    *marked = count_checkpointed(r.m->net);
    if (no_grad) {
        TB_TRY_GOTO(rc, tb_model_set_no_grad(r.m, 1), out_close);
        TB_TRY_GOTO(rc, forward_loss(be, &r, loss, logits), out_close);
        goto out_close;
    }
    TB_TRY_GOTO(rc, forward_loss(be, &r, loss, logits), out_close);
    TB_TRY_GOTO(rc, tb_model_backward(r.m, 1.0f), out_close);
    rc = be->copy_d2h(be, grad, r.m->flat_g, r.m->numel * sizeof(float), NULL);

out_close:
    run_close(be, &r);
    return rc;
}

static int check_act_memory(tb_backend *be)
{
    tb_gpt2_dims g = small_dims(4);
    size_t nl = 2 * (size_t)g.context * g.vocab, np = tb_gpt2_param_count(&g);
    float l0, l1, l2, *lg0 = malloc(nl * sizeof(float)), *lg1 = malloc(nl * sizeof(float));
    float *lg2 = malloc(nl * sizeof(float)), *g0 = malloc(np * sizeof(float));
    float *g1 = malloc(np * sizeof(float));
    int rc = TB_OK, m0, m1, m2;
    size_t b0, b1, b2;
    if (!lg0 || !lg1 || !lg2 || !g0 || !g1) {
        rc = TB_FAIL(TB_ERR_NOMEM, "result copies");
        goto out_free;
    }
    TB_TRY_GOTO(rc, mem_run(be, 0, 0, lg0, &l0, g0, &m0, &b0), out_free);
    TB_TRY_GOTO(rc, mem_run(be, 1, 0, lg1, &l1, g1, &m1, &b1), out_free);
    TB_TRY_GOTO(rc, mem_run(be, 0, 1, lg2, &l2, NULL, &m2, &b2), out_free);
    CHECK(m0 == 0 && m1 == g.layers && l0 == l1 && !memcmp(lg0, lg1, nl * sizeof(float)) &&
              !memcmp(g0, g1, np * sizeof(float)),
          "checkpointing (%d layers recomputed, one GELU per block, attention's "
          "probabilities recomputed): loss, logits and gradients bitwise the same (loss %.6f)",
          m1, l0);
    /* the manual attention's probabilities: one shared buffer, not one a
     * layer (each layer keeps the fused variant's row statistics) */
    tb_attn_desc ad = {.batch = g.heads, .heads = 2, .seq = g.context,
                       .head_dim = g.dim / g.heads, .causal = 1, .scale = 1.0f};
    size_t manual = 0, fused = 0;
    TB_TRY_GOTO(rc, be->attention_workspace(be, TB_ATTN_MANUAL, &ad, &manual, NULL), out_free);
    TB_TRY_GOTO(rc, be->attention_workspace(be, TB_ATTN_FUSED, &ad, &fused, NULL), out_free);
    size_t want = (size_t)(g.layers - 1) * manual - (size_t)g.layers * fused;
    CHECK(b1 + want <= b0, "checkpointing: model memory %zu -> %zu bytes, at least %zu less "
          "(%d layers' attention probabilities of %zu bytes shared)", b0, b1, want, g.layers,
          manual);
    CHECK(l0 == l2 && !memcmp(lg0, lg2, nl * sizeof(float)),
          "no_grad: loss and logits bitwise the same");

out_free:
    free(lg0), free(lg1), free(lg2), free(g0), free(g1);
    return rc;
}

/* ---- one SGD step ---- */
static int check_sgd(tb_backend *be)
{
    tb_gpt2_dims g = small_dims(4);
    run r;
    float l0, l1, *w = NULL, *grad = NULL;
    char what[160];
    int rc;
    TB_TRY_GOTO(rc, run_open(be, &g, 2, TB_GELU_TANH, 13, &r), out_close);
    size_t n = r.m->numel;
    w = malloc(n * sizeof(float));
    grad = malloc(n * sizeof(float));
    if (!w || !grad) {
        rc = TB_FAIL(TB_ERR_NOMEM, "parameter copies");
        goto out_close;
    }
    TB_TRY_GOTO(rc, loss_and_grad(be, &r, &l0, grad), out_close);
    TB_TRY_GOTO(rc, be->copy_d2h(be, w, r.m->flat_w, n * sizeof(float), NULL), out_close);
    for (size_t i = 0; i < n; i++)
        w[i] -= 0.1f * grad[i];
    TB_TRY_GOTO(rc, be->copy_h2d(be, r.m->flat_w, w, n * sizeof(float), NULL), out_close);
    TB_TRY_GOTO(rc, forward_loss(be, &r, &l1, NULL), out_close);
    snprintf(what, sizeof what, "one SGD step (lr 0.1): loss %.5f -> %.5f (lower)", l0, l1);
    CHECK_WHAT(l1 < l0, what);

out_close:
    free(w);
    free(grad);
    run_close(be, &r);
    return rc;
}

static int run_all(tb_backend *be, void *arg)
{
    (void)arg;
    TB_TRY(check_counts(be));
    TB_TRY(check_order(be));
    TB_TRY(check_refusals(be));
    TB_TRY(check_init_values(be));
    TB_TRY(check_init_chunks(be));
    TB_TRY(check_init(be, 2));
    TB_TRY(check_init(be, 4));
    TB_TRY(check_causal(be, TB_ATTN_MANUAL));
    TB_TRY(check_causal(be, TB_ATTN_FUSED));
    TB_TRY(check_variants(be));
    TB_TRY(check_sgd(be));
    TB_TRY(check_act_memory(be));
    return check_gradients(be);
}

int main(void)
{
    return tb_test_main_cpu(2, "gpt2_test: counts, init loss, causality, float64 gradients, "
                            "fused vs manual attention, one SGD step", run_all, NULL);
}
