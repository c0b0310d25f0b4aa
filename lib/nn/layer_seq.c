/*
 * layer_seq.c - containers: a sequence of layers, and a residual block
 * y = relu(main(x) + shortcut(x)) with the identity as the default shortcut.
 *
 * A container holds no parameters of its own; its children's parameters are
 * reached through tb_layer_for_each_param (layers.c). The residual block's
 * backward sends the gradient through both paths and adds the two input
 * gradients (the identity path passes it on unchanged). Its add and ReLU
 * run in the trunk's activation dtype (ctx->act, lib/nn/amp.h).
 *
 * Tests: bazel test //lib/nn:gradcheck_test
 */
#include <stdlib.h>
#include <string.h>

#include "lib/nn/layers.h"

/* ---- sequence ---- */
typedef struct seq_layer {
    tb_layer base;
    const tb_tensor *x;        /* input of the last forward */
    const tb_tensor **outs;    /* (nchildren) each child's output of the last forward */
    int rec_to;                /* checkpointing: last child recomputed in this backward */
} seq_layer;

static int seq_run(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    seq_layer *s = (seq_layer *)l;
    const tb_tensor *t = x;
    s->x = x;
    for (int i = 0; i < l->nchildren; i++) {
        TB_TRY(tb_layer_acts_bind(l->children[i], t));
        TB_TRY(tb_layer_forward(l->children[i], t, &t));
        s->outs[i] = t;
    }
    *y = t;
    return TB_OK;
}

/* Under no_grad the children take the scratch pair one level deeper. */
static int seq_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    tb_act_mem *a = &l->ctx->acts;
    a->depth++;
    int rc = seq_run(l, x, y);
    a->depth--;
    return rc;
}

/* Checkpointing: the forward of the run of checkpointed children ending at
 * child m, again, from the stored input of the run's first child. Batch
 * statistics come out the same; running statistics are left alone. */
static int seq_recompute(tb_layer *l, int m)
{
    seq_layer *s = (seq_layer *)l;
    int j = m;
    while (j > 0 && l->children[j - 1]->checkpoint)
        j--;
    const tb_tensor *t = j == 0 ? s->x : s->outs[j - 1];
    int rc = TB_OK;
    l->ctx->acts.recomputing = 1;
    for (int k = j; k <= m && rc == TB_OK; k++) {
        rc = tb_layer_acts_bind(l->children[k], t);
        if (rc == TB_OK)
            rc = tb_layer_forward(l->children[k], t, &t);
    }
    l->ctx->acts.recomputing = 0;
    s->rec_to = m;
    return rc;
}

/* Before child i's backward: its input (and, checkpointed, its output)
 * must hold their forward values. A recompute up to m leaves the outputs
 * of m and m - 1 intact (two scratch buffers, alternating). */
static int seq_restore_for(tb_layer *l, int i)
{
    seq_layer *s = (seq_layer *)l;
    int in_ckpt = i > 0 && l->children[i - 1]->checkpoint;
    if (!l->children[i]->checkpoint)
        return in_ckpt ? seq_recompute(l, i - 1) : TB_OK;
    if (s->rec_to == i || !in_ckpt)
        return TB_OK;
    return seq_recompute(l, i);
}

static int seq_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    seq_layer *s = (seq_layer *)l;
    const tb_tensor *t = dy;
    s->rec_to = -1;
    for (int i = l->nchildren - 1; i >= 0 && t; i--) {
        TB_TRY(seq_restore_for(l, i));
        TB_TRY(tb_layer_backward(l->children[i], t, &t));
    }
    *dx = t;
    return TB_OK;
}

static int seq_alloc(tb_layer *l, int max_batch)
{
    for (int i = 0; i < l->nchildren; i++)
        TB_TRY(tb_layer_alloc(l->children[i], max_batch));
    return TB_OK;
}

static void seq_release(tb_layer *l)
{
    free(((seq_layer *)l)->outs);
}

