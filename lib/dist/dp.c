/*
 * dp.c - DataParallel on any backend through the table: copies between
 * devices are copy_peer, the reduction is axpby on device 0; the replicas
 * run on host threads or from the calling thread. See dp.h.
 */
#include "lib/core/clock.h"
#include "lib/dist/dp.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct tb_dp_replica {
    tb_backend *be;           /* replica 0: main's (borrowed) */
    tb_model *m;              /* replica 0: main (borrowed) */
    int owned;                /* the backend was opened by tb_dp_create (replica i > 0's
                                 model is always its own) */
    int lo, cnt;              /* this step's share of the batch */
    tb_tensor x;              /* (cnt, C, H, W); replica 0's holds the whole batch until the
                                 scatter has sent the other shares */
    const tb_tensor *logits;
    tb_tensor dlogits;        /* (cnt, classes, 1, 1) */
    int rc;
};

/* ---- building ---- */

static int replica_alloc(tb_dp_replica *r, const tb_model_opts *o)
{
    TB_TRY(tb_tensor_alloc(r->be, o->max_batch, o->in.c, o->in.h, o->in.w, &r->x));
    return tb_tensor_alloc(r->be, o->max_batch, o->classes, 1, 1, &r->dlogits);
}

/* Replica i's device ordinal: device_ids defaults to every device with
 * output_device (main's, d0) first, then the others in ascending order. */
static int replica_ordinal(int d0, int i)
{
    int k = i - 1;
    return k < d0 ? k : k + 1;
}

static int replica_open(tb_dp_replica *r, const tb_backend *be0, int i, int threads)
{
    tb_device_kind kind;
    int ord;
    if (tb_device_parse(be0->name, &kind, &ord) != TB_OK)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "DataParallel cannot open replicas of a '%s' backend",
                       be0->name);
    int ordinal = replica_ordinal(be0->device, i);
    int rc = tb_backend_open(kind, ordinal, threads, &r->be);
    if (rc != TB_OK)
        return TB_FAIL(rc, "DataParallel replica %d (%s:%d) could not be opened: use fewer "
                       "replicas, at most the devices there are", i, be0->name, ordinal);
    r->owned = 1;
    return TB_OK;
}

/* Replica i's model on r->be (opened, or the caller's). */
static int replica_build(tb_dp_replica *r, const tb_model *main, const tb_layer_spec *spec,
                         const tb_model_opts *o)
{
    TB_TRY(tb_model_build(r->be, spec, o, &r->m));
    r->m->ctx.gelu = main->ctx.gelu;
    r->m->ctx.conv_autotune = main->ctx.conv_autotune;
    r->m->ctx.conv_deterministic = main->ctx.conv_deterministic;
    r->m->ctx.math = main->ctx.math;
    r->m->ctx.conv_math = main->ctx.conv_math;
    if (r->m->numel != main->numel)
        return TB_FAIL(TB_ERR_INVALID, "DP replica has %zu parameters, the model %zu: build it "
                       "from the same description", r->m->numel, main->numel);
    return replica_alloc(r, o);
}

static int dp_alloc_device0(tb_dp *dp, const tb_model_opts *opts)
{
    tb_model *main = dp->main;
    tb_backend *be0 = main->ctx.be;
    TB_TRY(tb_xent_init(&main->ctx, opts->classes, opts->max_batch, &dp->loss));
    TB_TRY(tb_tensor_alloc(be0, opts->max_batch, opts->classes, 1, 1, &dp->logits));
    TB_TRY(be0->dev_alloc(be0, (void **)&dp->labels, (size_t)opts->max_batch * sizeof(int32_t)));
    return be0->dev_alloc(be0, (void **)&dp->grad_stage, main->numel * sizeof(float));
}

/* TB_DP_ONE_THREAD: an event per phase boundary on every replica's device. */
static int marks_create(tb_dp *dp)
{
    if (dp->mode != TB_DP_ONE_THREAD)
        return TB_OK;
    dp->marks = calloc((size_t)dp->n * TB_DP_MARKS, sizeof *dp->marks);
    if (!dp->marks)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for DataParallel's events");
    for (int i = 0; i < dp->n; i++)
        for (int k = 0; k < TB_DP_MARKS; k++)
            TB_TRY(dp->reps[i].be->event_create(dp->reps[i].be, &dp->marks[i * TB_DP_MARKS + k]));
    return TB_OK;
}

