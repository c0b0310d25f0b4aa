/*
 * sim.c - the CUDA-semantics test backend's engine (see sim.h): streams as
 * queues run by one worker thread each, events as points in those queues,
 * synchronization that waits for what it names, graph capture as a
 * recording of queued calls, and the runtime slots of the table. The op
 * slots are generated wrappers (sim_ops.c, tools/gen_sim_ops.py) that copy
 * their arguments into a closure and call tb_sim_queue_op.
 *
 * One mutex and one condition variable serve every sim backend in the
 * process: copy_peer makes one backend's stream wait for another's, and a
 * single lock keeps those waits simple. Tests run a few hundred ops a step;
 * the lock is not what they measure.
 *
 * Tests: bazel test //lib/backend/sim:sim_test
 */
#define _GNU_SOURCE
#include "lib/backend/sim/sim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/backend/cpu/gelu.h"
#include "lib/core/clock.h"

typedef enum item_kind {
    ITEM_OP = 0,     /* run(cpu, args) after the backend's op delay */
    ITEM_HOST = 1,   /* host(harg) after the item's own delay */
    ITEM_EVENT = 2,  /* an event's record completes */
    ITEM_WAIT_EVENT = 3,
    ITEM_WAIT_STREAM = 4, /* another stream's queue reaches a position */
} item_kind;

typedef struct item {
    struct item *next;
    item_kind kind;
    tb_sim_run_fn run;
    void *args;
    int owns_args;           /* 0: a graph's recording owns them */
    int (*host)(void *);
    void *harg;
    double delay_s;
    tb_event *ev;
    tb_stream *other;
    long target;             /* the event's record count or the stream's position */
} item;

struct tb_stream {
    struct sim_ctx *ctx;
    pthread_t worker;
    item *head, *tail;
    long queued, done;       /* items queued and run so far */
    int stop;
    struct tb_stream *next;  /* the backend's list of streams */
};

struct tb_event {
    long recorded, done;     /* records issued, records run */
    double t;                /* CLOCK_MONOTONIC of the last record run */
    int refs;                /* queued records and waits that name it */
    int destroyed;           /* event_destroy came first: the last of them frees it */
};

struct tb_graph {
    item *items;             /* (n) recorded calls, in order */
    int n, cap;
};

typedef struct sim_ctx {
    tb_backend *cpu;
    tb_stream *compute;
    tb_stream *streams;      /* every stream, compute first */
    tb_graph *capture;       /* non-NULL between graph_begin and graph_end */
    double op_delay_s;
    long launches;
    int err_code;            /* the first queued failure (sticky) */
    char err_msg[256];
} sim_ctx;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static sim_ctx *ctx_of(tb_backend *be) { return be->ctx; }

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- the worker ---- */

/* Runs one item; called without the lock for ops and host functions. */
static void run_work(sim_ctx *c, item *it)
{
    pthread_mutex_lock(&mu);
    int failed = c->err_code != TB_OK;
    double op_delay_s = c->op_delay_s;
    pthread_mutex_unlock(&mu);
    if (failed) /* a broken context runs nothing more, as CUDA's sticky errors */
        return;
    int rc;
    if (it->kind == ITEM_OP) {
        sleep_s(op_delay_s);
        rc = it->run(c->cpu, it->args);
    } else {
        sleep_s(it->delay_s);
        rc = it->host(it->harg);
    }
    if (rc == TB_OK)
        return;
    pthread_mutex_lock(&mu);
    if (c->err_code == TB_OK) {
        c->err_code = rc;
        snprintf(c->err_msg, sizeof c->err_msg, "%s", tb_error_message());
    }
    pthread_mutex_unlock(&mu);
    tb_error_clear();
}

/* Events and waits, under the lock. An event may be destroyed while
 * records and waits still name it, as CUDA allows: the last one frees it. */
static void run_marker(item *it)
{
    if (it->kind == ITEM_WAIT_STREAM) {
        while (it->other->done < it->target)
            pthread_cond_wait(&cv, &mu);
        return;
    }
    if (it->kind == ITEM_EVENT) {
        it->ev->done = it->target;
        it->ev->t = tb_clock_s();
    } else {
        while (it->ev->done < it->target)
            pthread_cond_wait(&cv, &mu);
    }
    if (--it->ev->refs == 0 && it->ev->destroyed)
        free(it->ev);
}

