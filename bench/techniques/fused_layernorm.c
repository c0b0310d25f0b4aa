/*
 * fused_layernorm.c - `bazel run //bench:fused_layernorm`: layer norm as
 * eager PyTorch decomposes it (several passes: mean, center, variance,
 * normalize, scale, shift, with two rows x cols temporaries) vs fused (one
 * kernel per row, apex's FusedLayerNorm), forward and backward, over
 * transformer shapes (tokens x hidden width), beside the copy bandwidth of
 * the same device with the same threads. Baseline: unfused.
 *
 * Writes results/<device>/fused_layernorm.csv and plots/<device>/
 * fused_layernorm.* (bandwidth) and fused_layernorm_speedup.* . Effective
 * bandwidth counts what a perfect kernel moves: forward reads x and writes
 * y (8 bytes an element), backward reads x and dy and writes dx (12);
 * copy reads and writes (8). Correctness: y and dx against the float64
 * reference (lib/backend/ref/attention.h), and fused against unfused in the note.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness/opbench.h"
#include "lib/backend/ref/attention.h"

#define LN_EPS 1e-5f
/* Relative to the largest reference value (tb_max_rel_err): a few fp32
 * ulp of a row's sums. */
#define LN_TOL 1e-5

typedef struct ln_shape { int rows, cols; } ln_shape;

/* Tokens x width: BERT-base (768) at 1K and 4K tokens, GPT-2 medium
 * (1024) at 8K, a 4096-wide model at 1K tokens. */
static const ln_shape shapes_all[] = {{1024, 768}, {4096, 768}, {8192, 1024}, {1024, 4096}};
static const ln_shape shapes_tiny[] = {{64, 768}, {256, 1024}};

enum { C_COPY, C_FWD_UN, C_FWD_UN_AGAIN, C_FWD_FUSED, C_BWD_UN, C_BWD_UN_AGAIN, C_BWD_FUSED,
       NCASES };
static const struct { const char *name; int bwd; tb_ln_variant v; } case_defs[NCASES] = {
    {"copy", 0, TB_LN_FUSED},          {"fwd_unfused", 0, TB_LN_UNFUSED},
    {"fwd_unfused_again", 0, TB_LN_UNFUSED}, {"fwd_fused", 0, TB_LN_FUSED},
    {"bwd_unfused", 1, TB_LN_UNFUSED}, {"bwd_unfused_again", 1, TB_LN_UNFUSED},
    {"bwd_fused", 1, TB_LN_FUSED},
};

/* What each case is compared with (its own index: nothing): the copy is the
 * ceiling, fused is compared with unfused, "again" is unfused's A/A copy. */
static const int case_base[NCASES] = {C_COPY, C_FWD_UN, C_FWD_UN, C_FWD_UN,
                                      C_BWD_UN, C_BWD_UN, C_BWD_UN};

typedef struct ln_bufs {
    float *x, *dy, *y, *dx, *gamma, *beta, *dgamma, *dbeta, *mean, *rstd; /* device */
    float *hx, *hdy, *hgamma, *hbeta, *hout, *href, *hbase, *hrg, *hrb;     /* host */
    size_t max_n;
    int max_rows, max_cols;
} ln_bufs;

/* What the cases of one shape and direction time: device buffers of that
 * shape, filled from the host inputs (ln_bufs). The direction's baseline
 * (and the copy) rebuild them (new addresses and pages, as another run of
 * the program would draw); its variant and A/A copy change build with it. */
enum { D_COPY, D_FWD, D_BWD, NDIRS };

typedef struct ln_dev {
    tb_backend *be;
    const ln_bufs *host;
    ln_shape s;
    int dir;                   /* D_COPY, D_FWD, D_BWD */
    float *x, *y, *dy, *dx;    /* (rows, cols); y: copy and forward; dy, dx: backward */
    float *gamma, *beta, *dgamma, *dbeta; /* (cols); forward and backward */
    float *mean, *rstd;        /* (rows); the backward's from one forward */
} ln_dev;

typedef struct ln_case {
    tb_backend *be;
    ln_dev *d;
    ln_shape s;
    int k;                     /* index into case_defs */
} ln_case;