/* Replica i's backend: backends[i] when given, else opened here. */
static int dp_build(tb_dp *dp, const tb_layer_spec *spec, const tb_model_opts *opts,
                    tb_backend *const *backends, int threads_per_replica)
{
    TB_TRY(replica_alloc(&dp->reps[0], opts));
    for (int i = 1; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        if (backends)
            r->be = backends[i];
        else
            TB_TRY(replica_open(r, dp->main->ctx.be, i, threads_per_replica));
        TB_TRY(replica_build(r, dp->main, spec, opts));
    }
    TB_TRY(marks_create(dp));
    return dp_alloc_device0(dp, opts);
}

static int dp_create(tb_model *main, const tb_layer_spec *spec, const tb_model_opts *opts, int n,
                     tb_dp_mode mode, tb_backend *const *backends, int threads_per_replica,
                     tb_dp **out)
{
    *out = NULL;
    if (n < 1)
        return TB_FAIL(TB_ERR_INVALID, "DataParallel needs at least 1 replica, got %d", n);
    if (mode != TB_DP_THREADS && mode != TB_DP_ONE_THREAD)
        return TB_FAIL(TB_ERR_INVALID, "DataParallel mode %d: use TB_DP_THREADS or "
                       "TB_DP_ONE_THREAD", (int)mode);
    tb_dp *dp = calloc(1, sizeof *dp);
    if (!dp || !(dp->reps = calloc((size_t)n, sizeof *dp->reps))) {
        free(dp);
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating DataParallel");
    }
    dp->n = n;
    dp->mode = mode;
    dp->main = main;
    dp->reps[0] = (tb_dp_replica){.be = main->ctx.be, .m = main};
    int rc;
    TB_TRY_GOTO(rc, dp_build(dp, spec, opts, backends, threads_per_replica), out_destroy);
    *out = dp;
    return TB_OK;

out_destroy:
    tb_dp_destroy(dp);
    return rc;
}

int tb_dp_create(tb_model *main, const tb_layer_spec *spec, const tb_model_opts *opts, int n,
              tb_dp_mode mode, int threads_per_replica, tb_dp **out)
{
    return dp_create(main, spec, opts, n, mode, NULL, threads_per_replica, out);
}

int tb_dp_create_on(tb_model *main, const tb_layer_spec *spec, const tb_model_opts *opts, int n,
                    tb_dp_mode mode, tb_backend *const *backends, tb_dp **out)
{
    *out = NULL;
    if (!backends || n < 1 || backends[0] != main->ctx.be)
        return TB_FAIL(TB_ERR_INVALID, "tb_dp_create_on: backends[0] must be the model's "
                       "backend, one backend per replica");
    for (int i = 1; i < n; i++)
        if (!backends[i] || backends[i]->copy_peer != main->ctx.be->copy_peer)
            return TB_FAIL(TB_ERR_INVALID, "tb_dp_create_on: replica %d's backend is not of "
                           "the model's kind (%s)", i, main->ctx.be->name);
    return dp_create(main, spec, opts, n, mode, backends, 0, out);
}

void tb_dp_destroy(tb_dp *dp)
{
    if (!dp)
        return;
    tb_backend *be0 = dp->main->ctx.be;
    for (int i = 0; dp->marks && i < dp->n; i++)
        for (int k = 0; k < TB_DP_MARKS; k++)
            if (dp->marks[i * TB_DP_MARKS + k])
                dp->reps[i].be->event_destroy(dp->reps[i].be, dp->marks[i * TB_DP_MARKS + k]);
    free(dp->marks);
    tb_xent_free(&dp->loss);
    tb_tensor_free(&dp->logits);
    if (dp->labels)
        be0->dev_free(be0, dp->labels);
    if (dp->grad_stage)
        be0->dev_free(be0, dp->grad_stage);
    for (int i = 0; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        tb_tensor_free(&r->x);
        tb_tensor_free(&r->dlogits);
        if (i > 0)
            tb_model_destroy(r->m);
        if (r->owned && r->be)
            tb_backend_close(r->be);
    }
    free(dp->reps);
    free(dp);
}

/* bytes from src on backend a to dst on backend b; counted in *counter
 * when they cross devices. */
