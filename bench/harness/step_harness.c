/* step_harness.c - see step_harness.h. */
#include "bench/harness/step_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/report/plot.h"

/* Per profile: the subset, the batch, how long each repetition and check
 * runs. The default keeps every sweep point and makes each one short. */
typedef struct step_profile {
    int batch;
    long long train_n, test_n;
    int warmup;               /* units run when a trainer is created, untimed */
    int iters;                /* units per repetition (steps; epochs: always 1) */
    int check_steps;          /* steps of the correctness pass */
    long check_samples;       /* per_sample entries: samples of the check */
} step_profile;

static const step_profile step_profiles[3] = {
    [TB_PROFILE_DEFAULT] = {32, 256, 1000, 2, 2, 20, 1024},
    [TB_PROFILE_FULL] = {64, 2048, 10000, 3, 5, 100, 16384},
    [TB_PROFILE_TINY] = {16, 64, 256, 1, 1, 5, 128},
};

/* What the correctness pass learned about one setting. */
typedef struct setting_state {
    int na;                   /* 1: an n/a row, not timed */
    char why[200];            /* the n/a reason */
    float loss, loss_again;   /* last loss of the check; a baseline's second run */
    double peak_bytes;
    char note[200];
} setting_state;

typedef struct step_run step_run;

typedef struct step_case {
    step_run *run;
    int idx;                  /* setting */
} step_case;

struct step_run {
    const tb_step_technique *tech;
    tb_bench b;
    step_profile prof;
    tb_config base_cfg;
    tb_dataset *train, *test;
    setting_state *st;
    step_case *cases;         /* one per setting */
    tb_step_ctx live;         /* the trainer being timed */
    int live_idx;             /* its setting, -1 when none */
    double mem_limit_mib;
    int check_steps;
};

/* ---- building one setting's trainer ---- */

static void base_config(step_run *r)
{
    tb_config *c = &r->base_cfg;
    tb_config_defaults(c);
    c->batch_size = r->prof.batch;
    c->data_limit = r->prof.train_n;
    c->test_limit = r->prof.test_n;
    /* train_test's lr for batch 32: at 0.05 a few steps of SGD with momentum
     * amplify rounding differences beyond what the tolerances mean to catch. */
    c->lr = 0.01;
    if (r->tech->setup)
        r->tech->setup(c, r->b.profile);
}

static int ctx_open(step_run *r, int idx, tb_step_ctx *c)
{
    const tb_step_setting *s = &r->tech->settings[idx];
    memset(c, 0, sizeof *c);
    c->tech = r->tech;
    c->setting = s;
    c->bench = &r->b;
    c->cfg = r->base_cfg;
    c->train = r->train;
    c->test = r->test;
    if (s->apply)
        s->apply(&c->cfg, s->param);
    TB_TRY(tb_config_validate(&c->cfg));
    if (s->prepare)
        TB_TRY(s->prepare(r->b.be, s->param));
    return tb_trainer_create_with_data(&c->cfg, r->b.be, r->train, r->test, &c->t);
}

static void ctx_close(tb_step_ctx *c)
{
    tb_trainer_destroy(c->t);
    free(c->user);
    c->t = NULL;
    c->user = NULL;
}

int tb_step_next_batch(tb_step_ctx *c, tb_batch *b)
{
    return tb_trainer_next_batch(c->t, b);
}

/* One unit of the metric: the setting's own, or a step, or an epoch. */
static int run_unit(tb_step_ctx *c, float *loss)
{
    int rc = TB_OK;
    if (c->setting->run_once)
        rc = c->setting->run_once(c, loss);
    else if (c->tech->metric == TB_METRIC_STEP)
        rc = tb_trainer_step(c->t, loss);
    else
        for (int i = tb_loader_num_batches(c->t->train_ld); i > 0 && rc == TB_OK; i--)
            rc = tb_trainer_step(c->t, loss);
    c->calls++;
    return rc;
}

static int timed_unit(void *arg)
{
    float loss;
    return run_unit(arg, &loss);
}

const char *tb_step_na_never(const char *backend, const tb_step_setting *s)
{
    (void)backend;
    (void)s;
    return NULL;
}

/* ---- the correctness pass ---- */

/* 1: the setting ran out of memory (recorded as n/a), 0: it ran, else an error. */
static int mark_oom(step_run *r, int idx, int rc)
{
    if (rc != TB_ERR_DEVICE_OOM)
        return rc;
    setting_state *s = &r->st[idx];
    s->na = 1;
    snprintf(s->why, sizeof s->why, "out of memory under --mem-limit=%g MiB (%s)",
             r->mem_limit_mib, tb_error_message());
    tb_error_clear();
    fprintf(stderr, "%s: %s: %s\n", r->tech->desc.name, r->tech->settings[idx].name, s->why);
    return TB_OK;
}

