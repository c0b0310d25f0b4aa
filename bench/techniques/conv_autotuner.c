/*
 * conv_autotuner.c - `bazel run //bench:conv_autotuner`: convolution with
 * the backend's default algorithm vs the autotuned best (conv_find, the
 * analogue of torch.backends.cudnn.benchmark = True), forward and
 * forward+backward (data and filter gradients), over shapes:
 *   - the tuning talk's: 64 filters 3x3, batch 32, 64 channels, 64x64;
 *   - the small CNN's four convolution shapes (Fashion-MNIST 28x28, batch 32);
 *   - ResNet-ish 3x3 layers at 56x56 (64 ch), 28x28 (128), 14x14 (256),
 *     batch 8 (32 in the full profile).
 * Baseline: the default algorithm (the technique off).
 *
 * Besides, per shape (default profile: the small CNN's shapes only, see
 * plan_shapes; every note gives the first tuning's time): the one-off tuning cost (conv_find for the forward,
 * backward-data and backward-filter of one new shape: its own row), and a
 * step whose batch size changes every time: every new shape is tuned again
 * (autotuned), or gets its default algorithm's primitive made (baseline),
 * so that row is the cost per step of cudnn.benchmark with varying shapes.
 * Each such call uses a batch size no recent call used (264 sizes centered
 * on the shape's batch where it can be, see cold_batch, cycling every
 * COLD_CYCLE calls: the rounds engine makes as many calls as its warm-up
 * and rounds need, and a cycle longer than the CPU backend's 64-entry
 * primitive cache means every call misses it), so no cache helps it; every
 * cold case does the same work over a cycle, and the note gives the
 * range and mean of its batches.
 *
 * Writes results/<device>/conv_autotuner.csv and plots/<device>/
 * conv_autotuner_speedup.* . The chosen algorithms are in each autotuned
 * row's note. Correctness: the autotuned outputs (y; dx and dw) against the
 * default algorithm's, tolerance CONV_TOL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/opbench.h"

/* Relative to the largest default value (tb_max_rel_err): algorithms sum
 * in different orders, and Winograd or FFT transforms round differently. */
#define CONV_TOL 1e-4

typedef struct conv_shape {
    const char *what;
    int n, c, h, w, k, r, stride;
    int talk;                  /* the tuning talk's shape: cite their numbers */
} conv_shape;

static const conv_shape shapes_default[] = {
    {"tuning talk: 64 filters 3x3, 64 ch, 64x64", 32, 64, 64, 64, 64, 3, 1, 1},
    {"small CNN conv1: 1->16 ch, 28x28", 32, 1, 28, 28, 16, 3, 1, 0},
    {"small CNN resblock: 16->16 ch, 14x14", 32, 16, 14, 14, 16, 3, 1, 0},
    {"small CNN conv stride 2: 16->32 ch, 14x14", 32, 16, 14, 14, 32, 3, 2, 0},
    {"small CNN resblock: 32->32 ch, 7x7", 32, 32, 7, 7, 32, 3, 1, 0},
    {"ResNet-ish 3x3: 64 ch, 56x56", 8, 64, 56, 56, 64, 3, 1, 0},
    {"ResNet-ish 3x3: 128 ch, 28x28", 8, 128, 28, 28, 128, 3, 1, 0},
    {"ResNet-ish 3x3: 256 ch, 14x14", 8, 256, 14, 14, 256, 3, 1, 0},
};
enum { NSHAPES = sizeof shapes_default / sizeof shapes_default[0], FIRST_RESNET = 5 };
static const conv_shape shapes_tiny[] = {
    {"small CNN conv1: 1->16 ch, 28x28", 16, 1, 28, 28, 16, 3, 1, 0},
    {"small CNN resblock: 32->32 ch, 7x7", 16, 32, 7, 7, 32, 3, 1, 0},
};

/* Warm cases (fixed batch) and cold cases (a new batch size every call). */
enum { C_FWD_DEF, C_FWD_DEF_AGAIN, C_FWD_TUNED, C_STEP_DEF, C_STEP_DEF_AGAIN, C_STEP_TUNED,
       C_FIND, C_VARY_DEF, C_VARY_DEF_AGAIN, C_VARY_TUNED, NCASES };
