/*
 * gbench_shim.h - a C API over Google Benchmark (Debian libbenchmark-dev 1.7.1).
 *
 * Why: tunebench is C, Google Benchmark is C++. The shim lets a benchmark
 * written in C register functions, loop with tbb_keep_running(), report
 * counters, and get Google Benchmark's JSON (read it back with
 * bench/harness/gb_results.h; GB's CSV reporter is deprecated and wrong).
 *
 *   static void bm_gelu(tbb_state *st, void *user) {
 *       size_t n = (size_t)tbb_range(st, 0);
 *       while (tbb_keep_running(st))
 *           gelu(...);
 *       tbb_set_bytes_processed(st, tbb_iterations(st) * n * 8);
 *   }
 *   int64_t sizes[] = {1024, 65536};
 *   tbb_options o = tbb_options_default();
 *   o.args = sizes; o.n_arg_sets = 2; o.args_per_set = 1;
 *   o.repetitions = 5; o.iterations = 100;   // fixed: needed under MPI
 *   TB_TRY(tbb_register("gelu_fused", bm_gelu, ctx, &o));
 *   TB_TRY(tbb_run(&argc, argv, "results/x/gelu.json", &n_run));
 *
 * Names in the JSON: GB appends the arguments and options to the
 * registered name, in this order: arguments, "/min_time:0.010",
 * "/iterations:100", "/repeats:5", "/manual_time", e.g.
 * "gelu_fused/1024/iterations:100/repeats:5/manual_time".
 *
 * No C++ exception crosses into C: every entry point catches and turns it
 * into a tb_err status (or a skip-with-error inside a benchmark).
 * Not thread-safe: register and run from one thread.
 * The Debian library is a debug build and prints a warning saying so.
 *
 * Test: bench/harness/gbench_shim_test.c (bazel test //bench/harness:gbench_shim_test).
 */
#ifndef TB_GBENCH_SHIM_H
#define TB_GBENCH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tbb_state tbb_state; /* a benchmark::State, opaque to C */
typedef void (*tbb_fn)(tbb_state *st, void *user);

typedef enum tbb_time_unit {
    TBB_NS = 0, /* GB's default */
    TBB_US = 1,
    TBB_MS = 2,
    TBB_S = 3,
} tbb_time_unit;

/* Largest argument tuple GB's names handle comfortably; more is refused. */
#define TBB_MAX_ARGS_PER_SET 8

typedef struct tbb_options {
    /* Argument tuples, row-major: n_arg_sets rows of args_per_set int64s.
     * Each row is one benchmark instance; tbb_range(st, i) reads column i.
     * NULL / 0 rows: one instance without arguments. */
    const int64_t *args;
    int n_arg_sets;
    int args_per_set;
    int64_t iterations;   /* fixed iteration count; 0 = GB picks (per process!) */
    int repetitions;      /* 0 = GB's default (1, or --benchmark_repetitions) */
    double min_time;      /* seconds; 0 = GB's default (0.5 s). Not with iterations. */
    int manual_time;      /* 1: time is what tbb_set_iteration_time reports */
    tbb_time_unit unit;   /* unit of the console table and the JSON */
} tbb_options;

/* Defaults: no arguments, automatic iterations, GB's repetitions and
 * min_time, automatic timing, nanoseconds. */
tbb_options tbb_options_default(void);

/* Registers fn under name with opts (NULL = defaults); user is passed to
 * every call. Per-repetition rows are always reported (report_aggregates_only
 * is forced off), so the JSON has one "iteration" row per repetition.
 * REQUIRES: name non-empty; iterations >= 0; repetitions >= 0; min_time >= 0;
 * not both iterations and min_time (GB aborts on that: TB_ERR_INVALID here);
 * 1 <= args_per_set <= TBB_MAX_ARGS_PER_SET when n_arg_sets > 0. */
int tbb_register(const char *name, tbb_fn fn, void *user, const tbb_options *opts);

/* Unregisters every benchmark (benchmark::ClearRegisteredBenchmarks). */
void tbb_clear(void);

/* Initializes GB with argc/argv (its own flags, --benchmark_filter=... and
 * friends, are consumed and removed from argv; others are left for the
 * caller), runs every registered benchmark that matches the filter,
 * prints GB's console table on stdout (context on stderr), and when
 * json_out_path is not NULL writes GB's JSON there as well.
 * *n_run (may be NULL) gets the number of benchmark instances that matched.
 * argc/argv may be NULL: then GB sees only a program name.
 * A filter that matches nothing is not an error: *n_run is 0.
 * Returns TB_ERR_IO when json_out_path cannot be written.
 * GB's flags keep their values across calls unless given again.
 * Note: GB itself exits the process on --help and on malformed GB flags. */
int tbb_run(int *argc, char **argv, const char *json_out_path, size_t *n_run);

/* Runs every registered benchmark (whatever --benchmark_filter says) with
 * no console output: GB's JSON, the only output, goes into *json (a
 * NUL-terminated malloc'd string of *len bytes; free() it). For callers
 * that run many small batches (bench/harness/rounds.c: one per round) and
 * print their own progress. GB's flags keep the values the last tbb_run
 * parsed. *n_run (may be NULL): instances run. */
int tbb_run_quiet(char **json, size_t *len, size_t *n_run);

/* ---- inside a benchmark function ---- */

/* The timed loop: while (tbb_keep_running(st)) { ... }  (State::KeepRunning) */
int tbb_keep_running(tbb_state *st);
int64_t tbb_range(tbb_state *st, int i); /* argument i of this instance */
int64_t tbb_iterations(tbb_state *st);   /* iterations done so far (after the loop: all) */
/* Manual time: the seconds one iteration took, e.g. from CUDA events.
 * Call once per iteration, inside the loop. */
void tbb_set_iteration_time(tbb_state *st, double seconds);
void tbb_pause_timing(tbb_state *st);  /* REQUIRES: timing running */
void tbb_resume_timing(tbb_state *st); /* REQUIRES: timing paused */

typedef enum tbb_counter_flags {
    TBB_COUNTER_PLAIN = 0,          /* value as given */
    TBB_COUNTER_RATE = 1,           /* value / elapsed seconds */
    TBB_COUNTER_AVG_ITERATIONS = 2, /* value / iterations */
    TBB_COUNTER_AVG_ITERATIONS_RATE = 3, /* both */
} tbb_counter_flags;

/* Sets user counter name; it appears as a key of the JSON row. Names must
 * not clash with GB's own keys ("name", "real_time", ...). */
void tbb_counter(tbb_state *st, const char *name, double value, tbb_counter_flags flags);
void tbb_set_label(tbb_state *st, const char *label);
void tbb_set_bytes_processed(tbb_state *st, int64_t bytes); /* JSON key "bytes_per_second" */
void tbb_set_items_processed(tbb_state *st, int64_t items); /* JSON key "items_per_second" */
/* Marks this run failed: the JSON row has error_occurred and error_message.
 * Call before the loop (the loop then does not run) or inside it (the loop
 * ends after the current iteration). Return from fn afterwards. Only the
 * first call of a run counts; later pause/resume calls are ignored. */
void tbb_skip_with_error(tbb_state *st, const char *msg);

#ifdef __cplusplus
}
#endif
#endif
