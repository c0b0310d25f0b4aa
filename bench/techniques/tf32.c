/*
 * tf32.c - `bazel run //bench:tf32`: square fp32 GEMMs (n x n x n) with
 * plain fp32 math vs TF32 math (torch.backends.cuda.matmul.allow_tf32),
 * over n = 256 .. 8192 (default profile: 4096). Baseline: fp32 (the technique off).
 *
 * CUDA: cuBLAS in TF32 tensor-op math. CPU: the nearest analogue, oneDNN's
 * fpmath mode bf16 (fp32 data, bf16 multiplies), which oneDNN may accept
 * and still compute in fp32: on a CPU without avx512_bf16 (or AMX), and
 * with Debian 12's oneDNN 2.6 on an AVX-512 BF16 EPYC too. Whether it
 * changes anything here is measured, not assumed from the CPU's flags: one
 * 256^3 GEMM in each math before the sweep (probe_math); where they come out
 * bitwise the same, the two settings would run the same code: the tf32 rows
 * are n/a saying so, and the fp32 rows are timed with their A/A copies
 * (timing the same kernels twice gave 'faster' 1.01x [1.01, 1.03] at 2048 in
 * a bench:all run of 2026-11-30, as such rows will at the 5% their
 * intervals allow).
 *
 * Profiles: default goes to 4096, full to 8192; the rounds engine picks
 * the calls per repetition (opb_rounds_cfg's minimum time, at least one
 * call). One 8192 GEMM is 1.1 TFLOP, about 11 s on two idle CPU cores
 * (twice that under load): there (from n = 4096 on, 0.7 s a call) each
 * case makes one warm-up call instead of the harness's two (the first call creates the oneDNN primitive and
 * touches the output's pages), so 8192 costs at least 3 warm-ups + 3 x 5
 * rounds + 2 calls of the correctness check, about 220 s: more than the
 * default profile's share of bench:all's 15 minutes, hence 4096 there
 * (about 30 s), and 2048 on a CPU where the mode changes nothing
 * (fp32_only_cpu: 4096 is an n/a row saying why). tiny runs 256 and 512 for
 * the tests.
 *
 * Writes results/<device>/tf32.csv and plots/<device>/tf32.* (GFLOP/s) and
 * tf32_speedup.* . Correctness: the TF32 result against the fp32 result of
 * the same inputs (uniform in [-1, 1]), tolerance TF32_TOL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/gemm_ceiling.h"
#include "bench/harness/opbench.h"

/* Relative to the largest fp32 value (tb_max_rel_err). bf16 multiplies keep
 * 8 significant bits (relative rounding 2^-9 per product, growing with the
 * sum); TF32 keeps 11. 2e-2 bounds the coarser of the two with margin. */
#define TF32_TOL TB_TOL_BF16

enum { V_F32, V_F32_AGAIN, V_TF32, NV };
static const char *const vnames[NV] = {"f32", "f32_again", "tf32"};
static const tb_math vmath[NV] = {TB_MATH_F32, TB_MATH_F32, TB_MATH_TF32};

typedef struct gemm_bufs {
    float *a, *b, *c;          /* device, max_n^2 floats */
    float *ha, *hb, *hc[2];    /* host */
} gemm_bufs;

typedef struct gemm_case {
    tb_backend *be;
    const gemm_bufs *bf;
    int n;
    tb_math math;
} gemm_case;

static int run_gemm(void *arg)
{
    gemm_case *c = arg;
    const gemm_bufs *f = c->bf;
    return c->be->gemm(c->be, 0, 0, c->n, c->n, c->n, 1.0f, f->a, c->n, f->b, c->n, 0.0f, f->c,
                       c->n, c->math);
}

/* What the cases of one size time: a, b and c of n x n floats, a and b
 * copied from the host inputs' first n^2 (as the checks' buffers hold
 * them). The fp32 baseline rebuilds them (new addresses and pages: what
 * another run of the program would draw); TF32 and the A/A copy, compared
 * with it, change build with it. */
static void size_free(tb_backend *be, gemm_bufs *g)
{
    be->dev_free(be, g->a);
    be->dev_free(be, g->b);
    be->dev_free(be, g->c);
    g->a = g->b = g->c = NULL;
}

static int size_alloc(tb_backend *be, const gemm_bufs *host, int n, gemm_bufs *g)
{
    size_t bytes = (size_t)n * n * sizeof(float);
    int rc;
    *g = (gemm_bufs){0};
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->a, bytes), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->b, bytes), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->c, bytes), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, g->a, host->ha, bytes, NULL), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, g->b, host->hb, bytes, NULL), out_free);
    /* every page of the output touched: its first write is not timed */
    TB_TRY_GOTO(rc, be->memset(be, g->c, 0, bytes, NULL), out_free);
    return be->sync(be);
