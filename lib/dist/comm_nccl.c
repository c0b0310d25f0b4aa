/*
 * comm_nccl.c - the communicator over NCCL, for gradients in CUDA device
 * memory. Built only where the CUDA toolkit was found (lib/dist/BUILD; the
 * stand-in is comm_nccl_absent.c).
 *
 * Bootstrap over MPI, as NCCL's own examples do: rank 0 calls
 * ncclGetUniqueId, MPI_Bcast sends the id to every rank, each calls
 * ncclCommInitRank. Collectives run on a side stream: each one first waits
 * (cudaStreamWaitEvent) for an event recorded on the backend's compute
 * stream, so it reads gradients the backward kernels already wrote, and
 * records its own completion event, which test polls (cudaEventQuery) and
 * wait synchronizes on, then makes the compute stream wait for, so the
 * optimizer reads the reduced gradients. Host threads never block on the
 * compute stream to start an all-reduce: backward keeps queueing kernels
 * while NCCL runs, which is DDP's overlap on a GPU.
 *
 * Compiles and links here (no GPU); the first person with one runs
 * bazel run //bench:ddp -- --ranks=2 --device=cuda.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>

#include "lib/backend/cuda/cuda.h"
#include "lib/dist/comm.h"
#include "lib/backend/cuda/check.h"

typedef struct nccl_state {
    ncclComm_t comm;
    cudaStream_t side;        /* collectives run here */
    cudaStream_t compute;     /* the backend's; borrowed */
    cudaEvent_t ready;        /* recorded on compute before each collective */
    cudaEvent_t *pool;        /* completion events, one per request in flight */
    int *pool_busy;
    int pool_n;
    tb_backend *be;
} nccl_state;

static nccl_state *state(tb_comm *c) { return c->impl; }

/* A free completion event from the pool, growing it when all are in use. */
static int event_get(nccl_state *s, cudaEvent_t *ev)
{
    for (int i = 0; i < s->pool_n; i++) {
        if (!s->pool_busy[i]) {
            s->pool_busy[i] = 1;
            *ev = s->pool[i];
            return TB_OK;
        }
    }
    int n = s->pool_n ? 2 * s->pool_n : 16;
    cudaEvent_t *pool = realloc(s->pool, (size_t)n * sizeof *pool);
    if (!pool)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for NCCL events");
    s->pool = pool;
    int *busy = realloc(s->pool_busy, (size_t)n * sizeof *busy);
    if (!busy)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for NCCL events");
    s->pool_busy = busy;
    for (int i = s->pool_n; i < n; i++) {
        TB_CHECK_CUDA(cudaEventCreateWithFlags(&s->pool[i], cudaEventDisableTiming));
        s->pool_busy[i] = 0;
        s->pool_n = i + 1;
    }
    return event_get(s, ev);
}

static void event_put(nccl_state *s, cudaEvent_t ev)
{
    for (int i = 0; i < s->pool_n; i++)
        if (s->pool[i] == ev)
            s->pool_busy[i] = 0;
}

/* The side stream waits for everything queued on compute so far. */
static int side_after_compute(nccl_state *s)
{
    TB_CHECK_CUDA(cudaEventRecord(s->ready, s->compute));
    TB_CHECK_CUDA(cudaStreamWaitEvent(s->side, s->ready, 0));
    return TB_OK;
}

static int nccl_iallreduce_sum(tb_comm *c, float *buf, size_t n, tb_comm_req *req)
{
    nccl_state *s = state(c);
    if (req->active)
        return TB_FAIL(TB_ERR_INVALID, "all-reduce started on a request still in flight");
    cudaEvent_t done = NULL;
    TB_TRY(tb_cuda_bind(s->be));
    TB_TRY(event_get(s, &done));
    TB_TRY(side_after_compute(s));
    TB_CHECK_NCCL(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, s->comm, s->side));
    TB_CHECK_CUDA(cudaEventRecord(done, s->side));
    req->done_event = done;
    req->mpi = MPI_REQUEST_NULL;
    tb_comm_req_started(c, req, n, "ncclAllReduce");
    return TB_OK;
}

/* req completed: the compute stream waits for it, its event goes back. */
static int req_finished(tb_comm *c, tb_comm_req *req)
{
    nccl_state *s = state(c);
    cudaEvent_t done = req->done_event;
    req->active = 0;
    req->t_end = tb_comm_now();
    req->done_event = NULL;
    tb_comm_watch_end();
    TB_CHECK_CUDA(cudaStreamWaitEvent(s->compute, done, 0));
    event_put(s, done);
    return TB_OK;
}

static int nccl_test(tb_comm *c, tb_comm_req *req, int *done)
{
    *done = 1;
    if (!req->active)
        return TB_OK;
    cudaError_t e = cudaEventQuery((cudaEvent_t)req->done_event);
    if (e == cudaErrorNotReady) {
        /* not an error, but the runtime may keep it as its last one, and
         * the next launch's TB_CHECK_LAUNCH would fail on it (PyTorch
         * clears it after its queries too) */
        (void)cudaGetLastError();
        *done = 0;
        return TB_OK;
    }
    TB_CHECK_CUDA(e);
    return req_finished(c, req);
}