static int dp_copy(size_t *counter, tb_backend *b, void *dst, tb_backend *a, const void *src,
                   size_t bytes)
{
    if (a != b)
        *counter += bytes;
    return b->copy_peer(b, dst, a, src, bytes);
}

/* ---- running the replicas ---- */

typedef int (*replica_fn)(tb_dp_replica *r);

typedef struct job {
    tb_dp_replica *r;
    replica_fn fn;
} job;

/* A replica thread waits for its device, as the CPU DP's "device" is the
 * thread itself. */
static int job_run(job *j)
{
    TB_TRY(j->fn(j->r));
    return j->r->be->sync(j->r->be);
}

static void *job_main(void *arg)
{
    job *j = arg;
    j->r->rc = job_run(j);
    return NULL;
}

/* fn on every replica at once: replica 0 on the calling thread. */
static int run_threads(tb_dp *dp, replica_fn fn)
{
    pthread_t th[dp->n];
    job jobs[dp->n];
    int started[dp->n];
    for (int i = 0; i < dp->n; i++)
        jobs[i] = (job){.r = &dp->reps[i], .fn = fn};
    for (int i = 1; i < dp->n; i++) {
        started[i] = pthread_create(&th[i], NULL, job_main, &jobs[i]) == 0;
        if (!started[i])
            dp->reps[i].rc = TB_FAIL(TB_ERR_INTERNAL, "cannot start DataParallel thread %d", i);
    }
    int rc = job_run(&jobs[0]);
    for (int i = 1; i < dp->n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        if (rc == TB_OK && dp->reps[i].rc != TB_OK)
            rc = TB_FAIL(dp->reps[i].rc, "DataParallel replica %d failed on its thread (the "
                         "cause is on that thread's error chain)", i);
    }
    return rc;
}

/* fn on every replica in turn from this thread; asynchronous backends
 * queue the work and return, so the devices run at once. */
static int run_one_thread(tb_dp *dp, replica_fn fn)
{
    for (int i = 0; i < dp->n; i++)
        TB_TRY(fn(&dp->reps[i]));
    return TB_OK;
}

static int run_replicas(tb_dp *dp, replica_fn fn)
{
    return dp->mode == TB_DP_THREADS ? run_threads(dp, fn) : run_one_thread(dp, fn);
}

static int replica_forward(tb_dp_replica *r) { return tb_model_forward(r->m, &r->x, &r->logits); }

static int replica_backward(tb_dp_replica *r)
{
    const tb_tensor *dx;
    TB_TRY(tb_layer_backward(r->m->net, &r->dlogits, &dx));
    r->m->ctx.grad_accumulate = 1;
    return TB_OK;
}

/* ---- the step ---- */

/* TB_DP_ONE_THREAD: phase boundary k reached on every device's stream. */
static int mark(tb_dp *dp, int k)
{
    for (int i = 0; dp->marks && i < dp->n; i++) {
        tb_backend *be = dp->reps[i].be;
        TB_TRY(be->event_record(be, dp->marks[i * TB_DP_MARKS + k], NULL));
    }
    return TB_OK;
}

/* The batch onto device 0 (a DataParallel user's input.to(device_ids[0])),
 * then each other replica's share from there. */
static int scatter(tb_dp *dp, const float *images, const int32_t *labels, int batch)
{
    tb_dp_replica *r0 = &dp->reps[0];
    tb_backend *be0 = r0->be;
    size_t sample = tb_shape_numel(dp->main->in);
    TB_TRY(tb_tensor_set_batch(&r0->x, batch));
    TB_TRY(tb_tensor_from_host(&r0->x, images));
    TB_TRY(be0->copy_h2d(be0, dp->labels, labels, (size_t)batch * sizeof(int32_t), NULL));
    for (int i = 0; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        r->lo = (int)((long)batch * i / dp->n);
        r->cnt = (int)((long)batch * (i + 1) / dp->n) - r->lo;
        TB_TRY(tb_tensor_set_batch(&r->x, r->cnt)); /* replica 0: its rows come first */
        if (i > 0)
            TB_TRY(dp_copy(&dp->bytes.scatter, r->be, r->x.data, be0,
                           r0->x.data + (size_t)r->lo * sample,
                           (size_t)r->cnt * sample * sizeof(float)));
    }
    return TB_OK;
}

