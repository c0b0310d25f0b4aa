/* opbench.c - see opbench.h. */
#include "bench/harness/opbench.h"

#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/harness/opb_plan.h"
#include "lib/core/atomic_file.h"
#include "lib/core/grow.h"
#include "lib/report/plot.h"

/* One arm's unit loop: `units` calls of the case's op back to back, timed
 * as one span with the backend's events (tb_bench_time_op), so that the
 * clock's resolution and the event overhead are paid once per repetition,
 * not once per call. */
typedef struct unit_loop {
    opb_case *c;
    long units;
} unit_loop;

static int run_units(void *arg)
{
    unit_loop *u = arg;
    for (long i = 0; i < u->units; i++)
        TB_TRY(u->c->fn(u->c->arg));
    return TB_OK;
}

/* tb_arm.run: the case's own untimed warm-up calls before its first
 * repetition (cold cases have none), then `units` timed calls. */
static int arm_run(void *user, long units, double *seconds)
{
    opb_case *c = user;
    for (; c->warmed < c->warmups; c->warmed++) {
        TB_TRY(c->fn(c->arg));
        TB_TRY(c->be->sync(c->be));
    }
    unit_loop u = {c, units};
    return tb_bench_time_op(c->be, run_units, &u, seconds);
}

/* tb_arm.rebuild: the case's own rebuild, then its warm-up calls again. */
static int arm_rebuild(void *user)
{
    opb_case *c = user;
    TB_TRY(c->rebuild(c->arg));
    for (int k = 0; k < c->rebuild_warmups; k++)
        TB_TRY(c->fn(c->arg));
    return c->be->sync(c->be);
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
    (void)iterations;
    opb_case *c = malloc(sizeof *c);
    if (!c)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory registering a case");
    *c = (opb_case){.be = b->be, .fn = fn, .arg = arg, .warmups = warmups, .base = set->n};
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(c->name, sizeof c->name, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof c->name) {
        free(c);
        return TB_FAIL(TB_ERR_INVALID, "case name too long (%d bytes)", len);
    }
    int rc = set_push(set, c);
    if (rc != TB_OK)
        free(c);
    return rc;
}

int opb_compare(opb_set *set, size_t var, size_t base, int aa)
{
    if (var >= set->n || base >= set->n || var == base)
        return TB_FAIL(TB_ERR_INVALID, "opb_compare(%zu, %zu): not two registered cases "
                       "(%zu registered)", var, base, set->n);
    set->cases[var]->base = base;
    set->cases[var]->aa = aa;
    return TB_OK;
}

