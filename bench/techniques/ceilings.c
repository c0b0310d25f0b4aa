/*
 * ceilings.c - `bazel run //bench:ceilings`: the bounds every technique's
 * rate is held to, measured in the same run, on the same device, with the
 * same threads:
 *   fp32 GEMM peak        be->gemm, TB_MATH_F32, square n x n x n
 *   tf32 GEMM peak        TB_MATH_TF32: TF32 tensor cores on CUDA; on the CPU
 *                         oneDNN's bf16 fpmath mode, the nearest analogue
 *                         (its note says whether it changed a probe GEMM:
 *                         tb_gemm_tf32_differs)
 *   bf16 GEMM peak        gemm_lowp on bf16 operands, where the backend has it; otherwise an
 *                         n/a row with the backend's own reason
 *   copy bandwidth        be->copy_d2d (bytes read + written / time, as
 *                         bench:gelu counts its copy)
 *   h2d pinned / pageable be->copy_h2d from host_alloc(pinned = 1 / 0)
 *                         (bytes / time); n/a on the CPU backend
 *   all-reduce bus bw     n/a here: a single process; bench:ddp measures it
 *                         with its ranks
 * GEMM rate is 2 n^3 / median time (GFLOP/s, 10^9 per second).
 *
 * Writes results/<device>/ceilings.csv (+ .json, .gbench.json) in the
 * standard schema (technique "ceilings", one row per ceiling, the ceiling's
 * name in `setting`). No figure: a handful of numbers read best as a table.
 * bench:all runs it first; the report lists the ceilings and shows each
 * technique's rate beside the one it is bounded by.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/gemm_ceiling.h"
#include "bench/harness/harness.h"
#include "bench/harness/opbench.h"
#include "lib/core/rng.h"

typedef enum ceil_op { OP_GEMM, OP_D2D, OP_H2D } ceil_op;

typedef struct ceil_case {
    const char *name;          /* the ceiling: the `setting` column */
    const char *bm;            /* Google Benchmark name */
    ceil_op op;
    tb_math math;              /* OP_GEMM */
    int pinned;                /* OP_H2D */
    const char *metric, *rate_unit, *param_name;
    tb_backend *be;
    float *a, *b, *c;          /* GEMM operands (n x n), or copy dst (a) and src (b) */
    void *a16, *b16;           /* bf16 operands of the TB_MATH_LOWP case */
    void *host;                /* OP_H2D source */
    size_t n;                  /* matrix side, or bytes */
    int usable;                /* 0: n/a, reason in why */
    char why[256];
} ceil_case;

static int run_case(void *arg)
{
    ceil_case *c = arg;
    tb_backend *be = c->be;
    int n = (int)c->n;
    switch (c->op) {
    case OP_GEMM:
        if (c->math == TB_MATH_LOWP) /* bf16 operands, fp32 accumulation and C */
            return be->gemm_lowp(be, TB_BF16, 0, 0, n, n, n, 1.0f, c->a16, n, c->b16, n, 0.0f,
                                 c->c, n);
        return be->gemm(be, 0, 0, n, n, n, 1.0f, c->a, n, c->b, n, 0.0f, c->c, n, c->math);
    case OP_D2D: return be->copy_d2d(be, c->a, c->b, c->n, TB_ON_COMPUTE);
    case OP_H2D: return be->copy_h2d(be, c->a, c->host, c->n, NULL);
    }
    return TB_FAIL(TB_ERR_INTERNAL, "unknown ceiling op");
}

static void bm_ceiling(tbb_state *st, void *user)
{
    ceil_case *c = user;
    tb_bench_timed_loop(st, c->be, run_case, c);
}

/* Sizes per backend and profile: big enough to reach the peak, small
 * enough for the default profile to take well under a minute. */
static size_t gemm_side(int cuda, int profile)
{
    static const size_t cpu[3] = {2048, 4096, 512}, gpu[3] = {8192, 16384, 2048};
    return (cuda ? gpu : cpu)[profile];
}

static size_t copy_bytes(int cuda, int profile)
{
    static const size_t cpu[3] = {256u << 20, 1024u << 20, 16u << 20};
    static const size_t gpu[3] = {1024u << 20, 2048u << 20, 64u << 20};
    return (cuda ? gpu : cpu)[profile];
}

