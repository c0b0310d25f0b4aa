/*
 * comm_sim.c - the sim backend's communicator (see comm_sim.h): the
 * ordering comm_nccl.c gives NCCL's collectives, on the sim's streams and
 * events, with a sleep on the side stream where NCCL moves bytes.
 *
 * Tests: bazel test //lib/dist:ddp_sim_test
 */
#include "lib/dist/comm_sim.h"

#include <stdlib.h>

#include "lib/backend/sim/sim.h"

typedef struct sim_comm {
    tb_backend *be;
    tb_stream *side;
    tb_event *ready;          /* recorded on compute before each collective */
    double delay_s;
} sim_comm;

static sim_comm *state(tb_comm *c) { return c->impl; }

static int wire(void *arg)
{
    (void)arg; /* one rank: the sum is the buffer as it is */
    return TB_OK;
}

static int sim_iallreduce_sum(tb_comm *c, float *buf, size_t n, tb_comm_req *req)
{
    sim_comm *s = state(c);
    tb_backend *be = s->be;
    tb_event *done = NULL;
    (void)buf;
    if (req->active)
        return TB_FAIL(TB_ERR_INVALID, "all-reduce started on a request still in flight");
    TB_TRY(be->event_record(be, s->ready, NULL));
    TB_TRY(be->stream_wait_event(be, s->side, s->ready));
    TB_TRY(tb_sim_host_fn(be, s->side, wire, NULL, s->delay_s));
    TB_TRY(be->event_create(be, &done));
    int rc = be->event_record(be, done, s->side);
    if (rc != TB_OK) {
        be->event_destroy(be, done);
        return rc;
    }
    req->done_event = done;
    req->mpi = MPI_REQUEST_NULL;
    tb_comm_req_started(c, req, n, "sim all-reduce");
    return TB_OK;
}

/* req completed: the compute stream waits for it, its event goes. */
static int req_finished(tb_comm *c, tb_comm_req *req)
{
    tb_backend *be = state(c)->be;
    tb_event *done = req->done_event;
    req->active = 0;
    req->t_end = tb_comm_now();
    req->done_event = NULL;
    tb_comm_watch_end();
    int rc = be->stream_wait_event(be, NULL, done);
    int d_rc = be->event_destroy(be, done);
    return rc != TB_OK ? rc : d_rc;
}

static int sim_test(tb_comm *c, tb_comm_req *req, int *done)
{
    *done = 1;
    if (!req->active)
        return TB_OK;
    TB_TRY(tb_sim_event_done(state(c)->be, req->done_event, done));
    return *done ? req_finished(c, req) : TB_OK;
}

static int sim_wait(tb_comm *c, tb_comm_req *req)
{
    if (!req->active)
        return TB_OK;
    double t0 = tb_comm_now();
    TB_TRY(state(c)->be->event_sync(state(c)->be, req->done_event));
    c->stats.wait_s += tb_comm_now() - t0;
    return req_finished(c, req);
}

static int sim_allreduce_sum(tb_comm *c, float *buf, size_t n)
{
    tb_comm_req req = {.mpi = MPI_REQUEST_NULL};
    TB_TRY(sim_iallreduce_sum(c, buf, n, &req));
    return sim_wait(c, &req);
}

static int sim_bcast(tb_comm *c, void *buf, size_t bytes, int root)
{
    (void)buf;
    (void)root;
    c->stats.bcast_bytes += bytes;
    return TB_OK;
}

static int sim_barrier(tb_comm *c)
{
    (void)c;
    return TB_OK;
}

/* Frees everything; returns the first failure (the side stream's
 * queued work that failed, or a destroy that did), as tb_comm_ops asks. */
static int sim_destroy(tb_comm *c)
{
    sim_comm *s = state(c);
    int rc = TB_OK;
    if (s) {
        if (s->side) {
            int r = s->be->stream_sync(s->be, s->side);
            rc = rc == TB_OK ? r : rc;
            r = s->be->stream_destroy(s->be, s->side);
            rc = rc == TB_OK ? r : rc;
        }
        if (s->ready) {
            int r = s->be->event_destroy(s->be, s->ready);
            rc = rc == TB_OK ? r : rc;
        }
        free(s);
    }
    free(c);
    return rc;
}

static const tb_comm_ops sim_ops = TB_COMM_OPS("sim", sim);

int tb_comm_sim_create(tb_backend *be, double delay_s, tb_comm **out)
{
    *out = NULL;
    if (!tb_sim_is(be) || !(delay_s >= 0))
        return TB_FAIL(TB_ERR_INVALID, "tb_comm_sim_create: a sim backend and a delay >= 0 s");
    tb_comm *c = calloc(1, sizeof *c);
    sim_comm *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating the sim communicator");
    }
    *c = (tb_comm){.ops = &sim_ops, .rank = 0, .size = 1, .mpi = MPI_COMM_NULL, .impl = s};
    s->be = be;
    s->delay_s = delay_s;
    int rc;
    TB_TRY_GOTO(rc, be->stream_create(be, &s->side), out_destroy);
    TB_TRY_GOTO(rc, be->event_create(be, &s->ready), out_destroy);
    *out = c;
    return TB_OK;

out_destroy:
    (void)sim_destroy(c); /* rc, the failure that brought us here, is the one to report */
    return rc;
}
