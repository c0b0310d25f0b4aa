/* trace.c - see trace.h. */
#include "lib/train/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/atomic_file.h"
#include "lib/core/clock.h"
#include "lib/core/grow.h"
#include "lib/core/status.h"

const char *const tb_phase_names[] = {"data", "copy", "forward", "backward", "optimizer",
                                      "allreduce", NULL};

int tb_trace_init(tb_trace *tr, tb_backend *be)
{
    memset(tr, 0, sizeof *tr);
    tr->be = be;
    tr->t0 = tb_clock_s();
    return TB_OK;
}

void tb_trace_free(tb_trace *tr)
{
    for (size_t i = 0; tr->be && i < tr->pool_n; i++)
        tr->be->event_destroy(tr->be, tr->pool[i]);
    if (tr->be && tr->phase_ev)
        tr->be->event_destroy(tr->be, tr->phase_ev);
    free(tr->pool);
    free(tr->ev);
    memset(tr, 0, sizeof *tr);
}

/* An event of the pool recorded on the compute stream now: *idx its
 * index, or -1 (and tr->err set) where that failed. */
static void record_pooled(tb_trace *tr, int *idx)
{
    *idx = -1;
    if (tr->err)
        return;
    if (tr->pool_used == tr->pool_n) {
        tb_event **pool = tb_grow(tr->pool, &tr->pool_n, tr->pool_used, sizeof *pool, 64);
        if (!pool) {
            tr->err = TB_FAIL(TB_ERR_NOMEM, "out of host memory for %zu trace events",
                              tr->pool_used);
            return;
        }
        tr->pool = pool;
        for (size_t i = tr->pool_used; i < tr->pool_n; i++)
            pool[i] = NULL;
    }
    tb_event **e = &tr->pool[tr->pool_used];
    int rc = *e ? TB_OK : tr->be->event_create(tr->be, e);
    if (rc == TB_OK)
        rc = tr->be->event_record(tr->be, *e, NULL);
    if (rc != TB_OK) {
        tr->err = rc;
        return;
    }
    *idx = (int)tr->pool_used++;
}

void tb_trace_begin(tb_trace *tr, tb_phase p)
{
    tb_nvtx_push(tb_phase_names[p]);
    tr->phase_open = p;
    tr->open_at[p] = tb_clock_s();
    if (!tr->be || tr->err)
        return;
    int rc = tr->phase_ev ? TB_OK : tr->be->event_create(tr->be, &tr->phase_ev);
    if (rc == TB_OK)
        rc = tr->be->event_record(tr->be, tr->phase_ev, NULL);
    if (rc != TB_OK)
        tr->err = rc;
}

static double pos(double v) { return v > 0 ? v : 0; }

/* Reads the op events ended since the last read (the device has run
 * them: the caller synchronized): a device-timed one's duration from its
 * events and "ts" from its phase's start event; then every one's self time
 * from its children's (events come in the order ops ended, children before
 * their parent). Their events go back to the pool once no op is open. */
static int read_ops(tb_trace *tr)
{
    for (size_t i = tr->unread; i < tr->n; i++) {
        tb_trace_event *e = &tr->ev[i];
        if (!e->op)
            continue;
        if (e->pending) {
            float ms = 0, at = 0;
            TB_TRY(tr->be->event_elapsed_ms(tr->be, tr->pool[e->ev_begin], tr->pool[e->ev_end],
                                            &ms));
            TB_TRY(tr->be->event_elapsed_ms(tr->be, tr->phase_ev, tr->pool[e->ev_begin], &at));
            e->dur_us = 1e3 * (double)ms;
            e->ts_us = 1e6 * (tr->open_at[e->phase] - tr->t0) + 1e3 * (double)at;
            e->pending = 0;
            e->ev_begin = e->ev_end = -1;
        }
        int d = e->depth;
        e->self_us = pos(e->dur_us - tr->acc_us[d + 1]);
        tr->acc_us[d + 1] = 0;
        tr->acc_us[d] += e->dur_us;
    }
    tr->unread = tr->n;
    tr->acc_us[0] = 0;
    if (tr->depth == 0)
        tr->pool_used = 0;
    return TB_OK;
}

int tb_trace_flush(tb_trace *tr)
{
    if (tr->be)
        TB_TRY(tr->be->sync(tr->be));
    if (tr->err)
        return tr->err;
    return read_ops(tr);
}

/* A new event slot, zeroed. */
static int push_event(tb_trace *tr, tb_trace_event **out)
{
    tb_trace_event *ev = tb_grow(tr->ev, &tr->cap, tr->n, sizeof *ev, 256);
    if (!ev)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for over %zu trace events", tr->cap);
    tr->ev = ev;
    *out = &tr->ev[tr->n++];
    memset(*out, 0, sizeof **out);
    return TB_OK;
}

