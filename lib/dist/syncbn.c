/*
 * syncbn.c - SyncBatchNorm over a communicator, and the model conversion.
 * See syncbn.h.
 */
#include "lib/dist/syncbn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SYNCBN_EPS 1e-5
#define SYNCBN_MOMENTUM 0.1

typedef struct syncbn_layer {
    tb_layer base;
    tb_comm *comm;                     /* borrowed */
    float *running_mean, *running_var; /* (C) device memory */
    double *mean, *invstd;             /* (C) global statistics of the last forward */
    double *red;                       /* (2C + 1) reduction buffer */
    double count;                      /* global samples x pixels of the last forward */
    tb_tensor y, dx;                   /* (N, C, H, W) */
    const tb_tensor *x;
} syncbn_layer;

/* Element (n, c, i) of an activation in t's layout. */
static inline size_t at(const tb_tensor *t, int C, int hw, int n, int c, int i)
{
    return t->layout == TB_NHWC ? ((size_t)n * hw + i) * C + c : ((size_t)n * C + c) * hw + i;
}

static int check_tensor(const tb_layer *l, const tb_tensor *t)
{
    if (t->dtype != TB_F32)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "%s: SyncBatchNorm takes fp32 activations", l->name);
    return TB_OK;
}

/* Global mean and 1/std per channel: two reductions (sums and count, then
 * squared deviations from the global mean), as exact as a two-pass BN. */
static int global_stats(syncbn_layer *s, const tb_tensor *x)
{
    int C = s->base.in.c, hw = s->base.in.h * s->base.in.w;
    for (int c = 0; c < C; c++) {
        double sum = 0;
        for (int n = 0; n < x->n; n++)
            for (int i = 0; i < hw; i++)
                sum += x->data[at(x, C, hw, n, c, i)];
        s->red[c] = sum;
    }
    s->red[C] = (double)x->n * hw;
    TB_TRY(tb_comm_sum_double(s->comm, s->red, C + 1));
    s->count = s->red[C];
    for (int c = 0; c < C; c++) {
        s->mean[c] = s->red[c] / s->count;
        double q = 0;
        for (int n = 0; n < x->n; n++)
            for (int i = 0; i < hw; i++) {
                double d = x->data[at(x, C, hw, n, c, i)] - s->mean[c];
                q += d * d;
            }
        s->red[c] = q;
    }
    TB_TRY(tb_comm_sum_double(s->comm, s->red, C));
    for (int c = 0; c < C; c++) {
        double var = s->red[c] / s->count;
        s->invstd[c] = 1.0 / sqrt(var + SYNCBN_EPS);
        double unbiased = s->count > 1 ? var * s->count / (s->count - 1) : var;
        s->running_mean[c] = (float)((1 - SYNCBN_MOMENTUM) * s->running_mean[c] +
                                     SYNCBN_MOMENTUM * s->mean[c]);
        s->running_var[c] = (float)((1 - SYNCBN_MOMENTUM) * s->running_var[c] +
                                    SYNCBN_MOMENTUM * unbiased);
    }
    return TB_OK;
}

static int syncbn_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    syncbn_layer *s = (syncbn_layer *)l;
    TB_TRY(check_tensor(l, x));
    TB_TRY(tb_tensor_set_batch(&s->y, x->n));
    s->y.layout = x->layout;
    s->x = x;
    *y = &s->y;
    tb_backend *be = l->ctx->be;
    tb_bn_desc d = {.n = x->n, .c = l->in.c, .hw = l->in.h * l->in.w, .layout = x->layout,
                    .eps = (float)SYNCBN_EPS, .momentum = (float)SYNCBN_MOMENTUM};
    if (!l->ctx->training)
        return be->bn_fwd_infer(be, &d, x->data, l->params[0].w, l->params[1].w,
                                s->running_mean, s->running_var, s->y.data);
    TB_TRY(global_stats(s, x));
    const float *gamma = l->params[0].w, *beta = l->params[1].w;
    for (int c = 0; c < d.c; c++)
        for (int n = 0; n < x->n; n++)
            for (int i = 0; i < d.hw; i++) {
                size_t k = at(x, d.c, d.hw, n, c, i);
                s->y.data[k] = (float)((x->data[k] - s->mean[c]) * s->invstd[c] * gamma[c] +
                                       beta[c]);
            }
    return TB_OK;
}