enum { C_F32, C_TF32, C_LOWP, C_D2D, C_H2D_PINNED, C_H2D_PAGEABLE, NCASES };

static void define_cases(ceil_case *cs, tb_backend *be, size_t side, size_t bytes)
{
    static const ceil_case defs[NCASES] = {
        {"fp32 GEMM peak", "ceil_gemm_f32", OP_GEMM, TB_MATH_F32, 0, "gemm time", "GFLOP/s", "n"},
        {"tf32 GEMM peak", "ceil_gemm_tf32", OP_GEMM, TB_MATH_TF32, 0, "gemm time", "GFLOP/s", "n"},
        {"bf16 GEMM peak", "ceil_gemm_lowp", OP_GEMM, TB_MATH_LOWP, 0, "gemm time", "GFLOP/s", "n"},
        {"copy bandwidth", "ceil_copy_d2d", OP_D2D, TB_MATH_F32, 0, "copy time", "GB/s", "bytes"},
        {"h2d pinned bandwidth", "ceil_h2d_pinned", OP_H2D, TB_MATH_F32, 1, "transfer time",
         "GB/s", "bytes"},
        {"h2d pageable bandwidth", "ceil_h2d_pageable", OP_H2D, TB_MATH_F32, 0, "transfer time",
         "GB/s", "bytes"},
    };
    for (int k = 0; k < NCASES; k++) {
        cs[k] = defs[k];
        cs[k].be = be;
        cs[k].n = defs[k].op == OP_GEMM ? side : bytes;
        cs[k].usable = 1;
    }
}

typedef struct ceil_bufs {
    float *a, *b, *c;          /* device: n x n each; a and b also serve the copies */
    void *a16, *b16;           /* device: a and b cast to bf16, for the bf16 GEMM peak */
    void *pinned, *pageable;   /* host sources for h2d */
    size_t gemm_bytes, copy_bytes, dev_bytes;
} ceil_bufs;

/* Device buffers hold max(GEMM operand, copy size) so one allocation
 * serves both; operands get random values (never zeros). */
static int alloc_bufs(tb_bench *bn, ceil_bufs *bf, size_t side, size_t bytes, int h2d)
{
    tb_backend *be = bn->be;
    bf->gemm_bytes = side * side * sizeof(float);
    bf->copy_bytes = bytes;
    bf->dev_bytes = bf->gemm_bytes > bytes ? bf->gemm_bytes : bytes;
    TB_TRY(be->dev_alloc(be, (void **)&bf->a, bf->dev_bytes));
    TB_TRY(be->dev_alloc(be, (void **)&bf->b, bf->dev_bytes));
    TB_TRY(be->dev_alloc(be, (void **)&bf->c, bf->gemm_bytes));
    float *h = NULL;
    TB_TRY(be->host_alloc(be, (void **)&h, bf->dev_bytes, 0));
    tb_rng_fill(h, bf->dev_bytes / sizeof(float), 7, -0.5, 0.5);
    int rc = be->copy_h2d(be, bf->a, h, bf->dev_bytes, NULL);
    if (rc == TB_OK)
        rc = be->copy_h2d(be, bf->b, h, bf->dev_bytes, NULL);
    be->host_free(be, h, 0);
    TB_TRY(rc);
    if (!h2d)
        return TB_OK;
    TB_TRY(be->host_alloc(be, &bf->pinned, bytes, 1));
    TB_TRY(be->host_alloc(be, &bf->pageable, bytes, 0));
    memset(bf->pinned, 1, bytes);
    memset(bf->pageable, 1, bytes);
    return TB_OK;
}

static void free_bufs(tb_backend *be, ceil_bufs *bf)
{
    be->dev_free(be, bf->a16);
    be->dev_free(be, bf->b16);
    be->dev_free(be, bf->a);
    be->dev_free(be, bf->b);
    be->dev_free(be, bf->c);
    if (bf->pinned)
        be->host_free(be, bf->pinned, 1);
    if (bf->pageable)
        be->host_free(be, bf->pageable, 0);
}

/* Tries each GEMM math once outside the timed runs: a backend that refuses
 * one (TB_ERR_UNSUPPORTED) gets an n/a row with its reason. */