static int nccl_wait(tb_comm *c, tb_comm_req *req)
{
    if (!req->active)
        return TB_OK;
    double t0 = tb_comm_now();
    TB_CHECK_CUDA(cudaEventSynchronize((cudaEvent_t)req->done_event));
    c->stats.wait_s += tb_comm_now() - t0;
    return req_finished(c, req);
}

static int nccl_allreduce_sum(tb_comm *c, float *buf, size_t n)
{
    tb_comm_req req = {.mpi = MPI_REQUEST_NULL};
    TB_TRY(nccl_iallreduce_sum(c, buf, n, &req));
    return nccl_wait(c, &req);
}

static int nccl_bcast(tb_comm *c, void *buf, size_t bytes, int root)
{
    nccl_state *s = state(c);
    TB_TRY(tb_cuda_bind(s->be));
    TB_TRY(side_after_compute(s));
    TB_CHECK_NCCL(ncclBroadcast(buf, buf, bytes, ncclUint8, root, s->comm, s->side));
    double t0 = tb_comm_now();
    tb_comm_watch_begin("ncclBroadcast");
    cudaError_t e = cudaStreamSynchronize(s->side);
    tb_comm_watch_end();
    TB_CHECK_CUDA(e);
    c->stats.wait_s += tb_comm_now() - t0;
    c->stats.bcast_bytes += bytes;
    return TB_OK;
}

static int nccl_barrier(tb_comm *c) { return c->parent->ops->barrier(c->parent); }

/* Teardown keeps going after a failure and returns the first one. */
static void keep_first(int *rc, int r)
{
    if (*rc == TB_OK)
        *rc = r;
}

static int cuda_status(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return TB_OK;
    return TB_FAIL(TB_ERR_CUDA, "%s failed: %s (%d)", what, cudaGetErrorString(e), (int)e);
}

static int nccl_destroy(tb_comm *c)
{
    nccl_state *s = state(c);
    int rc = TB_OK;
    if (s) {
        /* A collective nobody waited for may still run on the side stream,
         * using the communicator and events freed below: finish it first. */
        if (s->be)
            keep_first(&rc, tb_cuda_bind(s->be));
        if (s->side)
            keep_first(&rc, cuda_status(cudaStreamSynchronize(s->side),
                                        "cudaStreamSynchronize (NCCL side stream)"));
        if (s->comm) {
            ncclResult_t r = ncclCommDestroy(s->comm);
            if (r != ncclSuccess)
                keep_first(&rc, TB_FAIL(TB_ERR_NCCL, "ncclCommDestroy failed: %s (NCCL result "
                                        "%d)", ncclGetErrorString(r), (int)r));
        }
        for (int i = 0; i < s->pool_n; i++)
            keep_first(&rc, cuda_status(cudaEventDestroy(s->pool[i]), "cudaEventDestroy"));
        if (s->ready)
            keep_first(&rc, cuda_status(cudaEventDestroy(s->ready), "cudaEventDestroy"));
        if (s->side)
            keep_first(&rc, cuda_status(cudaStreamDestroy(s->side), "cudaStreamDestroy"));
        free(s->pool);
        free(s->pool_busy);
        free(s);
    }
    free(c);
    return rc;
}

static const tb_comm_ops nccl_ops = TB_COMM_OPS("nccl", nccl);

static int nccl_bootstrap(tb_comm *mpi, nccl_state *s)
{
    ncclUniqueId id;
    if (mpi->rank == 0)
        TB_CHECK_NCCL(ncclGetUniqueId(&id));
    TB_TRY(tb_comm_bcast(mpi, &id, sizeof id, 0));
    TB_CHECK_CUDA(cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking));
    TB_CHECK_CUDA(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
    tb_comm_watch_begin("ncclCommInitRank");
    ncclResult_t r = ncclCommInitRank(&s->comm, mpi->size, id, mpi->rank);
    tb_comm_watch_end();
    TB_CHECK_NCCL(r);
    return TB_OK;
}

int tb_comm_nccl_create(tb_comm *mpi, tb_backend *be, tb_comm **out)
{
    *out = NULL;
    if (!tb_cuda_owns(be))
        return TB_FAIL(TB_ERR_INVALID, "NCCL needs the CUDA backend, got %s", be->name);
    tb_comm *c = calloc(1, sizeof *c);
    nccl_state *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating an NCCL communicator");
    }
    c->ops = &nccl_ops;
    c->impl = s;
    c->rank = mpi->rank;
    c->size = mpi->size;
    c->mpi = mpi->mpi;
    c->parent = mpi;
    s->be = be;
    s->compute = tb_cuda_ctx(be)->compute;
    int rc;
    TB_TRY_GOTO(rc, tb_cuda_bind(be), out_destroy);
    TB_TRY_GOTO(rc, nccl_bootstrap(mpi, s), out_destroy);
    *out = c;
    return TB_OK;

out_destroy:
    (void)nccl_destroy(c); /* adds to the chain; the first failure is returned */
    return rc;
}
