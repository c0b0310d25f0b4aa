/*
 * layers.c - what every layer family shares: construction, parameter walks
 * and binding, allocation and destruction, and the conv algorithm cache (the
 * cudnn.benchmark analogue). See layers.h.
 */
#include "lib/layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int layer_new(tb_layer_ctx *ctx, const tb_layer_vtbl *vt, size_t size, tb_shape in,
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

void layer_add_param(tb_layer *l, const char *name, size_t n, tb_init_kind init, float bound)
{
    tb_param *p = &l->params[l->nparams++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->n = n;
    p->init = init;
    p->bound = bound;
}

int layer_tensor(tb_layer *l, int max_batch, tb_shape s, tb_tensor *t)
{
    int rc = tensor_alloc(l->ctx->be, max_batch, s.c, s.h, s.w, t);
    if (rc != TB_OK)
        return TB_FAIL(rc, "allocating activations of layer %s", l->name);
    return TB_OK;
}

int layer_alloc(tb_layer *l, int max_batch)
{
    return l->vt->alloc(l, max_batch);
}

void layer_destroy(tb_layer *l)
{
    if (!l)
        return;
    l->vt->release(l);
    for (int i = 0; i < l->nchildren; i++)
        layer_destroy(l->children[i]);
    free(l->children);
    free(l);
}

void layer_for_each_param(tb_layer *l, tb_param_fn fn, void *user)
{
    for (int i = 0; i < l->nparams; i++)
        fn(&l->params[i], user);
    for (int i = 0; i < l->nchildren; i++)
        layer_for_each_param(l->children[i], fn, user);
}

static void count_one(tb_param *p, void *user) { *(size_t *)user += p->n; }

size_t layer_param_count(tb_layer *l)
{
    size_t n = 0;
    layer_for_each_param(l, count_one, &n);
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

void layer_params_bind(tb_layer *l, float *w, float *g)
{
    bind_state s = {w, g};
    layer_for_each_param(l, bind_one, &s);
}

/* ---- the conv algorithm cache ---- */

static int desc_equal(const tb_conv_desc *a, const tb_conv_desc *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
           a->r == b->r && a->s == b->s && a->stride == b->stride && a->pad == b->pad &&
           a->layout == b->layout && a->dtype == b->dtype && a->math == b->math;
}

static int cache_grow(tb_conv_algo_cache *c)
{
    if (c->count < c->cap)
        return TB_OK;
    int cap = c->cap ? 2 * c->cap : 16;
    tb_conv_algo_entry *e = realloc(c->entries, (size_t)cap * sizeof *e);
    if (!e)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory growing the conv algorithm cache");
    c->entries = e;
    c->cap = cap;
    return TB_OK;
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

int conv_algo_lookup(tb_layer_ctx *ctx, const tb_conv_desc *d, tb_conv_kind kind, int *algo)
{
    tb_conv_algo_cache *c = &ctx->algos;
    for (int i = 0; i < c->count; i++) {
        if (c->entries[i].kind == kind && desc_equal(&c->entries[i].desc, d)) {
            *algo = c->entries[i].algo;
            return TB_OK;
        }
    }
    TB_TRY(cache_grow(c));
    tb_conv_algo_entry e = {.desc = *d, .kind = kind, .ms = -1};
    if (ctx->conv_autotune)
        TB_TRY(conv_algo_tune(ctx, d, kind, &e));
    else
        TB_TRY(ctx->be->conv_algo_default(ctx->be, d, kind, &e.algo));
    c->entries[c->count++] = e;
    *algo = e.algo;
    return TB_OK;
}

void conv_algo_cache_free(tb_conv_algo_cache *c)
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

int layer_anomaly_check(tb_layer *l, const tb_tensor *t, int backward)
{
    const char *dir = backward ? "backward" : "forward";
    float bad = 0;
    TB_TRY(maybe_inject(l, t, backward));
    if (t) {
        TB_TRY(count_bad(l->ctx, t->data, tensor_numel(t), &bad));
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
