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
 * Tests: bazel test //lib:trace_test
 */
#ifndef TB_TRACE_H
#define TB_TRACE_H

#include <stddef.h>

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

typedef struct tb_trace_event {
    tb_phase phase;
    long step;
    double ts_us, dur_us;
} tb_trace_event;

typedef struct tb_trace {
    tb_backend *be;           /* borrowed: synchronized at each tb_trace_end */
    tb_trace_event *ev;
    size_t n, cap;
    double t0;                /* CLOCK_MONOTONIC seconds at tb_trace_init */
    double open_at[TB_PHASE_COUNT]; /* start of the open phase, seconds */
    long step;                /* the step events are tagged with (set by the trainer) */
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

/* NVTX ranges (lib/train/trace_nvtx.c on CUDA builds, no-ops otherwise). */
void tb_nvtx_push(const char *name);
void tb_nvtx_pop(void);

#ifdef __cplusplus
}
#endif
#endif