static const struct { const char *name; int cold, bwd, tuned, find; } case_defs[NCASES] = {
    {"fwd_default", 0, 0, 0, 0},    {"fwd_default_again", 0, 0, 0, 0},
    {"fwd_tuned", 0, 0, 1, 0},      {"step_default", 0, 1, 0, 0},
    {"step_default_again", 0, 1, 0, 0}, {"step_tuned", 0, 1, 1, 0},
    {"find", 1, 0, 1, 1},           {"vary_default", 1, 1, 0, 0},
    {"vary_default_again", 1, 1, 0, 0}, {"vary_tuned", 1, 1, 1, 0},
};

typedef struct conv_bufs {
    float *x, *w, *y, *dy, *dx, *dw;  /* device, sized for the largest shape and batch */
    float *hy[2], *hdx[2], *hdw[2];   /* host: [default, tuned] */
    size_t nx, nw, ny;
} conv_bufs;

typedef struct conv_case {
    tb_backend *be;
    const conv_bufs *bf;
    tb_conv_desc d;
    int algo[3];               /* per tb_conv_kind: default or tuned, for warm cases */
    int k, lane, calls;        /* case_defs index; cold: lane and calls so far */
} conv_case;

static tb_conv_desc make_desc(const conv_shape *s)
{
    return (tb_conv_desc){s->n, s->c, s->h, s->w, s->k, s->r, s->r, s->stride, s->r / 2,
                          TB_NCHW, TB_F32, TB_MATH_F32};
}

/* Calls of a cold lane before its batch sizes repeat: more than the CPU
 * backend's primitive cache holds (CONV_CACHE_SIZE, 64; LRU), so a size
 * is evicted before it comes back, while the buffers stay bounded however
 * many calls the rounds make. */
#define COLD_CYCLE 66

/* A shape's cold cases (find, vary_default, its A/A copy, vary_tuned),
 * each a lane of batch sizes its own. */
#define COLD_LANES 4
#define COLD_STEP (2 * COLD_LANES)

/* The smallest batch of a shape's cold lanes: the cycle centered on the
 * base where the base allows it. */
static int cold_lo(int base)
{
    int lo = base - COLD_STEP * (COLD_CYCLE / 4);
    return lo < 1 ? 1 : lo;
}

static int cold_hi(int base) { return cold_lo(base) + COLD_STEP * (COLD_CYCLE / 2) - 1; }

static double cold_mean(int base) { return 0.5 * (cold_lo(base) + cold_hi(base)); }

/* The batch of a cold case's call: lo + COLD_STEP (call / 2) + lane on
 * even calls, + (COLD_STEP - 1 - lane) on odd ones. Every (lane, call)
 * gets its own size (a lane owns two residues mod COLD_STEP), and each
 * pair of calls sums to the same in every lane: over a cycle the lanes do
 * the same work (their mean, cold_mean), so a lane's speed is not its
 * batches'. */
static int cold_batch(int base, int lane, int call)
{
    int off = call % 2 == 0 ? lane : COLD_STEP - 1 - lane;
    return cold_lo(base) + COLD_STEP * (call / 2) + off;
}

static int find_best(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind, int *algo,
                     char *name, size_t cap)
{
    tb_conv_algo_perf perf[TB_MAX_CONV_ALGOS];
    int got = 0;
    TB_TRY(be->conv_find(be, d, kind, perf, TB_MAX_CONV_ALGOS, &got));
    if (got < 1)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "conv_find returned no algorithm");
    *algo = perf[0].algo;
    if (name)
        snprintf(name, cap, "%s", perf[0].name);
    return TB_OK;
}

