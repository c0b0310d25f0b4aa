/*
 * fused_attention.c - `bazel run //bench:fused_attention`: multi-head
 * attention with the scores materialized (S = scale Q K^T, mask, softmax,
 * P V: eager PyTorch) vs fused (tiled, online softmax, the T x T matrix
 * never stored: scaled_dot_product_attention's flash kernel), forward and
 * forward+backward, causal and not, over sequence lengths 128 .. 4096 at
 * B = 1, D = 64, H = 4 in the full profile and H = 1 in the default and tiny
 * ones (every sequence length stays; one head keeps the default profile in
 * its time budget, and per-head work is the same). Baseline: manual (the
 * technique off).
 *
 * Memory: memory_bytes is the peak the backend's allocator saw above what
 * was in use before one call (forward, or forward then backward), the
 * `saved` buffer kept between them included: 4 B H T^2 bytes for manual's
 * probabilities, 4 B H T for fused's logsumexp, plus what the op allocates
 * itself (lib/backend/backend.h, attention_workspace); the note repeats what
 * attention_workspace declares.
 *
 * Writes results/<device>/fused_attention.csv and plots/<device>/
 * fused_attention.* (time), fused_attention_speedup.* and
 * fused_attention_memory.* . Correctness: fused against manual, out (forward)
 * and the worst of dq, dk, dv (backward), tolerances ATTN_TOL_*.
 *
 * What "fused" is here: tunebench's own tiled kernel in fp32 (on the CPU,
 * AVX-512 tile products where the CPU has it, lib/backend/cpu/attention.c;
 * on a GPU, CUDA cores with 16-32 row tiles; no tensor cores), not cuDNN's or
 * PyTorch's flash attention. Every fused row's note says so, so that its
 * speedup is never read as theirs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness/opbench.h"

#define ATTN_B 1
/* Heads: set from the profile in run setup (see the header comment). */
static int attn_heads = 1;
#define ATTN_D 64
/* Relative to the largest manual value (tb_max_rel_err). Each variant is
 * within 5e-6 (out) and 1e-5 (gradients) of the float64 reference in
 * lib/backend/cpu/attention_test.c; their difference within the sum, with margin for
 * longer rows than the test's. */
#define ATTN_TOL_FWD 2e-5
#define ATTN_TOL_BWD 5e-5

/* The fused rows' label (see the header comment). */
#define FUSED_LABEL "own fp32 kernel, no tensor cores (not cuDNN/PyTorch flash)"

enum { V_MANUAL, V_MANUAL_AGAIN, V_FUSED, NV };
static const char *const vnames[NV] = {"manual", "manual_again", "fused"};
static const tb_attn_variant vvar[NV] = {TB_ATTN_MANUAL, TB_ATTN_MANUAL, TB_ATTN_FUSED};

typedef struct attn_bufs {
    float *q, *k, *v, *out, *dout, *dq, *dk, *dv, *saved; /* device, sized for the largest T */
    float *hq, *hk, *hv, *hdout, *hres[2][4];             /* host: [variant][out dq dk dv] */
    size_t max_n, max_saved;
} attn_bufs;

typedef struct attn_case {
    tb_backend *be;
    attn_bufs *bf;             /* its point's device buffers (attn_dev_alloc) */
    const attn_bufs *host;     /* the host inputs they are filled from */
    tb_attn_desc d;
    tb_attn_variant v;
    int bwd;
} attn_case;

static int run_case(void *arg)
{
    attn_case *c = arg;
    const attn_bufs *f = c->bf;
    TB_TRY(c->be->attention_fwd(c->be, c->v, &c->d, f->q, f->k, f->v, f->out, f->saved));
    if (!c->bwd)
        return TB_OK;
    return c->be->attention_bwd(c->be, c->v, &c->d, f->q, f->k, f->v, f->out, f->dout, f->saved,
                                f->dq, f->dk, f->dv);
}

static tb_attn_desc make_desc(int seq, int causal)
{
    return (tb_attn_desc){ATTN_B, attn_heads, seq, ATTN_D, causal, 1.0f / sqrtf((float)ATTN_D)};
}

static int plan_seqs(int profile, int *seqs)
{
    int hi = profile == TB_PROFILE_TINY ? 256 : 4096, n = 0;
    for (int t = 128; t <= hi; t *= 2)
        seqs[n++] = t;
    return n;
}

/* About 2 GFLOP of forward per repetition in default: several iterations
 * at short sequences, one from T = 1024 on. */
