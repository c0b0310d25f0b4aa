/*
 * caching_allocator_ops.c - `bazel run //bench:caching_allocator_ops`: what the
 * device allocator costs a training step. The step is the small CNN's
 * allocation pattern (forward: one activation per layer; backward: one
 * gradient per layer, in reverse, freeing activations as it goes), each
 * buffer written once (memset), as a step writes its activations. Modes:
 *   plain         one device malloc/free per dev_alloc/dev_free (baseline:
 *                 the technique off);
 *   caching       freed blocks kept for reuse (PyTorch's default);
 *   empty cache   caching, plus torch.cuda.empty_cache() after every step;
 * and with a batch size that changes every step (B/2 .. B):
 *   plain, caching, and caching with one reservation preallocated for the
 *   largest batch (PyTorch's advice: run the largest batch first).
 *
 * On the CPU backend there is no caching allocator (mem_set_mode and
 * mem_empty_cache are NULL: every dev_alloc is an aligned_alloc): plain is
 * timed, the other settings are n/a rows with that reason.
 *
 * Writes results/<device>/caching_allocator_ops.csv and plots/<device>/
 * caching_allocator_ops.* . Correctness: n/a (no values are computed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/opbench.h"

/* Floats per sample of each layer's activation: the small CNN on 28x28
 * (16x28x28, pooled 16x14x14, resblock 16x14x14, stride 2 32x7x7, resblock
 * 32x7x7, linear 64, logits 10). */
static const size_t layer_floats[] = {12544, 3136, 3136, 3136, 1568, 1568, 64, 10};
enum { NLAYERS = sizeof layer_floats / sizeof layer_floats[0] };

typedef enum alloc_mode { M_PLAIN, M_CACHING, M_EMPTY, M_PREALLOC } alloc_mode;

enum { C_PLAIN, C_PLAIN_AGAIN, C_CACHING, C_EMPTY, C_VPLAIN, C_VPLAIN_AGAIN, C_VCACHING,
       C_VPREALLOC, NCASES };
static const struct { const char *name, *setting; alloc_mode mode; int vary; } case_defs[NCASES] = {
    {"plain", "plain", M_PLAIN, 0},
    {"plain_again", "plain", M_PLAIN, 0},
    {"caching", "caching", M_CACHING, 0},
    {"empty_cache", "empty cache every step", M_EMPTY, 0},
    {"vary_plain", "plain", M_PLAIN, 1},
    {"vary_plain_again", "plain", M_PLAIN, 1},
    {"vary_caching", "caching", M_CACHING, 1},
    {"vary_prealloc", "preallocated for the largest batch", M_PREALLOC, 1},
};

typedef struct alloc_state {
    int batch;                 /* the largest batch */
    int current;               /* mode set on the backend now, -1 at first */
    size_t reserve;            /* bytes of one step at the largest batch */
    struct alloc_case *cases;
} alloc_state;

typedef struct alloc_case {
    tb_backend *be;
    alloc_state *st;
    int k, calls;
} alloc_case;

static size_t step_bytes(int batch)
{
    size_t total = 0;
    for (int i = 0; i < NLAYERS; i++)
        total += 2 * layer_floats[i] * (size_t)batch * sizeof(float);
    return total;
}

static int set_mode(tb_backend *be, alloc_state *st, alloc_mode m)
{
    if ((int)m == st->current)
        return TB_OK;
    tb_mem_mode mode = m == M_PLAIN ? TB_MEM_PLAIN : TB_MEM_CACHING;
    if (be->mem_empty_cache)
        TB_TRY(be->mem_empty_cache(be));
    TB_TRY(be->mem_set_mode(be, mode, m == M_PREALLOC ? st->reserve : 0));
    st->current = (int)m;
    return TB_OK;
}

static int alloc_touch(tb_backend *be, void **p, size_t bytes)
{
    TB_TRY(be->dev_alloc(be, p, bytes));
    return be->memset(be, *p, 0, bytes, TB_ON_COMPUTE); /* as a step's kernels: no host wait */
}

/* One step's allocations at batch b: forward allocates every activation,
 * backward allocates each layer's gradient and frees what it no longer
 * needs. Frees everything on error too. */
static int step(tb_backend *be, int b)
{
    void *act[NLAYERS] = {0}, *grad[NLAYERS + 1] = {0};
    int rc = TB_OK;
    for (int i = 0; i < NLAYERS && rc == TB_OK; i++)
        rc = alloc_touch(be, &act[i], layer_floats[i] * (size_t)b * sizeof(float));
    for (int i = NLAYERS - 1; i >= 0 && rc == TB_OK; i--) {
        rc = alloc_touch(be, &grad[i], layer_floats[i] * (size_t)b * sizeof(float));
        be->dev_free(be, grad[i + 1]);
        grad[i + 1] = NULL;
        be->dev_free(be, act[i]);
        act[i] = NULL;
    }
    for (int i = 0; i < NLAYERS; i++)
        be->dev_free(be, act[i]);
    for (int i = 0; i <= NLAYERS; i++)
        be->dev_free(be, grad[i]);
    return rc;
}

static int run_case(void *arg)
{
    alloc_case *c = arg;
    alloc_state *st = c->st;
    alloc_mode m = case_defs[c->k].mode;
    if (c->be->mem_set_mode)
        TB_TRY(set_mode(c->be, st, m));
    int half = st->batch / 2;
    int b = case_defs[c->k].vary ? half + (c->calls++ * 7) % (half + 1) : st->batch;
    TB_TRY(step(c->be, b));
    if (m == M_EMPTY)
        return c->be->mem_empty_cache(c->be);
    return TB_OK;
}

