/*
 * comm_mpi.c - the communicator over OpenMPI, and the watchdog that turns a
 * hung collective into a failed job. See comm.h.
 *
 * The watchdog is one thread per process. Implementations call
 * tb_comm_watch_begin when an operation starts and tb_comm_watch_end when one
 * completes; the thread wakes every 50 ms, and when operations have been
 * outstanding for longer than the limit with none completing, it prints
 * which rank and which operation, and calls MPI_Abort. MPI is initialized
 * MPI_THREAD_FUNNELED: only the main thread makes MPI calls, except that
 * last-resort MPI_Abort, which does not return and asks mpirun to end
 * every rank (OpenMPI implements it through its runtime, not through the
 * communicator the main thread is blocked in).
 *
 * Test: bazel test //lib/dist:comm_test
 */
#define _GNU_SOURCE
#include "lib/dist/comm.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

double tb_comm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tb_comm_req_started(tb_comm *c, tb_comm_req *req, size_t n, const char *what)
{
    tb_comm_watch_begin(what);
    req->active = 1;
    req->bytes = n * sizeof(float);
    req->t_start = tb_comm_now();
    req->t_end = 0;
    c->stats.allreduce_bytes += req->bytes;
    c->stats.allreduce_calls++;
}

int tb_mpi_fail(int mpi_rc, const char *file, int line, const char *expr)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", mpi_rc);
    return tb_error_push(TB_ERR_MPI, file, line, "%s failed: %s", expr, msg);
}

double tb_comm_algbw(size_t bytes, double seconds) { return (double)bytes / seconds; }

double tb_comm_busbw(size_t bytes, double seconds, int ranks)
{
    return tb_comm_algbw(bytes, seconds) * 2.0 * (double)(ranks - 1) / (double)ranks;
}

void tb_comm_reset_stats(tb_comm *c) { c->stats = (tb_comm_stats){0}; }

/* ---- the watchdog ---- */

static struct {
    pthread_t thread;
    int running;
    atomic_int stop;
    atomic_int outstanding;            /* operations started, not completed */
    _Atomic double since;              /* start of the current wait for progress */
    _Atomic(const char *) what;        /* newest operation started */
    double timeout_s;
    int rank;
} watch;

void tb_comm_watch_begin(const char *what)
{
    atomic_store(&watch.what, what);
    /* the clock first, then the count: the watchdog, seeing an operation
     * outstanding, must not read the time the previous one ended */
    if (atomic_load(&watch.outstanding) == 0)
        atomic_store(&watch.since, tb_comm_now());
    atomic_fetch_add(&watch.outstanding, 1);
}

void tb_comm_watch_end(void)
{
    atomic_store(&watch.since, tb_comm_now());
    atomic_fetch_sub(&watch.outstanding, 1);
}

static void *watch_main(void *arg)
{
    (void)arg;
    const struct timespec nap = {0, 50 * 1000 * 1000};
    while (!atomic_load(&watch.stop)) {
        nanosleep(&nap, NULL);
        if (atomic_load(&watch.outstanding) <= 0)
            continue;
        double waited = tb_comm_now() - atomic_load(&watch.since);
        if (waited <= watch.timeout_s)
            continue;
        fprintf(stderr,
                "tunebench: rank %d: %s did not complete within --comm-timeout=%g s "
                "(another rank died or hangs); aborting the whole job\n",
                watch.rank, atomic_load(&watch.what), watch.timeout_s);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 86);
        _exit(86); /* MPI_Abort does not return; this is in case it does */
    }
    return NULL;
}

static int watch_start(int rank, double timeout_s)
{
    if (timeout_s <= 0)
        return TB_OK;
    watch.timeout_s = timeout_s;
    watch.rank = rank;
    atomic_store(&watch.stop, 0);
    atomic_store(&watch.outstanding, 0);
    atomic_store(&watch.what, "nothing");
    int e = pthread_create(&watch.thread, NULL, watch_main, NULL);
    if (e != 0)
        return TB_FAIL(TB_ERR_INTERNAL, "cannot start the communication watchdog thread: error %d", e);
    watch.running = 1;
    return TB_OK;
}

static void watch_stop(void)
{
    if (!watch.running)
        return;
    atomic_store(&watch.stop, 1);
    pthread_join(watch.thread, NULL);
    watch.running = 0;
}

/* ---- the MPI operations ---- */

typedef struct mpi_state {
    int initialized_here;     /* 1: tb_comm_destroy calls MPI_Finalize */
} mpi_state;

static int check_count(size_t n, const char *what)
{
    if (n > (size_t)INT_MAX)
        return TB_FAIL(TB_ERR_INVALID, "%s of %zu elements: more than MPI's int count; split it",
                       what, n);
    return TB_OK;
}

static int mpi_allreduce_sum(tb_comm *c, float *buf, size_t n)
{
    TB_TRY(check_count(n, "all-reduce"));
    double t0 = tb_comm_now();
    tb_comm_watch_begin("MPI_Allreduce");
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->mpi);
    tb_comm_watch_end();
    if (rc != MPI_SUCCESS)
        return tb_mpi_fail(rc, __FILE__, __LINE__, "MPI_Allreduce");
    c->stats.wait_s += tb_comm_now() - t0;
    c->stats.allreduce_bytes += n * sizeof(float);
    c->stats.allreduce_calls++;
    return TB_OK;
}

