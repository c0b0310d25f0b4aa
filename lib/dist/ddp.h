/*
 * ddp.h - DistributedDataParallel: one process per device, gradients
 * averaged over ranks by all-reduce in buckets that start during backward.
 *
 * As PyTorch's DDP does it:
 *   - gradients are grouped into buckets of about bucket_bytes (default
 *     25 MiB) in reverse order of the model's parameters, which is the order
 *     backward produces them (the last layer's gradients first); a bucket is
 *     a contiguous slice of the model's flat gradient buffer, so it is
 *     reduced in place with no copy;
 *   - backward runs layer by layer (tb_ddp_backward walks the model's top-level
 *     layers in reverse); after each layer it calls tb_ddp_on_grad_ready for
 *     that layer's parameters, and a bucket whose gradients are all ready
 *     starts its non-blocking all-reduce at once (buckets start in index
 *     order, the same on every rank, as MPI requires of collectives);
 *   - between layers tb_ddp_poll calls tb_comm_test on buckets in flight, since MPI
 *     progresses a non-blocking all-reduce only inside MPI calls;
 *   - tb_ddp_finish waits for every bucket and divides by the world size, before
 *     the optimizer step. With overlap off it instead all-reduces the whole
 *     gradient buffer once, after backward.
 *   - no_sync: a backward with sync = 0 all-reduces nothing; gradients
 *     accumulate locally and the next synced backward reduces the sum
 *     (gradient accumulation without a collective per micro-batch).
 * Buffers (batch norm running statistics) are not broadcast each step
 * (PyTorch's broadcast_buffers=True): they live inside the BN layers, which
 * expose no handle; each rank's running statistics see its own shard, which
 * only evaluation reads. Parameters start identical (broadcast from rank 0).
 *
 * Per step it records compute (backward) time, all-reduce time (sum over
 * buckets of start to seen-complete), exposed communication (from the end
 * of backward until the last bucket is reduced and averaged: the wait the
 * overlap did not hide), bytes all-reduced, and each bucket's start and end
 * relative to the end of backward (negative: before it ended). Backward ends
 * when the compute stream has run it (stream_sync of the compute stream, not
 * a device-wide sync, which on CUDA would wait for NCCL's side stream too).
 *
 * Test: bazel test //lib/dist:ddp_test (2 ranks under mpirun, bench/cmd/ddp_worker.c --verify);
 * //lib/dist:ddp_sim_test (the overlap's exposed time on the CUDA-semantics sim backend)
 */
#ifndef TB_DDP_H
#define TB_DDP_H

#include <stddef.h>

#include "lib/dist/comm.h"
#include "lib/nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TB_DDP_DEFAULT_BUCKET_BYTES ((size_t)25 << 20)

typedef struct tb_ddp_opts {
    size_t bucket_bytes;      /* > 0; PyTorch's bucket_cap_mb, default 25 MiB */
    int overlap;              /* 1: buckets start during backward; 0: one all-reduce after */
} tb_ddp_opts;

typedef struct tb_ddp_bucket {
    int first_param, last_param; /* model parameter indices, first <= last */
    size_t offset, n;         /* floats of the flat gradient buffer it covers */
    int pending;              /* parameters not yet ready in this backward */
    int started;
    tb_comm_req req;
} tb_ddp_bucket;

typedef struct tb_ddp_trace_entry {
    int bucket;
    size_t bytes;
    double start, end;        /* seconds relative to the end of backward */
} tb_ddp_trace_entry;

typedef struct tb_ddp_step {
    int synced;               /* 0 for a no_sync backward */
    double backward_s;        /* backward, hooks and polling included, until the
                                 compute stream has run it */
    double allreduce_s;       /* sum over buckets of start..seen complete */
    double exposed_s;         /* end of backward .. gradients reduced and averaged */
    size_t bytes;             /* all-reduced in this step */
    int nbuckets;             /* entries in trace */
    tb_ddp_trace_entry *trace; /* (nbuckets); owned by the tb_ddp */
} tb_ddp_step;

typedef struct tb_ddp {
    tb_comm *comm;            /* borrowed */
    tb_model *model;          /* borrowed */
    tb_ddp_opts opts;
    tb_ddp_bucket *buckets;   /* (nbuckets) bucket 0 holds the last parameters */
    int nbuckets;
    int *param_bucket;        /* (model->nparams) bucket of each parameter */
    int *child_first, *child_count; /* (net->nchildren) parameters of each top-level layer */
    int sync;                 /* the current backward all-reduces */
    int next_start;           /* next bucket to start, in order */
    double t_backward_end;
    tb_ddp_step step;         /* the last step's record */
} tb_ddp;

/* Builds the buckets for m. REQUIRES: comm and m outlive d; the same model
 * description and opts on every rank. */
int tb_ddp_create(tb_comm *comm, tb_model *m, const tb_ddp_opts *opts, tb_ddp **out);
void tb_ddp_destroy(tb_ddp *d);

/* Rank 0's parameters to every rank (DDP's constructor does this). */
int tb_ddp_broadcast_params(tb_ddp *d);

/* Backward from the last tb_model_forward_loss, as tb_model_backward does, with
 * the hooks: sync = 0 is no_sync (accumulate locally, reduce nothing).
 * REQUIRES: m->ctx.training. */
int tb_ddp_backward(tb_ddp *d, float loss_scale, int sync);

/* The hook: parameter param_index's gradient is final for this backward.
 * Starts every bucket, in order, whose gradients are now all ready. */
int tb_ddp_on_grad_ready(tb_ddp *d, int param_index);

/* Progresses buckets in flight (tb_comm_test on each). */
int tb_ddp_poll(tb_ddp *d);

/* Waits for every bucket of a synced backward and divides the gradients by
 * the world size; fills d->step. A no-op (step.synced = 0) after no_sync.
 * Call before the optimizer step. */
int tb_ddp_finish(tb_ddp *d);

#ifdef __cplusplus
}
#endif
#endif
