/*
 * ddp.c - DistributedDataParallel's buckets, hooks and overlap. See ddp.h.
 */
#include "lib/dist/ddp.h"

#include <stdlib.h>
#include <string.h>

/* ---- which parameters each top-level layer owns ---- */

typedef struct param_walk {
    tb_model *m;
    int next;                 /* model parameter index expected next */
    int mismatch;
} param_walk;

static void walk_one(tb_param *p, void *user)
{
    param_walk *w = user;
    if (w->next >= w->m->nparams || w->m->params[w->next] != p)
        w->mismatch = 1;
    w->next++;
}

/* Fills child_first/child_count: top-level layer i owns parameters
 * [child_first[i], child_first[i] + child_count[i]). */
static int map_children(tb_ddp *d)
{
    tb_model *m = d->model;
    int nc = m->net->nchildren;
    d->child_first = calloc((size_t)nc + 1, sizeof *d->child_first);
    d->child_count = calloc((size_t)nc + 1, sizeof *d->child_count);
    if (!d->child_first || !d->child_count)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory building DDP buckets");
    param_walk w = {.m = m};
    for (int i = 0; i < nc; i++) {
        d->child_first[i] = w.next;
        tb_layer_for_each_param(m->net->children[i], walk_one, &w);
        d->child_count[i] = w.next - d->child_first[i];
    }
    if (w.mismatch || w.next != m->nparams)
        return TB_FAIL(TB_ERR_INTERNAL, "DDP: the model's parameter list does not follow its "
                       "layers (%d walked, %d listed)", w.next, m->nparams);
    return TB_OK;
}

static size_t param_offset(const tb_model *m, int i) { return (size_t)(m->params[i]->g - m->flat_g); }

/* Buckets of about bucket_bytes, from the last parameter backwards. */
static int make_buckets(tb_ddp *d)
{
    tb_model *m = d->model;
    d->buckets = calloc((size_t)m->nparams + 1, sizeof *d->buckets);
    d->param_bucket = calloc((size_t)m->nparams + 1, sizeof *d->param_bucket);
    d->step.trace = calloc((size_t)m->nparams + 1, sizeof *d->step.trace);
    if (!d->buckets || !d->param_bucket || !d->step.trace)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory building DDP buckets");
    size_t bytes = 0;
    int nb = 0;
    for (int i = m->nparams - 1; i >= 0; i--) {
        if (bytes == 0)
            d->buckets[nb].last_param = i;
        d->buckets[nb].first_param = i;
        d->param_bucket[i] = nb;
        bytes += m->params[i]->n * sizeof(float);
        if (bytes >= d->opts.bucket_bytes || i == 0) {
            nb++;
            bytes = 0;
        }
    }
    for (int b = 0; b < nb; b++) {
        tb_ddp_bucket *k = &d->buckets[b];
        k->offset = param_offset(m, k->first_param);
        size_t end = param_offset(m, k->last_param) + m->params[k->last_param]->n;
        k->n = end - k->offset;
        k->req.mpi = MPI_REQUEST_NULL;
    }
    d->nbuckets = nb;
    return TB_OK;
}

int tb_ddp_create(tb_comm *comm, tb_model *m, const tb_ddp_opts *opts, tb_ddp **out)
{
    *out = NULL;
    if (opts->bucket_bytes == 0)
        return TB_FAIL(TB_ERR_INVALID, "DDP bucket size must be > 0 bytes");
    if (m->nparams <= 0)
        return TB_FAIL(TB_ERR_INVALID, "DDP: the model has no parameters");
    tb_ddp *d = calloc(1, sizeof *d);
    if (!d)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating DDP");
    d->comm = comm;
    d->model = m;
    d->opts = *opts;
    int rc;
    TB_TRY_GOTO(rc, map_children(d), out_destroy);
    TB_TRY_GOTO(rc, make_buckets(d), out_destroy);
    *out = d;
    return TB_OK;

out_destroy:
    tb_ddp_destroy(d);
    return rc;
}

void tb_ddp_destroy(tb_ddp *d)
{
    if (!d)
        return;
    for (int b = 0; b < d->nbuckets; b++)
        tb_comm_wait(d->comm, &d->buckets[b].req);
    free(d->buckets);
    free(d->param_bucket);
    free(d->child_first);
    free(d->child_count);
    free(d->step.trace);
    free(d);
}

int tb_ddp_broadcast_params(tb_ddp *d)
{
    return tb_comm_bcast(d->comm, d->model->flat_w, d->model->numel * sizeof(float), 0);
}

/* ---- one backward ---- */

static void begin_backward(tb_ddp *d, int sync)
{
    d->sync = sync;
    d->next_start = 0;
    for (int b = 0; b < d->nbuckets; b++) {
        tb_ddp_bucket *k = &d->buckets[b];
        k->pending = k->last_param - k->first_param + 1;
        k->started = 0;
    }
    d->step.synced = sync;
    d->step.bytes = 0;
    d->step.allreduce_s = 0;
    d->step.exposed_s = 0;
    d->step.nbuckets = 0;
}

