/*
 * results.h - the one CSV schema every technique writes.
 *
 * One row per (technique, setting, sweep point, metric). Rows are collected
 * in memory and written at the end (or after every point, for --resume)
 * through lib/atomic_file, as results/<device>/<technique>.csv and the same
 * rows as <technique>.json. The columns, their units and when they are empty
 * are documented in results/README.md; the exact bytes are pinned by
 * lib/report/results_test.c against lib/report/testdata/results_golden.csv. Changing a
 * column means changing all three, and TB_RESULTS_SCHEMA.
 *
 * Numbers: a missing number is NaN in memory, an empty CSV field and null in
 * JSON. Integers up to 2^53 print exactly ("67108864"), others with 6
 * significant digits (%.6g; a value that rounds to an integer prints as that
 * integer), always with '.' whatever the locale. Formatting a value read
 * back from a file gives the same text, so rewriting a CSV changes nothing. An n/a row
 * has empty numbers and its reason in note: never a made-up number.
 *
 * Test: bazel test //lib/report:results_test
 */
#ifndef TB_RESULTS_H
#define TB_RESULTS_H

#include <stddef.h>
#include <stdio.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: rounds, mde, stopped_by, unreliable, busy, load_avg appended (the
 * paired measurement); a schema-1 CSV still loads, those fields empty.
 * 3: workload, model_gflops, gemm_ceiling, mfu appended (step techniques
 * per workload, issue 15); a schema-2 CSV loads with them empty.
 * 4: xcore_ns appended (the machine state the rounds ran in, issue 14); a
 * schema-3 CSV loads with it empty. */
#define TB_RESULTS_SCHEMA "tunebench-results/4"

typedef enum tb_timing_verdict {
    TB_TIMING_NA = 0,         /* "n/a": not timed (see note) */
    TB_TIMING_BASELINE,       /* "baseline": this row is the reference */
    TB_TIMING_FASTER,         /* "faster": speedup interval above the noise floor */
    TB_TIMING_SLOWER,         /* "slower": below it */
    TB_TIMING_WITHIN_NOISE,   /* "within noise" */
} tb_timing_verdict;

typedef enum tb_correctness {
    TB_CORRECT_NA = 0,        /* "n/a": not checked (see note) */
    TB_CORRECT_EXACT,         /* "exact": bitwise equal */
    TB_CORRECT_WITHIN_TOL,    /* "within tolerance": max_rel_err <= tolerance */
    TB_CORRECT_DIFFERS,       /* "DIFFERS": beyond tolerance; upper case on purpose */
} tb_correctness;

/* One CSV row. Strings are NUL-terminated and truncated to fit; numbers are
 * NaN when missing (tb_result_row_init sets every number to NaN). */
typedef struct tb_result_row {
    char technique[32];       /* "gelu" */
    char backend[8];          /* "cpu", "cuda" */
    char device[128];         /* device name as in the fingerprint */
    char setting[64];         /* "fused", "unfused", "workers=4" */
    int is_baseline;          /* 1 for the setting the others are compared with */
    char param_name[32];      /* sweep parameter: "elements", "batch" */
    double param_value;       /* its value at this point */
    char metric[48];          /* what was timed: "fwd time", "step time" */
    char unit[16];            /* unit of median..max: "ms", "us", "s" */
    int reps;                 /* repetitions behind the median; 0 = empty */
    double median;
    double ci_low, ci_high;   /* 95% interval of the median */
    double min, max;
    double noise_floor;       /* relative spread of the baseline timed twice */
    double speedup;           /* baseline median / this median; > 1 is faster */
    double speedup_ci_low, speedup_ci_high; /* bootstrap 95% interval */
    tb_timing_verdict timing_verdict;
    tb_correctness correctness;
    char checked_against[48]; /* "baseline", "float64 reference" */
    double tolerance;         /* relative tolerance the check used */
    double max_rel_err;
    double rate;              /* achieved rate, e.g. effective bandwidth */
    char rate_unit[16];       /* "GB/s" (1e9 bytes), "GFLOP/s", "samples/s" */
    char ceiling_name[48];    /* "copy bandwidth": the bound this rate is held to */
    double ceiling_rate;      /* measured in the same run, in rate_unit */
    double fraction_of_ceiling; /* rate / ceiling_rate */
    double memory_bytes;      /* peak device (host on CPU) memory */
    /* the interleaved, paired measurement (bench/harness/rounds.h) */
    int rounds;               /* rounds behind the paired comparison; 0 = not paired
                                 (then mde, stopped_by are empty too) */
    double mde;               /* minimum detectable effect, relative (0.02 = 2%) */
    char stopped_by[8];       /* why the rounds stopped: "target", "budget", "cap" */
    int unreliable;           /* 1: its baseline's A/A interval excludes 1 */
    int busy;                 /* 1: measured on a busy machine */
    double load_avg;          /* mean 1-minute load average while it was measured */
    /* schema 3 (lib/train/workload.h) */
    char workload[48];        /* "gpt2-reduced-synthetic"; "" where no model trains */
    double model_gflops;      /* model FLOPs per second (lib/nn/flops.h), 1e9 */
    double gemm_ceiling;      /* the GEMM ceiling it is held to, GFLOP/s, for the
                                 precision in use (how measured: the note) */
    double mfu;               /* model_gflops / gemm_ceiling */
    /* schema 4 */
    double xcore_ns;          /* median round trip of a cache line between the first two
                                 CPUs over its rounds (bench/harness/machine_probe.h): the
                                 state the machine was in */
    char note[512];           /* n/a reason or remark */
} tb_result_row;

