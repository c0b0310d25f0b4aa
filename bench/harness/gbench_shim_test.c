/*
 * gbench_shim_test.c - registers C benchmarks through the Google Benchmark
 * shim (arguments, fixed iterations, repetitions, min_time, manual time,
 * counters, a label, pause/resume, one run that skips with an error), runs
 * them into a temporary JSON file, and reads it back with gb_results:
 * repetition counts, names as GB builds them, times, counters, labels and
 * the error rows. Also checks option validation and that GB's flags are
 * taken out of argv while others stay, and tbb_run_quiet (JSON in memory,
 * the filter ignored). Takes about a second.
 * Run: bazel test //bench/harness:gbench_shim_test
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp */

#include "bench/harness/gbench_shim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/harness/gb_results.h"
#include "lib/core/testing.h"

#define NEAR(a, b, rel) (fabs((a) - (b)) <= (rel) * fabs(b))

static volatile double sink;

/* Args (a, b); reports counters, a label and bytes. */
static void bm_args(tbb_state *st, void *user)
{
    int *calls = user;
    (*calls)++;
    int64_t a = tbb_range(st, 0), b = tbb_range(st, 1);
    while (tbb_keep_running(st))
        sink += (double)(a * b);
    int64_t iters = tbb_iterations(st);
    tbb_counter(st, "per_iter", 3.0 * (double)iters, TBB_COUNTER_AVG_ITERATIONS);
    tbb_counter(st, "plain", (double)(a + b), TBB_COUNTER_PLAIN);
    tbb_set_label(st, "lab");
    tbb_set_bytes_processed(st, iters * 1024);
}

/* Manual time: every iteration "took" 2 ms. */
static void bm_manual(tbb_state *st, void *user)
{
    (void)user;
    while (tbb_keep_running(st))
        tbb_set_iteration_time(st, 2e-3);
}

/* Automatic iteration count under a small min_time; pause around setup. */
static void bm_paused(tbb_state *st, void *user)
{
    (void)user;
    while (tbb_keep_running(st)) {
        tbb_pause_timing(st);
        sink += 1;
        tbb_resume_timing(st);
        sink *= 0.5;
    }
    tbb_counter(st, "rate", (double)tbb_iterations(st), TBB_COUNTER_RATE);
}

static void bm_skip(tbb_state *st, void *user)
{
    (void)user;
    tbb_skip_with_error(st, "no device here");
    tbb_skip_with_error(st, "second message is ignored");
    while (tbb_keep_running(st))
        sink += 1;
}

/* Reads an argument it does not have: must fail the run, not abort. */
static void bm_bad_range(tbb_state *st, void *user)
{
    (void)user;
    sink += (double)tbb_range(st, 0);
    while (tbb_keep_running(st))
        sink += 1;
}

static int register_all(int *calls)
{
    static const int64_t args[] = {3, 4, 5, 6};
    tbb_options o = tbb_options_default();
    o.args = args;
    o.n_arg_sets = 2;
    o.args_per_set = 2;
    o.iterations = 10;
    o.repetitions = 3;
    TB_TRY(tbb_register("args", bm_args, calls, &o));

    o = tbb_options_default();
    o.iterations = 5;
    o.repetitions = 2;
    o.manual_time = 1;
    o.unit = TBB_MS;
    TB_TRY(tbb_register("manual", bm_manual, NULL, &o));

    o = tbb_options_default();
    o.min_time = 0.01;
    o.repetitions = 2;
    o.unit = TBB_US;
    TB_TRY(tbb_register("paused", bm_paused, NULL, &o));

    o = tbb_options_default();
    o.iterations = 3;
    o.repetitions = 2;
    TB_TRY(tbb_register("skip", bm_skip, NULL, &o));

    o = tbb_options_default();
    o.iterations = 1;
    TB_TRY(tbb_register("bad_range", bm_bad_range, NULL, &o));
    return TB_OK;
}

