/* harness.c - see harness.h. */
#include "bench/harness/harness.h"

#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/harness/pin.h"
#include "lib/core/atomic_file.h"
#include "lib/core/clock.h"
#include "lib/core/rng.h"

/* tb_profile order, then auto (the flag's default) */
static const char *const profile_names[] = {"default", "full", "tiny", "gpu", "auto", NULL};

/* What an interrupted run must not leave behind (tb_bench_remove_on_signal):
 * the temporaries Google Benchmark and the rounds write into, data staged
 * outside the results (data_format's copy in /dev/shm). The handler only
 * calls unlink and rmdir, which are async-signal-safe, then dies of the
 * signal, as bench:all's guard expects. */
#define MAX_ON_SIGNAL 8
static char on_signal[MAX_ON_SIGNAL][PATH_MAX + 96];
static volatile sig_atomic_t on_signal_n;

static void remove_and_die(int sig)
{
    for (int i = 0; i < on_signal_n; i++)
        if (on_signal[i][0] && unlink(on_signal[i]) != 0)
            rmdir(on_signal[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

int tb_bench_remove_on_signal(const char *path)
{
    int i = 0;
    while (i < on_signal_n && on_signal[i][0])
        i++;
    if (i == MAX_ON_SIGNAL)
        return TB_FAIL(TB_ERR_INTERNAL, "more than %d paths to remove on a signal", MAX_ON_SIGNAL);
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof on_signal[i])
        return TB_FAIL(TB_ERR_INVALID, "path empty or too long: %s", path);
    /* the first byte last: a signal in between sees an empty slot, never a
     * prefix of the path (which could name another file) */
    memcpy(on_signal[i] + 1, path + 1, len);
    atomic_signal_fence(memory_order_seq_cst); /* the compiler keeps this order */
    on_signal[i][0] = path[0];
    if (i == on_signal_n)
        on_signal_n = i + 1;
    signal(SIGINT, remove_and_die);
    signal(SIGTERM, remove_and_die);
    signal(SIGHUP, remove_and_die); /* a closed terminal or ssh session */
    return TB_OK;
}

void tb_bench_keep_on_signal(const char *path)
{
    for (int i = 0; i < on_signal_n; i++)
        if (!strcmp(on_signal[i], path))
            on_signal[i][0] = '\0';
}

int tb_bench_reserve_tmp(const char *path, char *tmp, size_t cap)
{
    TB_TRY(tb_atomic_reserve(path, tmp, cap));
    int rc = tb_bench_remove_on_signal(tmp);
    if (rc != TB_OK)
        unlink(tmp);
    return rc;
}

int tb_bench_finish_tmp(int rc, const char *tmp, const char *path)
{
    if (rc == TB_OK)
        rc = tb_atomic_publish(tmp, path);
    tb_bench_keep_on_signal(tmp);
    if (rc != TB_OK)
        unlink(tmp);
    return rc;
}

#define TB_MAX_ARGS 256 /* of a command line the fingerprint records */

int tb_bench_init(tb_bench *b, const tb_technique *tech, const tb_flag *extra, size_t nextra,
                  int argc, char **argv, int *done)
{
    const char *technique = tb_technique_results(tech);
    memset(b, 0, sizeof *b);
    b->t_start = tb_clock_s();
    b->tech = tech;
    b->technique = technique;
    b->device_spec = "auto";
    b->reps = TB_MIN_REPS;
    b->out_dir = "";
    b->run_profile = TB_PROFILE_AUTO;
    *done = 0;
    tb_results_init(&b->res);

    /* the command line as given, for the fingerprint: parsing takes the
     * flags out of argv */
    char *given[TB_MAX_ARGS + 1];
    int ngiven = tb_flags_keep_argv(argc, argv, given, TB_MAX_ARGS + 1);
    int describe = 0;
    tb_flag flags[7 + TB_MAX_EXTRA_FLAGS] = {
        {"device", TB_FLAG_STRING, &b->device_spec, "auto, cpu, cuda or cuda:N", NULL},
        {"threads", TB_FLAG_INT, &b->threads, "CPU threads for kernels (0 = all cores)", NULL,
         TB_RANGE(0, TB_THREADS_MAX)},
        {"profile", TB_FLAG_CHOICE, &b->run_profile,
         "sweep length: default (minutes), full (real measurements), tiny (tests), gpu (the "
         "real models on one 80 GB GPU, budgets for 10 minutes: README gives its estimated run "
         "time); auto: gpu on the CUDA backend, else "
         "default", profile_names},
        {"out-dir", TB_FLAG_STRING, &b->out_dir,
         "root for results/ and plots/ (default: the source tree under bazel run)", NULL},
        {"reps", TB_FLAG_INT, &b->reps,
         "repetitions per measurement (at least 5: a median and its interval)", NULL,
         TB_RANGE(TB_MIN_REPS, 100000)},
        {"extra-budget", TB_FLAG_DOUBLE, &b->extra_budget,
         "seconds added to the technique's time budget (its checks and timing together); "
         "negative: taken off, at most half of it (bench:all's time keeper)", NULL,
         TB_RANGE(-86400, 86400)},
        {"describe", TB_FLAG_BOOL, &describe,
         "print this technique's declaration as one JSON line (what bench:all reads) and exit",
         NULL},
    };
    if (nextra > TB_MAX_EXTRA_FLAGS)
        return TB_FAIL(TB_ERR_INTERNAL, "too many technique flags");
    if (nextra > 0) /* extra is NULL where there are none, and memcpy's NULL is undefined */
        memcpy(flags + 7, extra, nextra * sizeof *extra);
    size_t nflags = 7 + nextra;
    int help = 0;
    TB_TRY(tb_flags_parse(flags, nflags, &argc, argv, "benchmark_", &help));
    if (describe) {
        *done = 1;
        return tb_technique_describe(tech, stdout);
    }
    /* Google Benchmark's flags that leave its JSON output as tb_bench_run
     * reads it (--benchmark_format, _out or _list_tests would not: the
     * runner prints its usage or nothing and exits, or writes elsewhere) */
    static const char *const gbench_ok[] = {"--benchmark_filter=", "--benchmark_min_time=",
                                            "--benchmark_min_warmup_time=", NULL};
    if (help) {
        char prog[64];
        snprintf(prog, sizeof prog, "bazel run //bench:%s --", tech->name);
        tb_flags_usage(stdout, prog, tech->what, flags, nflags);
        if (tech->gbench_runner)
            printf("  --benchmark_filter=, --benchmark_min_time=, --benchmark_min_warmup_time=\n"
                   "                            Google Benchmark's own, passed to its runner\n");
        *done = 1;
        return TB_OK;
    }
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--benchmark_", 12) != 0)
            return TB_FAIL(TB_ERR_INVALID, "unexpected argument '%s'; see --help", argv[i]);
        if (!tech->gbench_runner)
            return TB_FAIL(TB_ERR_INVALID, "%s: %s times in tunebench's own interleaved "
                           "rounds, not Google Benchmark's runner, and takes no --benchmark_* "
                           "flag (--reps, and the step techniques' --budget and --target, set "
                           "the rounds)", argv[i], technique);
        int ok = 0;
        for (int k = 0; gbench_ok[k]; k++)
            ok |= !strncmp(argv[i], gbench_ok[k], strlen(gbench_ok[k]));
        if (!ok)
            return TB_FAIL(TB_ERR_INVALID, "%s: not passed to Google Benchmark (it would change "
                           "the JSON output tunebench reads); %s takes --benchmark_filter, "
                           "--benchmark_min_time and --benchmark_min_warmup_time", argv[i],
                           technique);
    }
    b->argc = argc;
    b->argv = argv;

    tb_device_kind kind;
    int ordinal;
    TB_TRY(tb_device_parse(b->device_spec, &kind, &ordinal));
    TB_TRY(tb_backend_open(kind, ordinal, b->threads, &b->be));
    TB_TRY(b->be->device_info(b->be, &b->info));
    tb_profile_resolve(&b->run_profile, b->info.backend, technique);
    b->profile = tb_profile_sizes(b->run_profile);
    char slug[128];
    tb_device_slug(&b->info, slug, sizeof slug);
    TB_TRY(tb_outdir_init(&b->od, b->out_dir, slug));
    TB_TRY(tb_outdir_create(&b->od));
    /* what a killed run (SIGKILL, the OOM killer) could not remove: only
     * temporaries whose process is gone, so bench:all's own are safe */
    TB_TRY(tb_atomic_sweep_stale(b->od.results, NULL));
    TB_TRY(tb_atomic_sweep_stale(b->od.plots, NULL));
    TB_TRY(tb_fingerprint_collect(&b->fp, &b->info, ngiven, given));
    TB_TRY(tb_fingerprint_set(&b->fp, "run.profile", profile_names[b->run_profile]));
    /* before anything is timed (bench/harness/pin.h) */
    char pinning[256];
    tb_pin_threads(b->info.threads, pinning, sizeof pinning);
    TB_TRY(tb_fingerprint_set(&b->fp, "run.pinning", pinning));
    /* fingerprint.json is written with the results (tb_bench_save): a run
     * interrupted before them leaves the one that describes the CSVs there */
    char dev[200];
    tb_device_describe(&b->info, dev, sizeof dev);
    fprintf(stderr, "%s: %s backend on %s, profile %s; results in %s\n", technique,
            b->info.backend, dev, profile_names[b->run_profile], b->od.results);
    fprintf(stderr, "%s: pinning: %s\n", technique, pinning);
    return TB_OK;
}

double tb_bench_budget(const tb_bench *b)
{
    double declared = b->tech->budget_seconds[b->run_profile];
    declared = declared > 0 ? declared : 0;
    double budget = declared + b->extra_budget, least = (1.0 - TB_BUDGET_MAX_CUT) * declared;
    /* A cut leaves something: the rounds' minimum needs it. */
    return budget > least ? budget : least;
}

double tb_bench_elapsed(const tb_bench *b)
{
    return tb_clock_s() - b->t_start;
}

double tb_bench_budget_left(const tb_bench *b)
{
    double budget = tb_bench_budget(b);
    if (budget <= 0)
        return 0;
    double spent = tb_bench_elapsed(b), left = budget - spent;
    if (left >= TB_BUDGET_FLOOR * budget)
        return left;
    fprintf(stderr, "%s: set-up and checks took %.1f s of its %.0f s budget: the rounds get "
            "%.1f s (%.0f%% of the budget)\n", b->technique, spent, budget,
            TB_BUDGET_FLOOR * budget, 100 * TB_BUDGET_FLOOR);
    return TB_BUDGET_FLOOR * budget;
}

int tb_bench_run(tb_bench *b, gb_results **out)
{
    char path[PATH_MAX + 64], name[96], tmp[PATH_MAX + 96];
    snprintf(name, sizeof name, "%s.gbench.json", b->technique);
    TB_TRY(tb_outdir_join(b->od.results, name, path, sizeof path));
    TB_TRY(tb_bench_reserve_tmp(path, tmp, sizeof tmp));
    size_t n_run = 0;
    int rc = tbb_run(&b->argc, b->argv, tmp, &n_run);
    tb_bench_keep_on_signal(tmp);
    if (rc != TB_OK) {
        unlink(tmp);
        return rc;
    }
    if (n_run == 0) {
        unlink(tmp);
        return TB_FAIL(TB_ERR_INVALID, "no benchmark matched (check --benchmark_filter)");
    }
    rc = gb_results_read(tmp, out);
    if (rc != TB_OK) {
        unlink(tmp);
        return rc;
    }
    return tb_atomic_publish(tmp, path);
}

tb_correctness tb_bench_correctness(tb_match m)
{
    switch (m) {
    case TB_MATCH_EXACT:
        return TB_CORRECT_EXACT;
    case TB_MATCH_WITHIN_TOL:
        return TB_CORRECT_WITHIN_TOL;
    default:
        return TB_CORRECT_DIFFERS;
    }
}

const gb_run *tb_bench_find(const gb_results *r, const char *prefix)
{
    size_t n = strlen(prefix);
    for (size_t i = 0; i < r->n_runs; i++)
        if (strncmp(r->runs[i].name, prefix, n) == 0)
            return &r->runs[i];
    return NULL;
}

static int run_usable(const gb_run *run)
{
    if (!run)
        return TB_FAIL(TB_ERR_DATA, "a benchmark run is missing from Google Benchmark's JSON");
    if (run->error_occurred)
        return TB_FAIL(TB_ERR_DATA, "benchmark %s failed: %s", run->name, run->error_message);
    if (run->repetitions < TB_MIN_REPS)
        return TB_FAIL(TB_ERR_DATA, "benchmark %s has %d repetitions, fewer than %d", run->name,
                       run->repetitions, TB_MIN_REPS);
    return TB_OK;
}

/* The distribution-free 95% interval of the median: the order statistics
 * [x(k), x(n-k+1)] for the largest k with P(Bin(n, 1/2) < k) <= 0.025, so
 * that it covers the median in at least 95% of samples; NaN (empty
 * columns: "too few repetitions") below 6 repetitions, where even
 * [min, max] covers only 1 - 2^(1-n) (93.75% at 5). A percentile bootstrap
 * gave exactly [min, max] at 5 and called it 95% (the review of
 * 2026-11-30). The repetitions are taken as independent; where they drift
 * together the interval is narrower than it should be, which the paired
 * speedup columns, not these, are built to withstand. */
static void median_interval(const double *x, size_t n, double *lo, double *hi)
{
    *lo = *hi = NAN;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return;
    memcpy(v, x, n * sizeof *v);
    for (size_t i = 1; i < n; i++) /* insertion sort: n is small */
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    /* tail = P(B <= j), grown one term at a time (log space: n may be
     * large); k: the largest with P(B <= k - 1) <= 0.025 */
    double tail = 0, log_half_n = (double)n * log(0.5);
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        double log_choose = lgamma((double)n + 1) - lgamma((double)j + 1) -
                            lgamma((double)(n - j) + 1);
        tail += exp(log_choose + log_half_n);
        if (tail > 0.025)
            break;
        k = j + 1;
    }
    if (k >= 1 && k <= n - k + 1) {
        *lo = v[k - 1]; /* x(k), 1-based */
        *hi = v[n - k]; /* x(n - k + 1) */
    }
    free(v);
}

