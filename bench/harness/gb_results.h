/*
 * gb_results.h - reads Google Benchmark's JSON output into per-run arrays.
 *
 * Why: tunebench takes the repetitions from Google Benchmark and computes
 * its own statistics (lib/core/stats.h); GB's own aggregates (mean, median,
 * stddev, cv) and its deprecated CSV are not used. This reader keeps only
 * the rows with run_type "iteration" (one per repetition), groups them by
 * run_name in the order the file first names them, and converts times to
 * seconds per iteration.
 *
 * Times: real_time, which is the manual time when the benchmark used
 * tbb_set_iteration_time (its name then ends in "/manual_time"), divided by
 * the row's time_unit (ns, us, ms, s). cpu_time is kept too.
 * Counters: every key of a row that is not one of GB's own is a user counter
 * (bytes_per_second and items_per_second included); a counter missing from
 * one repetition reads NaN there.
 *
 *   gb_results *r;
 *   TB_TRY(gb_results_read("x.json", &r));
 *   const gb_run *run = gb_results_find(r, "gelu/1024/iterations:100/repeats:5");
 *   ... run->seconds[0 .. run->repetitions) ...
 *   gb_results_free(r);
 *
 * Test: bench/harness/gb_results_test.c (bazel test //bench/harness:gb_results_test).
 */
#ifndef TB_GB_RESULTS_H
#define TB_GB_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gb_counter {
    char *name;
    double *values; /* (repetitions); NaN where a repetition lacks it */
} gb_counter;

typedef struct gb_run {
    char *name;            /* GB's run_name, e.g. "bm/64/iterations:10/repeats:3/manual_time" */
    int repetitions;       /* "iteration" rows found for this run */
    double *seconds;       /* (repetitions) real time per iteration, seconds */
    double *cpu_seconds;   /* (repetitions) CPU time per iteration, seconds */
    int64_t *iterations;   /* (repetitions) */
    int manual_time;       /* 1 when name ends in "/manual_time" */
    gb_counter *counters;  /* (n_counters), in the order first seen */
    size_t n_counters;
    char *label;           /* of the first repetition that has one, or "" */
    int error_occurred;    /* 1 if any repetition reported an error */
    char *error_message;   /* the first error message, or "" */
} gb_run;

/* The "context" object, for the environment fingerprint. Strings are ""
 * and numbers 0 when the file lacks them. */
typedef struct gb_context {
    char *date;
    char *host_name;
    char *executable;
    int num_cpus;
    double mhz_per_cpu;
    int cpu_scaling_enabled; /* -1 when absent */
    char *library_build_type; /* "debug" for Debian's libbenchmark */
} gb_context;

typedef struct gb_results {
    gb_context context;
    gb_run *runs;
    size_t n_runs;
} gb_results;

/* Reads path. TB_ERR_IO when it cannot be read; TB_ERR_DATA when it is not
 * GB JSON (malformed, no "benchmarks" array, a row without run_name,
 * real_time or a known time_unit). */
int gb_results_read(const char *path, gb_results **out);

/* Same from a JSON document in memory (len bytes). */
int gb_results_parse(const char *text, size_t len, gb_results **out);

void gb_results_free(gb_results *r); /* NULL is fine */

/* The run named run_name, or NULL. */
const gb_run *gb_results_find(const gb_results *r, const char *run_name);

/* The counter of run named name, or NULL. */
const gb_counter *gb_run_counter(const gb_run *run, const char *name);

/* Seconds per unit for "ns", "us", "ms", "s"; 0 for anything else. */
double gb_time_unit_seconds(const char *unit);

#ifdef __cplusplus
}
#endif
#endif