/* names: NULL, or where the tuned algorithms' names go. */
static int pick_algos_named(tb_backend *be, const tb_conv_desc *d, int tuned, int algo[3],
                            char (*names)[64])
{
    for (int kind = 0; kind < 3; kind++) {
        if (tuned)
            TB_TRY(find_best(be, d, (tb_conv_kind)kind, &algo[kind], names ? names[kind] : NULL,
                             64));
        else
            TB_TRY(be->conv_algo_default(be, d, (tb_conv_kind)kind, &algo[kind]));
    }
    return TB_OK;
}

static int pick_algos(tb_backend *be, const tb_conv_desc *d, int tuned, int algo[3])
{
    return pick_algos_named(be, d, tuned, algo, NULL);
}

/* What setup learns per shape: both algorithm sets, the tuned names, the
 * time of that first (one-off) tuning, and whether the cold cases run. */
typedef struct shape_tuning {
    tb_backend *be;
    tb_conv_desc d;
    int def[3], tuned[3];
    char names[3][64];
    double find_s;
    int cold;
} shape_tuning;

static int tune_once(void *arg)
{
    shape_tuning *t = arg;
    return pick_algos_named(t->be, &t->d, 1, t->tuned, t->names);
}

static int conv_pass(tb_backend *be, const conv_bufs *f, const tb_conv_desc *d,
                     const int algo[3], int bwd)
{
    TB_TRY(be->conv_fwd(be, d, algo[TB_CONV_FWD], f->x, f->w, NULL, f->y));
    if (!bwd)
        return TB_OK;
    TB_TRY(be->conv_bwd_data(be, d, algo[TB_CONV_BWD_DATA], f->dy, f->w, f->dx));
    return be->conv_bwd_filter(be, d, algo[TB_CONV_BWD_FILTER], f->x, f->dy, f->dw, NULL, 0);
}

static int run_case(void *arg)
{
    conv_case *c = arg;
    if (!case_defs[c->k].cold)
        return conv_pass(c->be, c->bf, &c->d, c->algo, case_defs[c->k].bwd);
    tb_conv_desc d = c->d;
    d.n = cold_batch(c->d.n, c->lane, c->calls++ % COLD_CYCLE);
    int algo[3];
    TB_TRY(pick_algos(c->be, &d, case_defs[c->k].tuned, algo));
    if (case_defs[c->k].find)
        return TB_OK;
    return conv_pass(c->be, c->bf, &d, algo, 1);
}

static int64_t plan_iterations(int profile, const tb_conv_desc *d)
{
    double flops = 2.0 * d->n * d->k * (double)tb_conv_out_h(d) * tb_conv_out_w(d) * d->c *
                   d->r * d->s;
    double budget = profile == TB_PROFILE_FULL ? 2e10 : profile == TB_PROFILE_TINY ? 5e7 : 2e9;
    int64_t it = (int64_t)(budget / flops);
    return it < 1 ? 1 : it;
}

/* The case just registered as case_defs[k]: each default, its again and
 * tuned come in a row (find, the tuning cost alone, is compared with
 * nothing), so its base is the default registered k - base cases ago. */
static int compare_case(opb_set *set, int k)
{
    static const int base_of[NCASES] = {C_FWD_DEF, C_FWD_DEF, C_FWD_DEF, C_STEP_DEF,
                                        C_STEP_DEF, C_STEP_DEF, C_FIND, C_VARY_DEF,
                                        C_VARY_DEF, C_VARY_DEF};
    if (base_of[k] == k)
        return TB_OK;
    return opb_compare(set, set->n - 1, set->n - 1 - (size_t)(k - base_of[k]),
                       k == C_FWD_DEF_AGAIN || k == C_STEP_DEF_AGAIN || k == C_VARY_DEF_AGAIN);
}

