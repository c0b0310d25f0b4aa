/*
 * pinned_memory_bw.c - `bazel run //bench:pinned_memory_bw`: host-to-device
 * and device-to-host copy bandwidth from pageable vs pinned (page-locked)
 * host memory, synchronous and asynchronous on a side stream
 * (pin_memory=True, non_blocking=True), over sizes 4 KiB .. 256 MiB.
 * Baseline: pageable (the technique off). The end-to-end training step with
 * and without is bench:pinned_memory (bench/harness/step_harness.h).
 *
 * On the CPU backend there is no device copy: every row is n/a with that
 * reason, and nothing is timed. The async case records an event on the
 * compute stream, has the side stream wait for it, copies there, and has
 * the compute stream wait for the copy, so the compute stream's events
 * time the side stream's copy.
 *
 * Writes results/<device>/pinned_memory_bw.csv and plots/<device>/
 * pinned_memory_bw.* (bandwidth). Correctness: each row's own copy, made
 * the way it is timed (async ones on the side stream), must carry random
 * data bitwise equal (check_case).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/opbench.h"

enum { NSIZES_MAX = 9 };

enum { V_PAGEABLE, V_PAGEABLE_AGAIN, V_PINNED, V_PINNED_ASYNC, NV };
static const struct { const char *name, *setting; int pinned, async; } vdefs[NV] = {
    {"pageable", "pageable", 0, 0},
    {"pageable_again", "pageable", 0, 0},
    {"pinned", "pinned", 1, 0},
    {"pinned_async", "pinned + async on a side stream", 1, 1},
};

typedef struct copy_bufs {
    tb_backend *be;
    void *dev, *host[2];       /* [pageable, pinned], max bytes each */
    tb_stream *side;
    tb_event *ready, *done;
} copy_bufs;

typedef struct copy_case {
    copy_bufs *bf;
    size_t bytes;
    int v, d2h;
} copy_case;

static int copy_once(tb_backend *be, copy_case *c, tb_stream *s)
{
    void *host = c->bf->host[vdefs[c->v].pinned];
    if (c->d2h)
        return be->copy_d2h(be, host, c->bf->dev, c->bytes, s);
    return be->copy_h2d(be, c->bf->dev, host, c->bytes, s);
}

static int run_case(void *arg)
{
    copy_case *c = arg;
    copy_bufs *f = c->bf;
    tb_backend *be = f->be;
    if (!vdefs[c->v].async)
        return copy_once(be, c, NULL);
    TB_TRY(be->event_record(be, f->ready, NULL));
    TB_TRY(be->stream_wait_event(be, f->side, f->ready));
    TB_TRY(copy_once(be, c, f->side));
    TB_TRY(be->event_record(be, f->done, f->side));
    return be->stream_wait_event(be, NULL, f->done);
}

typedef struct pin_state {
    size_t sizes[NSIZES_MAX];
    int nsizes, measurable;
    copy_bufs f;
    copy_case *cases;          /* nsizes * 2 directions * NV */
} pin_state;

static int plan_sizes(int profile, size_t *sizes)
{
    int hi = profile == TB_PROFILE_TINY ? 16 : 28, n = 0; /* 2^12 .. 2^28 bytes */
    for (int e = 12; e <= hi; e += 2)
        sizes[n++] = (size_t)1 << e;
    return n;
}

/* About 64 MiB per repetition (256 MiB in full): the biggest sizes get one
 * copy a repetition, never fewer repetitions. */
static int64_t plan_iterations(int profile, size_t bytes)
{
    double budget = profile == TB_PROFILE_FULL ? 256.0 * (1 << 20) : 64.0 * (1 << 20);
    if (profile == TB_PROFILE_TINY)
        budget = 1 << 20;
    int64_t it = (int64_t)(budget / (double)bytes);
    return it < 1 ? 1 : it;
}

static int alloc_bufs(tb_backend *be, copy_bufs *f, size_t max)
{
    f->be = be;
    TB_TRY(be->dev_alloc(be, &f->dev, max));
    TB_TRY(be->host_alloc(be, &f->host[0], max, 0));
    TB_TRY(be->host_alloc(be, &f->host[1], max, 1));
    for (int p = 0; p < 2; p++)
        tb_rng_fill(f->host[p], max / sizeof(float), (uint64_t)p + 1, -1.0, 1.0);
    TB_TRY(be->stream_create(be, &f->side));
    TB_TRY(be->event_create(be, &f->ready));
    return be->event_create(be, &f->done);
}

static void free_bufs(tb_backend *be, copy_bufs *f)
{
    if (f->done)
        be->event_destroy(be, f->done);
    if (f->ready)
        be->event_destroy(be, f->ready);
    if (f->side)
        be->stream_destroy(be, f->side);
    be->dev_free(be, f->dev);
    be->host_free(be, f->host[0], 0);
    be->host_free(be, f->host[1], 1);
}