static void test_validation(void)
{
    printf("option validation refuses what GB would abort on\n");
    tbb_options o = tbb_options_default();
    o.iterations = 10;
    o.min_time = 0.1;
    tb_error_clear();
    CHECK(tbb_register("x", bm_manual, NULL, &o) == TB_ERR_INVALID, "iterations and min_time");
    printf("  %s\n", tb_error_message());
    o = tbb_options_default();
    o.n_arg_sets = 1;
    o.args_per_set = 1;
    CHECK(tbb_register("x", bm_manual, NULL, &o) == TB_ERR_INVALID, "arg sets without args");
    static const int64_t one = 1;
    o.args = &one;
    o.args_per_set = 0;
    CHECK(tbb_register("x", bm_manual, NULL, &o) == TB_ERR_INVALID, "args_per_set 0");
    CHECK(tbb_register("", bm_manual, NULL, NULL) == TB_ERR_INVALID, "empty name");
    o = tbb_options_default();
    o.repetitions = -1;
    CHECK(tbb_register("x", bm_manual, NULL, &o) == TB_ERR_INVALID, "negative repetitions");
    tb_error_clear();
}

static void print_runs(const gb_results *r)
{
    for (size_t i = 0; i < r->n_runs; i++) {
        const gb_run *run = &r->runs[i];
        printf("  %-45s reps %d  t0 %.3e s  iters %lld  counters %zu  label \"%s\"  error \"%s\"\n",
               run->name, run->repetitions, run->seconds[0], (long long)run->iterations[0],
               run->n_counters, run->label, run->error_message);
    }
}

static void check_args_runs(const gb_results *r)
{
    const char *names[] = {"args/3/4/iterations:10/repeats:3", "args/5/6/iterations:10/repeats:3"};
    for (int k = 0; k < 2; k++) {
        const gb_run *run = gb_results_find(r, names[k]);
        CHECK(run != NULL, "run %s present", names[k]);
        if (!run)
            continue;
        CHECK(run->repetitions == 3, "%s: 3 repetitions, got %d", names[k], run->repetitions);
        for (int i = 0; i < run->repetitions; i++) {
            CHECK(run->iterations[i] == 10, "%s: fixed 10 iterations", names[k]);
            CHECK(run->seconds[i] > 0, "%s: time %g", names[k], run->seconds[i]);
        }
        const gb_counter *per = gb_run_counter(run, "per_iter");
        const gb_counter *plain = gb_run_counter(run, "plain");
        const gb_counter *bps = gb_run_counter(run, "bytes_per_second");
        CHECK(per && per->values[0] == 3.0, "avg-iterations counter 30/10 = 3");
        CHECK(plain && plain->values[2] == (k == 0 ? 7.0 : 11.0), "plain counter a+b");
        CHECK(bps && bps->values[0] > 0, "bytes_per_second reported");
        CHECK(strcmp(run->label, "lab") == 0 && !run->error_occurred, "label, no error");
    }
}

static void check_results(const gb_results *r)
{
    print_runs(r);
    CHECK(r->n_runs == 6, "6 runs (2 arg sets + 4), got %zu", r->n_runs);
    check_args_runs(r);

    const gb_run *m = gb_results_find(r, "manual/iterations:5/repeats:2/manual_time");
    CHECK(m && m->manual_time && m->repetitions == 2, "manual time run named /manual_time");
    if (m)
        CHECK(NEAR(m->seconds[0], 2e-3, 1e-9) && NEAR(m->seconds[1], 2e-3, 1e-9),
              "manual time 2 ms per iteration, got %g", m->seconds[0]);

    const gb_run *p = gb_results_find(r, "paused/min_time:0.010/repeats:2");
    CHECK(p && p->repetitions == 2, "min_time run present with 2 repetitions");
    if (p) {
        CHECK(p->iterations[0] >= 1, "automatic iteration count >= 1: %lld", (long long)p->iterations[0]);
        const gb_counter *rate = gb_run_counter(p, "rate");
        CHECK(rate && rate->values[0] > 0, "rate counter");
    }

    const gb_run *s = gb_results_find(r, "skip/iterations:3/repeats:2");
    CHECK(s && s->error_occurred && s->repetitions == 2, "skip run has error rows for each repetition");
    if (s)
        CHECK(strcmp(s->error_message, "no device here") == 0, "first error message: %s", s->error_message);

    const gb_run *b = gb_results_find(r, "bad_range/iterations:1");
    CHECK(b && b->error_occurred && strstr(b->error_message, "out of range"), "bad tbb_range fails the run");

    CHECK(r->context.num_cpus > 0 && r->context.host_name[0], "context: cpus and host");
    CHECK(strcmp(r->context.library_build_type, "debug") == 0 ||
              strcmp(r->context.library_build_type, "release") == 0,
          "library_build_type: %s", r->context.library_build_type);
}