static int run_case(void *arg)
{
    ln_case *c = arg;
    tb_backend *be = c->be;
    const ln_dev *f = c->d;
    tb_ln_variant v = case_defs[c->k].v;
    if (c->k == C_COPY)
        return be->copy_d2d(be, f->y, f->x, (size_t)c->s.rows * c->s.cols * sizeof(float),
                            TB_ON_COMPUTE); /* as the kernels run: no host wait per copy */
    if (!case_defs[c->k].bwd)
        return be->layernorm_fwd(be, v, f->x, f->gamma, f->beta, LN_EPS, c->s.rows, c->s.cols,
                                 f->y, f->mean, f->rstd);
    return be->layernorm_bwd(be, v, f->x, f->dy, f->gamma, f->mean, f->rstd, c->s.rows,
                             c->s.cols, f->dx, f->dgamma, f->dbeta, 0);
}

static void dev_free_all(ln_dev *d)
{
    float **p[] = {&d->x, &d->y, &d->dy, &d->dx, &d->gamma, &d->beta, &d->dgamma, &d->dbeta,
                   &d->mean, &d->rstd};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        d->be->dev_free(d->be, *p[i]);
        *p[i] = NULL;
    }
}

static int dev_buf(tb_backend *be, float **p, size_t floats)
{
    TB_TRY(be->dev_alloc(be, (void **)p, floats * sizeof(float)));
    return be->memset(be, *p, 0, floats * sizeof(float), NULL);
}

/* d's buffers, every page touched, the inputs copied in; the backward's
 * mean and rstd from one fused forward (into dx, overwritten later). */
static int dev_alloc_all(ln_dev *d)
{
    tb_backend *be = d->be;
    size_t n = (size_t)d->s.rows * d->s.cols, cols = (size_t)d->s.cols;
    int rc;
    d->x = d->y = d->dy = d->dx = d->gamma = d->beta = d->dgamma = d->dbeta = NULL;
    d->mean = d->rstd = NULL;
    TB_TRY_GOTO(rc, dev_buf(be, &d->x, n), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, d->x, d->host->hx, n * sizeof(float), NULL), out_free);
    if (d->dir != D_BWD)
        TB_TRY_GOTO(rc, dev_buf(be, &d->y, n), out_free);
    if (d->dir == D_COPY)
        return be->sync(be);
    float **c[] = {&d->gamma, &d->beta, &d->dgamma, &d->dbeta};
    for (int i = 0; i < 4; i++)
        TB_TRY_GOTO(rc, dev_buf(be, c[i], cols), out_free);
    TB_TRY_GOTO(rc, dev_buf(be, &d->mean, (size_t)d->s.rows), out_free);
    TB_TRY_GOTO(rc, dev_buf(be, &d->rstd, (size_t)d->s.rows), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, d->gamma, d->host->hgamma, cols * sizeof(float), NULL),
                out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, d->beta, d->host->hbeta, cols * sizeof(float), NULL),
                out_free);
    if (d->dir == D_BWD) {
        TB_TRY_GOTO(rc, dev_buf(be, &d->dy, n), out_free);
        TB_TRY_GOTO(rc, dev_buf(be, &d->dx, n), out_free);
        TB_TRY_GOTO(rc, be->copy_h2d(be, d->dy, d->host->hdy, n * sizeof(float), NULL),
                    out_free);
        TB_TRY_GOTO(rc, be->layernorm_fwd(be, TB_LN_FUSED, d->x, d->gamma, d->beta, LN_EPS,
                                          d->s.rows, d->s.cols, d->dx, d->mean, d->rstd),
                    out_free);
    }
    return be->sync(be);
out_free:
    dev_free_all(d);
    return rc;
}

/* opb_set_rebuild: new buffers before the old are freed, so that the
 * allocator cannot hand the same blocks back. */
static int case_rebuild(void *arg)
{
    ln_dev *d = ((ln_case *)arg)->d, old = *d;
    TB_TRY(dev_alloc_all(d));
    dev_free_all(&old);
    return TB_OK;
}

static int64_t plan_iterations(int profile, ln_shape s)
{
    /* Copy bytes per repetition: the unfused passes take ten times longer. */
    double bytes = profile == TB_PROFILE_FULL ? 256.0 * (1 << 20)
                   : profile == TB_PROFILE_TINY ? 1.0 * (1 << 20) : 24.0 * (1 << 20);
    int64_t it = (int64_t)(bytes / (8.0 * s.rows * (double)s.cols));
    return it < 1 ? 1 : it;
}