static int probe_gemms(ceil_case *cs, size_t side)
{
    for (int k = C_F32; k <= C_LOWP; k++) {
        ceil_case probe = cs[k];
        probe.n = side < 64 ? side : 64;
        int rc = run_case(&probe);
        if (rc == TB_ERR_UNSUPPORTED) {
            cs[k].usable = 0;
            snprintf(cs[k].why, sizeof cs[k].why, "%s", tb_error_message());
            tb_error_clear();
        } else if (rc != TB_OK) {
            return rc;
        }
    }
    return TB_OK;
}

static int plan(tb_bench *bn, ceil_case *cs, ceil_bufs *bf)
{
    int cuda = strcmp(bn->info.backend, "cuda") == 0;
    size_t side = gemm_side(cuda, bn->profile), bytes = copy_bytes(cuda, bn->profile);
    define_cases(cs, bn->be, side, bytes);
    if (!cuda)
        for (int k = C_H2D_PINNED; k <= C_H2D_PAGEABLE; k++) {
            cs[k].usable = 0;
            snprintf(cs[k].why, sizeof cs[k].why, "no device copy on the CPU backend");
        }
    TB_TRY(alloc_bufs(bn, bf, side, bytes, cuda));
    size_t elems = side * side;
    TB_TRY(bn->be->dev_alloc(bn->be, &bf->a16, elems * 2));
    TB_TRY(bn->be->dev_alloc(bn->be, &bf->b16, elems * 2));
    TB_TRY(bn->be->cast_f32_to_lowp(bn->be, TB_BF16, bf->a, bf->a16, elems));
    TB_TRY(bn->be->cast_f32_to_lowp(bn->be, TB_BF16, bf->b, bf->b16, elems));
    for (int k = 0; k < NCASES; k++) {
        cs[k].a16 = bf->a16;
        cs[k].b16 = bf->b16;
        cs[k].a = bf->a;
        cs[k].b = bf->b;
        cs[k].c = bf->c;
        cs[k].host = cs[k].pinned ? bf->pinned : bf->pageable;
    }
    return probe_gemms(cs, side);
}

/* The calls a repetition needs to last the profile's minimum repetition
 * time (opb_rounds_cfg, the op sweeps' value), from one call timed after a
 * warm-up call: the ceilings are rates with nothing to compare, so they keep
 * plain back-to-back repetitions, but no repetition is shorter than a
 * compared op's. At least `least`. */
static int calls_for_min_time(tb_bench *bn, ceil_case *c, int64_t least, int64_t *out)
{
    tb_rounds_cfg cfg;
    opb_rounds_cfg(bn, &cfg);
    double t = 0;
    TB_TRY(run_case(c));
    TB_TRY(bn->be->sync(bn->be));
    TB_TRY(tb_bench_time_op(bn->be, run_case, c, &t));
    int64_t need = t > 0 ? (int64_t)ceil(cfg.min_rep_s / t) : least;
    *out = need > least ? need : least;
    return TB_OK;
}

static int register_all(tb_bench *bn, ceil_case *cs)
{
    int cuda = strcmp(bn->info.backend, "cuda") == 0;
    for (int k = 0; k < NCASES; k++) {
        if (!cs[k].usable)
            continue;
        char name[96];
        snprintf(name, sizeof name, "%s/%zu", cs[k].bm, cs[k].n);
        tbb_options o = tbb_options_default();
        /* A repetition lasts the profile's minimum repetition time
         * (calls_for_min_time), at least one call; the CPU's copies at
         * least 5. A GPU's GEMMs and copies at the gpu sizes last 13-280 ms
         * a call: at 10 calls a repetition (the H200 run) the 2 GiB
         * pageable copy took 14 s and the fp32 GEMM 8 s of the technique's
         * 41, where 0.2 s repetitions (1 and 2 calls) hold them as well:
         * the events time the whole repetition, and its spread was 0.01-2%. */
        o.iterations = cuda || cs[k].op == OP_GEMM ? 1 : 5;
        if (bn->profile == TB_PROFILE_TINY)
            o.iterations = 2;
        TB_TRY(calls_for_min_time(bn, &cs[k], o.iterations, &o.iterations));
        o.repetitions = bn->reps;
        o.manual_time = 1;
        o.unit = TBB_MS;
        TB_TRY(tbb_register(name, bm_ceiling, &cs[k], &o));
    }
    return TB_OK;
}