static const tb_layer_vtbl seq_vtbl = {
    .kind = "seq", .forward = seq_forward, .backward = seq_backward,
    .alloc = seq_alloc, .release = seq_release,
};

/* Gives the children to l; on failure destroys them. */
static int adopt(tb_layer *l, tb_layer **children, int n)
{
    l->children = calloc((size_t)(n > 0 ? n : 1), sizeof *l->children);
    if (!l->children) {
        for (int i = 0; i < n; i++)
            tb_layer_destroy(children[i]);
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating a container");
    }
    memcpy(l->children, children, (size_t)n * sizeof *children);
    l->nchildren = n;
    return TB_OK;
}

static int shapes_equal(tb_shape a, tb_shape b) { return a.c == b.c && a.h == b.h && a.w == b.w; }

static void destroy_all(tb_layer **ls, int n)
{
    for (int i = 0; i < n; i++)
        tb_layer_destroy(ls[i]);
}

int tb_layer_seq_create(tb_layer_ctx *ctx, tb_layer **children, int n, tb_layer **out)
{
    *out = NULL;
    for (int i = 1; i < n; i++) {
        if (!shapes_equal(children[i - 1]->out, children[i]->in)) {
            destroy_all(children, n);
            return TB_FAIL(TB_ERR_INVALID, "seq: layer %d (%s) does not take its input's shape",
                           i, children[i]->name);
        }
    }
    if (n <= 0)
        return TB_FAIL(TB_ERR_INVALID, "seq: no layers");
    tb_layer *l;
    int rc = tb_layer_new(ctx, &seq_vtbl, sizeof(seq_layer), children[0]->in, children[n - 1]->out,
                       &l);
    if (rc != TB_OK) {
        destroy_all(children, n);
        return rc;
    }
    rc = adopt(l, children, n);
    if (rc != TB_OK) {
        free(l);
        return rc;
    }
    seq_layer *s = (seq_layer *)l;
    s->outs = calloc((size_t)n, sizeof *s->outs);
    if (!s->outs) {
        tb_layer_destroy(l);
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating a sequence");
    }
    *out = l;
    return TB_OK;
}

/* ---- residual block ---- */
typedef struct residual_layer {
    tb_layer base;      /* children[0] = main path, children[1] = shortcut if any */
    tb_tensor sum;      /* (N, C, H, W) main + shortcut, before the ReLU */
    tb_tensor y;        /* (N, C, H, W) */
    tb_tensor dsum;     /* (N, C, H, W) */
    tb_tensor dx;       /* (N, C, H, W) input shape */
} residual_layer;

/* The shortcut runs one container level deeper than the main path: under
 * no_grad its layers then take another scratch pair than the main path's
 * (a sequence's children take the pair of its depth), which still holds the
 * main path's output for the add. */
static int residual_shortcut(tb_layer *l, const tb_tensor *x, const tb_tensor **s)
{
    tb_act_mem *a = &l->ctx->acts;
    a->depth++;
    int rc = tb_layer_forward(l->children[1], x, s);
    a->depth--;
    return rc;
}

static int residual_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    residual_layer *r = (residual_layer *)l;
    const tb_tensor *m, *s = x;
    TB_TRY(tb_layer_forward(l->children[0], x, &m));
    if (l->nchildren > 1)
        TB_TRY(residual_shortcut(l, x, &s));
    TB_TRY(tb_tensor_set_batch(&r->sum, x->n));
    TB_TRY(tb_tensor_set_batch(&r->y, x->n));
    /* no_grad keeps no sum for backward: the ReLU runs in place on y */
    float *sum = l->ctx->acts.no_grad ? r->y.data : r->sum.data;
    size_t n = tb_tensor_numel(&r->sum);
    TB_TRY(tb_layer_act_check(l, m));
    TB_TRY(tb_layer_act_check(l, s));
    TB_TRY(tb_act_add(l->ctx, m->data, s->data, sum, n));
    TB_TRY(tb_act_relu_fwd(l->ctx, sum, r->y.data, n));
    *y = &r->y;
    return TB_OK;
}

