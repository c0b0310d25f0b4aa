/*
 * fused_optimizer.c - `bazel run //bench:fused_optimizer`: one optimizer step
 * per tensor (PyTorch's for-loop optimizers: several element-wise passes per
 * tensor) vs fused (one pass over all tensors, Adam(fused=True) / apex's
 * multi-tensor apply), for SGD with momentum and AdamW, over parameter
 * counts from 10 tensors of 1K to 100 tensors of 1M (10 of 1M in the
 * default profile), including many small tensors (1000 of 1K), where
 * per-tensor overhead matters most.
 * Baseline: per-tensor (the technique off).
 *
 * Writes results/<device>/fused_optimizer.csv and plots/<device>/
 * fused_optimizer.* (step time) and fused_optimizer_speedup.* . The rate is
 * parameters updated per second (Gparams/s). Correctness: the parameters after
 * CHECK_STEPS steps from the same state, fused vs per-tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/opbench.h"

#define CHECK_STEPS 3

typedef struct opt_point { int count; size_t each; } opt_point;

/* The sweep: (tensors, floats per tensor). Full runs all of them; default
 * stops before 100 x 1M (100M parameters, 1.6 GB of AdamW state: one
 * per-tensor step takes 1-1.6 s on two cores, and the sweep needs 42 of
 * them per optimizer); tiny runs three small points. */
static const opt_point points_all[] = {
    {10, 1000}, {1000, 1000}, {100, 10000}, {10, 100000}, {100, 100000}, {10, 1000000},
    {100, 1000000},
};
static const opt_point points_tiny[] = {{10, 1000}, {100, 1000}, {10, 10000}};

static const struct { const char *name; tb_opt_kind kind; } opts[] = {
    {"sgd", TB_OPT_SGD},
    {"adamw", TB_OPT_ADAMW},
};
enum { NOPTS = 2 };

/* Per (optimizer, point): per-tensor, per-tensor again (noise floor), fused. */
enum { V_PER, V_PER_AGAIN, V_FUSED, NV };
static const char *const vnames[NV] = {"per_tensor", "per_tensor_again", "fused"};

typedef struct opt_group opt_group;

typedef struct opt_case {
    tb_backend *be;
    tb_opt_hparams hp;
    tb_param_view *views;
    int count, fused;
    opt_group *group;       /* whose views these are */
} opt_case;

static int run_step(void *arg)
{
    opt_case *c = arg;
    return c->be->opt_step(c->be, &c->hp, c->views, c->count, c->fused);
}

typedef struct opt_bufs {
    float *param, *grad, *s1, *s2;  /* device, max_total floats each */
    float *h_init, *h_grad, *h_out[2];
    size_t max_total;
} opt_bufs;

static tb_opt_hparams hparams(tb_opt_kind kind)
{
    if (kind == TB_OPT_SGD)
        return (tb_opt_hparams){.kind = kind, .lr = 0.1f, .momentum = 0.9f,
                                .weight_decay = 1e-4f, .step = 1, .grad_scale = 1.0f};
    return (tb_opt_hparams){.kind = kind, .lr = 1e-3f, .weight_decay = 0.01f, .beta1 = 0.9f,
                            .beta2 = 0.999f, .eps = 1e-8f, .step = 1, .grad_scale = 1.0f};
}

static tb_param_view *make_views(const opt_bufs *bf, opt_point p)
{
    tb_param_view *v = calloc((size_t)p.count, sizeof *v);
    for (int i = 0; v && i < p.count; i++) {
        size_t off = (size_t)i * p.each;
        v[i] = (tb_param_view){bf->param + off, bf->grad + off, bf->s1 + off, bf->s2 + off,
                               p.each};
    }
    return v;
}

static int64_t plan_iterations(int profile, opt_point p)
{
    double elems = profile == TB_PROFILE_FULL ? 1 << 25 : profile == TB_PROFILE_TINY ? 1 << 16
                                                                                    : 1 << 22;
    int64_t it = (int64_t)(elems / ((double)p.count * (double)p.each));
    return it < 1 ? 1 : it;
}

/* What the cases of one (optimizer, point) time: parameters, gradients and
 * moments of their own (count x each floats), filled from the host inputs,
 * and views into them. The per-tensor baseline rebuilds them (new
 * addresses and pages, as another run of the program would draw); fused
 * and the A/A copy, compared with it, change build with it. */