static int alloc_bufs(tb_backend *be, ln_bufs *f)
{
    size_t nb = f->max_n * sizeof(float), cb = (size_t)f->max_cols * sizeof(float),
           rb = (size_t)f->max_rows * sizeof(float);
    float **dev_n[] = {&f->x, &f->dy, &f->y, &f->dx};
    float **dev_c[] = {&f->gamma, &f->beta, &f->dgamma, &f->dbeta};
    float **host_n[] = {&f->hx, &f->hdy, &f->hout, &f->href, &f->hbase};
    for (int i = 0; i < 4; i++) {
        TB_TRY(be->dev_alloc(be, (void **)dev_n[i], nb));
        TB_TRY(be->dev_alloc(be, (void **)dev_c[i], cb));
    }
    TB_TRY(be->dev_alloc(be, (void **)&f->mean, rb));
    TB_TRY(be->dev_alloc(be, (void **)&f->rstd, rb));
    for (int i = 0; i < 5; i++)
        TB_TRY(be->host_alloc(be, (void **)host_n[i], nb, 0));
    float **host_c[] = {&f->hgamma, &f->hbeta, &f->hrg, &f->hrb};
    for (int i = 0; i < 4; i++)
        TB_TRY(be->host_alloc(be, (void **)host_c[i], cb, 0));
    tb_rng_fill(f->hx, f->max_n, 1, -3.0, 3.0);
    tb_rng_fill(f->hdy, f->max_n, 2, -1.0, 1.0);
    tb_rng_fill(f->hgamma, (size_t)f->max_cols, 3, 0.5, 1.5);
    tb_rng_fill(f->hbeta, (size_t)f->max_cols, 4, -0.5, 0.5);
    TB_TRY(be->copy_h2d(be, f->x, f->hx, nb, NULL));
    TB_TRY(be->copy_h2d(be, f->dy, f->hdy, nb, NULL));
    TB_TRY(be->copy_h2d(be, f->gamma, f->hgamma, cb, NULL));
    return be->copy_h2d(be, f->beta, f->hbeta, cb, NULL);
}

static void free_bufs(tb_backend *be, ln_bufs *f)
{
    float *dev[] = {f->x, f->dy, f->y, f->dx, f->gamma, f->beta, f->dgamma, f->dbeta, f->mean,
                    f->rstd};
    float *host[] = {f->hx, f->hdy, f->hout, f->href, f->hbase, f->hgamma, f->hbeta, f->hrg,
                     f->hrb};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        be->dev_free(be, dev[i]);
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        be->host_free(be, host[i], 0);
}

typedef struct ln_check {
    tb_compare ref[2][2];      /* [bwd][variant] vs the float64 reference */
    tb_compare vs_base[2];     /* [bwd] fused vs unfused */
} ln_check;

/* One direction of the correctness pass: each variant's output (y or dx)
 * against href and against the unfused one. */
static int check_dir(tb_backend *be, ln_bufs *f, ln_shape s, int bwd, ln_check *chk)
{
    size_t n = (size_t)s.rows * s.cols;
    for (int v = 0; v < 2; v++) {
        TB_TRY(be->layernorm_fwd(be, (tb_ln_variant)v, f->x, f->gamma, f->beta, LN_EPS, s.rows,
                                 s.cols, f->y, f->mean, f->rstd));
        if (bwd)
            TB_TRY(be->layernorm_bwd(be, (tb_ln_variant)v, f->x, f->dy, f->gamma, f->mean,
                                     f->rstd, s.rows, s.cols, f->dx, f->dgamma, f->dbeta, 0));
        float *h = v == TB_LN_UNFUSED ? f->hbase : f->hout;
        TB_TRY(be->copy_d2h(be, h, bwd ? f->dx : f->y, n * sizeof(float), NULL));
        TB_TRY(be->sync(be));
        TB_TRY(tb_compare_floats(f->href, h, n, LN_TOL, &chk->ref[bwd][v]));
    }
    return tb_compare_floats(f->hbase, f->hout, n, LN_TOL, &chk->vs_base[bwd]);
}

static int check_shape(tb_backend *be, ln_bufs *f, ln_shape s, ln_check *chk)
{
    /* The reference's row statistics land in hout, overwritten just after. */
    TB_TRY(tb_ref_layernorm_fwd(f->hx, f->hgamma, f->hbeta, LN_EPS, s.rows, s.cols, f->href,
                                f->hout, f->hout + s.rows));
    TB_TRY(check_dir(be, f, s, 0, chk));
    TB_TRY(tb_ref_layernorm_bwd(f->hx, f->hdy, f->hgamma, LN_EPS, s.rows, s.cols, f->href,
                                f->hrg, f->hrb, 0));
    return check_dir(be, f, s, 1, chk);
}

