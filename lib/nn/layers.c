/*
 * layers.c - what every layer family shares: construction, parameter walks
 * and binding, allocation and destruction, and the conv algorithm cache (the
 * cudnn.benchmark analogue). See layers.h.
 */
#include "lib/nn/layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/grow.h"

int tb_layer_new(tb_layer_ctx *ctx, const tb_layer_vtbl *vt, size_t size, tb_shape in,
              tb_shape out, tb_layer **l)
{
    *l = NULL;
    if (out.c <= 0 || out.h <= 0 || out.w <= 0)
        return TB_FAIL(TB_ERR_INVALID, "%s on input (%d, %d, %d) gives an empty output", vt->kind,
                       in.c, in.h, in.w);
    tb_layer *n = calloc(1, size);
    if (!n)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating a %s layer", vt->kind);
    n->vt = vt;
    n->ctx = ctx;
    n->in = in;
    n->out = out;
    n->need_dx = 1;
    snprintf(n->name, sizeof n->name, "%s", vt->kind);
    *l = n;
    return TB_OK;
}

void tb_layer_add_param(tb_layer *l, const char *name, size_t n, tb_init_kind init, float bound)
{
    tb_param *p = &l->params[l->nparams++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->n = n;
    p->init = init;
    p->bound = bound;
}

static int acts_register(tb_layer *l, tb_tensor *t, int output)
{
    if (l->nacts == TB_LAYER_MAX_ACTS)
        return TB_FAIL(TB_ERR_INVALID, "layer %s has more than %d activation tensors", l->name,
                       TB_LAYER_MAX_ACTS);
    l->acts[l->nacts].t = t;
    l->acts[l->nacts].output = output;
    l->nacts++;
    return TB_OK;
}

int tb_layer_tensor_as(tb_layer *l, int max_batch, tb_shape s, tb_dtype dtype, tb_tensor *t)
{
    int rc = tb_tensor_alloc_as(l->ctx->be, max_batch, s.c, s.h, s.w, dtype, t);
    if (rc != TB_OK)
        return TB_FAIL(rc, "allocating activations of layer %s", l->name);
    t->layout = l->ctx->layout;
    return acts_register(l, t, 0);
}

int tb_layer_tensor(tb_layer *l, int max_batch, tb_shape s, tb_tensor *t)
{
    return tb_layer_tensor_as(l, max_batch, s, TB_F32, t);
}

int tb_layer_out_tensor_as(tb_layer *l, int max_batch, tb_dtype dtype, tb_tensor *t)
{
    if (!l->checkpoint) {
        TB_TRY(tb_layer_tensor_as(l, max_batch, l->out, dtype, t));
        l->acts[l->nacts - 1].output = 1;
        return TB_OK;
    }
    /* no memory of its own: tb_layer_acts_bind points it at scratch */
    *t = tb_tensor_view(l->ctx->be, NULL, max_batch, l->out.c, l->out.h, l->out.w);
    t->layout = l->ctx->layout;
    t->dtype = dtype;
    return acts_register(l, t, 1);
}

int tb_layer_out_tensor(tb_layer *l, int max_batch, tb_tensor *t)
{
    return tb_layer_out_tensor_as(l, max_batch, TB_F32, t);
}

int tb_layer_act_check(const tb_layer *l, const tb_tensor *x)
{
    if (x->dtype == l->ctx->act)
        return TB_OK;
    return TB_FAIL(TB_ERR_INTERNAL, "layer %s (%s) got a %s input where activations are %s",
                   l->name, l->vt->kind, x->dtype == TB_F32 ? "fp32" : "bf16",
                   l->ctx->act == TB_F32 ? "fp32" : "bf16");
}

int tb_act_relu_fwd(const tb_layer_ctx *ctx, const void *x, void *y, size_t n)
{
    tb_backend *be = ctx->be;
    if (ctx->act != TB_F32)
        return be->relu_fwd_lowp(be, ctx->act, x, y, n);
    return be->relu_fwd(be, x, y, n);
}

int tb_act_relu_bwd(const tb_layer_ctx *ctx, const void *y, const void *dy, void *dx, size_t n)
{
    tb_backend *be = ctx->be;
    if (ctx->act != TB_F32)
        return be->relu_bwd_lowp(be, ctx->act, y, dy, dx, n);
    return be->relu_bwd(be, y, dy, dx, n);
}

int tb_act_add(const tb_layer_ctx *ctx, const void *a, const void *b, void *y, size_t n)
{
    tb_backend *be = ctx->be;
    if (ctx->act != TB_F32)
        return be->add_lowp(be, ctx->act, a, b, y, n);
    return be->add(be, a, b, y, n);
}

int tb_layer_alloc(tb_layer *l, int max_batch)
{
    return l->vt->alloc(l, max_batch);
}

void tb_layer_destroy(tb_layer *l)
{
    if (!l)
        return;
    l->vt->release(l);
    for (int i = 0; i < l->nchildren; i++)
        tb_layer_destroy(l->children[i]);
    free(l->children);
    free(l);
}

void tb_layer_for_each_param(tb_layer *l, tb_param_fn fn, void *user)
{
    for (int i = 0; i < l->nparams; i++)
        fn(&l->params[i], user);
    for (int i = 0; i < l->nchildren; i++)
        tb_layer_for_each_param(l->children[i], fn, user);
}

static void count_one(tb_param *p, void *user) { *(size_t *)user += p->n; }

size_t tb_layer_param_count(tb_layer *l)
{
    size_t n = 0;
    tb_layer_for_each_param(l, count_one, &n);
    return n;
}

typedef struct bind_state {
    float *w, *g;
} bind_state;

static void bind_one(tb_param *p, void *user)
{
    bind_state *s = user;
    p->w = s->w;
    p->g = s->g;
    s->w += p->n;
    s->g += p->n;
}

void tb_layer_params_bind(tb_layer *l, float *w, float *g)
{
    bind_state s = {w, g};
    tb_layer_for_each_param(l, bind_one, &s);
}

/* ---- the conv algorithm cache ---- */

static int desc_equal(const tb_conv_desc *a, const tb_conv_desc *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
           a->r == b->r && a->s == b->s && a->stride == b->stride && a->pad == b->pad &&
           a->layout == b->layout && a->dtype == b->dtype && a->math == b->math &&
           a->deterministic == b->deterministic && a->lowp_out == b->lowp_out;
}

/* The autotuner: time every usable algorithm once and keep the fastest. */
static int conv_algo_tune(tb_layer_ctx *ctx, const tb_conv_desc *d, tb_conv_kind kind,
                          tb_conv_algo_entry *e)
{
    tb_backend *be = ctx->be;
    tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
    int got = 0;
    TB_TRY(be->conv_find(be, d, kind, perf, TB_MAX_CONV_ALGOS, &got));
    ctx->algos.tunings++;
    for (int i = 0; i < got; i++) {
        if (perf[i].ms < 0)
            continue;
        e->algo = perf[i].algo;
        e->ms = perf[i].ms;
        snprintf(e->name, sizeof e->name, "%s", perf[i].name);
        return TB_OK;
    }
    return TB_FAIL(TB_ERR_UNSUPPORTED,
                   "conv autotuner: no algorithm ran for n=%d c=%d %dx%d k=%d %dx%d (kind %d)",
                   d->n, d->c, d->h, d->w, d->k, d->r, d->s, (int)kind);
}

int tb_conv_algo_lookup(tb_layer_ctx *ctx, const tb_conv_desc *d, tb_conv_kind kind, int *algo)
{
    tb_conv_algo_cache *c = &ctx->algos;
    for (int i = 0; i < c->count; i++) {
        if (c->entries[i].kind == kind && desc_equal(&c->entries[i].desc, d)) {
            *algo = c->entries[i].algo;
            return TB_OK;
        }
    }
    size_t cap = (size_t)c->cap;
    tb_conv_algo_entry *grown = tb_grow(c->entries, &cap, (size_t)c->count, sizeof *grown, 16);
    if (!grown)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory growing the conv algorithm cache");
    c->entries = grown;
    c->cap = (int)cap;
    tb_conv_algo_entry e = {.desc = *d, .kind = kind, .ms = -1};
    if (ctx->conv_autotune)
        TB_TRY(conv_algo_tune(ctx, d, kind, &e));
    else
        TB_TRY(ctx->be->conv_algo_default(ctx->be, d, kind, &e.algo));
    c->entries[c->count++] = e;
    *algo = e.algo;
    return TB_OK;
}

void tb_conv_algo_cache_free(tb_conv_algo_cache *c)
{
    free(c->entries);
    memset(c, 0, sizeof *c);
}

/* ---- anomaly detection ---- */

/* Number of NaN/Inf in x[0..n), read back to the host. */
static int count_bad(tb_layer_ctx *ctx, const float *x, size_t n, float *bad)
{
    tb_backend *be = ctx->be;
    if (!ctx->anomaly_count)
        return TB_FAIL(TB_ERR_INVALID, "anomaly detection on without its device counter");
    TB_TRY(be->count_nonfinite(be, x, n, ctx->anomaly_count));
    return be->copy_d2h(be, bad, ctx->anomaly_count, sizeof *bad, NULL);
}

/* The test hook: a NaN into element 0 of t when l is the chosen layer. */
static int maybe_inject(tb_layer *l, const tb_tensor *t, int backward)
{
    tb_layer_ctx *ctx = l->ctx;
    if (!ctx->anomaly_inject || !t || ctx->anomaly_inject_bwd != backward ||
        strcmp(ctx->anomaly_inject, l->name) != 0)
        return TB_OK;
    const float nan = NAN;
    return ctx->be->copy_h2d(ctx->be, t->data, &nan, sizeof nan, NULL);
}

int tb_layer_anomaly_check(tb_layer *l, const tb_tensor *t, int backward)
{
    const char *dir = backward ? "backward" : "forward";
    float bad = 0;
    TB_TRY(maybe_inject(l, t, backward));
    if (t) {
        TB_TRY(count_bad(l->ctx, t->data, tb_tensor_numel(t), &bad));
        if (bad > 0)
            return TB_FAIL(TB_ERR_NUMERIC, "anomaly: %s of layer %s (%s) produced %.0f NaN/Inf "
                           "values in its %s", dir, l->name, l->vt->kind, (double)bad,
                           backward ? "input gradient" : "output");
    }
    for (int i = 0; backward && i < l->nparams; i++) {
        const tb_param *p = &l->params[i];
        TB_TRY(count_bad(l->ctx, p->g, p->n, &bad));
        if (bad > 0)
            return TB_FAIL(TB_ERR_NUMERIC, "anomaly: backward of layer %s (%s) produced %.0f "
                           "NaN/Inf values in the gradient of its %s", l->name, l->vt->kind,
                           (double)bad, p->name);
    }
    return TB_OK;
}

/* ---- activation memory: no_grad evaluation and checkpointing ---- */

/* ---- the per-op timeline (ctx->hook) ---- */

/* 1 when l's kind is one of kinds[0..n). */
static int kind_in(const tb_layer *l, const char *const *kinds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(l->vt->kind, kinds[i]))
            return 1;
    return 0;
}