static int add_rows(tb_bench *bn, const gb_results *r, const ceil_case *cs)
{
    for (int k = 0; k < NCASES; k++) {
        const ceil_case *c = &cs[k];
        if (!c->usable) {
            TB_TRY(tb_results_add_na(&bn->res, "ceilings", bn->info.backend, bn->info.name,
                                     c->name, c->metric, c->why));
            continue;
        }
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s/%zu/", c->bm, c->n);
        const gb_run *run = tb_bench_find(r, prefix);
        if (!run)
            return TB_FAIL(TB_ERR_DATA, "no result for %s in Google Benchmark's JSON", prefix);
        tb_result_row row;
        tb_bench_row(bn, &row, c->name, 0, c->param_name, (double)c->n, c->metric);
        TB_TRY(tb_bench_fill_timing(&row, run, 1e3, "ms"));
        row.timing_verdict = TB_TIMING_NA;
        double secs = row.median * 1e-3, side = (double)c->n;
        if (c->op == OP_GEMM) {
            row.rate = 2.0 * side * side * side / secs / 1e9;
            int cpu_tf32 = c->math == TB_MATH_TF32 && strcmp(bn->info.backend, "cpu") == 0;
            int differs = 1;
            if (cpu_tf32)
                TB_TRY(tb_gemm_tf32_differs(bn->be, &differs));
            snprintf(row.note, sizeof row.note, "%s; rate = 2 n^3 / median time",
                     !cpu_tf32 ? "a ceiling, not compared with a baseline"
                     : differs ? "on the CPU: oneDNN fpmath mode bf16 (fp32 data, bf16 "
                                 "multiplies: " TB_TF32_PROBE_DIFFERED "), the nearest "
                                 "analogue of TF32"
                               : "on the CPU: oneDNN fpmath mode bf16, which oneDNN computes in "
                                 "fp32 here (" TB_TF32_PROBE_SAME "): expect the fp32 peak");
        } else {
            double moved = c->op == OP_D2D ? 2.0 * side : side;
            row.rate = moved / secs / 1e9;
            snprintf(row.note, sizeof row.note, "%s",
                     c->op == OP_D2D ? "rate = bytes read + written / median time"
                                     : "rate = bytes transferred / median time");
        }
        snprintf(row.rate_unit, sizeof row.rate_unit, "%s", c->rate_unit);
        TB_TRY(tb_results_add(&bn->res, &row));
    }
    return tb_results_add_na(&bn->res, "ceilings", bn->info.backend, bn->info.name,
                             "all-reduce bus bandwidth", "all-reduce time",
                             "single process; see bench:ddp");
}

static int run(tb_bench *bn)
{
    ceil_case cs[NCASES];
    ceil_bufs bf = {0};
    gb_results *r = NULL;
    int rc;
    TB_TRY_GOTO(rc, plan(bn, cs, &bf), out_free);
    TB_TRY_GOTO(rc, register_all(bn, cs), out_free);
    fprintf(stderr, "ceilings: GEMM n = %zu, copies of %zu MiB, %d repetitions\n", cs[C_F32].n,
            cs[C_D2D].n >> 20, bn->reps);
    TB_TRY_GOTO(rc, tb_bench_run(bn, &r), out_free);
    TB_TRY_GOTO(rc, add_rows(bn, r, cs), out_free);
    TB_TRY_GOTO(rc, tb_bench_save(bn), out_free);
out_free:
    gb_results_free(r);
    free_bufs(bn->be, &bf);
    return rc;
}

static const tb_technique technique = {
    .name = "ceilings",
    .what = "Peak GEMM rate, copy and host-to-device bandwidth: the ceilings the "
            "techniques are held to.",
    .est_seconds = {6, 90, 5, 21}, /* default, full, tiny, gpu */
    /* plain repetitions (rates, nothing compared), each of at least the op sweeps' minimum time;
     * default: 4.7-5.2 s in six idle runs, so 8 (was 15) */
    .budget_seconds = {8, 80, 4, 12},
    .order = 0,
    .gbench_runner = 1,
    .tiny = {.min_rows = 7},
};

int main(int argc, char **argv)
{
    tb_bench b;
    int done = 0;
    int rc = tb_bench_init(&b, &technique, NULL, 0, argc, argv, &done);
    if (rc == TB_OK && !done)
        rc = run(&b);
    tb_bench_close(&b);
    if (rc != TB_OK)
        return tb_bench_fail("ceilings", rc);
    return 0;
}
