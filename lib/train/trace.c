/* trace.c - see trace.h. */
#include "lib/train/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/core/atomic_file.h"
#include "lib/core/grow.h"
#include "lib/core/status.h"

const char *const tb_phase_names[] = {"data", "copy", "forward", "backward", "optimizer",
                                      "allreduce", NULL};

static double mono_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int tb_trace_init(tb_trace *tr, tb_backend *be)
{
    memset(tr, 0, sizeof *tr);
    tr->be = be;
    tr->t0 = mono_seconds();
    return TB_OK;
}

void tb_trace_free(tb_trace *tr)
{
    free(tr->ev);
    memset(tr, 0, sizeof *tr);
}

void tb_trace_begin(tb_trace *tr, tb_phase p)
{
    tb_nvtx_push(tb_phase_names[p]);
    tr->open_at[p] = mono_seconds();
}

int tb_trace_end(tb_trace *tr, tb_phase p)
{
    if (tr->be)
        TB_TRY(tr->be->sync(tr->be));
    double end = mono_seconds();
    tb_nvtx_pop();
    tb_trace_event *ev = tb_grow(tr->ev, &tr->cap, tr->n, sizeof *ev, 256);
    if (!ev)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for over %zu trace events", tr->cap);
    tr->ev = ev;
    tr->ev[tr->n++] = (tb_trace_event){
        .phase = p, .step = tr->step,
        .ts_us = 1e6 * (tr->open_at[p] - tr->t0), .dur_us = 1e6 * (end - tr->open_at[p]),
    };
    return TB_OK;
}

int tb_trace_write(const tb_trace *tr, const char *path)
{
    tb_atomic_file af;
    TB_TRY(tb_atomic_open(&af, path));
    fputs("{\"traceEvents\": [\n", af.fp);
    for (size_t i = 0; i < tr->n; i++) {
        const tb_trace_event *e = &tr->ev[i];
        fprintf(af.fp,
                "  {\"name\": \"%s\", \"cat\": \"step\", \"ph\": \"X\", \"ts\": %.3f, "
                "\"dur\": %.3f, \"pid\": 1, \"tid\": 1, \"args\": {\"step\": %ld}}%s\n",
                tb_phase_names[e->phase], e->ts_us, e->dur_us, e->step,
                i + 1 < tr->n ? "," : "");
    }
    fputs("],\n\"displayTimeUnit\": \"ms\"}\n", af.fp);
    return tb_atomic_commit(&af);
}