/* A layer of the conv trunk, whose activations are ctx->act (amp.h). */
static int trunk_kind(const tb_layer *l)
{
    static const char *const kinds[] = {"conv2d", "batchnorm", "relu", "maxpool", "avgpool"};
    return kind_in(l, kinds, sizeof kinds / sizeof kinds[0]);
}

/* The least traffic of a leaf layer's call on a batch of n, in bytes: its
 * input and output once each (backward: dy, the saved input and dx), and
 * its parameters (backward: their gradients too). Containers: 0 (their
 * children account for what they move). */
static double call_bytes(const tb_layer *l, int n, int backward)
{
    if (l->nchildren > 0)
        return 0;
    if (l->vt->bytes)
        return l->vt->bytes(l, n, backward);
    double in = (double)tb_shape_numel(l->in) * n, out = (double)tb_shape_numel(l->out) * n;
    double params = 0;
    for (int i = 0; i < l->nparams; i++)
        params += (double)l->params[i].n;
    double act = trunk_kind(l) ? (double)tb_dtype_bytes(l->ctx->act) : 4.0;
    return backward ? act * (2.0 * in + out) + 8.0 * params : act * (in + out) + 4.0 * params;
}

int tb_layer_hooked_call(tb_layer *l, const tb_tensor *in, int backward, const tb_tensor **out)
{
    const tb_layer_hook *h = l->ctx->hook;
    tb_flops f;
    memset(&f, 0, sizeof f);
    if (l->vt->flops)
        l->vt->flops(l, &f);
    double flops = tb_flops_pass(&f, backward);
    int n = in ? in->n : 0;
    h->begin(h->user, l->name, l->vt->kind, backward);
    int rc = tb_layer_call(l, in, backward, out);
    int rc_end = h->end(h->user, flops * n, call_bytes(l, n, backward), 0);
    return rc != TB_OK ? rc : rc_end;
}