static int run_and_check(char *path)
{
    int calls = 0;
    TB_TRY(register_all(&calls));
    char a0[] = "gbench_shim_test", a1[] = "--benchmark_min_warmup_time=0", a2[] = "--mine=1";
    char *argv[] = {a0, a1, a2, NULL};
    int argc = 3;
    size_t n_run = 0;
    TB_TRY(tbb_run(&argc, argv, path, &n_run));
    fflush(stdout);
    CHECK(n_run == 6, "6 instances ran, got %zu", n_run);
    CHECK(calls >= 6, "bm_args called per instance and repetition: %d", calls);
    CHECK(argc == 2 && strcmp(argv[1], "--mine=1") == 0, "GB flag removed, own flag kept (argc %d)", argc);

    gb_results *r = NULL;
    TB_TRY(gb_results_read(path, &r));
    check_results(r);
    gb_results_free(r);

    printf("tbb_clear, then a filter that matches nothing\n");
    tbb_clear();
    TB_TRY(register_all(&calls));
    char f1[] = "--benchmark_filter=^nothing$";
    char *argv2[] = {a0, f1, NULL};
    argc = 2;
    TB_TRY(tbb_run(&argc, argv2, NULL, &n_run));
    CHECK(n_run == 0, "nothing matched: %zu", n_run);
    tbb_clear();
    TB_TRY(tbb_run(NULL, NULL, NULL, &n_run));
    CHECK(n_run == 0, "nothing registered after tbb_clear: %zu", n_run);

    tb_error_clear();
    CHECK(tbb_run(NULL, NULL, "/nonexistent/dir/x.json", &n_run) == TB_ERR_IO, "unwritable JSON path");
    tb_error_clear();
    return TB_OK;
}

/* tbb_run_quiet: every registered benchmark runs whatever the filter (set
 * here by a tbb_run), and the JSON comes back in memory, rows included. */
static void test_quiet(void)
{
    char prog[] = "x", filt[] = "--benchmark_filter=nothing_matches";
    char *argv[] = {prog, filt, NULL};
    int argc = 2;
    size_t n_run = 99, len = 0;
    char *json = NULL;
    tbb_clear();
    CHECK(tbb_run(&argc, argv, NULL, &n_run) == TB_OK && n_run == 0, "a filter matching nothing");
    tbb_options o = tbb_options_default();
    o.iterations = 4;
    o.repetitions = 1;
    o.manual_time = 1;
    CHECK(tbb_register("quiet_a", bm_manual, NULL, &o) == TB_OK, "register quiet_a");
    CHECK(tbb_register("quiet_b", bm_manual, NULL, &o) == TB_OK, "register quiet_b");
    int rc = tbb_run_quiet(&json, &len, &n_run);
    CHECK(rc == TB_OK && json && len == strlen(json), "tbb_run_quiet returns the JSON");
    CHECK(n_run == 2, "both ran despite the filter (%zu)", n_run);
    gb_results *r = NULL;
    if (json && gb_results_parse(json, len, &r) == TB_OK) {
        CHECK(r->n_runs == 2 && r->runs[0].repetitions == 1 && r->runs[0].iterations[0] == 4,
              "two runs of one repetition of 4 iterations");
        CHECK(strncmp(r->runs[0].name, "quiet_a/", 8) == 0, "in registration order (%s)",
              r->runs[0].name);
        gb_results_free(r);
    } else {
        CHECK(0, "the quiet JSON parses");
    }
    free(json);
    tbb_clear();
    char reset[] = "--benchmark_filter=.";
    char *argv2[] = {prog, reset, NULL};
    argc = 2;
    tbb_run(&argc, argv2, NULL, NULL);
    tb_error_clear();
}

int main(void)
{
    test_validation();
    test_quiet();

    const char *dir = getenv("TEST_TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/gbench_shim_test_XXXXXX", dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    printf("running benchmarks into %s\n", path);
    int rc = run_and_check(path);
    remove(path);
    if (rc != TB_OK) {
        tb_error_print(stdout);
        failures++;
    }
    if (failures) {
        printf("gbench_shim_test: %d FAILED\n", failures);
        return 1;
    }
    printf("gbench_shim_test: all passed\n");
    return 0;
}