/* The rows of one technique, in the order added. */
typedef struct tb_results {
    tb_result_row *rows;
    size_t n, cap;
} tb_results;

/* Sets every number to NaN, every string to "", enums to n/a, counts and
 * flags (reps, rounds, unreliable, busy) to 0: "not paired, not flagged". */
void tb_result_row_init(tb_result_row *row);

void tb_results_init(tb_results *res);
void tb_results_free(tb_results *res);

/* Appends a copy of row. */
int tb_results_add(tb_results *res, const tb_result_row *row);

/* Appends an n/a row: identity columns set, numbers empty, verdicts n/a,
 * the reason in note. REQUIRES: reason non-empty. */
int tb_results_add_na(tb_results *res, const char *technique, const char *backend,
                      const char *device, const char *setting, const char *metric,
                      const char *reason);

/* The header's column names in order: column i, NULL past the end. */
const char *tb_results_column(size_t i);
size_t tb_results_ncolumns(void);

const char *tb_timing_verdict_name(tb_timing_verdict v);
const char *tb_correctness_name(tb_correctness c);

/* Formats v as the CSV and JSON do (see the top of this file): "" when NaN
 * or infinite; '.' as decimal point whatever the locale.
 * REQUIRES: cap >= 32. */
void tb_format_number(char *buf, size_t cap, double v);

/* Writes s as one CSV field (RFC 4180): quoted when it holds a comma,
 * quote, CR or LF, or begins or ends with a space; quotes inside doubled.
 * For every CSV tunebench writes (compare.csv too). */
void tb_results_put_csv_string(FILE *f, const char *s);

/* Writes header + rows as CSV (RFC 4180 quoting, LF line ends) to f. */
int tb_results_write_csv(const tb_results *res, FILE *f);
/* Same, as {"schema": ..., "rows": [{column: value, ...}]}. */
int tb_results_write_json(const tb_results *res, FILE *f);

/* The JSON, with the technique's declared headline setting (the one the
 * report's summary shows; bench/harness/technique.h) and the metric it is
 * read on as top-level "headline" and "headline_metric" keys before "rows";
 * NULL or "": none, as tb_results_write_json. */
int tb_results_write_json_headline(const tb_results *res, const char *headline,
                                   const char *metric, FILE *f);

/* Atomically writes path (see atomic_file.h). REQUIRES: directory exists. */
int tb_results_save_csv(const tb_results *res, const char *path);
int tb_results_save_json(const tb_results *res, const char *path);
int tb_results_save_json_headline(const tb_results *res, const char *headline,
                                  const char *metric, const char *path);

/* Reads a CSV written by tb_results_write_csv and appends its rows to res.
 * Columns are matched by header name, so columns added later (unknown
 * here) are skipped; a missing schema-1 column is TB_ERR_DATA, while a
 * missing schema-2 column (a file from an older build) leaves its field as
 * tb_result_row_init does. name is for error messages. */
int tb_results_parse_csv(FILE *f, const char *name, tb_results *res);
int tb_results_read_csv(const char *path, tb_results *res);

#ifdef __cplusplus
}
#endif
#endif