out_free:
    size_free(be, g);
    return rc;
}

typedef struct size_bufs {
    tb_backend *be;
    const gemm_bufs *host;     /* the sweep's host inputs */
    gemm_bufs dev;             /* a, b, c only */
    int n;
} size_bufs;

typedef struct sized_case {
    gemm_case g;               /* g.bf points at size->dev */
    size_bufs *size;
} sized_case;

/* opb_set_rebuild: new buffers before the old are freed, so that the
 * allocator cannot hand the same blocks back. */
static int size_rebuild(void *arg)
{
    size_bufs *z = ((sized_case *)arg)->size;
    gemm_bufs old = z->dev;
    TB_TRY(size_alloc(z->be, z->host, z->n, &z->dev));
    size_free(z->be, &old);
    return TB_OK;
}

static int plan_sizes(int profile, int *sizes)
{
    int hi = profile == TB_PROFILE_TINY ? 512 : profile == TB_PROFILE_FULL ? 8192 : 4096;
    int n = 0;
    for (int s = 256; s <= hi; s *= 2)
        sizes[n++] = s;
    return n;
}

/* The default profile's largest size on a CPU where TF32 math changes
 * nothing (probe_math): only fp32 is timed there, and at n = 4096 (1.9 s a
 * call on a 2-core AVX2 VM) its warm-ups and rounds, with the TF32 arm
 * then also timed, took 78 s of a 19-34 s budget, the run past its 15
 * minutes. Those rows are n/a saying so (the planned sizes past nsizes);
 * the full profile times every size. NULL: every size. */
static const char *fp32_only_cpu(const tb_bench *b, int math_differs)
{
    if (b->profile != TB_PROFILE_DEFAULT || strcmp(b->info.backend, "cpu") != 0 ||
        math_differs)
        return NULL;
    return "not timed in the default profile on this CPU: TF32 changes nothing here (oneDNN "
           "computes its bf16 fpmath mode in fp32: " TB_TF32_PROBE_SAME "), and "
           "this size's fp32 GEMM is seconds a call on 2 cores (78 s with both settings in one "
           "run, past its budget); the sizes below are timed, --profile=full times this one";
}

/* About 4 GFLOP per repetition in default (0.04 s at 100 GFLOP/s); one
 * call from n = 1024 on (2 GFLOP), 1.1 TFLOP at 8192. */
static int64_t plan_iterations(int profile, int n)
{
    double flops = profile == TB_PROFILE_FULL ? 2e10 : profile == TB_PROFILE_TINY ? 2e8 : 4e9;
    int64_t it = (int64_t)(flops / (2.0 * n * (double)n * n));
    return it < 1 ? 1 : it;
}

/* One warm-up call where a single call is over 0.1 TFLOP (n = 4096 and
 * up: 0.7 s and more on two cores; see the file comment), the harness's
 * two below: the engine's own warm-up makes three more calls. */
static int plan_warmups(int n)
{
    return 2.0 * n * (double)n * n > 1e11 ? 1 : 2;
}

/* TF32 math tried once outside the timed runs (tb_gemm_tf32_differs):
 * *timed 0, with the tf32 rows' n/a reason in why, where the backend
 * refuses it (instead of a failed run) or where its output is bitwise
 * fp32's (the same arithmetic: nothing to compare); *differs 1 where its
 * output is not fp32's. */
static int probe_math(tb_backend *be, int *timed, int *differs, char *why, size_t cap)
{
    *timed = 1;
    *differs = 0;
    int rc = tb_gemm_tf32_differs(be, differs);
    if (rc == TB_ERR_UNSUPPORTED) {
        snprintf(why, cap, "TF32 math refused by the backend: %.200s", tb_error_message());
        tb_error_clear();
        *timed = 0;
        return TB_OK;
    }
    TB_TRY(rc);
    if (!*differs) {
        snprintf(why, cap, "n/a here: TF32 math changes nothing (%s, " TB_TF32_PROBE_SAME "), "
                 "so both settings would run the same kernels; the fp32 rows are timed",
                 strcmp(be->name, "cpu") == 0
                     ? "this CPU's oneDNN computes its bf16 fpmath mode in fp32"
                     : "the backend computes it in fp32");
        *timed = 0;
    }
    return TB_OK;
}