/* The scratch buffer of pair that x is not in, allocated on first use. */
static int pair_pick(tb_backend *be, float **pair, size_t bytes, const tb_tensor *x, float **buf)
{
    int k = pair[0] != NULL && pair[0] == x->data;
    if (!pair[k])
        TB_TRY(be->dev_alloc(be, (void **)&pair[k], bytes));
    *buf = pair[k];
    return TB_OK;
}

int tb_layer_acts_bind(tb_layer *l, const tb_tensor *x)
{
    tb_act_mem *a = &l->ctx->acts;
    float *buf;
    int outputs = 0;
    for (int i = 0; i < l->nacts; i++)
        outputs += l->acts[i].output;
    if (!outputs) /* containers: their children are bound one by one */
        return TB_OK;
    if (a->no_grad) {
        if (a->depth < 1 || a->depth > TB_ACT_DEPTHS)
            return TB_FAIL(TB_ERR_INVALID, "no_grad forward of %s at container depth %d "
                           "(1..%d)", l->name, a->depth, TB_ACT_DEPTHS);
        TB_TRY(pair_pick(l->ctx->be, &a->ng[2 * (a->depth - 1)], a->ng_bytes, x, &buf));
    } else if (l->checkpoint) {
        TB_TRY(pair_pick(l->ctx->be, a->ckpt, a->ckpt_bytes, x, &buf));
    } else {
        return TB_OK;
    }
    for (int i = 0; i < l->nacts; i++)
        if (l->acts[i].output)
            l->acts[i].t->data = buf;
    return TB_OK;
}

