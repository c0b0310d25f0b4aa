/*
 * opbench.h - what the op-level technique binaries share (bench/techniques/gelu.c's
 * pattern, factored out): registering a timed op with Google Benchmark
 * (two warm-up calls, then manual time per iteration from the backend's
 * events), finding its runs again, filling result rows (timing; noise floor
 * of a baseline timed twice; speedup with its interval and verdict),
 * correctness verdicts, n/a rows and figures grouped by (setting, metric).
 * Random inputs: tb_rng_fill (lib/core/rng.h).
 *
 * Used by bench/techniques/{pinned_memory,conv_autotuner,fused_optimizer,
 * mixed_precision_ops,tf32,caching_allocator,fused_attention,
 * fused_layernorm}.c. Each is run as `bazel run //bench:<name>`.
 */
#ifndef TB_BENCH_OPBENCH_H
#define TB_BENCH_OPBENCH_H

#include <stddef.h>
#include <stdint.h>

#include "bench/harness/harness.h"
#include "lib/core/rng.h"

/* One registered benchmark: fn(arg) is one timed iteration. */
typedef struct opb_case {
    tb_backend *be;
    tb_timed_op fn;
    void *arg;
    int warmups;               /* untimed calls first: 2 (the harness's), 1 or 0 */
    int warmed;                /* of them made so far (before the first repetition) */
} opb_case;

/* The cases registered so far; they must outlive tb_bench_run. */
typedef struct opb_set {
    opb_case **cases;
    size_t n, cap;
} opb_set;

/* Untimed warm-up calls before a case's first repetition: caches, lazy
 * initialization, autotuner caches. */
#define OPB_WARMUPS 2

/* Registers "NAME/" (printf-style fmt) with iterations per repetition and
 * b->reps repetitions, unit us, after `warmups` untimed calls: OPB_WARMUPS;
 * 1 for an op that caches nothing and whose single call takes long
 * (attention at T = 4096); 0 for ops whose every call is a first call (a
 * new shape each time: the autotuner's tuning cost, a batch size that
 * changes every step), which fn must make cold itself. Errors inside a run
 * end it with Google Benchmark's skip-with-error, which the row fillers
 * then report.
 * REQUIRES: iterations >= 1; arg lives until tb_bench_run returns. */
int opb_register(tb_bench *b, opb_set *set, int warmups, tb_timed_op fn, void *arg,
                 int64_t iterations, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
void opb_set_free(opb_set *set);

/* A sweep as callbacks on its own state: setup allocates and registers
 * the cases; report checks correctness, adds rows and draws figures (the
 * rows are saved between the two); teardown frees, whatever happened. */
typedef struct opb_sweep {
    int (*setup)(tb_bench *b, void *state, opb_set *set);
    int (*report)(tb_bench *b, void *state, const gb_results *r);
    int (*plot)(tb_bench *b, void *state);
    void (*teardown)(tb_bench *b, void *state);
} opb_sweep;

/* setup, run Google Benchmark, report, save, plot, teardown. When setup
 * registered nothing (every row n/a on this backend), Google Benchmark is
 * not run and report gets r == NULL. */
int opb_run(tb_bench *b, const opb_sweep *sw, void *state);

/* main() of a technique binary: tb_bench_init with no flags of its own,
 * run, the exit code (errors printed). */
int opb_main(int argc, char **argv, const tb_technique *tech, int (*run)(tb_bench *b));

/* The main() of a technique file that is one op-level sweep. */
#define TB_OPB_MAIN(tech, run)                                                                    \
    int main(int argc, char **argv) { return opb_main(argc, argv, &(tech), (run)); }

/* The run registered as fmt (without the trailing '/'), or NULL. */
const gb_run *opb_find(const gb_results *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Same, failing with TB_ERR_DATA when missing. */
int opb_need(const gb_results *r, const gb_run **out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Baseline row: timing in unit (scale: seconds -> unit), speedup 1 and the
 * noise floor from base vs again. */
int opb_fill_base(tb_result_row *row, const gb_run *base, const gb_run *again, double scale,
                  const char *unit);
/* Variant row: timing, speedup over base with interval, noise floor, verdict. */
int opb_fill_variant(tb_result_row *row, const gb_run *me, const gb_run *base,
                     const gb_run *again, double scale, const char *unit);

/* Correctness columns from a comparison against `against` ("baseline",
 * "float64 reference", "f32 GEMM"). */
void opb_set_check(tb_result_row *row, const tb_compare *c, const char *against);

/* An n/a row: identity columns, verdicts n/a, the reason in note. */
int opb_add_na(tb_bench *b, const char *setting, const char *metric, const char *reason);

/* Which column a figure shows on y. */
typedef enum opb_y { OPB_Y_MEDIAN, OPB_Y_SPEEDUP, OPB_Y_RATE, OPB_Y_MEMORY } opb_y;

/* Draws every row with a value in column y as a line per (setting, metric)
 * against param_value (speedups with their intervals, baselines left out
 * of speedup figures), into plots/<device>/name.{png,svg,pdf}. Does nothing
 * when no row has a value. x_log: 0 or a log base. */
int opb_plot(tb_bench *b, const char *name, const char *title, const char *x_label,
             const char *y_label, int x_log, opb_y y);
/* Same, with only the rows whose metric is `metric` (NULL: all). */
int opb_plot_metric(tb_bench *b, const char *name, const char *title, const char *x_label,
                    const char *y_label, int x_log, opb_y y, const char *metric);

#endif