static void *worker_main(void *arg)
{
    tb_stream *s = arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&cv, &mu);
        if (!s->head)
            break;
        item *it = s->head;
        if (it->kind == ITEM_OP || it->kind == ITEM_HOST) {
            pthread_mutex_unlock(&mu);
            run_work(s->ctx, it);
            pthread_mutex_lock(&mu);
        } else {
            run_marker(it);
        }
        s->head = it->next;
        if (!s->head)
            s->tail = NULL;
        s->done++;
        if (it->owns_args)
            free(it->args);
        free(it);
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    tb_cpu_gelu_ws_free(); /* the CPU GELU's per-thread temporaries, grown on this thread */
    return NULL;
}

/* ---- queueing ---- */

static int push(tb_stream *s, const item *proto)
{
    item *it = malloc(sizeof *it);
    if (!it)
        return TB_FAIL(TB_ERR_NOMEM, "sim: out of host memory queueing work");
    *it = *proto;
    it->next = NULL;
    pthread_mutex_lock(&mu);
    if (it->kind == ITEM_EVENT || it->kind == ITEM_WAIT_EVENT)
        it->ev->refs++;
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    s->queued++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return TB_OK;
}

static int record(tb_graph *g, const item *proto)
{
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        item *p = realloc(g->items, (size_t)cap * sizeof *p);
        if (!p)
            return TB_FAIL(TB_ERR_NOMEM, "sim: out of host memory recording a graph");
        g->items = p;
        g->cap = cap;
    }
    g->items[g->n] = *proto;
    g->items[g->n++].owns_args = 0;
    return TB_OK;
}

static tb_stream *stream_of(tb_backend *be, tb_stream *s)
{
    return s && s != TB_ON_COMPUTE ? s : ctx_of(be)->compute;
}

/* Work for stream s: recorded while the compute stream is being captured. */
static int queue_work(tb_backend *be, tb_stream *s, const item *proto)
{
    sim_ctx *c = ctx_of(be);
    s = stream_of(be, s);
    if (c->capture && s == c->compute)
        return record(c->capture, proto);
    return push(s, proto);
}

/* Synchronization is illegal inside a capture (it invalidates a CUDA one). */
static int refuse_in_capture(tb_backend *be, const char *what)
{
    if (ctx_of(be)->capture)
        return TB_FAIL(TB_ERR_INVALID, "sim: %s during a graph capture: a CUDA capture "
                       "would be invalidated; move it out of the captured step", what);
    return TB_OK;
}

static int sticky(sim_ctx *c)
{
    pthread_mutex_lock(&mu);
    int code = c->err_code;
    char msg[sizeof c->err_msg];
    memcpy(msg, c->err_msg, sizeof msg);
    pthread_mutex_unlock(&mu);
    if (code != TB_OK)
        return TB_FAIL(code, "sim: a queued op failed: %s", msg);
    return TB_OK;
}

