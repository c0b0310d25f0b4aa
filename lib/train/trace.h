/*
 * trace.h - the step timeline (--trace=PATH): each training step's phases
 * (waiting for data, host->device copies, forward, backward, optimizer,
 * all-reduce under DDP) as a Chrome trace JSON that Perfetto and
 * chrome://tracing open, plus NVTX ranges on CUDA builds for Nsight.
 *
 * Every phase is a complete event ("ph": "X") with "ts" and "dur" in
 * microseconds since tb_trace_init, "pid" 1, "tid" 1, and "args": {"step": N}.
 * Timestamps are host CLOCK_MONOTONIC; on a device with asynchronous
 * launches tb_trace_end synchronizes the device first, so a phase's duration
 * includes its device work (that sync is part of what tracing costs: the
 * "profiler off" technique measures it). The file is written once, at the
 * end, atomically (lib/core/atomic_file.h).
 *
 * NVTX: tb_trace_begin pushes a range named after the phase and tb_trace_end pops
 * it (lib/train/trace_nvtx.c, header-only nvtx3 from the CUDA toolkit; without
 * CUDA lib/train/trace_nvtx_absent.c does nothing).
 *
 * Use:
 *   tb_trace tr;  TB_TRY(tb_trace_init(&tr, be));
 *   tb_trace_begin(&tr, TB_PHASE_FORWARD); ...; TB_TRY(tb_trace_end(&tr, TB_PHASE_FORWARD));
 *   TB_TRY(tb_trace_write(&tr, path));  tb_trace_free(&tr);
 *
 * The op breakdown: with ops on (the trainer turns it on for --trace), every
 * layer's forward and backward, and the ops inside a layer that the layer
 * marks (attention's QKV GEMM, attention, output projection; the loss), is
 * an event too, "cat": "op", nested in time inside its phase and its parent
 * layer (Perfetto draws them as a flame graph), with "args": {"step",
 * "family", "dir": "fwd"/"bwd", "self_ms", "gflop", "mb"}. Each op event
 * also carries its self time: its duration less its children's, so self
 * times add up to at most their phase; a layer with marked ops inside it
 * keeps no FLOPs or bytes of its own (its ops carry them). tb_trace_summary sums self times by
 * (family, direction) over all steps after the first (the warm-up) and writes a
 * table: calls, total ms, ms per step, share of the step (the sum of the
 * step's phase events) and the achieved GFLOP/s and GB/s (bytes: the least
 * traffic the op needs, lib/nn/layers.c's call_bytes). The optimizer phase
 * is a row of its own ("optimizer"), its GB/s from optimizer_bytes.
 * An op is timed by two backend events recorded on the compute stream
 * (its begin and end), read when its phase ends (tb_trace_end, which waits
 * for the device anyway): no host wait per op, as PyTorch's profiler
 * records device activity without one. Its "ts" is its phase's host start
 * plus the device time from the phase's own start event. Off when --trace
 * is not given (the layers test one NULL pointer).
 *
 * Tests: bazel test //lib/train:toggles_test //lib/train:trace_ops_test
 */
#ifndef TB_TRACE_H
#define TB_TRACE_H

#include <stddef.h>
#include <stdio.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_phase {
    TB_PHASE_DATA = 0,      /* waiting for (or building) the next batch */
    TB_PHASE_COPY = 1,      /* host -> device copies of the batch */
    TB_PHASE_FORWARD = 2,   /* forward and loss */
    TB_PHASE_BACKWARD = 3,
    TB_PHASE_OPTIMIZER = 4,
    TB_PHASE_ALLREDUCE = 5, /* DDP's gradient all-reduce */
    TB_PHASE_COUNT = 6,
} tb_phase;

extern const char *const tb_phase_names[]; /* "data", "copy", "forward", ... */

#define TB_TRACE_NAME 48
#define TB_TRACE_DEPTH 32 /* op nesting kept; deeper ops are not recorded */