static int add_copy_row(tb_bench *b, const gb_results *r, ln_shape s, double *copy_gbs)
{
    const gb_run *run;
    TB_TRY(opb_need(r, &run, "ln_copy/%dx%d", s.rows, s.cols));
    tb_result_row row;
    tb_bench_row(b, &row, "copy", 0, "elements", (double)s.rows * s.cols, "copy time");
    TB_TRY(tb_bench_fill_timing(&row, run, 1e6, "us"));
    *copy_gbs = 8.0 * s.rows * (double)s.cols / (row.median * 1e-6) / 1e9;
    row.rate = *copy_gbs;
    snprintf(row.rate_unit, sizeof row.rate_unit, "GB/s");
    snprintf(row.note, sizeof row.note, "the ceiling: device copy with the same threads; %d x %d",
             s.rows, s.cols);
    return tb_results_add(&b->res, &row);
}

static int add_dir_rows(tb_bench *b, const gb_results *r, ln_shape s, int bwd, double copy_gbs,
                        const ln_check *chk)
{
    const gb_run *run[3];
    int base = bwd ? C_BWD_UN : C_FWD_UN;
    for (int i = 0; i < 3; i++)
        TB_TRY(opb_need(r, &run[i], "ln_%s/%dx%d", case_defs[base + i].name, s.rows, s.cols));
    double n = (double)s.rows * s.cols;
    for (int fused = 0; fused < 2; fused++) {
        tb_result_row row;
        tb_bench_row(b, &row, fused ? "fused" : "unfused", !fused, "elements", n,
                     bwd ? "bwd time" : "fwd time");
        if (fused)
            TB_TRY(opb_fill_variant(&row, run[2], run[0], run[1], 1e6, "us"));
        else
            TB_TRY(opb_fill_base(&row, run[0], run[1], 1e6, "us"));
        row.rate = (bwd ? 12.0 : 8.0) * n / (row.median * 1e-6) / 1e9;
        snprintf(row.rate_unit, sizeof row.rate_unit, "GB/s");
        snprintf(row.ceiling_name, sizeof row.ceiling_name, "copy bandwidth");
        row.ceiling_rate = copy_gbs;
        row.fraction_of_ceiling = row.rate / copy_gbs;
        opb_set_check(&row, &chk->ref[bwd][fused], "float64 reference");
        char verdict[160] = "";
        if (fused)
            tb_compare_format(&chk->vs_base[bwd], verdict, sizeof verdict);
        snprintf(row.note, sizeof row.note, "%d x %d; %s checked%s%s", s.rows, s.cols,
                 bwd ? "dx" : "y", fused ? "; vs unfused: " : "", verdict);
        TB_TRY(tb_results_add(&b->res, &row));
    }
    return TB_OK;
}

typedef struct ln_state {
    const ln_shape *shapes;
    int nshapes;
    ln_bufs f;                 /* host inputs, and the checks' device buffers */
    ln_case *cases;            /* nshapes * NCASES */
    ln_dev *devs;              /* nshapes * NDIRS: what the cases time */
} ln_state;

static int alloc_devs(tb_bench *b, ln_state *st)
{
    st->devs = calloc((size_t)st->nshapes * NDIRS, sizeof *st->devs);
    if (!st->devs)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    for (int s = 0; s < st->nshapes; s++)
        for (int d = 0; d < NDIRS; d++) {
            ln_dev *v = &st->devs[s * NDIRS + d];
            *v = (ln_dev){.be = b->be, .host = &st->f, .s = st->shapes[s], .dir = d};
            TB_TRY(dev_alloc_all(v));
        }
    return TB_OK;
}

