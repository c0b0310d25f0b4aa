/*
 * comm.h - the communicator data-parallel training talks to: rank, size,
 * all-reduce (sum of floats, blocking and non-blocking), broadcast, barrier,
 * over OpenMPI (CPU buffers) or NCCL (CUDA buffers, bootstrapped over MPI).
 * No home-made transport: mpirun launches the ranks, MPI or NCCL moves bytes.
 *
 *   lib/dist/comm_mpi.c          MPI: MPI_Allreduce / MPI_Iallreduce + MPI_Test.
 *                           The watchdog thread lives here.
 *   lib/dist/comm_nccl.c         NCCL (CUDA builds only): rank 0 ncclGetUniqueId,
 *                           MPI_Bcast, ncclCommInitRank; collectives on a
 *                           side stream ordered after the backend's compute
 *                           stream with events.
 *   lib/dist/comm_nccl_absent.c  the same entry point in a build without CUDA:
 *                           fails with TB_ERR_UNSUPPORTED.
 *
 * Progress: MPI moves a non-blocking all-reduce forward only inside MPI
 * calls, so whoever overlaps it with computation calls tb_comm_test between
 * pieces of work (lib/dist/ddp.c does, between layers).
 *
 * Hangs: a rank that dies makes mpirun kill the job (it exits non-zero). A
 * rank that hangs would leave the others blocked in a collective forever,
 * MPI's default; so tb_comm_mpi_init starts a watchdog thread: when an
 * operation has been outstanding for more than `timeout_s` seconds without
 * any completing, it prints one line naming the rank, the operation and the
 * limit on stderr and calls MPI_Abort, which makes mpirun end every rank.
 * That abort is the one place lib/ ends a process: the rank is stuck inside
 * MPI and no status could travel up.
 *
 * Counters: bytes all-reduced (payload bytes as given by the caller, counted
 * once per call, not per hop), calls, and seconds spent blocked in wait.
 *
 * Bus bandwidth, as nccl-tests defines it for all-reduce: algbw = bytes /
 * time; busbw = algbw * 2 (n - 1) / n, the rate each link carries in a ring,
 * comparable across rank counts and with the hardware's link bandwidth.
 *
 * Tests: bazel test //lib/dist:comm_test (2 ranks under mpirun)
 */
#ifndef TB_COMM_H
#define TB_COMM_H

/* bench/cmd/ddp_worker's exit status when its --verify checks ran and one
 * failed (its verify CSV says which): a result, not an error, for the
 * sweep (bench:ddp_sweep) to report as DIFFERS. */
#define TB_DDP_EXIT_CHECK_FAILED 4

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "lib/backend/backend.h"
#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MPI calls: records file, line and MPI's error string; returns TB_ERR_MPI.
 * Communicators are set to MPI_ERRORS_RETURN so a failure comes back. */