static int setup(tb_bench *b, void *state, opb_set *set)
{
    pin_state *st = state;
    st->nsizes = plan_sizes(b->profile, st->sizes);
    st->measurable = strcmp(b->info.backend, "cpu") != 0;
    if (!st->measurable)
        return TB_OK;
    st->cases = calloc((size_t)st->nsizes * 2 * NV, sizeof *st->cases);
    if (!st->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    TB_TRY(alloc_bufs(b->be, &st->f, st->sizes[st->nsizes - 1]));
    copy_case *c = st->cases;
    for (int s = 0; s < st->nsizes; s++)
        for (int d2h = 0; d2h < 2; d2h++)
            for (int v = 0; v < NV; v++, c++) {
                *c = (copy_case){&st->f, st->sizes[s], v, d2h};
                TB_TRY(opb_register(b, set, OPB_WARMUPS, run_case, c,
                                    plan_iterations(b->profile, st->sizes[s]), "copy_%s_%s/%zu",
                                    d2h ? "d2h" : "h2d", vdefs[v].name, st->sizes[s]));
                /* pageable, its again, pinned, pinned async in a row:
                 * compared with pageable. */
                if (v != V_PAGEABLE)
                    TB_TRY(opb_compare(set, set->n - 1, set->n - 1 - v, v == V_PAGEABLE_AGAIN));
            }
    return TB_OK;
}

/* Case c's own copy, the way it is timed (run_case: synchronous, or
 * async on the side stream), checked bitwise: h2d sends seeded random
 * floats from c's host buffer and reads them back synchronously; d2h
 * puts them on the device synchronously and receives them in c's host
 * buffer. */
static int check_case(tb_backend *be, copy_case *c, tb_compare *cmp)
{
    size_t n = c->bytes / sizeof(float);
    float *want = malloc(c->bytes), *got = malloc(c->bytes);
    float *host = c->bf->host[vdefs[c->v].pinned];
    int rc = want && got ? TB_OK : TB_FAIL(TB_ERR_NOMEM, "out of memory");
    if (rc == TB_OK) {
        tb_rng_fill(want, n, 0xc0ffee + c->bytes, -1.0, 1.0);
        if (c->d2h) {
            rc = be->copy_h2d(be, c->bf->dev, want, c->bytes, NULL);
        } else {
            memcpy(host, want, c->bytes);
        }
    }
    if (rc == TB_OK)
        rc = run_case(c);
    if (rc == TB_OK)
        rc = be->sync(be);
    if (rc == TB_OK && !c->d2h)
        rc = be->copy_d2h(be, got, c->bf->dev, c->bytes, NULL);
    else if (rc == TB_OK)
        memcpy(got, host, c->bytes);
    if (rc == TB_OK)
        rc = tb_compare_floats(want, got, n, 0.0, cmp);
    free(want);
    free(got);
    return rc;
}

static int add_rows(tb_bench *b, const gb_results *r, pin_state *st, int size, int d2h)
{
    size_t bytes = st->sizes[size];
    copy_case *cases = &st->cases[((size_t)size * 2 + (size_t)d2h) * NV];
    const gb_run *run[NV];
    for (int v = 0; v < NV; v++)
        TB_TRY(opb_need(r, &run[v], "copy_%s_%s/%zu", d2h ? "d2h" : "h2d", vdefs[v].name,
                        bytes));
    for (int v = 0; v < NV; v++) {
        if (v == V_PAGEABLE_AGAIN)
            continue;
        tb_result_row row;
        tb_bench_row(b, &row, vdefs[v].setting, v == V_PAGEABLE, "bytes", (double)bytes,
                     d2h ? "d2h copy time" : "h2d copy time");
        if (v == V_PAGEABLE)
            TB_TRY(opb_fill_base(&row, run[v], run[V_PAGEABLE_AGAIN], 1e6, "us"));
        else
            TB_TRY(opb_fill_variant(&row, run[v], run[V_PAGEABLE], run[V_PAGEABLE_AGAIN], 1e6,
                                    "us"));
        row.rate = (double)bytes / (row.median * 1e-6) / 1e9;
        snprintf(row.rate_unit, sizeof row.rate_unit, "GB/s");
        tb_compare cmp;
        TB_TRY(check_case(b->be, &cases[v], &cmp));
        opb_set_check(&row, &cmp, "the bytes sent");
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

static int add_na_rows(tb_bench *b)
{
    for (int d2h = 0; d2h < 2; d2h++)
        for (int v = 0; v < NV; v++) {
            if (v == V_PAGEABLE_AGAIN)
                continue;
            TB_TRY(opb_add_na(b, vdefs[v].setting, d2h ? "d2h copy time" : "h2d copy time",
                              "no device copy on the CPU backend; pin_memory has no effect "
                              "without a GPU (sizes 4 KiB .. 256 MiB not measured)"));
        }
    return TB_OK;
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    pin_state *st = state;
    if (!st->measurable)
        return add_na_rows(b);
    for (int s = 0; s < st->nsizes; s++)
        for (int d2h = 0; d2h < 2; d2h++)
            TB_TRY(add_rows(b, r, st, s, d2h));
    return TB_OK;
}

static int plot(tb_bench *b, void *state)
{
    (void)state;
    return opb_plot(b, "pinned_memory_bw", "Host-device copy bandwidth, pageable vs pinned",
                    "bytes", "GB/s", 2, OPB_Y_RATE);
}

static void teardown(tb_bench *b, void *state)
{
    pin_state *st = state;
    free(st->cases);
    if (st->measurable)
        free_bufs(b->be, &st->f);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    pin_state st = {0};
    return opb_run(b, &sweep, &st);
}

static const tb_technique technique = {
    .name = "pinned_memory_bw",
    .headline = "pinned",
    .what = "Host-to-device and device-to-host bandwidth, pageable vs pinned (sync and "
            "async on a side stream), 4 KiB .. 256 MiB.",
    .est_seconds = {1, 40, 1, 10}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {5, 35, 1, 8},
    .order = 360,
    .tiny = {.min_rows = 6, .no_gbench = 1},
};

TB_OPB_MAIN(technique, run)