/* BN, ReLU, GELU and pooling are cheap to run again; dropout is not
 * recomputed (its mask counter moves on). */
static int checkpointable(const tb_layer *l)
{
    static const char *const kinds[] = {"batchnorm", "relu", "gelu", "maxpool", "avgpool"};
    return kind_in(l, kinds, sizeof kinds / sizeof kinds[0]);
}

void tb_layer_acts_mark_checkpoints(tb_layer *root)
{
    root->ctx->acts.ckpt_attn = 1;
    int seq = !strcmp(root->vt->kind, "seq");
    for (int i = 0; i < root->nchildren; i++) {
        tb_layer *c = root->children[i];
        tb_layer_acts_mark_checkpoints(c);
        /* only when the next leaf of the same sequence is the one consumer:
         * then nothing else reads the scratch before it is overwritten */
        c->checkpoint = seq && i + 1 < root->nchildren && checkpointable(c) &&
                        root->children[i + 1]->nchildren == 0;
    }
}

/* Largest output at max batch: of checkpointed layers (ckpt), or of all. */
static size_t acts_max_out(const tb_layer *l, int ckpt_only)
{
    size_t m = 0;
    for (int i = 0; i < l->nacts; i++)
        if (l->acts[i].output && (!ckpt_only || l->checkpoint) &&
            tb_tensor_cap_bytes(l->acts[i].t) > m)
            m = tb_tensor_cap_bytes(l->acts[i].t);
    for (int i = 0; i < l->nchildren; i++) {
        size_t c = acts_max_out(l->children[i], ckpt_only);
        m = c > m ? c : m;
    }
    return m;
}

int tb_layer_acts_ckpt_alloc(tb_layer *root)
{
    tb_act_mem *a = &root->ctx->acts;
    a->ckpt_bytes = acts_max_out(root, 1);
    for (int k = 0; k < 2 && a->ckpt_bytes > 0; k++)
        if (!a->ckpt[k])
            TB_TRY(root->ctx->be->dev_alloc(root->ctx->be, (void **)&a->ckpt[k], a->ckpt_bytes));
    return TB_OK;
}

/* Frees (on) or allocates again (off) l's own activation memory. */
static int acts_swap(tb_layer *l, int on)
{
    tb_backend *be = l->ctx->be;
    for (int i = 0; i < l->nacts; i++) {
        tb_tensor *t = l->acts[i].t;
        if (on && t->owned) {
            be->dev_free(be, t->data);
            t->data = NULL;
            t->owned = 0;
        } else if (!on && l->checkpoint && l->acts[i].output) {
            t->data = NULL; /* bound to checkpoint scratch at each forward */
        } else if (!on && !t->owned) {
            int rc = be->dev_alloc(be, (void **)&t->data, tb_tensor_cap_bytes(t));
            if (rc != TB_OK)
                return TB_FAIL(rc, "allocating activations of layer %s again", l->name);
            t->owned = 1;
        }
    }
    for (int i = 0; i < l->nchildren; i++)
        TB_TRY(acts_swap(l->children[i], on));
    return TB_OK;
}

static void free_ptrs(tb_backend *be, float **p, int n)
{
    for (int i = 0; i < n; i++) {
        if (p[i])
            be->dev_free(be, p[i]);
        p[i] = NULL;
    }
}

int tb_layer_acts_no_grad(tb_layer *root, int on)
{
    tb_act_mem *a = &root->ctx->acts;
    if (on == a->no_grad)
        return TB_OK;
    if (on) {
        a->ng_bytes = acts_max_out(root, 0);
        TB_TRY(acts_swap(root, 1)); /* free first: the peak never holds both */
        a->no_grad = 1;
        a->depth = 0;
        return TB_OK;
    }
    free_ptrs(root->ctx->be, a->ng, 2 * TB_ACT_DEPTHS);
    a->no_grad = 0;
    return acts_swap(root, 0);
}

void tb_layer_acts_no_grad_release(tb_layer *root)
{
    tb_act_mem *a = &root->ctx->acts;
    if (a->no_grad)
        free_ptrs(root->ctx->be, a->ng, 2 * TB_ACT_DEPTHS);
}

void tb_layer_acts_free(tb_layer_ctx *ctx)
{
    free_ptrs(ctx->be, ctx->acts.ng, 2 * TB_ACT_DEPTHS);
    free_ptrs(ctx->be, ctx->acts.ckpt, 2);
    free_ptrs(ctx->be, &ctx->acts.attn_saved, 1);
    ctx->acts.attn_saved_bytes = 0;
}