int tb_mpi_fail(int mpi_rc, const char *file, int line, const char *expr);
#define TB_CHECK_MPI(call)                                         \
    do {                                                           \
        int tb_mpi_rc_ = (call);                                   \
        if (tb_mpi_rc_ != MPI_SUCCESS)                             \
            return tb_mpi_fail(tb_mpi_rc_, __FILE__, __LINE__, #call); \
    } while (0)
#define TB_CHECK_MPI_GOTO(rc, call, label)                             \
    do {                                                               \
        int tb_mpi_rc_ = (call);                                       \
        if (tb_mpi_rc_ != MPI_SUCCESS) {                               \
            (rc) = tb_mpi_fail(tb_mpi_rc_, __FILE__, __LINE__, #call); \
            goto label;                                                \
        }                                                              \
    } while (0)

typedef struct tb_comm tb_comm;

/* A non-blocking all-reduce in flight. Zero-initialize; reusable after it
 * completed. */
typedef struct tb_comm_req {
    MPI_Request mpi;          /* MPI_REQUEST_NULL when not MPI's */
    void *done_event;         /* NCCL: cudaEvent_t recorded after the collective */
    int active;               /* 1 from start until test/wait saw it complete */
    size_t bytes;
    double t_start, t_end;    /* CLOCK_MONOTONIC seconds: started, seen complete */
} tb_comm_req;

typedef struct tb_comm_stats {
    uint64_t allreduce_bytes; /* payload bytes passed to all-reduce calls */
    uint64_t allreduce_calls;
    uint64_t bcast_bytes;
    double wait_s;            /* time blocked in blocking calls and tb_comm_wait */
} tb_comm_stats;

/* The operations a communicator implements; comm_mpi.c and comm_nccl.c
 * each fill one. Buffers are host memory for MPI, device memory for NCCL. */
typedef struct tb_comm_ops {
    const char *name;         /* "mpi", "nccl" */
    int (*allreduce_sum)(tb_comm *c, float *buf, size_t n);
    int (*iallreduce_sum)(tb_comm *c, float *buf, size_t n, tb_comm_req *req);
    int (*test)(tb_comm *c, tb_comm_req *req, int *done);
    int (*wait)(tb_comm *c, tb_comm_req *req);
    int (*bcast)(tb_comm *c, void *buf, size_t bytes, int root);
    int (*barrier)(tb_comm *c);
    int (*destroy)(tb_comm *c); /* frees everything, returns the first failure */
} tb_comm_ops;

/* The ops table of a transport whose functions are PREFIX_allreduce_sum,
 * PREFIX_iallreduce_sum, PREFIX_test, ... PREFIX_destroy:
 *   static const tb_comm_ops mpi_ops = TB_COMM_OPS("mpi", mpi); */
#define TB_COMM_OPS(NAME, PREFIX)                                                         \
    {                                                                                     \
        .name = NAME, .allreduce_sum = PREFIX##_allreduce_sum,                            \
        .iallreduce_sum = PREFIX##_iallreduce_sum, .test = PREFIX##_test,                 \
        .wait = PREFIX##_wait, .bcast = PREFIX##_bcast, .barrier = PREFIX##_barrier,      \
        .destroy = PREFIX##_destroy,                                                      \
    }

struct tb_comm {
    const tb_comm_ops *ops;
    int rank, size;
    MPI_Comm mpi;             /* the MPI communicator (NCCL's bootstrap too) */
    tb_comm_stats stats;
    void *impl;               /* backend-private state */
    struct tb_comm *parent;   /* NCCL: the MPI communicator it was built on */
};

/* Initializes MPI (MPI_Init_thread, funneled) unless already initialized,
 * and returns a communicator over MPI_COMM_WORLD with the watchdog running.
 * timeout_s <= 0 disables the watchdog. */
int tb_comm_mpi_init(int *argc, char ***argv, double timeout_s, tb_comm **out);

/* A communicator over NCCL for be's CUDA device, bootstrapped over mpi
 * (rank 0's ncclUniqueId broadcast with MPI_Bcast). mpi must outlive it.
 * In a build without CUDA: TB_ERR_UNSUPPORTED. */
int tb_comm_nccl_create(tb_comm *mpi, tb_backend *be, tb_comm **out);

/* Destroys c; for the MPI communicator also stops the watchdog and calls
 * MPI_Finalize (when this module initialized MPI); for NCCL first waits for
 * collectives still running. Frees everything even after a failure and
 * returns the first one (TB_ERR_MPI, TB_ERR_NCCL, TB_ERR_CUDA). NULL: TB_OK. */
int tb_comm_destroy(tb_comm *c);

static inline int tb_comm_rank(const tb_comm *c) { return c->rank; }
static inline int tb_comm_size(const tb_comm *c) { return c->size; }

/* In-place sum over ranks of buf[0..n). */
static inline int tb_comm_allreduce_sum(tb_comm *c, float *buf, size_t n)
{
    return c->ops->allreduce_sum(c, buf, n);
}
/* Starts an in-place sum; buf must stay untouched until test/wait says done.
 * REQUIRES: req not active. */
static inline int tb_comm_iallreduce_sum(tb_comm *c, float *buf, size_t n, tb_comm_req *req)
{
    return c->ops->iallreduce_sum(c, buf, n, req);
}
/* *done = 1 once req completed (then req is inactive, t_end set). Makes
 * progress on every outstanding operation. An inactive req is done. */
static inline int tb_comm_test(tb_comm *c, tb_comm_req *req, int *done)
{
    return c->ops->test(c, req, done);
}
/* Blocks until req completes. An inactive req returns at once. */
static inline int tb_comm_wait(tb_comm *c, tb_comm_req *req) { return c->ops->wait(c, req); }
static inline int tb_comm_bcast(tb_comm *c, void *buf, size_t bytes, int root)
{
    return c->ops->bcast(c, buf, bytes, root);
}
static inline int tb_comm_barrier(tb_comm *c) { return c->ops->barrier(c); }

void tb_comm_reset_stats(tb_comm *c);

/* Sum over ranks of one double (timings, counts) on the MPI communicator
 * underneath c; and max. Blocking; host memory whatever c is. */
int tb_comm_sum_double(tb_comm *c, double *v, int n);
int tb_comm_max_double(tb_comm *c, double *v, int n);

/* nccl-tests' definitions for all-reduce. REQUIRES: seconds > 0, ranks >= 1. */
double tb_comm_algbw(size_t bytes, double seconds);
double tb_comm_busbw(size_t bytes, double seconds, int ranks);

/* CLOCK_MONOTONIC in seconds. */
double tb_comm_now(void);

/* For implementations: req now carries an all-reduce of n floats started
 * at this moment (active, bytes, start time), counted in c's stats, and
 * the watchdog watches what. */
void tb_comm_req_started(tb_comm *c, tb_comm_req *req, size_t n, const char *what);

/* Watchdog bookkeeping for implementations (comm_nccl.c uses it too):
 * an operation started / one completed. */
void tb_comm_watch_begin(const char *what);
void tb_comm_watch_end(void);

#ifdef __cplusplus
}
#endif
#endif