static int replicate(tb_dp *dp)
{
    tb_backend *be0 = dp->main->ctx.be;
    size_t bytes = dp->main->numel * sizeof(float);
    for (int i = 1; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        TB_TRY(dp_copy(&dp->bytes.replicate, r->be, r->m->flat_w, be0, dp->main->flat_w, bytes));
        r->m->ctx.training = dp->main->ctx.training;
        r->m->ctx.grad_accumulate = 0; /* replicas' gradients are written, then reduced */
    }
    return TB_OK;
}

/* Outputs onto device 0, the loss there, the output gradient back out. */
static int gather_loss(tb_dp *dp, int batch, float loss_scale)
{
    tb_backend *be0 = dp->main->ctx.be;
    size_t classes = (size_t)dp->main->classes;
    TB_TRY(tb_tensor_set_batch(&dp->logits, batch));
    for (int i = 0; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        TB_TRY(dp_copy(&dp->bytes.gather, be0, dp->logits.data + (size_t)r->lo * classes, r->be,
                       r->logits->data, (size_t)r->cnt * classes * sizeof(float)));
    }
    TB_TRY(tb_xent_forward(&dp->loss, &dp->logits, dp->labels));
    const tb_tensor *d;
    TB_TRY(tb_xent_backward(&dp->loss, loss_scale / (float)batch, &d));
    for (int i = 0; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        TB_TRY(tb_tensor_set_batch(&r->dlogits, r->cnt));
        TB_TRY(dp_copy(&dp->bytes.grad_scatter, r->be, r->dlogits.data, be0,
                       d->data + (size_t)r->lo * classes, (size_t)r->cnt * classes * sizeof(float)));
    }
    return TB_OK;
}

/* Replica gradients summed into main's (which backward wrote or added to),
 * one at a time through a staging buffer on device 0. */
static int reduce_grads(tb_dp *dp)
{
    tb_backend *be0 = dp->main->ctx.be;
    size_t n = dp->main->numel;
    for (int i = 1; i < dp->n; i++) {
        tb_dp_replica *r = &dp->reps[i];
        TB_TRY(dp_copy(&dp->bytes.reduce, be0, dp->grad_stage, r->be, r->m->flat_g,
                       n * sizeof(float)));
        TB_TRY(be0->axpby(be0, 1.0f, dp->grad_stage, 1.0f, dp->main->flat_g, n));
    }
    return TB_OK;
}

int tb_dp_step(tb_dp *dp, const float *images, const int32_t *labels, int batch, float loss_scale,
            float *loss)
{
    if (batch < dp->n || batch > dp->reps[0].x.cap_n)
        return TB_FAIL(TB_ERR_INVALID, "DataParallel: batch %d with %d replicas: give at least "
                       "one sample per replica and at most max_batch (%d)", batch, dp->n,
                       dp->reps[0].x.cap_n);
    dp->bytes = (tb_dp_bytes){0};
    double t0 = tb_clock_s();
    TB_TRY(mark(dp, 0));
    TB_TRY(scatter(dp, images, labels, batch));
    TB_TRY(mark(dp, 1));
    double t1 = tb_clock_s();
    TB_TRY(replicate(dp));
    TB_TRY(mark(dp, 2));
    double t2 = tb_clock_s();
    TB_TRY(run_replicas(dp, replica_forward));
    TB_TRY(mark(dp, 3));
    double t3 = tb_clock_s();
    TB_TRY(gather_loss(dp, batch, loss_scale));
    TB_TRY(mark(dp, 4));
    double t4 = tb_clock_s();
    TB_TRY(run_replicas(dp, replica_backward));
    TB_TRY(mark(dp, 5));
    double t5 = tb_clock_s();
    TB_TRY(reduce_grads(dp));
    TB_TRY(mark(dp, 6));
    double t6 = tb_clock_s();
    if (loss)
        TB_TRY(tb_xent_read_loss(&dp->loss, loss));
    double t7 = tb_clock_s();
    dp->times = (tb_dp_times){.scatter_s = t1 - t0, .replicate_s = t2 - t1,
                              .forward_s = t3 - t2, .gather_loss_s = t4 - t3,
                              .backward_s = t5 - t4, .reduce_s = t6 - t5,
                              .loss_read_s = t7 - t6};
    /* The host waited for device 0 reading the loss; the other devices'
     * last events follow the reduction's copies, so this waits ~nothing. */
    return loss ? tb_dp_read_times(dp, &dp->times) : TB_OK;
}