static int64_t plan_iterations(int profile, int seq)
{
    double flops = profile == TB_PROFILE_FULL ? 1e10 : profile == TB_PROFILE_TINY ? 5e7 : 2e9;
    int64_t it = (int64_t)(flops / (4.0 * ATTN_B * attn_heads * (double)seq * seq * ATTN_D));
    return it < 1 ? 1 : it;
}

static void attn_dev_free(tb_backend *be, attn_bufs *g)
{
    float **dev[] = {&g->q, &g->k, &g->v, &g->out, &g->dout, &g->dq, &g->dk, &g->dv, &g->saved};
    for (int i = 0; i < 9; i++) {
        be->dev_free(be, *dev[i]);
        *dev[i] = NULL;
    }
}

/* The device buffers of one point (g->max_n, g->max_saved floats; no host
 * arrays): q, k, v and dout from the host inputs' first floats, every page
 * of the others touched (a first write is not timed). What the cases of
 * one (T, mask, direction) run on; its manual baseline rebuilds them (new
 * addresses and pages: what another run of the program would draw), and
 * fused and the A/A copy, compared with it, change build with it. */
static int attn_dev_alloc(tb_backend *be, const attn_bufs *host, attn_bufs *g)
{
    int rc;
    size_t nb = g->max_n * sizeof(float);
    float **dev[] = {&g->q, &g->k, &g->v, &g->dout, &g->out, &g->dq, &g->dk, &g->dv};
    const float *src[] = {host->hq, host->hk, host->hv, host->hdout};
    for (int i = 0; i < 8; i++)
        *dev[i] = NULL;
    g->saved = NULL;
    for (int i = 0; i < 8; i++) {
        TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)dev[i], nb), out_free);
        if (i < 4)
            TB_TRY_GOTO(rc, be->copy_h2d(be, *dev[i], src[i], nb, NULL), out_free);
        else
            TB_TRY_GOTO(rc, be->memset(be, *dev[i], 0, nb, NULL), out_free);
    }
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&g->saved, g->max_saved * sizeof(float)),
                out_free);
    TB_TRY_GOTO(rc, be->memset(be, g->saved, 0, g->max_saved * sizeof(float), NULL), out_free);
    return be->sync(be);
out_free:
    attn_dev_free(be, g);
    return rc;
}

/* opb_set_rebuild: new buffers before the old are freed, so that the
 * allocator cannot hand the same blocks back. */
static int case_rebuild(void *arg)
{
    attn_case *c = arg;
    attn_bufs old = *c->bf;
    TB_TRY(attn_dev_alloc(c->be, c->host, c->bf));
    attn_dev_free(c->be, &old);
    return TB_OK;
}

/* The checks' buffers for the longest sequence: host inputs (seeded),
 * results read back, and device buffers (attn_dev_alloc). */
static int alloc_bufs(tb_backend *be, attn_bufs *f, int max_seq)
{
    f->max_n = (size_t)ATTN_B * attn_heads * max_seq * ATTN_D;
    f->max_saved = (size_t)ATTN_B * attn_heads * max_seq * (size_t)max_seq;
    size_t nb = f->max_n * sizeof(float);
    float **host[] = {&f->hq, &f->hk, &f->hv, &f->hdout};
    for (int i = 0; i < 4; i++) {
        TB_TRY(be->host_alloc(be, (void **)host[i], nb, 0));
        tb_rng_fill(*host[i], f->max_n, (uint64_t)i + 1, -1.0, 1.0);
    }
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 4; i++)
            TB_TRY(be->host_alloc(be, (void **)&f->hres[v][i], nb, 0));
    return attn_dev_alloc(be, f, f);
}

static void free_bufs(tb_backend *be, attn_bufs *f)
{
    attn_dev_free(be, f);
    float *host[] = {f->hq, f->hk, f->hv, f->hdout};
    for (int i = 0; i < 4; i++)
        be->host_free(be, host[i], 0);
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 4; i++)
            be->host_free(be, f->hres[v][i], 0);
}

/* Peak memory of one call above what is in use before it, its own saved
 * buffer included; then the outputs are read back into hres[variant]. */