/* Waits until s has run everything queued on it before this call. */
static void drain(tb_stream *s)
{
    pthread_mutex_lock(&mu);
    long target = s->queued;
    while (s->done < target)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

int tb_sim_queue_op(tb_backend *be, tb_sim_run_fn run, void *args)
{
    item it = {.kind = ITEM_OP, .run = run, .args = args, .owns_args = 1};
    int rc = queue_work(be, NULL, &it);
    if (rc != TB_OK)
        free(args);
    return rc;
}

int tb_sim_host_fn(tb_backend *be, tb_stream *s, int (*fn)(void *arg), void *arg, double delay_s)
{
    item it = {.kind = ITEM_HOST, .host = fn, .harg = arg, .delay_s = delay_s};
    return queue_work(be, s, &it);
}

tb_backend *tb_sim_cpu(tb_backend *be) { return ctx_of(be)->cpu; }

/* ---- memory ---- */

static int sim_dev_alloc(tb_backend *be, void **p, size_t bytes)
{
    tb_backend *cpu = ctx_of(be)->cpu;
    return cpu->dev_alloc(cpu, p, bytes);
}

static int sim_sync(tb_backend *be);

/* cudaFree waits for the device: queued work may still read p. Inside a
 * capture the recorded calls may read p at every replay, and the sim has
 * no caching allocator to keep it for them: refused. */
static int sim_dev_free(tb_backend *be, void *p)
{
    tb_backend *cpu = ctx_of(be)->cpu;
    if (ctx_of(be)->capture)
        return TB_FAIL(TB_ERR_INVALID, "sim: dev_free during a graph capture: replays would "
                       "read freed memory; free after graph_end (the CUDA backend's caching "
                       "allocator would keep the block, the sim does not)");
    TB_TRY(sim_sync(be));
    return cpu->dev_free(cpu, p);
}

static int sim_host_alloc(tb_backend *be, void **p, size_t bytes, int pinned)
{
    tb_backend *cpu = ctx_of(be)->cpu;
    return cpu->host_alloc(cpu, p, bytes, pinned);
}

static int sim_host_free(tb_backend *be, void *p, int pinned)
{
    tb_backend *cpu = ctx_of(be)->cpu;
    return cpu->host_free(cpu, p, pinned);
}

typedef struct fill_args {
    void *dst;
    const void *src;         /* NULL: memset to value */
    int value;
    size_t bytes;
} fill_args;

static int run_fill(tb_backend *cpu, void *p)
{
    (void)cpu;
    fill_args *a = p;
    if (a->src)
        memcpy(a->dst, a->src, a->bytes);
    else
        memset(a->dst, a->value, a->bytes);
    return TB_OK;
}

/* A copy or memset: queued on s, or with s == NULL queued on compute and
 * waited for (cudaMemcpy / cudaMemset: the host sees the result). */
static int fill(tb_backend *be, void *dst, const void *src, int value, size_t bytes,
                tb_stream *s)
{
    if (!s)
        TB_TRY(refuse_in_capture(be, "a synchronous copy or memset (stream NULL)"));
    fill_args *a = malloc(sizeof *a);
    if (!a)
        return TB_FAIL(TB_ERR_NOMEM, "sim: out of host memory queueing a copy");
    *a = (fill_args){.dst = dst, .src = src, .value = value, .bytes = bytes};
    item it = {.kind = ITEM_OP, .run = run_fill, .args = a, .owns_args = 1};
    int rc = queue_work(be, s, &it);
    if (rc != TB_OK) {
        free(a);
        return rc;
    }
    if (s)
        return TB_OK;
    drain(ctx_of(be)->compute);
    return sticky(ctx_of(be));
}

static int sim_copy(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s)
{
    return fill(be, dst, src, 0, bytes, s);
}

static int sim_memset(tb_backend *be, void *p, int value, size_t bytes, tb_stream *s)
{
    return fill(be, p, NULL, value, bytes, s);
}

static int wait_position(tb_stream *s, tb_stream *other)
{
    pthread_mutex_lock(&mu);
    long target = other->queued;
    pthread_mutex_unlock(&mu);
    item it = {.kind = ITEM_WAIT_STREAM, .other = other, .target = target};
    return push(s, &it);
}

/* Ordered both ways, as backend.h says: dst's compute stream waits for
 * everything queued on src's, copies, and src's then waits for the copy. */
static int sim_copy_peer(tb_backend *be, void *dst, tb_backend *src_be, const void *src,
                         size_t bytes)
{
    if (!src_be || !tb_sim_is(src_be))
        return TB_FAIL(TB_ERR_INVALID, "copy_peer to sim from a %s backend: only between sim "
                       "backends", src_be ? src_be->name : "NULL");
    TB_TRY(refuse_in_capture(be, "copy_peer"));
    TB_TRY(refuse_in_capture(src_be, "copy_peer"));
    tb_stream *to = ctx_of(be)->compute, *from = ctx_of(src_be)->compute;
    if (to != from)
        TB_TRY(wait_position(to, from));
    TB_TRY(sim_copy(be, dst, src, bytes, to));
    return to != from ? wait_position(from, to) : TB_OK;
}

static int sim_mem_stats(tb_backend *be, size_t *in_use, size_t *peak)
{
    tb_backend *cpu = ctx_of(be)->cpu;
    return cpu->mem_stats(cpu, in_use, peak);
}

static int sim_mem_reset_peak(tb_backend *be)
{
    tb_backend *cpu = ctx_of(be)->cpu;
    return cpu->mem_reset_peak(cpu);
}

static int sim_mem_set_limit(tb_backend *be, size_t bytes)
{
    tb_backend *cpu = ctx_of(be)->cpu;
    return cpu->mem_set_limit(cpu, bytes);
}

/* ---- streams and events ---- */

static int stream_new(sim_ctx *c, tb_stream **out)
{
    tb_stream *s = calloc(1, sizeof *s);
    if (!s)
        return TB_FAIL(TB_ERR_NOMEM, "sim: out of host memory creating a stream");
    s->ctx = c;
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        free(s);
        return TB_FAIL(TB_ERR_INTERNAL, "sim: cannot start a stream's worker thread");
    }
    pthread_mutex_lock(&mu);
    s->next = c->streams;
    c->streams = s;
    pthread_mutex_unlock(&mu);
    *out = s;
    return TB_OK;
}