static int register_shape(tb_bench *b, opb_set *set, conv_case *cases, const conv_bufs *f,
                          shape_tuning *t, int idx)
{
    TB_TRY(pick_algos(b->be, &t->d, 0, t->def));
    TB_TRY(tb_bench_time_op(b->be, tune_once, t, &t->find_s));
    for (int k = 0, lane = 0; k < NCASES; k++) {
        if (case_defs[k].cold && !t->cold)
            continue;
        conv_case *c = &cases[idx * NCASES + k];
        if (case_defs[k].cold && lane >= COLD_LANES)
            return TB_FAIL(TB_ERR_INTERNAL, "more cold cases than COLD_LANES (%d)", COLD_LANES);
        *c = (conv_case){b->be, f, t->d, {0}, k, case_defs[k].cold ? lane++ : 0, 0};
        memcpy(c->algo, case_defs[k].tuned ? t->tuned : t->def, sizeof c->algo);
        if (case_defs[k].cold)
            TB_TRY(opb_register(b, set, 0, run_case, c, 1, "conv_%s/%d", case_defs[k].name,
                                idx));
        else
            /* a warm A/A copy runs its default's case (registered just
             * before it), warmed up with it, not twice */
            TB_TRY(opb_register(b, set, OPB_WARMUPS, run_case,
                                k == C_FWD_DEF_AGAIN || k == C_STEP_DEF_AGAIN ? c - 1 : c,
                                plan_iterations(b->profile, &t->d), "conv_%s/%d",
                                case_defs[k].name, idx));
        TB_TRY(compare_case(set, k));
    }
    return TB_OK;
}

/* Buffers for the largest shape; a cold shape's batch goes up to
 * cold_hi (cold_batch). */
static void max_sizes(const conv_shape *shapes, const shape_tuning *tune, int n, conv_bufs *f)
{
    for (int i = 0; i < n; i++) {
        tb_conv_desc d = make_desc(&shapes[i]);
        if (tune[i].cold && cold_hi(d.n) > d.n)
            d.n = cold_hi(d.n);
        size_t nx = (size_t)d.n * d.c * d.h * d.w, nw = (size_t)d.k * d.c * d.r * d.s,
               ny = (size_t)d.n * d.k * tb_conv_out_h(&d) * tb_conv_out_w(&d);
        f->nx = nx > f->nx ? nx : f->nx;
        f->nw = nw > f->nw ? nw : f->nw;
        f->ny = ny > f->ny ? ny : f->ny;
    }
}

/* dev: n random floats in [-1, 1), through a temporary host buffer. */
static int fill_dev(tb_backend *be, float **dev, size_t n, uint64_t seed)
{
    TB_TRY(be->dev_alloc(be, (void **)dev, n * sizeof(float)));
    return tb_bench_upload_random(be, *dev, n, seed, -1.0, 1.0);
}

static int alloc_bufs(tb_backend *be, conv_bufs *f)
{
    TB_TRY(fill_dev(be, &f->x, f->nx, 1));
    TB_TRY(fill_dev(be, &f->w, f->nw, 2));
    TB_TRY(fill_dev(be, &f->dy, f->ny, 3));
    TB_TRY(be->dev_alloc(be, (void **)&f->y, f->ny * sizeof(float)));
    TB_TRY(be->dev_alloc(be, (void **)&f->dx, f->nx * sizeof(float)));
    TB_TRY(be->dev_alloc(be, (void **)&f->dw, f->nw * sizeof(float)));
    for (int t = 0; t < 2; t++) {
        TB_TRY(be->host_alloc(be, (void **)&f->hy[t], f->ny * sizeof(float), 0));
        TB_TRY(be->host_alloc(be, (void **)&f->hdx[t], f->nx * sizeof(float), 0));
        TB_TRY(be->host_alloc(be, (void **)&f->hdw[t], f->nw * sizeof(float), 0));
    }
    return TB_OK;
}

static void free_bufs(tb_backend *be, conv_bufs *f)
{
    float *dev[] = {f->x, f->w, f->y, f->dy, f->dx, f->dw};
    for (int i = 0; i < 6; i++)
        be->dev_free(be, dev[i]);
    for (int t = 0; t < 2; t++) {
        be->host_free(be, f->hy[t], 0);
        be->host_free(be, f->hdx[t], 0);
        be->host_free(be, f->hdw[t], 0);
    }
}

typedef struct conv_check {
    tb_compare fwd, bwd;       /* tuned vs default: y; the worse of dx and dw */
} conv_check;