static int check_size(tb_backend *be, gemm_bufs *f, int n, tb_compare *cmp)
{
    gemm_case c = {be, f, n, TB_MATH_F32};
    size_t bytes = (size_t)n * n * sizeof(float);
    for (int k = 0; k < 2; k++) {
        c.math = k ? TB_MATH_TF32 : TB_MATH_F32;
        TB_TRY(run_gemm(&c));
        TB_TRY(be->copy_d2h(be, f->hc[k], f->c, bytes, NULL));
        TB_TRY(be->sync(be));
    }
    return tb_compare_floats(f->hc[0], f->hc[1], (size_t)n * n, TF32_TOL, cmp);
}

/* The tf32 rows' note: they are timed only where TF32 changed a probe
 * GEMM's output (probe_math). */
static void tf32_note(const tb_bench *b, char *note, size_t cap)
{
    if (strcmp(b->info.backend, "cpu") != 0) {
        snprintf(note, cap, "TF32 tensor-op math vs fp32; output vs fp32 GEMM");
        return;
    }
    snprintf(note, cap, "CPU: TF32 = oneDNN's bf16 fpmath mode, which here changes the products "
             "(" TB_TF32_PROBE_DIFFERED "): bf16 multiplies; output vs fp32 GEMM");
}

/* cmp == NULL: TF32 was refused; the fp32 rows only. */
static int add_rows(tb_bench *b, const gb_results *r, int n, const tb_compare *cmp)
{
    const gb_run *run[NV];
    for (int v = 0; v < (cmp ? NV : V_TF32); v++)
        TB_TRY(opb_need(r, &run[v], "gemm_%s/%d", vnames[v], n));
    for (int tf = 0; tf < (cmp ? 2 : 1); tf++) {
        tb_result_row row;
        tb_bench_row(b, &row, tf ? "tf32" : "fp32", !tf, "n", n, "gemm time");
        if (tf)
            TB_TRY(opb_fill_variant(&row, run[V_TF32], run[V_F32], run[V_F32_AGAIN], 1e3, "ms"));
        else
            TB_TRY(opb_fill_base(&row, run[V_F32], run[V_F32_AGAIN], 1e3, "ms"));
        row.rate = 2.0 * n * (double)n * n / (row.median * 1e-3) / 1e9;
        snprintf(row.rate_unit, sizeof row.rate_unit, "GFLOP/s");
        if (tf) {
            opb_set_check(&row, cmp, "fp32 GEMM");
            tf32_note(b, row.note, sizeof row.note);
        }
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

/* The checks' buffers of the largest size: host inputs (seeded), outputs
 * read back, and device a, b, c (size_alloc). */
static int alloc_bufs(tb_backend *be, gemm_bufs *f, int max_n)
{
    size_t n2 = (size_t)max_n * max_n, bytes = n2 * sizeof(float);
    TB_TRY(be->host_alloc(be, (void **)&f->ha, bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&f->hb, bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&f->hc[0], bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&f->hc[1], bytes, 0));
    tb_rng_fill(f->ha, n2, 1, -1.0, 1.0);
    tb_rng_fill(f->hb, n2, 2, -1.0, 1.0);
    gemm_bufs dev;
    TB_TRY(size_alloc(be, f, max_n, &dev));
    f->a = dev.a;
    f->b = dev.b;
    f->c = dev.c;
    return TB_OK;
}

static void free_bufs(tb_backend *be, gemm_bufs *f)
{
    size_free(be, f);
    be->host_free(be, f->ha, 0);
    be->host_free(be, f->hb, 0);
    be->host_free(be, f->hc[0], 0);
    be->host_free(be, f->hc[1], 0);
}


typedef struct tf32_state {
    int sizes[8], nsizes;
    int tf32_ok;               /* the tf32 cases are timed (probe_math; else why says why not) */
    int math_differs;          /* TF32's output is not fp32's, bitwise (probe_math) */
    int nplanned;              /* sizes[nsizes..nplanned): not timed, n/a rows (fp32_only_cpu) */
    const char *na_why;
    char why[256];
    gemm_bufs f;               /* host inputs, and the checks' device buffers */
    sized_case *cases;
    size_bufs *bufs;           /* (nsizes): what the cases time */
} tf32_state;

static int alloc_sizes(tb_bench *b, tf32_state *st)
{
    st->bufs = calloc((size_t)st->nsizes, sizeof *st->bufs);
    if (!st->bufs)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    for (int s = 0; s < st->nsizes; s++) {
        st->bufs[s] = (size_bufs){b->be, &st->f, {0}, st->sizes[s]};
        TB_TRY(size_alloc(b->be, &st->f, st->sizes[s], &st->bufs[s].dev));
    }
    return TB_OK;
}

static int setup(tb_bench *b, void *state, opb_set *set)
{
    tf32_state *st = state;
    st->nsizes = st->nplanned = plan_sizes(b->profile, st->sizes);
    TB_TRY(probe_math(b->be, &st->tf32_ok, &st->math_differs, st->why, sizeof st->why));
    st->na_why = fp32_only_cpu(b, st->math_differs);
    while (st->na_why && st->nsizes > 1 && st->sizes[st->nsizes - 1] > 2048)
        st->nsizes--;
    st->cases = calloc((size_t)st->nsizes * NV, sizeof *st->cases);
    if (!st->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    TB_TRY(alloc_bufs(b->be, &st->f, st->sizes[st->nsizes - 1]));
    TB_TRY(alloc_sizes(b, st));
    for (int s = 0; s < st->nsizes; s++)
        for (int v = 0; v < NV; v++) {
            if (vmath[v] == TB_MATH_TF32 && !st->tf32_ok)
                continue;
            sized_case *c = &st->cases[s * NV + v];
            *c = (sized_case){{b->be, &st->bufs[s].dev, st->sizes[s], vmath[v]}, &st->bufs[s]};
            /* the A/A copy runs f32's case (warmed up and rebuilt with it) */
            gemm_case *arg = v == V_F32_AGAIN ? &st->cases[s * NV + V_F32].g : &c->g;
            TB_TRY(opb_register(b, set, plan_warmups(st->sizes[s]), run_gemm, arg,
                                plan_iterations(b->profile, st->sizes[s]), "gemm_%s/%d",
                                vnames[v], st->sizes[s]));
            /* the baseline rebuilds the size's buffers; from n = 1024 on
             * (a call of 2 GFLOP and more) no call after it: the rebuild
             * touched every page and oneDNN's primitive outlives them */
            if (v == V_F32)
                TB_TRY(opb_set_rebuild(set, set->n - 1, size_rebuild,
                                       st->sizes[s] >= 1024 ? 0 : OPB_REBUILD_WARMUPS));
            /* f32, f32_again, tf32 of a size are registered in a row (tf32,
             * the last, may be left out): both compared with f32. */
            if (v != V_F32)
                TB_TRY(opb_compare(set, set->n - 1, set->n - 1 - v, v == V_F32_AGAIN));
        }
    return TB_OK;
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    tf32_state *st = state;
    for (int s = 0; s < st->nsizes; s++) {
        tb_compare cmp;
        if (st->tf32_ok)
            TB_TRY(check_size(b->be, &st->f, st->sizes[s], &cmp));
        TB_TRY(add_rows(b, r, st->sizes[s], st->tf32_ok ? &cmp : NULL));
    }
    for (int s = st->nsizes; s < st->nplanned; s++)
        for (int tf = 0; tf < 2; tf++) {
            TB_TRY(opb_add_na(b, tf ? "tf32" : "fp32", "gemm time", st->na_why));
            snprintf(b->res.rows[b->res.n - 1].param_name, sizeof b->res.rows[0].param_name, "n");
            b->res.rows[b->res.n - 1].param_value = st->sizes[s];
        }
    return st->tf32_ok ? TB_OK : opb_add_na(b, "tf32", "gemm time", st->why);
}

static int plot(tb_bench *b, void *state)
{
    (void)state;
    TB_TRY(opb_plot(b, "tf32", "Square GEMM rate, fp32 vs TF32 math", "n (n x n x n)",
                    "GFLOP/s", 2, OPB_Y_RATE));
    return opb_plot(b, "tf32_speedup", "TF32 over fp32 GEMM (paired estimate, 95% CI)", "n (n x n x n)",
                    "speedup (x)", 2, OPB_Y_SPEEDUP);
}

static void teardown(tb_bench *b, void *state)
{
    tf32_state *st = state;
    free(st->cases);
    for (int s = 0; st->bufs && s < st->nsizes; s++)
        size_free(b->be, &st->bufs[s].dev);
    free(st->bufs);
    free_bufs(b->be, &st->f);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    tf32_state st = {0};
    return opb_run(b, &sweep, &st);
}

static const tb_technique technique = {
    .name = "tf32",
    .headline = "tf32",
    .what = "Square GEMMs, fp32 vs TF32 math, n = 256 .. 4096 (full: 8192).",
    .est_seconds = {33, 600, 3, 14}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {34, 540, 2, 12},
    .order = 300,
    /* 4 rows and tf32_speedup too where TF32 changes the math (probe_math) */
    .tiny = {.min_rows = 3, .plots = "tf32"},
};

TB_OPB_MAIN(technique, run)