static int measure_call(tb_backend *be, attn_bufs *f, const tb_attn_desc *d, tb_attn_variant v,
                        int bwd, double *mem)
{
    size_t saved_bytes = 0, in_use = 0, peak = 0;
    float *saved = NULL;
    TB_TRY(be->attention_workspace(be, v, d, &saved_bytes, NULL));
    TB_TRY(be->sync(be));
    TB_TRY(be->mem_stats(be, &in_use, NULL));
    TB_TRY(be->mem_reset_peak(be));
    TB_TRY(be->dev_alloc(be, (void **)&saved, saved_bytes));
    attn_case c = {be, f, f, *d, v, bwd};
    attn_bufs g = *f;
    g.saved = saved;
    c.bf = &g;
    int rc = run_case(&c);
    if (rc == TB_OK)
        rc = be->sync(be);
    if (rc == TB_OK)
        rc = be->mem_stats(be, NULL, &peak);
    be->dev_free(be, saved);
    TB_TRY(rc);
    *mem = (double)(peak - in_use);
    size_t bytes = (size_t)d->batch * d->heads * d->seq * d->head_dim * sizeof(float);
    float *src[4] = {f->out, f->dq, f->dk, f->dv};
    for (int i = 0; i < (bwd ? 4 : 1); i++)
        TB_TRY(be->copy_d2h(be, f->hres[v][i], src[i], bytes, NULL));
    return be->sync(be);
}

typedef struct attn_check {
    double mem[2][2];          /* [bwd][variant] */
    tb_compare cmp[2];         /* [bwd] fused vs manual: out, or the worst gradient */
} attn_check;

static int check_point(tb_backend *be, attn_bufs *f, const tb_attn_desc *d, attn_check *chk)
{
    size_t n = (size_t)d->batch * d->heads * d->seq * d->head_dim;
    for (int bwd = 0; bwd < 2; bwd++) {
        for (int v = 0; v < 2; v++)
            TB_TRY(measure_call(be, f, d, (tb_attn_variant)v, bwd, &chk->mem[bwd][v]));
        if (!bwd)
            TB_TRY(tb_compare_floats(f->hres[0][0], f->hres[1][0], n, ATTN_TOL_FWD,
                                     &chk->cmp[0]));
        for (int i = 1; bwd && i < 4; i++) {
            tb_compare c;
            TB_TRY(tb_compare_floats(f->hres[0][i], f->hres[1][i], n, ATTN_TOL_BWD, &c));
            if (i == 1 || c.max_rel > chk->cmp[1].max_rel)
                chk->cmp[1] = c;
        }
    }
    return TB_OK;
}