int opb_set_rebuild(opb_set *set, size_t idx, int (*rebuild)(void *arg), int warmups)
{
    if (idx >= set->n || !rebuild || warmups < 0)
        return TB_FAIL(TB_ERR_INVALID, "opb_set_rebuild(%zu, %d warm-ups): no such case (%zu "
                       "registered), no rebuild or negative warm-ups", idx, warmups, set->n);
    set->cases[idx]->rebuild = rebuild;
    set->cases[idx]->rebuild_warmups = warmups;
    return TB_OK;
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

/* The sweep whose rows are being filled: opb_run sets it around report, so
 * that the fillers, which get gb_run pointers (the techniques' calls stay
 * as they were), can find each run's arm and its paired comparison. Like
 * Google Benchmark itself, one sweep at a time. */
typedef struct opb_ctx {
    const opb_plan *plan;
    const tb_rounds_result *rr;
    const gb_results *r;
} opb_ctx;

static opb_ctx current;

/* The arm behind run, or -1 when run is not from the current sweep's rounds. */
static int arm_of_run(const gb_run *run)
{
    if (!current.r || !run || run < current.r->runs || run >= current.r->runs + current.r->n_runs)
        return -1;
    return (int)(run - current.r->runs);
}

size_t opb_builds(const gb_run *run)
{
    int a = arm_of_run(run);
    if (a < 0)
        return 0;
    if (current.plan->arms[a].base == a)
        a = opb_plan_aa_arm(current.plan, a);
    return a >= 0 ? current.rr->arms[a].cmp.builds : 0;
}

/* The farthest the A/A interval strays from 1: the same reading of a
 * noise floor as tb_stats_noise_floor, on the paired interval. */
static double aa_noise(const tb_paired *aa)
{
    return fmax(0.0, fmax(aa->hi - 1.0, 1.0 - aa->lo));
}

/* arm: the arm whose interval the row reports (its stop is the row's). */
static void fill_rounds_columns(tb_result_row *row, const tb_paired *p, int arm)
{
    row->rounds = (int)p->rounds;
    row->mde = p->mde;
    snprintf(row->stopped_by, sizeof row->stopped_by, "%s",
             tb_rounds_stop_name(current.rr->arms[arm].stop));
    row->busy = current.rr->busy;
    row->load_avg = current.rr->load_avg;
    row->xcore_ns = current.rr->xcore_ns;
}

/* The arms a row reads (opb_plan_pair): var (-1 for a baseline row)
 * against ab, and ab's A/A arm. */
static int pair_arms(int var, int ab, const gb_run *again, int *aa)
{
    int ag = again ? arm_of_run(again) : -1;
    if (again && ag < 0)
        return TB_FAIL(TB_ERR_INVALID, "%s is not from this sweep's rounds", again->name);
    return opb_plan_pair(current.plan, var, ab, ag, aa);
}

int opb_fill_base(tb_result_row *row, const gb_run *base, const gb_run *again, double scale,
                  const char *unit)
{
    TB_TRY(tb_bench_fill_timing(row, base, scale, unit));
    row->speedup = row->speedup_ci_low = row->speedup_ci_high = 1.0;
    row->timing_verdict = TB_TIMING_BASELINE;
    int ab = arm_of_run(base);
    if (ab < 0)
        return tb_bench_noise_floor(base, again, &row->noise_floor);
    int aa;
    TB_TRY(pair_arms(-1, ab, again, &aa));
    row->noise_floor = 0;
    if (aa < 0)
        return TB_OK;
    const tb_paired *p = &current.rr->arms[aa].cmp;
    row->noise_floor = aa_noise(p);
    row->unreliable = p->lo > 1.0 || p->hi < 1.0;
    fill_rounds_columns(row, p, aa);
    return TB_OK;
}

int opb_fill_variant(tb_result_row *row, const gb_run *me, const gb_run *base,
                     const gb_run *again, double scale, const char *unit)
{
    TB_TRY(tb_bench_fill_timing(row, me, scale, unit));
    int am = arm_of_run(me), ab = arm_of_run(base);
    if (am < 0 || ab < 0)
        return tb_bench_fill_speedup(row, base, again, me);
    int aa;
    TB_TRY(pair_arms(am, ab, again, &aa));
    const tb_paired *cmp = &current.rr->arms[am].cmp;
    const tb_paired *aap = aa >= 0 ? &current.rr->arms[aa].cmp : NULL;
    int unreliable = 0;
    tb_speed_verdict v = tb_stats_paired_verdict(cmp, aap, &unreliable);
    row->speedup = cmp->speedup;
    row->speedup_ci_low = cmp->lo;
    row->speedup_ci_high = cmp->hi;
    row->noise_floor = aap ? aa_noise(aap) : 0;
    row->unreliable = unreliable;
    row->timing_verdict = tb_bench_timing_verdict(v);
    fill_rounds_columns(row, cmp, am);
    return TB_OK;
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

void opb_rounds_cfg(const tb_bench *b, tb_rounds_cfg *cfg)
{
    /* Per tb_profile: default, full, tiny. Op calls are short and many
     * sweep points share one round, so a repetition is shorter than a
     * training step's 0.2 s: 50 ms of calls already averages over
     * thousands of small calls, and the budget buys rounds instead. */
    static const double min_rep_s[3] = {0.05, 0.2, 0.002};
    /* Many arms share a sweep (gelu: 56); a settled op warms in far less. */
    static const double warmup_max_s[3] = {0.3, 3.0, 0.05};
    static const int max_rounds[3] = {60, 200, 5};
    /* Repetitions may shrink to this so that the minimum rounds of a sweep
     * of many arms fit its budget (fused_attention's 72 arms: 5 rounds of
     * 50 ms repetitions took 42 s of its 35); 10 ms still holds hundreds
     * of small calls. The tiny profile's are already as short. */
    static const double min_rep_floor_s[3] = {0.01, 0.05, 0};
    /* The gpu profile (full sizes) times its calls with the device's
     * events, precise to microseconds, and 5 ms of calls is still 50 of the
     * largest (GELU on 64 M elements, ~0.1 ms on an H200): at full's 50 ms
     * floor the H200 run's sweeps took 49 s (gelu, 119 arms) and 32 s
     * (fused_attention, 72) of budgets of 5.6 and 14 s, the minimum rounds,
     * not the budget, ending them. */
    double floor = b->run_profile == TB_PROFILE_GPU ? OPB_GPU_MIN_REP_FLOOR
                                                    : min_rep_floor_s[b->profile];
    /* A case's buffers are rebuilt every 2 rounds (every 4 in the full
     * profile's longer runs): an op sweep stops at 5 to 10 rounds in the
     * default profile, which must span TB_ROUNDS_MIN_BUILDS builds. */
    static const int rounds_per_build[3] = {2, 4, 2};
    int p = b->profile;
    double budget = tb_bench_budget_left(b);
    if (budget <= 0)
        budget = b->tech->est_seconds[b->run_profile];
    else
        budget -= OPB_CHECK_SHARE * tb_bench_budget(b);
    /* FNV-1a of the technique's name: a fixed seed per technique, so a
     * rerun shuffles its rounds the same way. */
    uint64_t seed = 0xcbf29ce484222325ull;
    for (const char *c = b->technique; *c; c++)
        seed = (seed ^ (unsigned char)*c) * 0x100000001b3ull;
    /* --reps is the minimum of rounds, as in the step harness. */
    int min_rounds = b->reps > 5 ? b->reps : 5;
    *cfg = (tb_rounds_cfg){.min_rep_s = min_rep_s[p], .min_rounds = min_rounds,
                           .max_rounds = max_rounds[p] > min_rounds ? max_rounds[p] : min_rounds,
                           .target_half_width = 0.02,
                           .budget_s = budget, .warmup_max_s = warmup_max_s[p], .seed = seed,
                           .rounds_per_build = rounds_per_build[p],
                           .min_rep_floor_s = floor};
}

/* The per-round times of every arm as Google Benchmark-like runs named
 * "<arm name>/", so that the techniques' opb_need lookups stay as they
 * were: repetitions are the rounds, seconds are per call. */
static int runs_of_rounds(const opb_plan *plan, const tb_rounds_result *rr, gb_results **out)
{
    gb_results *r = calloc(1, sizeof *r);
    if (!r)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    r->runs = calloc((size_t)plan->n_arms, sizeof *r->runs);
    if (!r->runs) {
        free(r);
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    }
    r->n_runs = (size_t)plan->n_arms;
    for (int i = 0; i < plan->n_arms; i++) {
        gb_run *run = &r->runs[i];
        size_t n = (size_t)rr->arms[i].rounds, len = strlen(plan->names[i]);
        run->name = malloc(len + 2);
        run->seconds = malloc((n ? n : 1) * sizeof *run->seconds);
        run->cpu_seconds = calloc(n ? n : 1, sizeof *run->cpu_seconds);
        run->iterations = calloc(n ? n : 1, sizeof *run->iterations);
        run->label = strdup("");
        run->error_message = strdup("");
        if (!run->name || !run->seconds || !run->cpu_seconds || !run->iterations ||
            !run->label || !run->error_message) {
            gb_results_free(r);
            return TB_FAIL(TB_ERR_NOMEM, "out of memory");
        }
        memcpy(run->name, plan->names[i], len);
        memcpy(run->name + len, "/", 2);
        memcpy(run->seconds, rr->arms[i].seconds, n * sizeof *run->seconds);
        for (size_t k = 0; k < n; k++)
            run->iterations[k] = rr->arms[i].units_per_rep;
        run->repetitions = (int)n;
        run->manual_time = 1;
    }
    *out = r;
    return TB_OK;
}

/* The arms of set's cases (opb_plan.h), each running its case. */
static int plan_arms(const opb_set *set, opb_plan *plan)
{
    opb_plan_case *pc = calloc(set->n ? set->n : 1, sizeof *pc);
    if (!pc)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < set->n; i++)
        pc[i] = (opb_plan_case){set->cases[i]->name, set->cases[i]->base, set->cases[i]->aa};
    int rc = opb_plan_build(pc, set->n, plan);
    free(pc);
    TB_TRY(rc);
    for (int a = 0; a < plan->n_arms; a++) {
        opb_case *c = set->cases[plan->case_of_arm[a]];
        /* an A/A copy registered with its base's op and argument runs on
         * its base's case: the engine then warms it up and rebuilds it
         * with its base (rounds.c, shares_base), not twice */
        opb_case *b = set->cases[c->base];
        if (c->aa && c->fn == b->fn && c->arg == b->arg)
            c = b;
        plan->arms[a].run = arm_run;
        plan->arms[a].user = c;
        plan->arms[a].rebuild = c->rebuild ? arm_rebuild : NULL;
    }
    return TB_OK;
}

/* Times every case in interleaved rounds; Google Benchmark's JSON of them
 * is kept as results/<device>/<technique>.gbench.json (atomically). */
static int time_cases(tb_bench *b, const opb_set *set, opb_plan *plan, tb_rounds_result *rr,
                      gb_results **out)
{
    TB_TRY(plan_arms(set, plan));
    tb_rounds_cfg cfg;
    opb_rounds_cfg(b, &cfg);
    char path[PATH_MAX + 64], name[96], tmp[PATH_MAX + 96];
    snprintf(name, sizeof name, "%s.gbench.json", b->technique);
    TB_TRY(tb_outdir_join(b->od.results, name, path, sizeof path));
    TB_TRY(tb_bench_reserve_tmp(path, tmp, sizeof tmp));
    cfg.gbench_json = tmp;
    fprintf(stderr, "%s: %zu cases as %d arms in rounds (seed %llu, budget %.0f s, "
            "repetitions of >= %g s)\n", b->technique, set->n, plan->n_arms,
            (unsigned long long)cfg.seed, cfg.budget_s, cfg.min_rep_s);
    TB_TRY(tb_bench_finish_tmp(tb_rounds_run(&cfg, plan->arms, plan->n_arms, rr), tmp, path));
    fprintf(stderr, "%s: %d rounds, stopped by %s after %.1f s (load %.2f%s)\n", b->technique,
            rr->rounds, tb_rounds_stop_name(rr->stop), rr->seconds, rr->load_avg,
            rr->busy ? ", busy machine" : "");
    return runs_of_rounds(plan, rr, out);
}

/* Every timed row of the sweep (rows from first on) measured in its rounds
 * gets the machine's load, compared or not (a copy ceiling too): the rows
 * the comparison fillers did not already mark. */
static void mark_machine(tb_results *res, size_t first, const tb_rounds_result *rr)
{
    for (size_t i = first; i < res->n; i++) {
        tb_result_row *row = &res->rows[i];
        if (row->reps <= 0 || !isnan(row->load_avg))
            continue;
        row->busy = rr->busy;
        row->load_avg = rr->load_avg;
        row->xcore_ns = rr->xcore_ns;
    }
}

int opb_run(tb_bench *b, const opb_sweep *sw, void *state)
{
    opb_set set = {0};
    opb_plan plan = {0};
    tb_rounds_result rr = {0};
    gb_results *r = NULL;
    int rc;
    TB_TRY_GOTO(rc, sw->setup(b, state, &set), out_free);
    if (set.n > 0)
        TB_TRY_GOTO(rc, time_cases(b, &set, &plan, &rr, &r), out_free);
    current = (opb_ctx){&plan, &rr, r};
    size_t first_row = b->res.n;
    rc = sw->report(b, state, r);
    current = (opb_ctx){0};
    TB_TRY_GOTO(rc, rc, out_free);
    if (r)
        mark_machine(&b->res, first_row, &rr);
    TB_TRY_GOTO(rc, tb_bench_save(b), out_free);
    TB_TRY_GOTO(rc, sw->plot(b, state), out_free);
out_free:
    gb_results_free(r);
    tb_rounds_result_free(&rr);
    opb_plan_free(&plan);
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
    int style[MAX_SERIES];     /* from the setting's place among all settings */
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

/* The place of `name` among the distinct values of a string field of
 * res's rows, in first-seen order; *count gets how many there are. */
static int place_of(const tb_results *res, size_t off, const char *name, int *count)
{
    int k = 0, at = 0;
    for (size_t i = 0; i < res->n; i++) {
        const char *s = (const char *)&res->rows[i] + off;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp((const char *)&res->rows[j] + off, s);
        if (seen)
            continue;
        if (!strcmp(s, name))
            at = k;
        k++;
    }
    *count = k;
    return at;
}

/* A series' line style from its setting's and metric's places among all
 * of res (the baseline included): a setting keeps its colour in its time,
 * rate and speedup figures, whichever of them leaves the baseline out. */
static int setting_style(const tb_results *res, const tb_result_row *r)
{
    int nset, nmet;
    int set = place_of(res, offsetof(tb_result_row, setting), r->setting, &nset);
    int met = place_of(res, offsetof(tb_result_row, metric), r->metric, &nmet);
    return 1 + set * nmet + met;
}

static int series_of(plot_data *pd, const tb_results *res, const tb_result_row *r)
{
    char name[128];
    snprintf(name, sizeof name, "%s, %s", r->setting, r->metric);
    for (int s = 0; s < pd->nseries; s++)
        if (!strcmp(pd->names[s], name))
            return s;
    if (pd->nseries == MAX_SERIES)
        return -1;
    snprintf(pd->names[pd->nseries], sizeof pd->names[0], "%s", name);
    pd->style[pd->nseries] = setting_style(res, r);
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
        int s = series_of(pd, res, r);
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
                                         y == OPB_Y_SPEEDUP ? pd->hi[s] : NULL, pd->n[s],
                                         pd->style[s]};
        char full[256], dev[200];
        tb_device_describe(&b->info, dev, sizeof dev);
        snprintf(full, sizeof full, "%s, %s", title, dev);
        tb_plot_hline one = {"no change", 1.0};
        int ylog = y == OPB_Y_MEDIAN || y == OPB_Y_MEMORY ? 10 : 0;
        tb_plot p = {full, x_label, y_label, x_log, ylog, series, (size_t)pd->nseries,
                     y == OPB_Y_SPEEDUP ? &one : NULL, y == OPB_Y_SPEEDUP ? 1 : 0, 0};
        rc = tb_plot_render(&p, b->od.plots, name, TB_PLOT_ALL);
    }
    free(pd);
    return rc;
}