int tb_trace_end(tb_trace *tr, tb_phase p)
{
    if (tr->be)
        TB_TRY(tr->be->sync(tr->be));
    double end = tb_clock_s();
    tb_nvtx_pop();
    tb_trace_event *e;
    TB_TRY(push_event(tr, &e));
    e->phase = p;
    e->step = tr->step;
    e->ts_us = 1e6 * (tr->open_at[p] - tr->t0);
    e->dur_us = 1e6 * (end - tr->open_at[p]);
    if (tr->err)
        return tr->err;
    return read_ops(tr);
}

void tb_trace_op_begin(tb_trace *tr, const char *name, const char *family, int backward)
{
    int d = tr->depth++;
    if (d >= TB_TRACE_DEPTH)
        return;
    tb_trace_open_op *o = &tr->ops[d];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->family = family;
    o->backward = backward;
    o->sub_ops = 0;
    o->t = tb_clock_s();
    o->ev = -1;
    if (tr->be)
        record_pooled(tr, &o->ev);
}

int tb_trace_op_end(tb_trace *tr, double flops, double bytes, int sub_op)
{
    int ev_end = -1;
    if (tr->be && tr->depth <= TB_TRACE_DEPTH)
        record_pooled(tr, &ev_end);
    if (tr->err)
        return tr->err;
    double end = tb_clock_s();
    int d = --tr->depth;
    if (d >= TB_TRACE_DEPTH)
        return TB_OK;
    const tb_trace_open_op *o = &tr->ops[d];
    /* without a backend: host times now; with one: the events', read at
     * the phase's end (read_ops, which also derives every self time) */
    int pending = o->ev >= 0 && ev_end >= 0;
    double dur = pending ? 0 : 1e6 * (end - o->t);
    if (d > 0)
        tr->ops[d - 1].sub_ops += sub_op;
    if (o->sub_ops)
        flops = bytes = 0;
    tb_trace_event *e;
    TB_TRY(push_event(tr, &e));
    *e = (tb_trace_event){
        .phase = (tb_phase)tr->phase_open, .step = tr->step, .ts_us = 1e6 * (o->t - tr->t0),
        .dur_us = dur, .op = 1, .backward = o->backward, .depth = d, .family = o->family,
        .flops = flops, .bytes = bytes,
        .ev_begin = pending ? o->ev : -1, .ev_end = pending ? ev_end : -1, .pending = pending,
    };
    snprintf(e->name, sizeof e->name, "%s", o->name);
    return TB_OK;
}

int tb_trace_write(const tb_trace *tr, const char *path)
{
    tb_atomic_file af;
    TB_TRY(tb_atomic_open(&af, path));
    fputs("{\"traceEvents\": [\n", af.fp);
    for (size_t i = 0; i < tr->n; i++) {
        const tb_trace_event *e = &tr->ev[i];
        if (e->op) {
            fprintf(af.fp,
                    "  {\"name\": \"%s\", \"cat\": \"op\", \"ph\": \"X\", \"ts\": %.3f, "
                    "\"dur\": %.3f, \"pid\": 1, \"tid\": 1, \"args\": {\"step\": %ld, "
                    "\"family\": \"%s\", \"dir\": \"%s\", \"depth\": %d, \"self_ms\": %.4f, "
                    "\"gflop\": %.6g, \"mb\": %.6g}}%s\n",
                    e->name, e->ts_us, e->dur_us, e->step, e->family,
                    e->backward ? "bwd" : "fwd", e->depth, e->self_us / 1e3, e->flops / 1e9,
                    e->bytes / 1e6, i + 1 < tr->n ? "," : "");
            continue;
        }
        fprintf(af.fp,
                "  {\"name\": \"%s\", \"cat\": \"step\", \"ph\": \"X\", \"ts\": %.3f, "
                "\"dur\": %.3f, \"pid\": 1, \"tid\": 1, \"args\": {\"step\": %ld}}%s\n",
                tb_phase_names[e->phase], e->ts_us, e->dur_us, e->step,
                i + 1 < tr->n ? "," : "");
    }
    fputs("],\n\"displayTimeUnit\": \"ms\"}\n", af.fp);
    return tb_atomic_commit(&af);
}

/* ---- the op breakdown table ---- */

#define SUMMARY_ROWS 64

typedef struct summary_row {
    const char *family;
    int backward;        /* -1: a phase's own row */
    long calls;
    double us, flops, bytes;
} summary_row;