static int add_rows(tb_bench *b, const gb_results *r, const tb_attn_desc *d, int bwd,
                    const attn_check *chk)
{
    const gb_run *run[NV];
    for (int v = 0; v < NV; v++)
        TB_TRY(opb_need(r, &run[v], "attn_%s_%s_%s/%d", bwd ? "fwdbwd" : "fwd", vnames[v],
                        d->causal ? "causal" : "full", d->seq));
    char metric[48];
    snprintf(metric, sizeof metric, "%s time%s", bwd ? "fwd+bwd" : "fwd",
             d->causal ? ", causal" : "");
    for (int fused = 0; fused < 2; fused++) {
        tb_attn_variant v = fused ? TB_ATTN_FUSED : TB_ATTN_MANUAL;
        tb_result_row row;
        tb_bench_row(b, &row, fused ? "fused" : "manual", !fused, "seq", d->seq, metric);
        if (fused)
            TB_TRY(opb_fill_variant(&row, run[V_FUSED], run[V_MANUAL], run[V_MANUAL_AGAIN], 1e3,
                                    "ms"));
        else
            TB_TRY(opb_fill_base(&row, run[V_MANUAL], run[V_MANUAL_AGAIN], 1e3, "ms"));
        row.memory_bytes = chk->mem[bwd][v];
        size_t saved = 0, temp = 0;
        TB_TRY(b->be->attention_workspace(b->be, v, d, &saved, &temp));
        char verdict[160] = "";
        if (fused) {
            opb_set_check(&row, &chk->cmp[bwd], "baseline");
            tb_compare_format(&chk->cmp[bwd], verdict, sizeof verdict);
        }
        snprintf(row.note, sizeof row.note,
                 "%sB=%d H=%d D=%d; workspace: saved %zu B, temp %zu B%s%s",
                 fused ? FUSED_LABEL "; " : "", d->batch, d->heads, d->head_dim, saved, temp,
                 fused ? (bwd ? "; dq dk dv vs manual: " : "; out vs manual: ") : "", verdict);
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

typedef struct attn_state {
    int seqs[8], nseqs;
    attn_bufs f;               /* host inputs, and the checks' device buffers */
    attn_case *cases;          /* nseqs * 2 masks * 2 directions * NV */
    attn_bufs *devs;           /* nseqs * 2 masks * 2 directions: what the cases run on */
} attn_state;

static int setup(tb_bench *b, void *state, opb_set *set)
{
    attn_state *st = state;
    attn_heads = b->profile == TB_PROFILE_FULL ? 4 : 1;
    st->nseqs = plan_seqs(b->profile, st->seqs);
    st->cases = calloc((size_t)st->nseqs * 4 * NV, sizeof *st->cases);
    if (!st->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    TB_TRY(alloc_bufs(b->be, &st->f, st->seqs[st->nseqs - 1]));
    st->devs = calloc((size_t)st->nseqs * 4, sizeof *st->devs);
    if (!st->devs)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    attn_case *c = st->cases;
    attn_bufs *g = st->devs;
    for (int s = 0; s < st->nseqs; s++)
        for (int causal = 0; causal < 2; causal++)
            for (int bwd = 0; bwd < 2; bwd++, g++) {
                int t = st->seqs[s];
                g->max_n = (size_t)ATTN_B * attn_heads * t * ATTN_D;
                g->max_saved = (size_t)ATTN_B * attn_heads * t * (size_t)t;
                TB_TRY(attn_dev_alloc(b->be, &st->f, g));
                for (int v = 0; v < NV; v++, c++) {
                    *c = (attn_case){b->be, g, &st->f, make_desc(t, causal), vvar[v], bwd};
                    /* Nothing to warm but caches from T = 1024 on: one warm-up. */
                    /* the A/A copy runs manual's case (warmed up and rebuilt with it) */
                    attn_case *arg = v == V_MANUAL_AGAIN ? c - 1 : c;
                    TB_TRY(opb_register(b, set, st->seqs[s] >= 1024 ? 1 : OPB_WARMUPS, run_case,
                                        arg, plan_iterations(b->profile, st->seqs[s]),
                                        "attn_%s_%s_%s/%d", bwd ? "fwdbwd" : "fwd",
                                        vnames[v], causal ? "causal" : "full",
                                        st->seqs[s]));
                    /* manual, manual_again, fused in a row: compared with manual,
                     * which rebuilds the point's buffers */
                    if (v != V_MANUAL)
                        TB_TRY(opb_compare(set, set->n - 1, set->n - 1 - v, v == V_MANUAL_AGAIN));
                    else
                        TB_TRY(opb_set_rebuild(set, set->n - 1, case_rebuild,
                                               OPB_REBUILD_WARMUPS));
                }
            }
    return TB_OK;
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    attn_state *st = state;
    for (int s = 0; s < st->nseqs; s++)
        for (int causal = 0; causal < 2; causal++) {
            tb_attn_desc d = make_desc(st->seqs[s], causal);
            attn_check chk;
            TB_TRY(check_point(b->be, &st->f, &d, &chk));
            TB_TRY(add_rows(b, r, &d, 0, &chk));
            TB_TRY(add_rows(b, r, &d, 1, &chk));
        }
    return TB_OK;
}

static int plot(tb_bench *b, void *state)
{
    (void)state;
    TB_TRY(opb_plot(b, "fused_attention", "Attention time (B=1, H=4, D=64)", "sequence length",
                    "time (ms)", 2, OPB_Y_MEDIAN));
    TB_TRY(opb_plot(b, "fused_attention_speedup", "Fused over manual attention (median, 95% CI)",
                    "sequence length", "speedup (x)", 2, OPB_Y_SPEEDUP));
    return opb_plot(b, "fused_attention_memory", "Attention peak memory per call",
                    "sequence length", "bytes", 2, OPB_Y_MEMORY);
}

static void teardown(tb_bench *b, void *state)
{
    attn_state *st = state;
    free(st->cases);
    for (int i = 0; st->devs && i < st->nseqs * 4; i++)
        attn_dev_free(b->be, &st->devs[i]);
    free(st->devs);
    free_bufs(b->be, &st->f);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    attn_state st = {0};
    return opb_run(b, &sweep, &st);
}

static const tb_technique technique = {
    .name = "fused_attention",
    .headline = "fused",
    .what = "Manual vs fused attention (forward, forward+backward; causal and not) over "
            "sequence lengths 128 .. 4096: time and memory. Fused is tunebench's own fp32 "
            "kernel (no tensor cores), not cuDNN's or PyTorch's flash attention.",
    .est_seconds = {33, 420, 6, 18}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {35, 380, 4, 16},
    .order = 310,
    .tiny = {.min_rows = 8,
             .plots = "fused_attention,fused_attention_speedup,fused_attention_memory"},
};

TB_OPB_MAIN(technique, run)
