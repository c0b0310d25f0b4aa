/* opbench.c - see opbench.h. */
#include "bench/harness/opbench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/grow.h"
#include "lib/report/plot.h"

/* Google Benchmark calls this once per repetition, the repetitions of one
 * case back to back: the untimed warm-up calls (c->warmups: 2, the
 * harness's; 1 for ops whose one call takes long and caches nothing; 0 for
 * cold cases) run before the first repetition only. Warming up again before
 * every repetition cost tf32's default profile 12 extra 8192^3 GEMMs
 * (~110 s) and changed nothing: the same primitive and pages stay warm. */
static void bm_case(tbb_state *st, void *user)
{
    opb_case *c = user;
    for (; c->warmed < c->warmups; c->warmed++)
        if (c->fn(c->arg) != TB_OK || c->be->sync(c->be) != TB_OK) {
            tbb_skip_with_error(st, tb_error_message());
            return;
        }
    tb_bench_timed_iterations(st, c->be, c->fn, c->arg);
}

static int set_push(opb_set *set, opb_case *c)
{
    opb_case **p = tb_grow(set->cases, &set->cap, set->n, sizeof *p, 64);
    if (!p)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory registering benchmarks");
    set->cases = p;
    set->cases[set->n++] = c;
    return TB_OK;
}

int opb_register(tb_bench *b, opb_set *set, int warmups, tb_timed_op fn, void *arg,
                 int64_t iterations, const char *fmt, ...)
{
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    opb_case *c = malloc(sizeof *c);
    if (!c)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory registering %s", name);
    *c = (opb_case){b->be, fn, arg, warmups, 0};
    int rc = set_push(set, c);
    if (rc != TB_OK) {
        free(c);
        return rc;
    }
    tbb_options o = tbb_options_default();
    o.iterations = iterations < 1 ? 1 : iterations;
    o.repetitions = b->reps;
    o.manual_time = 1;
    o.unit = TBB_US;
    return tbb_register(name, bm_case, c, &o);
}

void opb_set_free(opb_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        free(set->cases[i]);
    free(set->cases);
    *set = (opb_set){0};
}

static const gb_run *find_v(const gb_results *r, const char *fmt, va_list ap, char *prefix,
                            size_t cap)
{
    int len = vsnprintf(prefix, cap - 1, fmt, ap);
    if (len < 0 || (size_t)len >= cap - 1)
        return NULL;
    prefix[len] = '/';
    prefix[len + 1] = 0;
    return tb_bench_find(r, prefix);
}

const gb_run *opb_find(const gb_results *r, const char *fmt, ...)
{
    char prefix[168];
    va_list ap;
    va_start(ap, fmt);
    const gb_run *run = find_v(r, fmt, ap, prefix, sizeof prefix);
    va_end(ap);
    return run;
}

int opb_need(const gb_results *r, const gb_run **out, const char *fmt, ...)
{
    char prefix[168];
    va_list ap;
    va_start(ap, fmt);
    *out = find_v(r, fmt, ap, prefix, sizeof prefix);
    va_end(ap);
    if (!*out)
        return TB_FAIL(TB_ERR_DATA, "no result for %s in Google Benchmark's JSON", prefix);
    return TB_OK;
}

int opb_fill_base(tb_result_row *row, const gb_run *base, const gb_run *again, double scale,
                  const char *unit)
{
    TB_TRY(tb_bench_fill_timing(row, base, scale, unit));
    TB_TRY(tb_bench_noise_floor(base, again, &row->noise_floor));
    row->speedup = row->speedup_ci_low = row->speedup_ci_high = 1.0;
    row->timing_verdict = TB_TIMING_BASELINE;
    return TB_OK;
}

int opb_fill_variant(tb_result_row *row, const gb_run *me, const gb_run *base,
                     const gb_run *again, double scale, const char *unit)
{
    TB_TRY(tb_bench_fill_timing(row, me, scale, unit));
    return tb_bench_fill_speedup(row, base, again, me);
}

void opb_set_check(tb_result_row *row, const tb_compare *c, const char *against)
{
    row->max_rel_err = c->max_rel;
    row->tolerance = c->verdict == TB_MATCH_EXACT ? NAN : c->tol;
    snprintf(row->checked_against, sizeof row->checked_against, "%s", against);
    row->correctness = tb_bench_correctness(c->verdict);
}

int opb_add_na(tb_bench *b, const char *setting, const char *metric, const char *reason)
{
    return tb_results_add_na(&b->res, b->technique, b->info.backend, b->info.name, setting,
                             metric, reason);
}

