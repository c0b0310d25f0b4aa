/*
 * fused_attention.c - `bazel run //bench:fused_attention`: multi-head
 * attention with the scores materialized (S = scale Q K^T, mask, softmax,
 * P V: eager PyTorch) vs fused (tiled, online softmax, the T x T matrix
 * never stored: scaled_dot_product_attention's flash kernel), forward and
 * forward+backward, causal and not, over sequence lengths 128 .. 4096 at
 * D = 64 (512, 1024 and 4096 in the default profile). Every point does the
 * attention work of GPT-2's 12 heads at context 1024, batch 1 (default and
 * gpu profiles) or 2 (full): B H T^2 = 12 * 1024^2 (twice that), so
 * B H = 12 (1024 / T)^2, at least 1 (shorter contexts get the batch that
 * keeps the FLOPs, longer ones fewer heads). Manual's (B, H, T, T)
 * probabilities are then 48 MB (96 MB) at every length: out of a CPU's
 * last-level cache, as in training. With one head at T <= 1024 they stay in
 * cache, and there the fused kernel, which recomputes the scores in its
 * backward (seven T x T x D products to manual's six, both at the FMA peak),
 * loses on forward+backward (0.85x at T = 512 on a 2-core AVX-512 EPYC);
 * the tiny profile (tests) keeps one head. Baseline: manual (the technique
 * off).
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

#define ATTN_D 64
#define ATTN_GPT2_HEADS 12
#define ATTN_GPT2_CONTEXT 1024
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

/* The GPT-2 batch whose attention work every point does (see the header
 * comment): 2 in full, 1 in default and gpu (a GPU's manual path makes one
 * GEMM call per head: full's 1536 heads at T = 128 would spend its short
 * budget on launches), 0 in tiny: one head at every length. */
static int plan_gpt2_batch(const tb_bench *b)
{
    if (b->profile == TB_PROFILE_TINY)
        return 0;
    return b->run_profile == TB_PROFILE_FULL ? 2 : 1;
}

/* Heads over the batch, B H, at one sequence length: gpt2_batch times the
 * work of GPT-2's 12 heads at context 1024, at least one head. */
static size_t plan_batch_heads(int gpt2_batch, int seq)
{
    double r = (double)ATTN_GPT2_CONTEXT / seq;
    double bh = gpt2_batch * ATTN_GPT2_HEADS * r * r;
    return bh < 1.0 ? 1 : (size_t)(bh + 0.5);
}

/* B H split as GPT-2's 12 heads times a batch where it divides, else one
 * batch of B H heads. */
static tb_attn_desc make_desc(int gpt2_batch, int seq, int causal)
{
    size_t bh = plan_batch_heads(gpt2_batch, seq);
    int heads = bh % ATTN_GPT2_HEADS == 0 ? ATTN_GPT2_HEADS : (int)bh;
    int batch = (int)(bh / (size_t)heads);
    return (tb_attn_desc){batch, heads, seq, ATTN_D, causal, 1.0f / sqrtf((float)ATTN_D)};
}

static size_t desc_floats(const tb_attn_desc *d)
{
    return (size_t)d->batch * d->heads * d->seq * d->head_dim;
}

static size_t desc_probs(const tb_attn_desc *d)
{
    return (size_t)d->batch * d->heads * d->seq * (size_t)d->seq;
}

/* Sequence lengths: 128 .. 4096 in full; 512, 1024 and 4096 in default (at
 * GPT-2's work per point every length costs as much, and a round of four
 * left 5 rounds in the budget); 128 and 256 in tiny. */
static int plan_seqs(int profile, int *seqs)
{
    if (profile == TB_PROFILE_DEFAULT) {
        static const int def[] = {512, 1024, 4096};
        for (int i = 0; i < 3; i++)
            seqs[i] = def[i];
        return 3;
    }
    int hi = profile == TB_PROFILE_TINY ? 256 : 4096, n = 0;
    for (int t = 128; t <= hi; t *= 2)
        seqs[n++] = t;
    return n;
}

/* Iterations per repetition: about 2 GFLOP of forward in default (one
 * call everywhere outside the tiny profile, whose points are small). */