/* Runs what is queued, then ends the worker. */
static void stream_stop(sim_ctx *c, tb_stream *s)
{
    pthread_mutex_lock(&mu);
    s->stop = 1;
    pthread_cond_broadcast(&cv);
    for (tb_stream **p = &c->streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    pthread_mutex_unlock(&mu);
    pthread_join(s->worker, NULL);
    free(s);
}

static int sim_stream_create(tb_backend *be, tb_stream **s)
{
    return stream_new(ctx_of(be), s);
}

static int sim_stream_destroy(tb_backend *be, tb_stream *s)
{
    if (!s || s == ctx_of(be)->compute)
        return TB_FAIL(TB_ERR_INVALID, "stream_destroy: NULL is the compute stream, owned by "
                       "the backend");
    stream_stop(ctx_of(be), s);
    return TB_OK;
}

static int sim_stream_sync(tb_backend *be, tb_stream *s)
{
    TB_TRY(refuse_in_capture(be, "stream_sync"));
    drain(stream_of(be, s));
    return sticky(ctx_of(be));
}

static int sim_event_create(tb_backend *be, tb_event **e)
{
    (void)be;
    *e = calloc(1, sizeof **e);
    if (!*e)
        return TB_FAIL(TB_ERR_NOMEM, "sim: out of host memory creating an event");
    return TB_OK;
}

static int sim_event_destroy(tb_backend *be, tb_event *e)
{
    (void)be;
    if (!e)
        return TB_OK;
    pthread_mutex_lock(&mu);
    int named = e->refs > 0; /* by a queued record or wait: it frees e */
    e->destroyed = 1;
    pthread_mutex_unlock(&mu);
    if (!named)
        free(e);
    return TB_OK;
}

static int sim_event_record(tb_backend *be, tb_event *e, tb_stream *s)
{
    TB_TRY(refuse_in_capture(be, "event_record (events inside a capture are not modelled)"));
    pthread_mutex_lock(&mu);
    long target = ++e->recorded;
    pthread_mutex_unlock(&mu);
    item it = {.kind = ITEM_EVENT, .ev = e, .target = target};
    return push(stream_of(be, s), &it);
}

static int sim_stream_wait_event(tb_backend *be, tb_stream *s, tb_event *e)
{
    TB_TRY(refuse_in_capture(be, "stream_wait_event (events inside a capture are not "
                             "modelled)"));
    pthread_mutex_lock(&mu);
    long target = e->recorded;
    pthread_mutex_unlock(&mu);
    item it = {.kind = ITEM_WAIT_EVENT, .ev = e, .target = target};
    return push(stream_of(be, s), &it);
}

static int sim_event_sync(tb_backend *be, tb_event *e)
{
    TB_TRY(refuse_in_capture(be, "event_sync"));
    pthread_mutex_lock(&mu);
    long target = e->recorded;
    while (e->done < target)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return sticky(ctx_of(be));
}

int tb_sim_event_done(tb_backend *be, tb_event *e, int *done)
{
    pthread_mutex_lock(&mu);
    *done = e->done >= e->recorded;
    pthread_mutex_unlock(&mu);
    return sticky(ctx_of(be));
}

static int sim_event_elapsed_ms(tb_backend *be, tb_event *start, tb_event *end, float *ms)
{
    (void)be;
    pthread_mutex_lock(&mu);
    int ok = start->recorded > 0 && end->recorded > 0 && start->done == start->recorded &&
             end->done == end->recorded;
    double dt = end->t - start->t;
    pthread_mutex_unlock(&mu);
    if (!ok)
        return TB_FAIL(TB_ERR_INVALID, "event_elapsed_ms: an event never recorded or not "
                       "complete yet: event_sync the end event first");
    *ms = (float)(dt * 1e3);
    return TB_OK;
}

/* Every stream of the backend (cudaDeviceSynchronize): what each had
 * queued when this call reached it. REQUIRES: no other host thread
 * destroys one of be's streams meanwhile. */
static int sim_sync(tb_backend *be)
{
    sim_ctx *c = ctx_of(be);
    TB_TRY(refuse_in_capture(be, "sync"));
    pthread_mutex_lock(&mu);
    for (tb_stream *s = c->streams; s; s = s->next) {
        long target = s->queued;
        while (s->done < target)
            pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    return sticky(c);
}

static int sim_device_info(tb_backend *be, tb_device_info *info)
{
    tb_backend *cpu = ctx_of(be)->cpu;
    TB_TRY(cpu->device_info(cpu, info));
    snprintf(info->backend, sizeof info->backend, "sim");
    return TB_OK;
}

static void graph_free(tb_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++)
        free(g->items[i].args);
    free(g->items);
    free(g);
}

static int sim_destroy(tb_backend *be)
{
    sim_ctx *c = ctx_of(be);
    int rc = TB_OK;
    graph_free(c->capture); /* a capture never ended */
    c->capture = NULL;
    while (c->streams)
        stream_stop(c, c->streams);
    if (c->cpu)
        rc = c->cpu->destroy(c->cpu);
    free(c);
    free(be);
    return rc;
}

/* ---- graphs ---- */

static int sim_graph_begin(tb_backend *be)
{
    sim_ctx *c = ctx_of(be);
    if (c->capture)
        return TB_FAIL(TB_ERR_INVALID, "graph_begin: a capture is already under way");
    c->capture = calloc(1, sizeof *c->capture);
    if (!c->capture)
        return TB_FAIL(TB_ERR_NOMEM, "sim: out of host memory starting a capture");
    return TB_OK;
}

static int sim_graph_end(tb_backend *be, tb_graph **g)
{
    sim_ctx *c = ctx_of(be);
    *g = NULL;
    if (!c->capture)
        return TB_FAIL(TB_ERR_INVALID, "graph_end without graph_begin");
    *g = c->capture;
    c->capture = NULL;
    return TB_OK;
}

static int sim_graph_launch(tb_backend *be, tb_graph *g)
{
    if (!g)
        return TB_FAIL(TB_ERR_INVALID, "graph_launch: NULL graph");
    TB_TRY(refuse_in_capture(be, "graph_launch"));
    for (int i = 0; i < g->n; i++)
        TB_TRY(push(ctx_of(be)->compute, &g->items[i]));
    ctx_of(be)->launches++;
    return TB_OK;
}

/* A replay may still be queued: wait for it before freeing its arguments. */
static int sim_graph_destroy(tb_backend *be, tb_graph *g)
{
    if (!g)
        return TB_OK;
    drain(ctx_of(be)->compute);
    graph_free(g);
    return TB_OK;
}

long tb_sim_graph_launches(const tb_backend *be) { return ((const sim_ctx *)be->ctx)->launches; }

/* ---- the backend ---- */

int tb_sim_is(const tb_backend *be) { return be && be->destroy == sim_destroy; }

int tb_sim_set_op_delay(tb_backend *be, double seconds)
{
    if (!tb_sim_is(be) || !(seconds >= 0))
        return TB_FAIL(TB_ERR_INVALID, "tb_sim_set_op_delay: a sim backend and seconds >= 0");
    pthread_mutex_lock(&mu);
    ctx_of(be)->op_delay_s = seconds;
    pthread_mutex_unlock(&mu);
    return TB_OK;
}

static void install_runtime(tb_backend *be)
{
    be->dev_alloc = sim_dev_alloc;
    be->dev_free = sim_dev_free;
    be->host_alloc = sim_host_alloc;
    be->host_free = sim_host_free;
    be->copy_h2d = sim_copy;
    be->copy_d2h = sim_copy;
    be->copy_d2d = sim_copy;
    be->copy_peer = sim_copy_peer;
    be->memset = sim_memset;
    be->mem_stats = sim_mem_stats;
    be->mem_reset_peak = sim_mem_reset_peak;
    be->mem_set_limit = sim_mem_set_limit;
    be->stream_create = sim_stream_create;
    be->stream_destroy = sim_stream_destroy;
    be->stream_sync = sim_stream_sync;
    be->event_create = sim_event_create;
    be->event_destroy = sim_event_destroy;
    be->event_record = sim_event_record;
    be->stream_wait_event = sim_stream_wait_event;
    be->event_sync = sim_event_sync;
    be->event_elapsed_ms = sim_event_elapsed_ms;
    be->sync = sim_sync;
    be->device_info = sim_device_info;
    be->destroy = sim_destroy;
    be->graph_begin = sim_graph_begin;
    be->graph_end = sim_graph_end;
    be->graph_launch = sim_graph_launch;
    be->graph_destroy = sim_graph_destroy;
}

int tb_backend_sim_create(int threads, tb_backend **out)
{
    *out = NULL;
    tb_backend *be = calloc(1, sizeof *be);
    sim_ctx *c = calloc(1, sizeof *c);
    int rc;
    if (!be || !c) {
        free(be);
        free(c);
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating the sim backend");
    }
    be->name = "sim";
    be->ctx = c;
    install_runtime(be);
    TB_TRY_GOTO(rc, tb_backend_cpu_create(threads, &c->cpu), out_destroy);
    tb_sim_install_ops(be, c->cpu);
    TB_TRY_GOTO(rc, stream_new(c, &c->compute), out_destroy);
    *out = be;
    return TB_OK;

out_destroy:
    sim_destroy(be);
    return rc;
}