static int check_shape(tb_backend *be, conv_bufs *f, const shape_tuning *t, conv_check *chk)
{
    const tb_conv_desc *d = &t->d;
    size_t nx = (size_t)d->n * d->c * d->h * d->w, nw = (size_t)d->k * d->c * d->r * d->s,
           ny = (size_t)d->n * d->k * tb_conv_out_h(d) * tb_conv_out_w(d);
    for (int tuned = 0; tuned < 2; tuned++) {
        TB_TRY(conv_pass(be, f, d, tuned ? t->tuned : t->def, 1));
        TB_TRY(be->copy_d2h(be, f->hy[tuned], f->y, ny * sizeof(float), NULL));
        TB_TRY(be->copy_d2h(be, f->hdx[tuned], f->dx, nx * sizeof(float), NULL));
        TB_TRY(be->copy_d2h(be, f->hdw[tuned], f->dw, nw * sizeof(float), NULL));
        TB_TRY(be->sync(be));
    }
    tb_compare cw;
    TB_TRY(tb_compare_floats(f->hy[0], f->hy[1], ny, CONV_TOL, &chk->fwd));
    TB_TRY(tb_compare_floats(f->hdx[0], f->hdx[1], nx, CONV_TOL, &chk->bwd));
    TB_TRY(tb_compare_floats(f->hdw[0], f->hdw[1], nw, CONV_TOL, &cw));
    if (cw.max_rel > chk->bwd.max_rel)
        chk->bwd = cw;
    return TB_OK;
}