typedef struct tb_trace_event {
    tb_phase phase;           /* phase events; op events: the phase they ran in */
    long step;
    double ts_us, dur_us;
    int op;                   /* 1: an op event (below), 0: a phase */
    int backward;             /* op: 1 backward, 0 forward */
    int depth;                /* op: 0 directly inside its phase */
    char name[TB_TRACE_NAME]; /* op: the layer's or op's name ("h0", "qkv") */
    const char *family;       /* op: static string ("layernorm", "qkv_gemm") */
    double self_us;           /* op: dur_us less its children's (set when read) */
    double flops, bytes;      /* op: its own (children's excluded) */
    int ev_begin, ev_end;     /* op: its events in the pool until read (-1: none) */
    int pending;              /* op: its times not read yet (tb_trace_end reads them) */
} tb_trace_event;

/* An op still running (the nesting stack). */
typedef struct tb_trace_open_op {
    double t;                 /* start, seconds (host; without a backend) */
    int ev;                   /* its begin event in the pool, -1: none */
    int sub_ops;              /* sub-op children ended: its own FLOPs and bytes are
                                 then its children's, and it keeps none */
    char name[TB_TRACE_NAME];
    const char *family;
    int backward;
} tb_trace_open_op;

typedef struct tb_trace {
    tb_backend *be;           /* borrowed: synchronized at each tb_trace_end */
    tb_trace_event *ev;
    size_t n, cap;
    double t0;                /* CLOCK_MONOTONIC seconds at tb_trace_init */
    double open_at[TB_PHASE_COUNT]; /* start of the open phase, seconds */
    long step;                /* the step events are tagged with (set by the trainer) */
    int phase_open;           /* the phase last begun (op events are tagged with it) */
    tb_trace_open_op ops[TB_TRACE_DEPTH];
    int depth;                /* ops open; may exceed TB_TRACE_DEPTH (not recorded) */
    double optimizer_bytes;   /* least traffic of one optimizer step (the trainer's) */
    /* op timing on the device: a pool of events, reused once read */
    tb_event **pool;
    size_t pool_n, pool_used;
    tb_event *phase_ev;       /* recorded at tb_trace_begin: ops' "ts" anchor */
    size_t unread;            /* first op event not read yet */
    double acc_us[TB_TRACE_DEPTH + 1]; /* children's time per depth while reading */
    int err;                  /* an event failed in tb_trace_op_begin (returned later) */
} tb_trace;

/* be may be NULL (no device synchronization). */
int tb_trace_init(tb_trace *tr, tb_backend *be);
void tb_trace_free(tb_trace *tr);
void tb_trace_begin(tb_trace *tr, tb_phase p);
/* REQUIRES: tb_trace_begin(tr, p) came first. Errors: the sync's, TB_ERR_NOMEM. */
int tb_trace_end(tb_trace *tr, tb_phase p);
/* Writes {"traceEvents": [...], "displayTimeUnit": "ms"} atomically.
 * Errors: TB_ERR_IO naming the path. */
int tb_trace_write(const tb_trace *tr, const char *path);

/* An op (a layer's call, or an op inside one) begins / ends; calls nest.
 * family must be a static string. end: flops and bytes are the call's
 * whole work; sub_op 1: its enclosing op's flops and bytes include it (so
 * the parent's own are reduced by it). REQUIRES: a matching op_begin.
 * Errors: the sync's, TB_ERR_NOMEM. */
void tb_trace_op_begin(tb_trace *tr, const char *name, const char *family, int backward);
int tb_trace_op_end(tb_trace *tr, double flops, double bytes, int sub_op);

/* Waits for the device and reads every op event's times (tb_trace_end
 * does it at each phase's end; the trainer once more before the summary). */
int tb_trace_flush(tb_trace *tr);

/* The op breakdown table (see above) to f; steps before skip_steps are
 * left out (warm-up); with none left, all steps count. */
void tb_trace_summary(const tb_trace *tr, long skip_steps, FILE *f);

/* NVTX ranges (lib/train/trace_nvtx.c on CUDA builds, no-ops otherwise). */
void tb_nvtx_push(const char *name);
void tb_nvtx_pop(void);

#ifdef __cplusplus
}
#endif
#endif