typedef struct opt_group {
    tb_backend *be;
    const opt_bufs *host;   /* h_init, h_grad */
    opt_point p;
    opt_bufs dev;           /* param, grad, s1, s2 only */
    tb_param_view *views;   /* (p.count), into dev; rewritten by each rebuild */
} opt_group;

static void group_free_dev(tb_backend *be, opt_bufs *d)
{
    be->dev_free(be, d->param);
    be->dev_free(be, d->grad);
    be->dev_free(be, d->s1);
    be->dev_free(be, d->s2);
    d->param = d->grad = d->s1 = d->s2 = NULL;
}

/* g's buffers (every page written) and its views into them. */
static int group_alloc(opt_group *g)
{
    tb_backend *be = g->be;
    size_t bytes = (size_t)g->p.count * g->p.each * sizeof(float);
    opt_bufs *d = &g->dev;
    int rc;
    *d = (opt_bufs){0};
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&d->param, bytes), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&d->grad, bytes), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&d->s1, bytes), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&d->s2, bytes), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, d->param, g->host->h_init, bytes, NULL), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, d->grad, g->host->h_grad, bytes, NULL), out_free);
    TB_TRY_GOTO(rc, be->memset(be, d->s1, 0, bytes, NULL), out_free);
    TB_TRY_GOTO(rc, be->memset(be, d->s2, 0, bytes, NULL), out_free);
    for (int i = 0; i < g->p.count; i++) {
        size_t off = (size_t)i * g->p.each;
        g->views[i] = (tb_param_view){d->param + off, d->grad + off, d->s1 + off, d->s2 + off,
                                      g->p.each};
    }
    return be->sync(be);
out_free:
    group_free_dev(be, d);
    return rc;
}

/* opb_set_rebuild (the per-tensor baseline): new buffers before the old
 * are freed, so that the allocator cannot hand the same blocks back. */
static int group_rebuild(void *arg);

typedef struct opt_sweep {
    const opt_point *pts;
    int npts;
    tb_param_view **views;  /* per point: the checks', into bf */
    opt_case *cases;        /* NOPTS * npts * NV */
    opt_group *groups;      /* NOPTS * npts: what the cases time */
    opt_bufs bf;
} opt_sweep;

static int group_rebuild(void *arg)
{
    opt_group *g = ((opt_case *)arg)->group;
    opt_bufs old = g->dev;
    TB_TRY(group_alloc(g));
    group_free_dev(g->be, &old);
    return TB_OK;
}

static int alloc_groups(tb_bench *b, opt_sweep *sw)
{
    sw->groups = calloc((size_t)NOPTS * sw->npts, sizeof *sw->groups);
    if (!sw->groups)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory planning the sweep");
    for (int i = 0; i < NOPTS * sw->npts; i++) {
        opt_group *g = &sw->groups[i];
        *g = (opt_group){b->be, &sw->bf, sw->pts[i % sw->npts], {0}, NULL};
        g->views = calloc((size_t)g->p.count, sizeof *g->views);
        if (!g->views)
            return TB_FAIL(TB_ERR_NOMEM, "out of memory planning the sweep");
        TB_TRY(group_alloc(g));
    }
    return TB_OK;
}