static int check_run(step_run *r, int idx, float *loss, int with_note)
{
    tb_backend *be = r->b.be;
    tb_step_ctx c;
    size_t in_use = 0, peak = 0;
    TB_TRY(be->mem_reset_peak(be));
    int rc = ctx_open(r, idx, &c);
    int steps = r->check_steps;
    if (rc == TB_OK && r->tech->per_sample) {
        long per_step = (long)c.cfg.batch_size * c.cfg.accum_steps;
        steps = (int)(r->prof.check_samples / per_step);
        steps = steps < 1 ? 1 : steps;
    }
    int own = c.setting->run_once && r->tech->metric == TB_METRIC_STEP;
    for (int i = 0; i < steps && rc == TB_OK; i++)
        rc = own ? c.setting->run_once(&c, loss) : tb_trainer_step(c.t, loss);
    if (rc == TB_OK)
        rc = tb_trainer_sync(c.t);
    if (rc == TB_OK)
        rc = be->mem_stats(be, &in_use, &peak);
    if (rc == TB_OK && with_note && r->tech->check_note)
        rc = r->tech->check_note(&c, r->st[idx].note, sizeof r->st[idx].note);
    r->st[idx].peak_bytes = (double)peak;
    ctx_close(&c);
    return rc;
}

static int check_all(step_run *r)
{
    const tb_step_technique *t = r->tech;
    for (int i = 0; i < t->n_settings; i++) {
        setting_state *s = &r->st[i];
        const char *na = t->na_reason ? t->na_reason(r->b.info.backend, &t->settings[i]) : NULL;
        if (na && t->settings[i].base != i) {
            s->na = 1;
            snprintf(s->why, sizeof s->why, "%s", na);
            continue;
        }
        int rc = check_run(r, i, &s->loss, 1);
        TB_TRY(mark_oom(r, i, rc));
        if (!s->na && t->settings[i].base == i)
            TB_TRY(mark_oom(r, i, check_run(r, i, &s->loss_again, 0)));
        if (!s->na)
            fprintf(stderr, "%s: check %-24s loss after %d steps %.9g, peak %.1f MiB\n", t->desc.name,
                    t->settings[i].name, r->check_steps, s->loss, s->peak_bytes / 1048576.0);
    }
    return TB_OK;
}

/* ---- timing ---- */

/* Makes setting idx's trainer the live one, warmed up. */
static int live_switch(step_run *r, int idx)
{
    if (r->live_idx == idx)
        return TB_OK;
    ctx_close(&r->live);
    r->live_idx = -1;
    TB_TRY(ctx_open(r, idx, &r->live));
    r->live_idx = idx;
    float loss;
    int warmup = r->tech->per_sample ? 1 : r->prof.warmup;
    for (int w = 0; w < warmup; w++)
        TB_TRY(run_unit(&r->live, &loss));
    return tb_trainer_sync(r->live.t);
}

/* Seconds of one unit as reported: per 1000 samples when the entry asks. */
static double report_scale(const step_run *r)
{
    const tb_config *c = &r->live.cfg;
    return r->tech->per_sample ? 1000.0 / ((double)c->batch_size * c->accum_steps) : 1.0;
}

static void bm_setting(tbb_state *st, void *user)
{
    step_case *k = user;
    step_run *r = k->run;
    if (live_switch(r, k->idx) != TB_OK) {
        tbb_skip_with_error(st, tb_error_message());
        return;
    }
    double scale = report_scale(r);
    while (tbb_keep_running(st)) {
        double s = 0;
        if (tb_bench_time_op(r->b.be, timed_unit, &r->live, &s) != TB_OK) {
            tbb_skip_with_error(st, tb_error_message());
            return;
        }
        tbb_set_iteration_time(st, s * scale);
    }
}

static int register_one(step_run *r, int idx, const char *prefix)
{
    char name[64];
    snprintf(name, sizeof name, "%s%02d", prefix, idx);
    tbb_options o = tbb_options_default();
    o.iterations = r->tech->metric == TB_METRIC_EPOCH || r->tech->per_sample ? 1 : r->prof.iters;
    o.repetitions = r->b.reps;
    o.manual_time = 1;
    o.unit = TBB_MS;
    return tbb_register(name, bm_setting, &r->cases[idx], &o);
}

/* Every setting that ran, then every baseline again (at the end, so the
 * noise floor also sees drift over the run). */
static int register_all(step_run *r)
{
    const tb_step_technique *t = r->tech;
    for (int i = 0; i < t->n_settings; i++) {
        r->cases[i] = (step_case){r, i};
        if (!r->st[i].na)
            TB_TRY(register_one(r, i, "set"));
    }
    for (int i = 0; i < t->n_settings; i++)
        if (!r->st[i].na && t->settings[i].base == i)
            TB_TRY(register_one(r, i, "again"));
    return TB_OK;
}