int opb_run(tb_bench *b, const opb_sweep *sw, void *state)
{
    opb_set set = {0};
    gb_results *r = NULL;
    int rc;
    TB_TRY_GOTO(rc, sw->setup(b, state, &set), out_free);
    fprintf(stderr, "%s: timing %zu cases x %d repetitions\n", b->technique, set.n, b->reps);
    if (set.n > 0)
        TB_TRY_GOTO(rc, tb_bench_run(b, &r), out_free);
    TB_TRY_GOTO(rc, sw->report(b, state, r), out_free);
    TB_TRY_GOTO(rc, tb_bench_save(b), out_free);
    TB_TRY_GOTO(rc, sw->plot(b, state), out_free);
out_free:
    gb_results_free(r);
    opb_set_free(&set);
    sw->teardown(b, state);
    return rc;
}

int opb_main(int argc, char **argv, const tb_technique *tech, int (*run)(tb_bench *b))
{
    tb_bench b;
    int done = 0;
    int rc = tb_bench_init(&b, tech, NULL, 0, argc, argv, &done);
    if (rc == TB_OK && !done)
        rc = run(&b);
    tb_bench_close(&b);
    return rc == TB_OK ? 0 : tb_bench_fail(tech->name, rc);
}

/* ---- figures ---- */

enum { MAX_SERIES = 16, MAX_POINTS = 64 };

typedef struct plot_data {
    char names[MAX_SERIES][128];
    double x[MAX_SERIES][MAX_POINTS], y[MAX_SERIES][MAX_POINTS];
    double lo[MAX_SERIES][MAX_POINTS], hi[MAX_SERIES][MAX_POINTS];
    size_t n[MAX_SERIES];
    int nseries;
} plot_data;

static double row_y(const tb_result_row *r, opb_y y)
{
    switch (y) {
    case OPB_Y_MEDIAN: return r->median;
    case OPB_Y_SPEEDUP: return r->is_baseline ? NAN : r->speedup;
    case OPB_Y_RATE: return r->rate;
    case OPB_Y_MEMORY: return r->memory_bytes;
    }
    return NAN;
}

static int series_of(plot_data *pd, const tb_result_row *r)
{
    char name[128];
    snprintf(name, sizeof name, "%s, %s", r->setting, r->metric);
    for (int s = 0; s < pd->nseries; s++)
        if (!strcmp(pd->names[s], name))
            return s;
    if (pd->nseries == MAX_SERIES)
        return -1;
    snprintf(pd->names[pd->nseries], sizeof pd->names[0], "%s", name);
    return pd->nseries++;
}

static void collect(const tb_results *res, opb_y y, const char *metric, plot_data *pd)
{
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        if (metric && strcmp(r->metric, metric) != 0)
            continue;
        double v = row_y(r, y);
        if (isnan(v) || isnan(r->param_value))
            continue;
        int s = series_of(pd, r);
        if (s < 0 || pd->n[s] == MAX_POINTS)
            continue;
        size_t k = pd->n[s]++;
        pd->x[s][k] = r->param_value;
        pd->y[s][k] = v;
        pd->lo[s][k] = y == OPB_Y_SPEEDUP ? r->speedup_ci_low : v;
        pd->hi[s][k] = y == OPB_Y_SPEEDUP ? r->speedup_ci_high : v;
    }
}

int opb_plot(tb_bench *b, const char *name, const char *title, const char *x_label,
             const char *y_label, int x_log, opb_y y)
{
    return opb_plot_metric(b, name, title, x_label, y_label, x_log, y, NULL);
}

int opb_plot_metric(tb_bench *b, const char *name, const char *title, const char *x_label,
                    const char *y_label, int x_log, opb_y y, const char *metric)
{
    plot_data *pd = calloc(1, sizeof *pd);
    if (!pd)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory drawing %s", name);
    collect(&b->res, y, metric, pd);
    int rc = TB_OK;
    if (pd->nseries > 0) {
        tb_plot_series series[MAX_SERIES];
        for (int s = 0; s < pd->nseries; s++)
            series[s] = (tb_plot_series){pd->names[s], pd->x[s], pd->y[s],
                                         y == OPB_Y_SPEEDUP ? pd->lo[s] : NULL,
                                         y == OPB_Y_SPEEDUP ? pd->hi[s] : NULL, pd->n[s]};
        char full[256];
        snprintf(full, sizeof full, "%s, %s (%d threads)", title, b->info.name, b->info.threads);
        tb_plot_hline one = {"no change", 1.0};
        int ylog = y == OPB_Y_MEDIAN || y == OPB_Y_MEMORY ? 10 : 0;
        tb_plot p = {full, x_label, y_label, x_log, ylog, series, (size_t)pd->nseries,
                     y == OPB_Y_SPEEDUP ? &one : NULL, y == OPB_Y_SPEEDUP ? 1 : 0, 0};
        rc = tb_plot_render(&p, b->od.plots, name, TB_PLOT_ALL);
    }
    free(pd);
    return rc;
}