static summary_row *row_for(summary_row *rows, int *n, const char *family, int backward)
{
    for (int i = 0; i < *n; i++)
        if (rows[i].backward == backward && !strcmp(rows[i].family, family))
            return &rows[i];
    if (*n == SUMMARY_ROWS)
        return NULL;
    rows[*n] = (summary_row){.family = family, .backward = backward};
    return &rows[(*n)++];
}

static int by_time_desc(const void *a, const void *b)
{
    double x = ((const summary_row *)a)->us, y = ((const summary_row *)b)->us;
    return (x < y) - (x > y);
}

/* Phase time less the depth-0 ops inside it: what no op event covers. */
static void add_phase_rows(const tb_trace *tr, long skip, long steps, summary_row *rows,
                           int *n, double *step_us)
{
    double phase_us[TB_PHASE_COUNT] = {0}, op_us[TB_PHASE_COUNT] = {0};
    for (size_t i = 0; i < tr->n; i++) {
        const tb_trace_event *e = &tr->ev[i];
        if (e->step < skip)
            continue;
        if (!e->op)
            phase_us[e->phase] += e->dur_us;
        else if (e->depth == 0)
            op_us[e->phase] += e->dur_us;
    }
    static const char *const other[TB_PHASE_COUNT] = {
        "data", "copy", "forward (outside ops)", "backward (outside ops)", "optimizer",
        "allreduce"};
    for (int p = 0; p < TB_PHASE_COUNT; p++) {
        *step_us += phase_us[p];
        summary_row *r = phase_us[p] > 0 ? row_for(rows, n, other[p], -1) : NULL;
        if (!r)
            continue;
        r->us = pos(phase_us[p] - op_us[p]);
        r->calls = steps;
        r->bytes = p == TB_PHASE_OPTIMIZER ? tr->optimizer_bytes : 0;
    }
}

/* The first step counted and how many steps there are from it. */
static long counted_steps(const tb_trace *tr, long skip_steps, long *skip)
{
    long lo = -1, hi = -1, all_lo = -1;
    for (size_t i = 0; i < tr->n; i++) {
        long s = tr->ev[i].step;
        all_lo = all_lo < 0 || s < all_lo ? s : all_lo;
        hi = s > hi ? s : hi;
        if (s >= skip_steps && (lo < 0 || s < lo))
            lo = s;
    }
    *skip = lo >= 0 ? lo : all_lo;
    return hi >= *skip && *skip >= 0 ? hi - *skip + 1 : 0;
}

void tb_trace_summary(const tb_trace *tr, long skip_steps, FILE *f)
{
    summary_row rows[SUMMARY_ROWS];
    int n = 0;
    long skip, steps = counted_steps(tr, skip_steps, &skip);
    if (steps <= 0) {
        fprintf(f, "op breakdown: no steps traced\n");
        return;
    }
    for (size_t i = 0; i < tr->n; i++) {
        const tb_trace_event *e = &tr->ev[i];
        summary_row *r = e->op && e->step >= skip ? row_for(rows, &n, e->family, e->backward)
                                                  : NULL;
        if (!r)
            continue;
        r->calls++;
        r->us += e->self_us;
        r->flops += e->flops;
        r->bytes += e->bytes;
    }
    double step_us = 0;
    add_phase_rows(tr, skip, steps, rows, &n, &step_us);
    qsort(rows, (size_t)n, sizeof rows[0], by_time_desc);
    fprintf(f, "op breakdown: %ld steps from step %ld, %.3f ms a step (self time: an op's "
               "own, its children's excluded)\n", steps, skip, step_us / 1e3 / (double)steps);
    fprintf(f, "%-24s %-4s %7s %10s %9s %6s %9s %8s\n", "family", "dir", "calls", "total ms",
            "ms/step", "share", "GFLOP/s", "GB/s");
    for (int i = 0; i < n; i++) {
        const summary_row *r = &rows[i];
        double s = r->us / 1e6;
        char gf[16] = "-", gb[16] = "-";
        if (r->flops > 0 && s > 0)
            snprintf(gf, sizeof gf, "%.1f", r->flops / s / 1e9);
        if (r->bytes > 0 && s > 0)
            snprintf(gb, sizeof gb, "%.2f", r->bytes * (r->backward < 0 ? (double)steps : 1.0)
                                                / s / 1e9);
        fprintf(f, "%-24s %-4s %7ld %10.3f %9.3f %5.1f%% %9s %8s\n", r->family,
                r->backward < 0 ? "" : r->backward ? "bwd" : "fwd", r->calls, r->us / 1e3,
                r->us / 1e3 / (double)steps, step_us > 0 ? 100.0 * r->us / step_us : 0.0, gf,
                gb);
    }
}