int tb_bench_fill_timing(tb_result_row *row, const gb_run *run, double unit_scale, const char *unit)
{
    TB_TRY(run_usable(run));
    tb_summary s;
    TB_TRY(tb_stats_summary(run->seconds, (size_t)run->repetitions, &s));
    double lo, hi;
    median_interval(run->seconds, (size_t)run->repetitions, &lo, &hi);
    row->reps = run->repetitions;
    row->median = s.median * unit_scale;
    row->ci_low = lo * unit_scale;
    row->ci_high = hi * unit_scale;
    row->min = s.min * unit_scale;
    row->max = s.max * unit_scale;
    snprintf(row->unit, sizeof row->unit, "%s", unit);
    return TB_OK;
}

int tb_bench_noise_floor(const gb_run *base, const gb_run *base_again, double *noise)
{
    *noise = 0;
    if (!base_again)
        return TB_OK;
    TB_TRY(run_usable(base));
    TB_TRY(run_usable(base_again));
    tb_interval aa;
    TB_TRY(tb_stats_speedup_ci(base->seconds, (size_t)base->repetitions, base_again->seconds,
                               (size_t)base_again->repetitions, NULL, &aa));
    *noise = tb_stats_noise_floor(&aa);
    return TB_OK;
}

int tb_bench_fill_speedup(tb_result_row *row, const gb_run *base, const gb_run *base_again,
                          const gb_run *var)
{
    TB_TRY(run_usable(base));
    TB_TRY(run_usable(var));
    double noise;
    TB_TRY(tb_bench_noise_floor(base, base_again, &noise));
    tb_interval iv;
    TB_TRY(tb_stats_speedup_ci(base->seconds, (size_t)base->repetitions, var->seconds,
                               (size_t)var->repetitions, NULL, &iv));
    row->speedup = iv.point;
    row->speedup_ci_low = iv.lo;
    row->speedup_ci_high = iv.hi;
    row->noise_floor = noise;
    row->timing_verdict = tb_bench_timing_verdict(tb_stats_timing_verdict(&iv, noise));
    return TB_OK;
}