/* One pair of rows: default (baseline) and autotuned, for one metric. */
static int add_pair(tb_bench *b, const gb_results *r, int idx, int base_case, const char *metric,
                    const char *setting_suffix, const tb_compare *cmp, const char *note)
{
    const gb_run *run[3];
    for (int i = 0; i < 3; i++)
        TB_TRY(opb_need(r, &run[i], "conv_%s/%d", case_defs[base_case + i].name, idx));
    for (int tuned = 0; tuned < 2; tuned++) {
        char setting[64];
        snprintf(setting, sizeof setting, "%s%s", tuned ? "autotuned" : "default",
                 setting_suffix);
        tb_result_row row;
        tb_bench_row(b, &row, setting, !tuned, "shape", idx, metric);
        if (tuned)
            TB_TRY(opb_fill_variant(&row, run[2], run[0], run[1], 1e3, "ms"));
        else
            TB_TRY(opb_fill_base(&row, run[0], run[1], 1e3, "ms"));
        if (tuned && cmp)
            opb_set_check(&row, cmp, "baseline");
        snprintf(row.note, sizeof row.note, "%s", note);
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

static int add_find_row(tb_bench *b, const gb_results *r, int idx, const char *what)
{
    const gb_run *run;
    TB_TRY(opb_need(r, &run, "conv_find/%d", idx));
    tb_result_row row;
    tb_bench_row(b, &row, "autotuned", 0, "shape", idx, "tuning cost (fwd, bwd data, bwd filter)");
    TB_TRY(tb_bench_fill_timing(&row, run, 1e3, "ms"));
    snprintf(row.note, sizeof row.note, "%.60s; one-off per shape: conv_find of the three kinds "
             "at a batch size not seen before", what);
    return tb_results_add(&b->res, &row);
}

static int report_shape(tb_bench *b, const gb_results *r, conv_bufs *f, const conv_shape *s,
                        const shape_tuning *t, int idx)
{
    conv_check chk;
    TB_TRY(check_shape(b->be, f, t, &chk));
    char note[256];
    snprintf(note, sizeof note, "%.48s, batch %d%s; first tuning %.3g s; tuned: fwd %.32s, bwd "
             "data %.32s, bwd filter %.32s", s->what, s->n,
             s->talk ? "; talk's GPU: 1430 us default, 840 us tuned (their number)" : "",
             t->find_s, t->names[0], t->names[1], t->names[2]);
    TB_TRY(add_pair(b, r, idx, C_FWD_DEF, "fwd time", "", &chk.fwd, note));
    TB_TRY(add_pair(b, r, idx, C_STEP_DEF, "fwd+bwd time", "", &chk.bwd, note));
    if (!t->cold)
        return TB_OK;
    TB_TRY(add_find_row(b, r, idx, s->what));
    snprintf(note, sizeof note, "%.60s; batch %d..%d (mean %.1f, the same in every row), new "
             "every step: each new shape re-tunes (autotuned) or builds its default primitive "
             "(default)", s->what, cold_lo(s->n), cold_hi(s->n), cold_mean(s->n));
    return add_pair(b, r, idx, C_VARY_DEF, "fwd+bwd time, new batch every step",
                    ", batch varies", NULL, note);
}

typedef struct conv_state {
    conv_shape shapes[NSHAPES];
    shape_tuning tune[NSHAPES];
    int nshapes;
    conv_bufs f;
    conv_case *cases;          /* nshapes * NCASES */
} conv_state;

/* The cold cases (tuning cost, batch varying every step) run on the small
 * CNN's shapes in the default profile: one conv_find of the talk's shape
 * takes about 10 s on two cores, and they would need 20 of them. The full
 * profile runs them everywhere; the first tuning's time is in every note. */
static void plan_shapes(conv_state *st, int profile)
{
    int tiny = profile == TB_PROFILE_TINY;
    st->nshapes = tiny ? 2 : NSHAPES;
    memcpy(st->shapes, tiny ? shapes_tiny : shapes_default, st->nshapes * sizeof st->shapes[0]);
    for (int i = 0; i < st->nshapes; i++) {
        int big = !tiny && (st->shapes[i].talk || i >= FIRST_RESNET);
        if (big && profile == TB_PROFILE_FULL && i >= FIRST_RESNET)
            st->shapes[i].n = 32;
        st->tune[i].d = make_desc(&st->shapes[i]);
        st->tune[i].cold = !big || profile == TB_PROFILE_FULL;
    }
}

static int setup(tb_bench *b, void *state, opb_set *set)
{
    conv_state *st = state;
    plan_shapes(st, b->profile);
    st->cases = calloc((size_t)st->nshapes * NCASES, sizeof *st->cases);
    if (!st->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    max_sizes(st->shapes, st->tune, st->nshapes, &st->f);
    TB_TRY(alloc_bufs(b->be, &st->f));
    for (int i = 0; i < st->nshapes; i++) {
        st->tune[i].be = b->be;
        TB_TRY(register_shape(b, set, st->cases, &st->f, &st->tune[i], i));
    }
    return TB_OK;
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    conv_state *st = state;
    for (int i = 0; i < st->nshapes; i++)
        TB_TRY(report_shape(b, r, &st->f, &st->shapes[i], &st->tune[i], i));
    return TB_OK;
}

static int plot(tb_bench *b, void *state)
{
    (void)state;
    TB_TRY(opb_plot(b, "conv_autotuner", "Convolution time, default vs autotuned",
                    "shape (index; see notes)", "time (ms)", 0, OPB_Y_MEDIAN));
    return opb_plot(b, "conv_autotuner_speedup",
                    "Autotuned over default convolution (paired estimate, 95% CI)",
                    "shape (index; see notes)", "speedup (x)", 0, OPB_Y_SPEEDUP);
}

static void teardown(tb_bench *b, void *state)
{
    conv_state *st = state;
    free(st->cases);
    free_bufs(b->be, &st->f);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    conv_state st = {0};
    return opb_run(b, &sweep, &st);
}

static const tb_technique technique = {
    .name = "conv_autotuner",
    .headline = "autotuned",
    /* training runs the backward too; fixed shapes, as the tip assumes */
    .headline_metric = "fwd+bwd time",
    .what = "Default vs autotuned convolution algorithm (fwd, fwd+bwd), tuning cost, "
            "and batch sizes that change every step.",
    .est_seconds = {46, 900, 15, 26}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {45, 850, 10, 24},
    .order = 340,
    .tiny = {.min_rows = 10, .plots = "conv_autotuner,conv_autotuner_speedup"},
};

TB_OPB_MAIN(technique, run)