static int64_t plan_iterations(int profile, const tb_attn_desc *d)
{
    double flops = profile == TB_PROFILE_FULL ? 1e10 : profile == TB_PROFILE_TINY ? 5e7 : 2e9;
    int64_t it = (int64_t)(flops / (4.0 * desc_probs(d) * d->head_dim));
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

/* The checks' buffers for the largest point (max_n and max_saved set by
 * the caller): host inputs (seeded), results read back, and device buffers
 * (attn_dev_alloc). */
static int alloc_bufs(tb_backend *be, attn_bufs *f)
{
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

/* One call with a saved buffer of its own, allocated inside the call so
 * that its peak counts it. */
typedef struct saved_call {
    attn_case c;               /* c.bf: &g */
    attn_bufs g;               /* the point's buffers, g.saved the call's own */
    size_t saved_bytes;
} saved_call;

static int call_with_saved(void *arg)
{
    saved_call *s = arg;
    TB_TRY(s->c.be->dev_alloc(s->c.be, (void **)&s->g.saved, s->saved_bytes));
    return run_case(&s->c);
}

/* Peak memory of one call above what is in use before it, its own saved
 * buffer included; then the outputs are read back into hres[variant]. */
static int measure_call(tb_backend *be, attn_bufs *f, const tb_attn_desc *d, tb_attn_variant v,
                        int bwd, double *mem)
{
    saved_call s = {.c = {be, f, f, *d, v, bwd}, .g = *f};
    s.g.saved = NULL;
    s.c.bf = &s.g;
    TB_TRY(be->attention_workspace(be, v, d, &s.saved_bytes, NULL));
    int rc = tb_bench_peak_of(be, call_with_saved, &s, mem);
    be->dev_free(be, s.g.saved);
    TB_TRY(rc);
    size_t bytes = desc_floats(d) * sizeof(float);
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
    size_t n = desc_floats(d);
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
    st->nseqs = plan_seqs(b->profile, st->seqs);
    st->cases = calloc((size_t)st->nseqs * 4 * NV, sizeof *st->cases);
    if (!st->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    for (int s = 0; s < st->nseqs; s++) {
        tb_attn_desc d = make_desc(plan_gpt2_batch(b), st->seqs[s], 0);
        size_t n = desc_floats(&d), p = desc_probs(&d);
        st->f.max_n = n > st->f.max_n ? n : st->f.max_n;
        st->f.max_saved = p > st->f.max_saved ? p : st->f.max_saved;
    }
    TB_TRY(alloc_bufs(b->be, &st->f));
    st->devs = calloc((size_t)st->nseqs * 4, sizeof *st->devs);
    if (!st->devs)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    attn_case *c = st->cases;
    attn_bufs *g = st->devs;
    for (int s = 0; s < st->nseqs; s++)
        for (int causal = 0; causal < 2; causal++)
            for (int bwd = 0; bwd < 2; bwd++, g++) {
                tb_attn_desc d = make_desc(plan_gpt2_batch(b), st->seqs[s], causal);
                g->max_n = desc_floats(&d);
                g->max_saved = desc_probs(&d);
                TB_TRY(attn_dev_alloc(b->be, &st->f, g));
                for (int v = 0; v < NV; v++, c++) {
                    *c = (attn_case){b->be, g, &st->f, d, vvar[v], bwd};
                    /* Nothing to warm but caches from T = 1024 on: one warm-up. */
                    /* the A/A copy runs manual's case (warmed up and rebuilt with it) */
                    attn_case *arg = v == V_MANUAL_AGAIN ? c - 1 : c;
                    TB_TRY(opb_register(b, set, st->seqs[s] >= 1024 ? 1 : OPB_WARMUPS, run_case,
                                        arg, plan_iterations(b->profile, &d),
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
            tb_attn_desc d = make_desc(plan_gpt2_batch(b), st->seqs[s], causal);
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
    TB_TRY(opb_plot(b, "fused_attention", "Attention time (B H T^2 fixed, D=64)", "sequence length",
                    "time (ms)", 2, OPB_Y_MEDIAN));
    TB_TRY(opb_plot(b, "fused_attention_speedup",
                    "Fused over manual attention (paired estimate, 95% CI)", "sequence length",
                    "speedup (x)", 2, OPB_Y_SPEEDUP));
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
    /* a decoder's training step: forward and backward, causal */
    .headline_metric = "fwd+bwd time, causal",
    .what = "Manual vs fused attention (forward, forward+backward; causal and not) over "
            "sequence lengths 128 .. 4096 (default: 512, 1024, 4096), each at the FLOPs of GPT-2's 12 "
            "heads at context 1024: time and memory. Fused is tunebench's own fp32 "
            "kernel (no tensor cores), not cuDNN's or PyTorch's flash attention.",
    .est_seconds = {48, 420, 6, 14}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {50, 380, 4, 16},
    .order = 310,
    .tiny = {.min_rows = 8,
             .plots = "fused_attention,fused_attention_speedup,fused_attention_memory"},
};

TB_OPB_MAIN(technique, run)
