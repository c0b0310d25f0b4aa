/*
 * dp.c - DataParallel on the CPU backend: replicas on host threads. See dp.h.
 */
#include "lib/dp.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct tb_dp_replica {
    tb_backend *be;           /* replica 0: main's (borrowed) */
    tb_model *m;              /* replica 0: main (borrowed) */
    int owned;
    int lo, cnt;              /* this step's share of the batch */
    tb_tensor x;              /* (cnt, C, H, W) */
    const tb_tensor *logits;
    tb_tensor dlogits;        /* (cnt, classes, 1, 1) */
    int rc;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int replica_alloc(tb_dp_replica *r, const tb_model_opts *o)
{
    TB_TRY(tensor_alloc(r->be, o->max_batch, o->in.c, o->in.h, o->in.w, &r->x));
    return tensor_alloc(r->be, o->max_batch, o->classes, 1, 1, &r->dlogits);
}

static int replica_build(tb_dp_replica *r, const tb_model *main, const tb_layer_spec *spec,
                         const tb_model_opts *o, int threads)
{
    TB_TRY(tb_backend_cpu_create(threads, &r->be));
    r->owned = 1;
    TB_TRY(model_build(r->be, spec, o, &r->m));
    r->m->ctx.gelu = main->ctx.gelu;
    r->m->ctx.conv_autotune = main->ctx.conv_autotune;
    r->m->ctx.math = main->ctx.math;
    if (r->m->numel != main->numel)
        return TB_FAIL(TB_ERR_INVALID, "DP replica has %zu parameters, the model %zu: build it "
                       "from the same description", r->m->numel, main->numel);
    return replica_alloc(r, o);
}

int dp_create(tb_model *main, const tb_layer_spec *spec, const tb_model_opts *opts, int n,
              int threads_per_replica, tb_dp **out)
{
    *out = NULL;
    tb_backend *be0 = main->ctx.be;
    if (strcmp(be0->name, "cpu") != 0)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "DataParallel is built for the CPU backend only (one "
                       "thread per replica); on %s use DDP (bench:ddp)", be0->name);
    if (n < 1)
        return TB_FAIL(TB_ERR_INVALID, "DataParallel needs at least 1 replica, got %d", n);
    tb_dp *dp = calloc(1, sizeof *dp);
    if (!dp || !(dp->reps = calloc((size_t)n, sizeof *dp->reps))) {
        free(dp);
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating DataParallel");
    }
    dp->n = n;
    dp->main = main;
    dp->reps[0] = (tb_dp_replica){.be = be0, .m = main};
    int rc;
    TB_TRY_GOTO(rc, replica_alloc(&dp->reps[0], opts), out_destroy);
    for (int i = 1; i < n; i++)
        TB_TRY_GOTO(rc, replica_build(&dp->reps[i], main, spec, opts, threads_per_replica),
                    out_destroy);
    TB_TRY_GOTO(rc, xent_init(&main->ctx, opts->classes, opts->max_batch, &dp->loss), out_destroy);
    TB_TRY_GOTO(rc, tensor_alloc(be0, opts->max_batch, opts->classes, 1, 1, &dp->logits),
                out_destroy);
    TB_TRY_GOTO(rc, be0->dev_alloc(be0, (void **)&dp->labels,
                                   (size_t)opts->max_batch * sizeof(int32_t)), out_destroy);
    dp->host_tmp_n = main->numel;
    dp->host_tmp = malloc(dp->host_tmp_n * sizeof(float));
    if (!dp->host_tmp) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of host memory creating DataParallel");
        goto out_destroy;
    }
    *out = dp;
    return TB_OK;

out_destroy:
    dp_destroy(dp);
    return rc;
}

void dp_destroy(tb_dp *dp)
{
    if (!dp)
        return;
    for (int i = 0; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        tensor_free(&r->x);
        tensor_free(&r->dlogits);
        if (r->owned) {
            model_destroy(r->m);
            if (r->be)
                tb_backend_close(r->be);
        }
    }
    xent_free(&dp->loss);
    tensor_free(&dp->logits);
    if (dp->labels)
        dp->main->ctx.be->dev_free(dp->main->ctx.be, dp->labels);
    free(dp->host_tmp);
    free(dp->reps);
    free(dp);
}

/* bytes from src on backend a to dst on backend b, through host memory. */
static int copy_between(tb_dp *dp, tb_backend *a, const void *src, tb_backend *b, void *dst,
                        size_t bytes)
{
    if (bytes > dp->host_tmp_n * sizeof(float)) {
        float *p = realloc(dp->host_tmp, bytes);
        if (!p)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory staging a DataParallel copy");
        dp->host_tmp = p;
        dp->host_tmp_n = bytes / sizeof(float) + 1;
    }
    TB_TRY(a->copy_d2h(a, dp->host_tmp, src, bytes, NULL));
    return b->copy_h2d(b, dst, dp->host_tmp, bytes, NULL);
}

/* ---- running the replicas on threads ---- */

typedef int (*replica_fn)(tb_dp_replica *r);

typedef struct job {
    tb_dp_replica *r;
    replica_fn fn;
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    j->r->rc = j->fn(j->r);
    return NULL;
}