static int start_bucket(tb_ddp *d, int b)
{
    tb_ddp_bucket *k = &d->buckets[b];
    TB_TRY(tb_comm_iallreduce_sum(d->comm, d->model->flat_g + k->offset, k->n, &k->req));
    k->started = 1;
    d->step.bytes += k->n * sizeof(float);
    return TB_OK;
}

int tb_ddp_on_grad_ready(tb_ddp *d, int param_index)
{
    if (param_index < 0 || param_index >= d->model->nparams)
        return TB_FAIL(TB_ERR_INVALID, "DDP hook: parameter %d of %d", param_index,
                       d->model->nparams);
    tb_ddp_bucket *k = &d->buckets[d->param_bucket[param_index]];
    if (k->pending <= 0)
        return TB_FAIL(TB_ERR_INTERNAL, "DDP hook: parameter %d reported ready twice",
                       param_index);
    k->pending--;
    if (!d->sync || !d->opts.overlap)
        return TB_OK;
    while (d->next_start < d->nbuckets && d->buckets[d->next_start].pending == 0)
        TB_TRY(start_bucket(d, d->next_start++));
    return TB_OK;
}

int tb_ddp_poll(tb_ddp *d)
{
    for (int b = 0; b < d->next_start; b++) {
        int done;
        TB_TRY(tb_comm_test(d->comm, &d->buckets[b].req, &done));
    }
    return TB_OK;
}

int tb_ddp_backward(tb_ddp *d, float loss_scale, int sync)
{
    tb_model *m = d->model;
    if (!m->ctx.training)
        return TB_FAIL(TB_ERR_INVALID, "tb_ddp_backward in evaluation mode");
    begin_backward(d, sync);
    double t0 = tb_comm_now();
    const tb_tensor *t;
    TB_TRY(tb_xent_backward(&m->loss, loss_scale / (float)m->loss.n, &t));
    for (int i = m->net->nchildren - 1; i >= 0; i--) {
        /* The first layer computes no input gradient: t is NULL after it. */
        TB_TRY(tb_layer_backward(m->net->children[i], t, &t));
        for (int p = 0; p < d->child_count[i]; p++)
            TB_TRY(tb_ddp_on_grad_ready(d, d->child_first[i] + p));
        TB_TRY(tb_ddp_poll(d));
    }
    m->ctx.grad_accumulate = 1;
    /* The compute stream only: a device-wide sync would also wait for the
     * all-reduces already queued on the communicator's side stream (NCCL's),
     * so backward would include them and exposed communication read ~0. */
    TB_TRY(m->ctx.be->stream_sync(m->ctx.be, NULL));
    d->t_backward_end = tb_comm_now();
    d->step.backward_s = d->t_backward_end - t0;
    return TB_OK;
}

static void trace_add(tb_ddp *d, int b, size_t bytes, double start, double end)
{
    tb_ddp_trace_entry *e = &d->step.trace[d->step.nbuckets++];
    e->bucket = b;
    e->bytes = bytes;
    e->start = start - d->t_backward_end;
    e->end = end - d->t_backward_end;
    d->step.allreduce_s += end - start;
}

/* Overlap off: the whole gradient buffer in one all-reduce, now. */
static int reduce_all_at_once(tb_ddp *d)
{
    tb_model *m = d->model;
    double t0 = tb_comm_now();
    TB_TRY(tb_comm_allreduce_sum(d->comm, m->flat_g, m->numel));
    d->step.bytes = m->numel * sizeof(float);
    trace_add(d, 0, d->step.bytes, t0, tb_comm_now());
    return TB_OK;
}

static int wait_buckets(tb_ddp *d)
{
    while (d->next_start < d->nbuckets)  /* none should be left; keep the order if so */
        TB_TRY(start_bucket(d, d->next_start++));
    for (int b = 0; b < d->nbuckets; b++) {
        tb_ddp_bucket *k = &d->buckets[b];
        TB_TRY(tb_comm_wait(d->comm, &k->req));
        trace_add(d, b, k->n * sizeof(float), k->req.t_start, k->req.t_end);
    }
    return TB_OK;
}

int tb_ddp_finish(tb_ddp *d)
{
    if (!d->sync)
        return TB_OK;
    tb_model *m = d->model;
    tb_backend *be = m->ctx.be;
    if (d->opts.overlap)
        TB_TRY(wait_buckets(d));
    else
        TB_TRY(reduce_all_at_once(d));
    if (d->comm->size > 1)
        TB_TRY(be->axpby(be, 1.0f / (float)d->comm->size, m->flat_g, 0.0f, m->flat_g, m->numel));
    TB_TRY(be->sync(be));
    d->step.exposed_s = tb_comm_now() - d->t_backward_end;
    d->sync = 0;
    return TB_OK;
}