tb_timing_verdict tb_bench_timing_verdict(tb_speed_verdict v)
{
    switch (v) {
    case TB_SPEED_FASTER: return TB_TIMING_FASTER;
    case TB_SPEED_SLOWER: return TB_TIMING_SLOWER;
    default: return TB_TIMING_WITHIN_NOISE;
    }
}

void tb_bench_row(const tb_bench *b, tb_result_row *row, const char *setting, int is_baseline,
                  const char *param_name, double param_value, const char *metric)
{
    tb_result_row_init(row);
    snprintf(row->technique, sizeof row->technique, "%s", b->technique);
    snprintf(row->backend, sizeof row->backend, "%s", b->info.backend);
    snprintf(row->device, sizeof row->device, "%s", b->info.name);
    snprintf(row->setting, sizeof row->setting, "%s", setting);
    row->is_baseline = is_baseline;
    if (is_baseline)
        row->timing_verdict = TB_TIMING_BASELINE;
    snprintf(row->param_name, sizeof row->param_name, "%s", param_name);
    row->param_value = param_value;
    snprintf(row->metric, sizeof row->metric, "%s", metric);
}

/* The rows as a table on stdout, the way the report says them: an n/a row
 * prints "n/a (its reason)", never "nan". */
static void print_rows(const tb_results *res)
{
    printf("%-10s %-10s %12s %-14s %10s %-8s %-20s %-14s %s\n", "setting", "param", "value",
           "metric", "median", "unit", "speedup [95% CI]", "verdict", "correctness");
    for (size_t i = 0; i < res->n; i++) {
        const tb_result_row *r = &res->rows[i];
        char sp[64] = "", val[32] = "", med[32];
        if (!isnan(r->param_value))
            snprintf(val, sizeof val, "%.6g", r->param_value);
        if (isnan(r->median)) { /* a note that says "n/a ..." itself is not wrapped again */
            int said = !strncmp(r->note, "n/a", 3);
            printf("%-10s %-10s %12s %-14s %s%s%s\n", r->setting, r->param_name, val, r->metric,
                   said ? "" : "n/a (", r->note[0] ? r->note : "no reason recorded",
                   said ? "" : ")");
            continue;
        }
        snprintf(med, sizeof med, "%.4g", r->median);
        if (!isnan(r->speedup))
            snprintf(sp, sizeof sp, "%.3f [%.3f, %.3f]", r->speedup, r->speedup_ci_low,
                     r->speedup_ci_high);
        printf("%-10s %-10s %12s %-14s %10s %-8s %-20s %-14s %s\n", r->setting, r->param_name,
               val, r->metric, med, r->unit, sp, tb_timing_verdict_name(r->timing_verdict),
               tb_correctness_name(r->correctness));
    }
}