static int register_all(tb_bench *b, opt_sweep *sw, opb_set *set)
{
    sw->cases = calloc((size_t)NOPTS * sw->npts * NV, sizeof *sw->cases);
    if (!sw->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory planning the sweep");
    TB_TRY(alloc_groups(b, sw));
    for (int o = 0; o < NOPTS; o++)
        for (int p = 0; p < sw->npts; p++)
            for (int v = 0; v < NV; v++) {
                opt_case *c = &sw->cases[(o * sw->npts + p) * NV + v];
                opt_group *g = &sw->groups[o * sw->npts + p];
                *c = (opt_case){b->be, hparams(opts[o].kind), g->views, sw->pts[p].count,
                                v == V_FUSED, g};
                /* the A/A copy runs per_tensor's case (warmed up with it) */
                TB_TRY(opb_register(b, set, OPB_WARMUPS, run_step, v == V_PER_AGAIN ? c - 1 : c,
                                    plan_iterations(b->profile, sw->pts[p]), "opt_%s_%s/%dx%zu",
                                    opts[o].name, vnames[v], sw->pts[p].count, sw->pts[p].each));
                /* per_tensor, its again, fused in a row: compared with per_tensor. */
                if (v != V_PER)
                    TB_TRY(opb_compare(set, set->n - 1, set->n - 1 - v, v == V_PER_AGAIN));
                else
                    TB_TRY(opb_set_rebuild(set, set->n - 1, group_rebuild,
                                           OPB_REBUILD_WARMUPS));
            }
    return TB_OK;
}

/* Fresh state (same random parameters and gradients, zero moments), then
 * CHECK_STEPS steps of one variant; the parameters are read back. */
static int steps_from_init(tb_backend *be, const opt_bufs *bf, tb_opt_kind kind,
                           tb_param_view *views, opt_point p, int fused, float *h_out)
{
    size_t bytes = (size_t)p.count * p.each * sizeof(float);
    TB_TRY(be->copy_h2d(be, bf->param, bf->h_init, bytes, NULL));
    TB_TRY(be->copy_h2d(be, bf->grad, bf->h_grad, bytes, NULL));
    TB_TRY(be->memset(be, bf->s1, 0, bytes, NULL));
    TB_TRY(be->memset(be, bf->s2, 0, bytes, NULL));
    tb_opt_hparams hp = hparams(kind);
    for (int s = 1; s <= CHECK_STEPS; s++) {
        hp.step = s;
        TB_TRY(be->opt_step(be, &hp, views, p.count, fused));
    }
    TB_TRY(be->copy_d2h(be, h_out, bf->param, bytes, NULL));
    return be->sync(be);
}

static int check_point(tb_backend *be, const opt_bufs *bf, tb_opt_kind kind,
                       tb_param_view *views, opt_point p, tb_compare *cmp)
{
    TB_TRY(steps_from_init(be, bf, kind, views, p, 0, bf->h_out[0]));
    TB_TRY(steps_from_init(be, bf, kind, views, p, 1, bf->h_out[1]));
    return tb_compare_floats(bf->h_out[0], bf->h_out[1], (size_t)p.count * p.each, TB_TOL_F32,
                             cmp);
}

static int add_rows(tb_bench *b, const gb_results *r, int o, opt_point p, const tb_compare *cmp)
{
    const gb_run *run[NV];
    for (int v = 0; v < NV; v++)
        TB_TRY(opb_need(r, &run[v], "opt_%s_%s/%dx%zu", opts[o].name, vnames[v], p.count,
                        p.each));
    double params = (double)p.count * (double)p.each;
    for (int fused = 0; fused < 2; fused++) {
        char setting[64], metric[48];
        snprintf(setting, sizeof setting, "%s", fused ? "fused" : "per-tensor");
        snprintf(metric, sizeof metric, "%s step, %zuK floats a tensor", opts[o].name,
                 p.each / 1000);
        tb_result_row row;
        tb_bench_row(b, &row, setting, !fused, "tensors", p.count, metric);
        if (fused)
            TB_TRY(opb_fill_variant(&row, run[V_FUSED], run[V_PER], run[V_PER_AGAIN], 1e6, "us"));
        else
            TB_TRY(opb_fill_base(&row, run[V_PER], run[V_PER_AGAIN], 1e6, "us"));
        row.rate = params / (row.median * 1e-6) / 1e9;
        snprintf(row.rate_unit, sizeof row.rate_unit, "Gparams/s");
        if (fused) {
            opb_set_check(&row, cmp, "baseline");
            snprintf(row.note, sizeof row.note,
                     "%d tensors of %zu; parameters after %d steps vs per-tensor", p.count,
                     p.each, CHECK_STEPS);
        } else {
            snprintf(row.note, sizeof row.note, "%d tensors of %zu", p.count, p.each);
        }
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

static int alloc_bufs(tb_backend *be, opt_bufs *bf)
{
    size_t bytes = bf->max_total * sizeof(float);
    TB_TRY(be->dev_alloc(be, (void **)&bf->param, bytes));
    TB_TRY(be->dev_alloc(be, (void **)&bf->grad, bytes));
    TB_TRY(be->dev_alloc(be, (void **)&bf->s1, bytes));
    TB_TRY(be->dev_alloc(be, (void **)&bf->s2, bytes));
    TB_TRY(be->host_alloc(be, (void **)&bf->h_init, bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&bf->h_grad, bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&bf->h_out[0], bytes, 0));
    TB_TRY(be->host_alloc(be, (void **)&bf->h_out[1], bytes, 0));
    tb_rng_fill(bf->h_init, bf->max_total, 1, -1.0, 1.0);
    tb_rng_fill(bf->h_grad, bf->max_total, 2, -0.1, 0.1);
    TB_TRY(be->copy_h2d(be, bf->param, bf->h_init, bytes, NULL));
    TB_TRY(be->copy_h2d(be, bf->grad, bf->h_grad, bytes, NULL));
    TB_TRY(be->memset(be, bf->s1, 0, bytes, NULL));
    return be->memset(be, bf->s2, 0, bytes, NULL);
}

static void free_bufs(tb_backend *be, opt_bufs *bf)
{
    be->dev_free(be, bf->param);
    be->dev_free(be, bf->grad);
    be->dev_free(be, bf->s1);
    be->dev_free(be, bf->s2);
    be->host_free(be, bf->h_init, 0);
    be->host_free(be, bf->h_grad, 0);
    be->host_free(be, bf->h_out[0], 0);
    be->host_free(be, bf->h_out[1], 0);
}

static int setup(tb_bench *b, void *state, opb_set *set)
{
    opt_sweep *sw = state;
    int tiny = b->profile == TB_PROFILE_TINY;
    sw->pts = tiny ? points_tiny : points_all;
    int all = (int)(sizeof points_all / sizeof points_all[0]);
    sw->npts = tiny ? 3 : b->profile == TB_PROFILE_FULL ? all : all - 1;
    for (int p = 0; p < sw->npts; p++)
        if ((size_t)sw->pts[p].count * sw->pts[p].each > sw->bf.max_total)
            sw->bf.max_total = (size_t)sw->pts[p].count * sw->pts[p].each;
    sw->views = calloc((size_t)sw->npts, sizeof *sw->views);
    if (!sw->views)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    TB_TRY(alloc_bufs(b->be, &sw->bf));
    for (int p = 0; p < sw->npts; p++)
        if (!(sw->views[p] = make_views(&sw->bf, sw->pts[p])))
            return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    return register_all(b, sw, set);
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    opt_sweep *sw = state;
    for (int o = 0; o < NOPTS; o++)
        for (int p = 0; p < sw->npts; p++) {
            tb_compare cmp;
            TB_TRY(check_point(b->be, &sw->bf, opts[o].kind, sw->views[p], sw->pts[p], &cmp));
            TB_TRY(add_rows(b, r, o, sw->pts[p], &cmp));
        }
    return TB_OK;
}

static int plot(tb_bench *b, void *state)
{
    (void)state;
    TB_TRY(opb_plot(b, "fused_optimizer", "Optimizer step time", "tensors",
                    "step time (us)", 10, OPB_Y_MEDIAN));
    return opb_plot(b, "fused_optimizer_speedup",
                    "Fused over per-tensor optimizer step (paired estimate, 95% CI)", "tensors",
                    "speedup (x)", 10, OPB_Y_SPEEDUP);
}

static void teardown(tb_bench *b, void *state)
{
    opt_sweep *sw = state;
    free(sw->cases);
    for (int i = 0; sw->groups && i < NOPTS * sw->npts; i++) {
        group_free_dev(b->be, &sw->groups[i].dev);
        free(sw->groups[i].views);
    }
    free(sw->groups);
    for (int p = 0; sw->views && p < sw->npts; p++)
        free(sw->views[p]);
    free(sw->views);
    free_bufs(b->be, &sw->bf);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    opt_sweep sw = {0};
    return opb_run(b, &sweep, &sw);
}

static const tb_technique technique = {
    .name = "fused_optimizer",
    .headline = "fused",
    /* AdamW, as transformers train, on the largest tensors the profile runs
     * (10 or 100 of 1M floats: GPT-2 has 124M parameters); 1000 tensors of
     * 1K, the first metric, time per-call overhead alone and read 8x where
     * the whole step gains 1.05x (run 52) */
    .headline_metric = "adamw step, 1000K floats a tensor",
    .what = "Per-tensor vs fused optimizer step (SGD, AdamW) over parameter counts.",
    .est_seconds = {17, 420, 3, 14}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds */
    .budget_seconds = {18, 380, 2, 12},
    .order = 280,
    .tiny = {.min_rows = 12, .plots = "fused_optimizer,fused_optimizer_speedup"},
};

TB_OPB_MAIN(technique, run)