/* Which cases this backend can run: all with a caching allocator, plain
 * only without one. */
static int runnable(const tb_backend *be, int k)
{
    if (case_defs[k].mode == M_PLAIN)
        return 1;
    return be->mem_set_mode && be->mem_empty_cache;
}

static int setup(tb_bench *b, void *state, opb_set *set)
{
    alloc_state *st = state;
    st->batch = b->profile == TB_PROFILE_TINY ? 16 : 64;
    st->current = -1;
    st->reserve = step_bytes(st->batch);
    int64_t iterations = b->profile == TB_PROFILE_FULL ? 50 : b->profile == TB_PROFILE_TINY ? 3
                                                                                           : 10;
    st->cases = calloc(NCASES, sizeof *st->cases);
    if (!st->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    size_t idx[NCASES];
    for (int k = 0; k < NCASES; k++) {
        if (!runnable(b->be, k))
            continue;
        st->cases[k] = (alloc_case){b->be, st, k, 0};
        TB_TRY(opb_register(b, set, OPB_WARMUPS, run_case, &st->cases[k], iterations,
                            "alloc_%s/%d", case_defs[k].name, st->batch));
        idx[k] = set->n - 1;
    }
    /* Every case is compared with plain of its kind (fixed or varying
     * batch), which always runs; "again" is plain's A/A copy. */
    for (int k = 0; k < NCASES; k++) {
        int base = case_defs[k].vary ? C_VPLAIN : C_PLAIN;
        if (k != base && runnable(b->be, k))
            TB_TRY(opb_compare(set, idx[k], idx[base], k == C_PLAIN_AGAIN || k == C_VPLAIN_AGAIN));
    }
    return TB_OK;
}

static int add_row(tb_bench *b, const gb_results *r, int batch, int k, int base, int again,
                   double peak)
{
    const char *metric = case_defs[k].vary ? "step allocations, batch varies" : "step allocations";
    if (!runnable(b->be, k))
        return opb_add_na(b, case_defs[k].setting, metric,
                          "no caching allocator on this backend (mem_set_mode and "
                          "mem_empty_cache are NULL: every dev_alloc is a plain host "
                          "allocation), so there is nothing to cache, empty or preallocate");
    const gb_run *me, *rb, *ra;
    TB_TRY(opb_need(r, &me, "alloc_%s/%d", case_defs[k].name, batch));
    TB_TRY(opb_need(r, &rb, "alloc_%s/%d", case_defs[base].name, batch));
    TB_TRY(opb_need(r, &ra, "alloc_%s/%d", case_defs[again].name, batch));
    tb_result_row row;
    tb_bench_row(b, &row, case_defs[k].setting, k == base, "batch", batch, metric);
    if (k == base)
        TB_TRY(opb_fill_base(&row, rb, ra, 1e6, "us"));
    else
        TB_TRY(opb_fill_variant(&row, me, rb, ra, 1e6, "us"));
    row.memory_bytes = peak;
    snprintf(row.note, sizeof row.note, "%d buffers a step, each written once%s; memory: the "
             "peak of the bytes a step at batch %d asks for (the same in every mode: a "
             "cache's unused blocks are not counted); correctness n/a: nothing is computed",
             2 * NLAYERS, case_defs[k].vary ? "; batch B/2 .. B, a different one every step" : "",
             batch);
    return tb_results_add(&b->res, &row);
}

/* One untimed step at a batch, for its peak (tb_bench_peak_of). */
typedef struct step_at {
    tb_backend *be;
    int batch;
} step_at;

static int step_of(void *arg)
{
    const step_at *a = arg;
    return step(a->be, a->batch);
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    alloc_state *st = state;
    double peak;
    step_at largest = {b->be, st->batch};
    TB_TRY(tb_bench_peak_of(b->be, step_of, &largest, &peak));
    for (int k = 0; k < NCASES; k++) {
        if (k == C_PLAIN_AGAIN || k == C_VPLAIN_AGAIN)
            continue;
        int vary = case_defs[k].vary;
        TB_TRY(add_row(b, r, st->batch, k, vary ? C_VPLAIN : C_PLAIN,
                       vary ? C_VPLAIN_AGAIN : C_PLAIN_AGAIN, peak));
    }
    return TB_OK;
}

static int plot(tb_bench *b, void *state)
{
    (void)state;
    return opb_plot(b, "caching_allocator_ops", "Allocation cost of one training step", "batch",
                    "time (us)", 0, OPB_Y_MEDIAN);
}

static void teardown(tb_bench *b, void *state)
{
    alloc_state *st = state;
    if (b->be->mem_set_mode && st->current >= 0)
        b->be->mem_set_mode(b->be, TB_MEM_CACHING, 0);
    free(st->cases);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    alloc_state st = {0};
    return opb_run(b, &sweep, &st);
}

static const tb_technique technique = {
    .name = "caching_allocator_ops",
    .headline = "caching",
    .what = "Device allocator modes on a training step's allocations: plain, caching, "
            "empty cache every step, preallocation with a varying batch.",
    .est_seconds = {3, 20, 2, 7}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {3, 18, 1, 5},
    .order = 350,
    .tiny = {.min_rows = 6, .plots = "caching_allocator_ops"},
};

TB_OPB_MAIN(technique, run)