int tb_bench_save(tb_bench *b)
{
    char path[PATH_MAX + 64], name[96];
    TB_TRY(tb_outdir_join(b->od.results, "fingerprint.json", path, sizeof path));
    TB_TRY(tb_fingerprint_save(&b->fp, path));
    snprintf(name, sizeof name, "%s.csv", b->technique);
    TB_TRY(tb_outdir_join(b->od.results, name, path, sizeof path));
    TB_TRY(tb_results_save_csv(&b->res, path));
    snprintf(name, sizeof name, "%s.json", b->technique);
    TB_TRY(tb_outdir_join(b->od.results, name, path, sizeof path));
    TB_TRY(tb_results_save_json_headline(&b->res, b->tech ? b->tech->headline : NULL,
                                         b->tech ? b->tech->headline_metric : NULL, path));
    print_rows(&b->res);
    fprintf(stderr, "%s: wrote %s/%s.csv\n", b->technique, b->od.results, b->technique);
    return TB_OK;
}

void tb_bench_close(tb_bench *b)
{
    tb_results_free(&b->res);
    tb_backend_close(b->be);
    b->be = NULL;
}

int tb_bench_time_op(tb_backend *be, tb_timed_op op, void *arg, double *seconds)
{
    tb_event *start = NULL, *end = NULL;
    int rc;
    TB_TRY_GOTO(rc, be->event_create(be, &start), out);
    TB_TRY_GOTO(rc, be->event_create(be, &end), out_destroy_start);
    TB_TRY_GOTO(rc, be->event_record(be, start, NULL), out_destroy_end);
    TB_TRY_GOTO(rc, op(arg), out_destroy_end);
    TB_TRY_GOTO(rc, be->event_record(be, end, NULL), out_destroy_end);
    TB_TRY_GOTO(rc, be->event_sync(be, end), out_destroy_end);
    float ms = 0;
    TB_TRY_GOTO(rc, be->event_elapsed_ms(be, start, end, &ms), out_destroy_end);
    *seconds = ms * 1e-3;
out_destroy_end:
    be->event_destroy(be, end);
out_destroy_start:
    be->event_destroy(be, start);
out:
    return rc;
}