/* fn on every replica at once: replica 0 on the calling thread. */
static int run_all(tb_dp *dp, replica_fn fn)
{
    pthread_t th[dp->n];
    job jobs[dp->n];
    int started[dp->n];
    for (int i = 1; i < dp->n; i++) {
        jobs[i] = (job){.r = &dp->reps[i], .fn = fn};
        started[i] = pthread_create(&th[i], NULL, job_main, &jobs[i]) == 0;
        if (!started[i])
            dp->reps[i].rc = TB_FAIL(TB_ERR_INTERNAL, "cannot start DataParallel thread %d", i);
    }
    dp->reps[0].rc = fn(&dp->reps[0]);
    int rc = dp->reps[0].rc;
    for (int i = 1; i < dp->n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        if (rc == TB_OK)
            rc = dp->reps[i].rc;
    }
    return rc;
}

static int replica_forward(tb_dp_replica *r) { return model_forward(r->m, &r->x, &r->logits); }

static int replica_backward(tb_dp_replica *r)
{
    const tb_tensor *dx;
    TB_TRY(tensor_set_batch(&r->dlogits, r->cnt));
    TB_TRY(layer_backward(r->m->net, &r->dlogits, &dx));
    r->m->ctx.grad_accumulate = 1;
    return r->be->sync(r->be);
}

/* ---- the step ---- */

static int replicate(tb_dp *dp)
{
    tb_backend *be0 = dp->main->ctx.be;
    size_t bytes = dp->main->numel * sizeof(float);
    for (int i = 1; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        TB_TRY(copy_between(dp, be0, dp->main->flat_w, r->be, r->m->flat_w, bytes));
        r->m->ctx.training = dp->main->ctx.training;
        r->m->ctx.grad_accumulate = 0; /* replicas' gradients are written, then reduced */
    }
    return TB_OK;
}

static int scatter(tb_dp *dp, const float *images, int batch)
{
    size_t sample = shape_numel(dp->main->in);
    for (int i = 0; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        r->lo = (int)((long)batch * i / dp->n);
        r->cnt = (int)((long)batch * (i + 1) / dp->n) - r->lo;
        TB_TRY(tensor_set_batch(&r->x, r->cnt));
        TB_TRY(tensor_from_host(&r->x, images + (size_t)r->lo * sample));
    }
    return TB_OK;
}

/* Outputs onto device 0, the loss there, the output gradient back out. */
static int gather_loss(tb_dp *dp, const int32_t *labels, int batch, float loss_scale, float *loss)
{
    tb_backend *be0 = dp->main->ctx.be;
    int classes = dp->main->classes;
    TB_TRY(tensor_set_batch(&dp->logits, batch));
    for (int i = 0; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        TB_TRY(copy_between(dp, r->be, r->logits->data, be0,
                            dp->logits.data + (size_t)r->lo * classes,
                            (size_t)r->cnt * classes * sizeof(float)));
    }
    TB_TRY(be0->copy_h2d(be0, dp->labels, labels, (size_t)batch * sizeof(int32_t), NULL));
    TB_TRY(xent_forward(&dp->loss, &dp->logits, dp->labels));
    TB_TRY(xent_read_loss(&dp->loss, loss));
    const tb_tensor *d;
    TB_TRY(xent_backward(&dp->loss, loss_scale / (float)batch, &d));
    for (int i = 0; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        TB_TRY(copy_between(dp, be0, d->data + (size_t)r->lo * classes, r->be, r->dlogits.data,
                            (size_t)r->cnt * classes * sizeof(float)));
    }
    return TB_OK;
}

/* Replica gradients summed into main's (which backward wrote or added to). */
static int reduce_grads(tb_dp *dp)
{
    tb_backend *be0 = dp->main->ctx.be;
    size_t n = dp->main->numel;
    for (int i = 1; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        TB_TRY(r->be->copy_d2h(r->be, dp->host_tmp, r->m->flat_g, n * sizeof(float), NULL));
        TB_TRY(be0->axpby(be0, 1.0f, dp->host_tmp, 1.0f, dp->main->flat_g, n));
    }
    return be0->sync(be0);
}

int dp_step(tb_dp *dp, const float *images, const int32_t *labels, int batch, float loss_scale,
            float *loss)
{
    if (batch < dp->n)
        return TB_FAIL(TB_ERR_INVALID, "DataParallel: batch %d smaller than %d replicas", batch,
                       dp->n);
    tb_dp_times *t = &dp->times;
    double t0 = now_s();
    TB_TRY(replicate(dp));
    double t1 = now_s();
    TB_TRY(scatter(dp, images, batch));
    double t2 = now_s();
    TB_TRY(run_all(dp, replica_forward));
    double t3 = now_s();
    TB_TRY(gather_loss(dp, labels, batch, loss_scale, loss));
    double t4 = now_s();
    TB_TRY(run_all(dp, replica_backward));
    double t5 = now_s();
    TB_TRY(reduce_grads(dp));
    double t6 = now_s();
    *t = (tb_dp_times){t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5};
    return TB_OK;
}