static int residual_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    residual_layer *r = (residual_layer *)l;
    TB_TRY(tb_tensor_set_batch(&r->dsum, dy->n));
    TB_TRY(tb_act_relu_bwd(l->ctx, r->y.data, dy->data, r->dsum.data, tb_tensor_numel(dy)));
    const tb_tensor *dm, *ds = &r->dsum;
    TB_TRY(tb_layer_backward(l->children[0], &r->dsum, &dm));
    if (l->nchildren > 1)
        TB_TRY(tb_layer_backward(l->children[1], &r->dsum, &ds));
    TB_TRY(tb_tensor_set_batch(&r->dx, dy->n));
    TB_TRY(tb_act_add(l->ctx, dm->data, ds->data, r->dx.data, tb_tensor_numel(&r->dx)));
    *dx = &r->dx;
    return TB_OK;
}

static int residual_alloc(tb_layer *l, int max_batch)
{
    residual_layer *r = (residual_layer *)l;
    tb_dtype act = l->ctx->act;
    TB_TRY(seq_alloc(l, max_batch));
    TB_TRY(tb_layer_tensor_as(l, max_batch, l->out, act, &r->sum));
    TB_TRY(tb_layer_out_tensor_as(l, max_batch, act, &r->y));
    TB_TRY(tb_layer_tensor_as(l, max_batch, l->out, act, &r->dsum));
    return tb_layer_tensor_as(l, max_batch, l->in, act, &r->dx);
}

static void residual_release(tb_layer *l)
{
    residual_layer *r = (residual_layer *)l;
    tb_tensor_free(&r->sum);
    tb_tensor_free(&r->y);
    tb_tensor_free(&r->dsum);
    tb_tensor_free(&r->dx);
}

/* The block's own work (its paths count theirs), per element: forward
 * the add and the ReLU; backward the ReLU's mask on the output and the add
 * of the two paths' input gradients. */
static void residual_flops(const tb_layer *l, tb_flops *f)
{
    double out = (double)tb_shape_numel(l->out), in = (double)tb_shape_numel(l->in);
    f->fwd[TB_FLOPS_ELEMENTWISE] += 2 * out;
    f->bwd[TB_FLOPS_ELEMENTWISE] += out + in;
}

static const tb_layer_vtbl residual_vtbl = {
    .kind = "residual", .forward = residual_forward, .backward = residual_backward,
    .alloc = residual_alloc, .release = residual_release, .flops = residual_flops,
};

int tb_layer_residual_create(tb_layer_ctx *ctx, tb_layer *main_path, tb_layer *shortcut,
                          tb_layer **out)
{
    *out = NULL;
    tb_layer *kids[2] = {main_path, shortcut};
    int n = shortcut ? 2 : 1;
    tb_shape s_out = shortcut ? shortcut->out : main_path->in;
    if (!shapes_equal(main_path->out, s_out) ||
        (shortcut && !shapes_equal(shortcut->in, main_path->in))) {
        destroy_all(kids, n);
        return TB_FAIL(TB_ERR_INVALID, "residual: main path gives (%d, %d, %d), shortcut (%d, %d, %d)",
                       main_path->out.c, main_path->out.h, main_path->out.w, s_out.c, s_out.h,
                       s_out.w);
    }
    tb_layer *l;
    int rc = tb_layer_new(ctx, &residual_vtbl, sizeof(residual_layer), main_path->in,
                       main_path->out, &l);
    if (rc != TB_OK) {
        destroy_all(kids, n);
        return rc;
    }
    rc = adopt(l, kids, n);
    if (rc != TB_OK) {
        free(l);
        return rc;
    }
    *out = l;
    return TB_OK;
}