int tb_dp_read_times(tb_dp *dp, tb_dp_times *out)
{
    if (!dp->marks) { /* TB_DP_THREADS: the host clock already waited for each device */
        *out = dp->times;
        return TB_OK;
    }
    double ph[TB_DP_MARKS - 1] = {0};
    for (int i = 0; i < dp->n; i++) {
        tb_backend *be = dp->reps[i].be;
        tb_event **ev = &dp->marks[i * TB_DP_MARKS];
        TB_TRY(be->event_sync(be, ev[TB_DP_MARKS - 1]));
        for (int k = 0; k + 1 < TB_DP_MARKS; k++) {
            float ms;
            TB_TRY(be->event_elapsed_ms(be, ev[k], ev[k + 1], &ms));
            ph[k] = ph[k] > 1e-3 * ms ? ph[k] : 1e-3 * ms;
        }
    }
    dp->times = (tb_dp_times){.scatter_s = ph[0], .replicate_s = ph[1], .forward_s = ph[2],
                              .gather_loss_s = ph[3], .backward_s = ph[4], .reduce_s = ph[5],
                              .loss_read_s = dp->times.loss_read_s};
    *out = dp->times;
    return TB_OK;
}

int tb_dp_reference_grads(tb_model *m, const float *images, const int32_t *labels, int n,
                          int batch, float *loss)
{
    tb_backend *be = m->ctx.be;
    size_t per_image = (size_t)m->in.c * (size_t)m->in.h * (size_t)m->in.w;
    int most = (batch + n - 1) / n;
    tb_tensor x = {0};
    int32_t *dl = NULL;
    int rc;
    TB_TRY_GOTO(rc, tb_tensor_alloc(be, most, m->in.c, m->in.h, m->in.w, &x), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&dl, (size_t)most * sizeof(int32_t)), out_free);
    TB_TRY_GOTO(rc, tb_model_zero_grad(m, 1), out_free);
    *loss = 0;
    for (int k = 0; k < n; k++) {
        /* replica k's rows, as scatter cuts them; its mean loss weighs
         * cnt / batch in the batch's mean, as the gathered loss has it */
        int lo = (int)((long)batch * k / n), cnt = (int)((long)batch * (k + 1) / n) - lo;
        float l, share = (float)cnt / (float)batch;
        TB_TRY_GOTO(rc, tb_tensor_set_batch(&x, cnt), out_free);
        TB_TRY_GOTO(rc, tb_tensor_from_host(&x, images + (size_t)lo * per_image), out_free);
        TB_TRY_GOTO(rc, be->copy_h2d(be, dl, labels + lo, (size_t)cnt * sizeof(int32_t), NULL),
                    out_free);
        TB_TRY_GOTO(rc, tb_model_forward_loss(m, &x, dl, NULL), out_free);
        TB_TRY_GOTO(rc, tb_model_backward(m, share), out_free);
        TB_TRY_GOTO(rc, tb_xent_read_loss(&m->loss, &l), out_free);
        *loss += l * share;
    }
out_free:
    tb_tensor_free(&x);
    if (dl)
        be->dev_free(be, dl);
    return rc;
}

int tb_dp_check_net_build(tb_backend *be, int max_batch, tb_dp_check_net *net)
{
    *net = (tb_dp_check_net){.opts = {.in = {1, 28, 28}, .classes = 10, .max_batch = max_batch,
                                      .conv_bias = 1, .seed = 7}};
    tb_opt_hparams hp = {.kind = TB_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .grad_scale = 1.0f};
    tb_lr_schedule sch = {.peak_lr = 0.05};
    int rc;
    TB_TRY_GOTO(rc, tb_model_build(be, tb_spec_small_cnn, &net->opts, &net->m), out_free_net);
    TB_TRY_GOTO(rc, tb_optim_init(&net->opt, net->m, &hp, &sch, 0), out_free_net);
    return TB_OK;
out_free_net:
    tb_dp_check_net_free(net);
    return rc;
}

void tb_dp_check_net_free(tb_dp_check_net *net)
{
    tb_optim_free(&net->opt);
    tb_model_destroy(net->m);
    net->m = NULL;
}