static int syncbn_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    syncbn_layer *s = (syncbn_layer *)l;
    const tb_tensor *x = s->x;
    int C = l->in.c, hw = l->in.h * l->in.w, acc = l->ctx->grad_accumulate;
    float *dgamma = l->params[0].g, *dbeta = l->params[1].g;
    const float *gamma = l->params[0].w;
    for (int c = 0; c < C; c++) {
        double sdy = 0, sdyx = 0;
        for (int n = 0; n < dy->n; n++)
            for (int i = 0; i < hw; i++) {
                size_t k = at(x, C, hw, n, c, i);
                sdy += dy->data[k];
                sdyx += dy->data[k] * (x->data[k] - s->mean[c]) * s->invstd[c];
            }
        dgamma[c] = (float)(sdyx + (acc ? dgamma[c] : 0.0));
        dbeta[c] = (float)(sdy + (acc ? dbeta[c] : 0.0));
        s->red[c] = sdy;
        s->red[C + c] = sdyx;
    }
    TB_TRY(tb_comm_sum_double(s->comm, s->red, 2 * C));
    TB_TRY(tb_tensor_set_batch(&s->dx, dy->n));
    s->dx.layout = x->layout;
    for (int c = 0; c < C; c++) {
        double mdy = s->red[c] / s->count, mdyx = s->red[C + c] / s->count;
        for (int n = 0; n < dy->n; n++)
            for (int i = 0; i < hw; i++) {
                size_t k = at(x, C, hw, n, c, i);
                double xhat = (x->data[k] - s->mean[c]) * s->invstd[c];
                s->dx.data[k] = (float)(gamma[c] * s->invstd[c] * (dy->data[k] - mdy - xhat * mdyx));
            }
    }
    *dx = &s->dx;
    return TB_OK;
}

static int syncbn_alloc(tb_layer *l, int max_batch)
{
    syncbn_layer *s = (syncbn_layer *)l;
    tb_backend *be = l->ctx->be;
    int C = l->in.c;
    s->mean = calloc((size_t)C, sizeof *s->mean);
    s->invstd = calloc((size_t)C, sizeof *s->invstd);
    s->red = calloc(2 * (size_t)C + 1, sizeof *s->red);
    if (!s->mean || !s->invstd || !s->red)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for %s", l->name);
    TB_TRY(be->dev_alloc(be, (void **)&s->running_mean, (size_t)C * sizeof(float)));
    TB_TRY(be->dev_alloc(be, (void **)&s->running_var, (size_t)C * sizeof(float)));
    for (int c = 0; c < C; c++) { /* PyTorch's start: mean 0, var 1 */
        s->running_mean[c] = 0.0f;
        s->running_var[c] = 1.0f;
    }
    TB_TRY(tb_layer_tensor(l, max_batch, l->out, &s->y));
    return tb_layer_tensor(l, max_batch, l->in, &s->dx);
}

static void syncbn_release(tb_layer *l)
{
    syncbn_layer *s = (syncbn_layer *)l;
    tb_backend *be = l->ctx->be;
    if (s->running_mean)
        be->dev_free(be, s->running_mean);
    if (s->running_var)
        be->dev_free(be, s->running_var);
    free(s->mean);
    free(s->invstd);
    free(s->red);
    tb_tensor_free(&s->y);
    tb_tensor_free(&s->dx);
}

static const tb_layer_vtbl syncbn_vtbl = {
    .kind = "syncbatchnorm",
    .forward = syncbn_forward,
    .backward = syncbn_backward,
    .alloc = syncbn_alloc,
    .release = syncbn_release,
};

int tb_layer_syncbn_create(tb_layer_ctx *ctx, tb_shape in, tb_comm *comm, tb_layer **out)
{
    tb_layer *l;
    TB_TRY(tb_layer_new(ctx, &syncbn_vtbl, sizeof(syncbn_layer), in, in, &l));
    tb_layer_add_param(l, "gamma", (size_t)in.c, TB_INIT_ONES, 0);
    tb_layer_add_param(l, "beta", (size_t)in.c, TB_INIT_ZEROS, 0);
    ((syncbn_layer *)l)->comm = comm;
    *out = l;
    return TB_OK;
}

/* ---- conversion ---- */

/* old's parameters (views of the flat buffers) move to l; the model's
 * parameter list follows. */
static void take_params(tb_model *m, tb_layer *old, tb_layer *l)
{
    for (int k = 0; k < old->nparams; k++) {
        l->params[k] = old->params[k];
        for (int i = 0; i < m->nparams; i++)
            if (m->params[i] == &old->params[k])
                m->params[i] = &l->params[k];
    }
    l->nparams = old->nparams;
    l->need_dx = old->need_dx;
    snprintf(l->name, sizeof l->name, "sync%.*s", TB_LAYER_NAME - 5, old->name);
}

static int convert_tree(tb_model *m, tb_layer *parent, tb_comm *comm, int *count)
{
    for (int i = 0; i < parent->nchildren; i++) {
        tb_layer *old = parent->children[i];
        if (strcmp(old->vt->kind, "batchnorm") != 0) {
            TB_TRY(convert_tree(m, old, comm, count));
            continue;
        }
        tb_layer *l;
        TB_TRY(tb_layer_syncbn_create(old->ctx, old->in, comm, &l));
        int rc = tb_layer_alloc(l, m->max_batch);
        if (rc != TB_OK) {
            tb_layer_destroy(l);
            return rc;
        }
        take_params(m, old, l);
        parent->children[i] = l;
        tb_layer_destroy(old);
        (*count)++;
    }
    return TB_OK;
}

int tb_syncbn_convert(tb_model *m, tb_comm *comm, int *converted)
{
    int n = 0;
    if (strcmp(m->ctx.be->name, "cpu") != 0)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "SyncBatchNorm is built for the CPU backend only (its "
                       "per-channel sums are host loops); on %s train without --sync-bn",
                       m->ctx.be->name);
    int rc = convert_tree(m, m->net, comm, &n);
    if (converted)
        *converted = n;
    return rc;
}