static int mpi_iallreduce_sum(tb_comm *c, float *buf, size_t n, tb_comm_req *req)
{
    if (req->active)
        return TB_FAIL(TB_ERR_INVALID, "all-reduce started on a request still in flight");
    TB_TRY(check_count(n, "all-reduce"));
    TB_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->mpi, &req->mpi));
    tb_comm_req_started(c, req, n, "MPI_Iallreduce");
    return TB_OK;
}

static void req_finished(tb_comm_req *req)
{
    req->active = 0;
    req->t_end = tb_comm_now();
    tb_comm_watch_end();
}

static int mpi_test(tb_comm *c, tb_comm_req *req, int *done)
{
    (void)c;
    *done = 1;
    if (!req->active)
        return TB_OK;
    int flag = 0;
    TB_CHECK_MPI(MPI_Test(&req->mpi, &flag, MPI_STATUS_IGNORE));
    *done = flag;
    if (flag)
        req_finished(req);
    return TB_OK;
}

static int mpi_wait(tb_comm *c, tb_comm_req *req)
{
    if (!req->active)
        return TB_OK;
    double t0 = tb_comm_now();
    TB_CHECK_MPI(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE));
    req_finished(req);
    c->stats.wait_s += req->t_end - t0;
    return TB_OK;
}

static int mpi_bcast(tb_comm *c, void *buf, size_t bytes, int root)
{
    TB_TRY(check_count(bytes, "broadcast"));
    double t0 = tb_comm_now();
    tb_comm_watch_begin("MPI_Bcast");
    int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->mpi);
    tb_comm_watch_end();
    if (rc != MPI_SUCCESS)
        return tb_mpi_fail(rc, __FILE__, __LINE__, "MPI_Bcast");
    c->stats.wait_s += tb_comm_now() - t0;
    c->stats.bcast_bytes += bytes;
    return TB_OK;
}

static int mpi_barrier(tb_comm *c)
{
    tb_comm_watch_begin("MPI_Barrier");
    int rc = MPI_Barrier(c->mpi);
    tb_comm_watch_end();
    if (rc != MPI_SUCCESS)
        return tb_mpi_fail(rc, __FILE__, __LINE__, "MPI_Barrier");
    return TB_OK;
}

static int mpi_destroy(tb_comm *c)
{
    mpi_state *st = c->impl;
    int rc = TB_OK, r;
    watch_stop();
    if (c->mpi != MPI_COMM_NULL && (r = MPI_Comm_free(&c->mpi)) != MPI_SUCCESS)
        rc = tb_mpi_fail(r, __FILE__, __LINE__, "MPI_Comm_free");
    if (st && st->initialized_here && (r = MPI_Finalize()) != MPI_SUCCESS && rc == TB_OK)
        rc = tb_mpi_fail(r, __FILE__, __LINE__, "MPI_Finalize");
    free(st);
    free(c);
    return rc;
}

static const tb_comm_ops mpi_ops = TB_COMM_OPS("mpi", mpi);

static int mpi_start(int *argc, char ***argv, int *initialized_here)
{
    int inited = 0;
    *initialized_here = 0;
    TB_CHECK_MPI(MPI_Initialized(&inited));
    if (inited)
        return TB_OK;
    int provided = 0;
    TB_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    *initialized_here = 1;
    TB_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    return TB_OK;
}

int tb_comm_mpi_init(int *argc, char ***argv, double timeout_s, tb_comm **out)
{
    *out = NULL;
    tb_comm *c = calloc(1, sizeof *c);
    mpi_state *st = calloc(1, sizeof *st);
    int rc = TB_OK;
    if (!c || !st) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of host memory creating a communicator");
        goto out_free;
    }
    c->ops = &mpi_ops;
    c->impl = st;
    c->mpi = MPI_COMM_NULL;
    TB_TRY_GOTO(rc, mpi_start(argc, argv, &st->initialized_here), out_free);
    TB_CHECK_MPI_GOTO(rc, MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi), out_destroy);
    TB_CHECK_MPI_GOTO(rc, MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN), out_destroy);
    TB_CHECK_MPI_GOTO(rc, MPI_Comm_rank(c->mpi, &c->rank), out_destroy);
    TB_CHECK_MPI_GOTO(rc, MPI_Comm_size(c->mpi, &c->size), out_destroy);
    TB_TRY_GOTO(rc, watch_start(c->rank, timeout_s), out_destroy);
    *out = c;
    return TB_OK;

out_destroy:
    (void)mpi_destroy(c); /* adds to the chain; the first failure is returned */
    return rc;
out_free:
    free(st);
    free(c);
    return rc;
}

int tb_comm_destroy(tb_comm *c)
{
    return c ? c->ops->destroy(c) : TB_OK;
}

static int reduce_double(tb_comm *c, double *v, int n, MPI_Op op)
{
    MPI_Comm mc = c->parent ? c->parent->mpi : c->mpi;
    tb_comm_watch_begin("MPI_Allreduce (doubles)");
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, mc);
    tb_comm_watch_end();
    if (rc != MPI_SUCCESS)
        return tb_mpi_fail(rc, __FILE__, __LINE__, "MPI_Allreduce (doubles)");
    return TB_OK;
}

int tb_comm_sum_double(tb_comm *c, double *v, int n) { return reduce_double(c, v, n, MPI_SUM); }
int tb_comm_max_double(tb_comm *c, double *v, int n) { return reduce_double(c, v, n, MPI_MAX); }