/* ---- rows ---- */

static const gb_run *find_run(const gb_results *g, const char *prefix, int idx)
{
    char name[64];
    snprintf(name, sizeof name, "%s%02d/", prefix, idx);
    return tb_bench_find(g, name);
}

static void set_check(step_run *r, int i, tb_result_row *row)
{
    const tb_step_technique *t = r->tech;
    const setting_state *s = &r->st[i];
    int base = t->settings[i].base;
    if (t->not_comparable && base != i) {
        row->correctness = TB_CORRECT_NA;
        snprintf(row->note, sizeof row->note, "%s%s%s", t->not_comparable, s->note[0] ? "; " : "",
                 s->note);
        return;
    }
    tb_compare cmp;
    double ref = r->st[base].loss, got = base == i ? s->loss_again : s->loss;
    if (tb_compare_values(ref, got, t->tolerance, &cmp) != TB_OK) {
        tb_error_clear();
        return;
    }
    row->correctness = tb_bench_correctness(cmp.verdict);
    row->max_rel_err = cmp.max_rel;
    if (t->tolerance > 0)
        row->tolerance = t->tolerance;
    snprintf(row->checked_against, sizeof row->checked_against, "%s",
             base == i ? "baseline run again" : "baseline");
    snprintf(row->note, sizeof row->note, "loss after %d steps %.7g vs %.7g%s%s%s%s",
             r->check_steps, got, ref, t->tolerance > 0 ? "; tolerance: " : "",
             t->tolerance > 0 ? t->tolerance_why : "", s->note[0] ? "; " : "", s->note);
}

static double samples_per_unit(const step_run *r, int i)
{
    tb_config c = r->base_cfg;
    if (r->tech->settings[i].apply)
        r->tech->settings[i].apply(&c, r->tech->settings[i].param);
    if (r->tech->per_sample)
        return 1000.0;
    if (r->tech->metric == TB_METRIC_EPOCH)
        return (double)r->train->n;
    return (double)c.batch_size * c.accum_steps;
}

static int add_row(step_run *r, const gb_results *g, int i)
{
    const tb_step_technique *t = r->tech;
    const tb_step_setting *s = &t->settings[i];
    const char *metric = t->per_sample ? "time per 1000 samples"
                         : t->metric == TB_METRIC_EPOCH ? "epoch time" : "step time";
    if (r->st[i].na)
        return tb_results_add_na(&r->b.res, t->desc.name, r->b.info.backend, r->b.info.name, s->name,
                                 metric, r->st[i].why);
    tb_result_row row;
    int epoch = t->metric == TB_METRIC_EPOCH;
    tb_bench_row(&r->b, &row, s->name, s->base == i, t->param_name, s->param, metric);
    const gb_run *me = find_run(g, "set", i);
    const gb_run *base = find_run(g, "set", s->base), *again = find_run(g, "again", s->base);
    TB_TRY(tb_bench_fill_timing(&row, me, epoch ? 1.0 : 1e3, epoch ? "s" : "ms"));
    if (s->base == i)
        TB_TRY(tb_bench_noise_floor(base, again, &row.noise_floor));
    else
        TB_TRY(tb_bench_fill_speedup(&row, base, again, me));
    row.rate = samples_per_unit(r, i) / (row.median / (epoch ? 1.0 : 1e3));
    snprintf(row.rate_unit, sizeof row.rate_unit, "samples/s");
    row.memory_bytes = r->st[i].peak_bytes;
    set_check(r, i, &row);
    if (t->row_hook)
        t->row_hook(i, &row);
    return tb_results_add(&r->b.res, &row);
}

#define MAX_PLOT_GROUPS 4

/* Index of row's param_name among names[0..*n), added when new; -1 when
 * there are already MAX_PLOT_GROUPS. */
static int plot_group(const char *names[], size_t *n, const char *name)
{
    for (size_t g = 0; g < *n; g++)
        if (strcmp(names[g], name) == 0)
            return (int)g;
    if (*n == MAX_PLOT_GROUPS)
        return -1;
    names[*n] = name;
    return (int)(*n)++;
}

/* Speedup over the baseline per setting, with its 95% interval: one series
 * per param_name, so rows that sweep different things (the waterfall's
 * cumulative stages and its leave-one-out) are not joined by one line. */