int tb_bench_upload_random(tb_backend *be, float *dev, size_t n, uint64_t seed, double lo,
                           double hi)
{
    float *h = NULL;
    TB_TRY(be->host_alloc(be, (void **)&h, n * sizeof(float), 0));
    tb_rng_fill(h, n, seed, lo, hi);
    int rc = be->copy_h2d(be, dev, h, n * sizeof(float), NULL);
    if (rc == TB_OK)
        rc = be->sync(be);
    be->host_free(be, h, 0);
    return rc;
}

int tb_bench_peak_of(tb_backend *be, tb_timed_op op, void *arg, double *bytes)
{
    size_t before = 0, peak = 0;
    TB_TRY(be->sync(be));
    TB_TRY(be->mem_stats(be, &before, NULL));
    TB_TRY(be->mem_reset_peak(be));
    TB_TRY(op(arg));
    TB_TRY(be->sync(be));
    TB_TRY(be->mem_stats(be, NULL, &peak));
    *bytes = peak > before ? (double)(peak - before) : 0;
    return TB_OK;
}

void tb_bench_timed_iterations(tbb_state *st, tb_backend *be, tb_timed_op op, void *arg)
{
    while (tbb_keep_running(st)) {
        double s = 0;
        if (tb_bench_time_op(be, op, arg, &s) != TB_OK) {
            tbb_skip_with_error(st, tb_error_message());
            return;
        }
        tbb_set_iteration_time(st, s);
    }
}

void tb_bench_timed_loop(tbb_state *st, tb_backend *be, tb_timed_op op, void *arg)
{
    for (int w = 0; w < 2; w++)
        if (op(arg) != TB_OK || be->sync(be) != TB_OK) {
            tbb_skip_with_error(st, tb_error_message());
            return;
        }
    tb_bench_timed_iterations(st, be, op, arg);
}

int tb_bench_fail(const char *technique, int rc)
{
    /* the reason on the same line as the name: "gelu: error: ..." */
    if (tb_error_depth() == 0) {
        fprintf(stderr, "%s: error: %s\n", technique, tb_err_name(rc));
    } else {
        fprintf(stderr, "%s: ", technique);
        tb_error_print(stderr);
    }
    return tb_exit_code(rc);
}