static int setup(tb_bench *b, void *state, opb_set *set)
{
    ln_state *st = state;
    int tiny = b->profile == TB_PROFILE_TINY;
    st->shapes = tiny ? shapes_tiny : shapes_all;
    st->nshapes = tiny ? 2 : (int)(sizeof shapes_all / sizeof shapes_all[0]);
    for (int s = 0; s < st->nshapes; s++) {
        ln_shape sh = st->shapes[s];
        size_t n = (size_t)sh.rows * sh.cols;
        st->f.max_n = n > st->f.max_n ? n : st->f.max_n;
        st->f.max_rows = sh.rows > st->f.max_rows ? sh.rows : st->f.max_rows;
        st->f.max_cols = sh.cols > st->f.max_cols ? sh.cols : st->f.max_cols;
    }
    st->cases = calloc((size_t)st->nshapes * NCASES, sizeof *st->cases);
    if (!st->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    TB_TRY(alloc_bufs(b->be, &st->f));
    TB_TRY(alloc_devs(b, st));
    for (int s = 0; s < st->nshapes; s++)
        for (int k = 0; k < NCASES; k++) {
            ln_case *c = &st->cases[s * NCASES + k];
            int d = k == C_COPY ? D_COPY : case_defs[k].bwd ? D_BWD : D_FWD;
            *c = (ln_case){b->be, &st->devs[s * NDIRS + d], st->shapes[s], k};
            /* an A/A copy runs its base's case (warmed up and rebuilt with it) */
            int aa = k == C_FWD_UN_AGAIN || k == C_BWD_UN_AGAIN;
            ln_case *arg = aa ? &st->cases[s * NCASES + case_base[k]] : c;
            TB_TRY(opb_register(b, set, OPB_WARMUPS, run_case, arg,
                                plan_iterations(b->profile, st->shapes[s]), "ln_%s/%dx%d",
                                case_defs[k].name, st->shapes[s].rows, st->shapes[s].cols));
            /* the copy and each direction's baseline rebuild its buffers */
            if (case_base[k] == k)
                TB_TRY(opb_set_rebuild(set, set->n - 1, case_rebuild, OPB_REBUILD_WARMUPS));
            /* A shape's cases are registered together. */
            if (case_base[k] != k)
                TB_TRY(opb_compare(set, set->n - 1, set->n - 1 - k + case_base[k], aa));
        }
    return TB_OK;
}

static int report(tb_bench *b, void *state, const gb_results *r)
{
    ln_state *st = state;
    for (int s = 0; s < st->nshapes; s++) {
        ln_check chk;
        double copy_gbs;
        TB_TRY(check_shape(b->be, &st->f, st->shapes[s], &chk));
        TB_TRY(add_copy_row(b, r, st->shapes[s], &copy_gbs));
        TB_TRY(add_dir_rows(b, r, st->shapes[s], 0, copy_gbs, &chk));
        TB_TRY(add_dir_rows(b, r, st->shapes[s], 1, copy_gbs, &chk));
    }
    return TB_OK;
}

static int plot(tb_bench *b, void *state)
{
    (void)state;
    TB_TRY(opb_plot(b, "fused_layernorm", "Layer norm effective bandwidth", "elements",
                    "effective bandwidth (GB/s)", 2, OPB_Y_RATE));
    return opb_plot(b, "fused_layernorm_speedup",
                    "Layer norm fused over unfused (paired estimate, 95% CI)", "elements",
                    "speedup (x)", 2, OPB_Y_SPEEDUP);
}

static void teardown(tb_bench *b, void *state)
{
    ln_state *st = state;
    free(st->cases);
    for (int i = 0; st->devs && i < st->nshapes * NDIRS; i++)
        if (st->devs[i].be)
            dev_free_all(&st->devs[i]);
    free(st->devs);
    free_bufs(b->be, &st->f);
}

static int run(tb_bench *b)
{
    static const opb_sweep sweep = {setup, report, plot, teardown};
    ln_state st = {0};
    return opb_run(b, &sweep, &st);
}

static const tb_technique technique = {
    .name = "fused_layernorm",
    .headline = "fused",
    .what = "Fused vs unfused layer norm (forward and backward) over transformer "
            "shapes, beside the copy bandwidth.",
    .est_seconds = {15, 90, 3, 11}, /* default, full, tiny, gpu */
    /* the rounds' share of it (opb_rounds_cfg): warm-up and rounds; default
     * 13 s (was 10): its 5 minimum rounds of 24 arms, one rebuild of each
     * shape's buffers and its checks did not fit 10 (an idle run ended at
     * 15.1 s) */
    .budget_seconds = {13, 80, 2, 10},
    .order = 290,
    .tiny = {.min_rows = 10, .plots = "fused_layernorm,fused_layernorm_speedup"},
};

TB_OPB_MAIN(technique, run)