static int plot_speedups(step_run *r)
{
    size_t cap = (size_t)r->tech->n_settings, ng = 0, count[MAX_PLOT_GROUPS] = {0};
    const char *names[MAX_PLOT_GROUPS];
    double *buf = calloc(cap * 4 * MAX_PLOT_GROUPS, sizeof *buf);
    if (!buf)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory for the plot");
    for (size_t i = 0; i < r->b.res.n; i++) {
        const tb_result_row *row = &r->b.res.rows[i];
        int g = isnan(row->speedup) ? -1 : plot_group(names, &ng, row->param_name);
        if (g < 0 || count[g] >= cap)
            continue;
        double *x = buf + (size_t)g * 4 * cap;
        size_t k = count[g]++;
        x[k] = row->param_value, x[cap + k] = row->speedup;
        x[2 * cap + k] = row->speedup_ci_low, x[3 * cap + k] = row->speedup_ci_high;
    }
    tb_plot_series sp[MAX_PLOT_GROUPS];
    for (size_t g = 0; g < ng; g++) {
        const double *x = buf + g * 4 * cap;
        sp[g] = (tb_plot_series){ng > 1 ? names[g] : "speedup", x, x + cap, x + 2 * cap,
                                 x + 3 * cap, count[g]};
    }
    int rc = TB_OK;
    if (ng > 0) {
        char title[256], xl[96];
        snprintf(title, sizeof title, "%s: speedup over the technique off, %s (median, 95%% CI)",
                 r->tech->desc.name, r->b.info.name);
        snprintf(xl, sizeof xl, "%s", r->tech->param_name);
        tb_plot_hline one = {"no change", 1.0};
        tb_plot p = {title, xl, "speedup (x)", 0, 0, sp, ng, &one, 1, 0};
        rc = tb_plot_render(&p, r->b.od.plots, r->tech->desc.name, TB_PLOT_ALL);
    }
    free(buf);
    return rc;
}

/* ---- main ---- */

static int open_data(step_run *r)
{
    const tb_config *c = &r->base_cfg;
    TB_TRY(tb_dataset_open_fashion_mnist(c->data_dir, TB_SPLIT_TRAIN, (long)c->data_limit, &r->train));
    return tb_dataset_open_fashion_mnist(c->data_dir, TB_SPLIT_TEST, (long)c->test_limit, &r->test);
}

static int run(step_run *r)
{
    const tb_step_technique *t = r->tech;
    gb_results *g = NULL;
    int rc;
    if (t->backend_ready)
        t->backend_ready(r->b.info.backend);
    base_config(r);
    if (r->check_steps <= 0)
        r->check_steps = r->prof.check_steps;
    if (r->mem_limit_mib > 0)
        TB_TRY(r->b.be->mem_set_limit(r->b.be, (size_t)(r->mem_limit_mib * 1048576.0)));
    TB_TRY(open_data(r));
    r->st = calloc((size_t)t->n_settings, sizeof *r->st);
    r->cases = calloc((size_t)t->n_settings, sizeof *r->cases);
    if (!r->st || !r->cases)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory planning %s", t->desc.name);
    TB_TRY(check_all(r));
    TB_TRY(register_all(r));
    fprintf(stderr, "%s: timing %d settings x %d repetitions\n", t->desc.name, t->n_settings,
            r->b.reps);
    rc = tb_bench_run(&r->b, &g);
    ctx_close(&r->live);
    r->live_idx = -1;
    TB_TRY(rc);
    for (int i = 0; i < t->n_settings && rc == TB_OK; i++)
        rc = add_row(r, g, i);
    gb_results_free(g);
    TB_TRY(rc);
    TB_TRY(tb_bench_save(&r->b));
    return plot_speedups(r);
}

int tb_step_main(const tb_step_technique *tech, int argc, char **argv)
{
    step_run *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "%s: out of memory\n", tech->desc.name);
        return 1;
    }
    r->tech = tech;
    r->live_idx = -1;
    r->mem_limit_mib = -1;
    tb_flag extra[] = {
        {"mem-limit", TB_FLAG_DOUBLE, &r->mem_limit_mib,
         "device memory limit in MiB counted by the backend's allocator (0 = none; "
         "default: the technique's for the profile)", NULL},
        {"check-steps", TB_FLAG_INT, &r->check_steps,
         "steps of the correctness pass (0 = the profile's)", NULL},
    };
    int done = 0;
    int rc = tb_bench_init(&r->b, &tech->desc, extra, 2, argc, argv, &done);
    if (rc == TB_OK && !done) {
        r->prof = step_profiles[r->b.profile];
        if (r->mem_limit_mib < 0)
            r->mem_limit_mib = tech->mem_limit_mib[r->b.profile];
        rc = run(r);
    }
    ctx_close(&r->live);
    tb_dataset_free(r->train);
    tb_dataset_free(r->test);
    free(r->st);
    free(r->cases);
    tb_bench_close(&r->b);
    free(r);
    if (rc != TB_OK)
        return tb_bench_fail(tech->desc.name, rc);
    return 0;
}
