/*
 * opbench.h - what the op-level technique binaries share (bench/techniques/gelu.c's
 * pattern, factored out): registering a timed op and saying which case is
 * compared with which, timing every case in interleaved rounds
 * (bench/harness/rounds.h: warm-up until settled, a minimum repetition
 * time, rounds in a shuffled order, adaptive stop; Google Benchmark times
 * each repetition), finding a case's per-round times again, filling result
 * rows (timing; the paired speedup with its interval, its A/A noise check
 * and verdict; rounds, minimum detectable effect, why the rounds stopped,
 * the machine's load), correctness verdicts, n/a rows and figures grouped
 * by (setting, metric). Random inputs: tb_rng_fill (lib/core/rng.h).
 *
 * One sweep is one experiment: every registered case is an arm of the same
 * rounds (opb_plan.h says which arms, and makes an A/A arm for a compared
 * baseline the sweep did not copy itself), so drift hits every case alike.
 * Cases compared with nothing (a copy ceiling) are interleaved too, with
 * the same minimum repetition time, and get no comparison.
 *
 * Rebuilds (opb_set_rebuild): a case may own what its op works on and
 * rebuild it between rounds (new buffers, same inputs), so that its
 * interval is over builds as a step technique's (rounds.h, step 5): buffer
 * placement is drawn once per allocation and made two runs of gelu
 * disagree on 12 of 56 rows with tight intervals. A point's baseline
 * rebuilds; its variants and A/A copy share its buffers and change build
 * with it.
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
#include "bench/harness/rounds.h"
#include "lib/core/rng.h"

/* One registered case: fn(arg) is one unit of work. */
typedef struct opb_case {
    tb_backend *be;
    tb_timed_op fn;
    void *arg;
    int warmups;               /* untimed calls first: 2 (the harness's), 1 or 0 */
    int warmed;                /* of them made so far (before the first repetition) */
    char name[160];            /* "gelu_fwd_fused/1024" (no trailing '/') */
    size_t base;               /* the case it is compared with; own index: none */
    int aa;                    /* 1: the A/A copy of case `base` */
    int (*rebuild)(void *arg); /* a fresh build of arg's state (opb_set_rebuild); NULL: none */
    int rebuild_warmups;       /* untimed calls after each rebuild */
} opb_case;

/* The cases registered so far; they must outlive tb_bench_run. */
typedef struct opb_set {
    opb_case **cases;
    size_t n, cap;
} opb_set;

/* Untimed warm-up calls before a case's first repetition: caches, lazy
 * initialization, autotuner caches. */
#define OPB_WARMUPS 2

/* Registers the case "NAME" (printf-style fmt), compared with nothing until
 * opb_compare says otherwise. Timing: the rounds engine warms it up until
 * its times settle, then picks the calls per repetition that last the
 * profile's minimum repetition time (opb_rounds_cfg); `iterations`, the
 * sweep's own guess of calls per repetition, is no longer used for timing:
 * the engine's choice replaces it.
 * Before the engine's warm-up, `warmups` untimed calls: OPB_WARMUPS;
 * 1 for an op that caches nothing and whose single call takes long
 * (attention at T = 4096); 0 for ops whose every call is a first call (a
 * new shape each time: the autotuner's tuning cost, a batch size that
 * changes every step), which fn must make cold itself. An error in a call
 * ends the sweep with its status.
 * REQUIRES: iterations >= 1; arg lives until opb_run returns. */
int opb_register(tb_bench *b, opb_set *set, int warmups, tb_timed_op fn, void *arg,
                 int64_t iterations, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
void opb_set_free(opb_set *set);

/* Says that case var (its index in set: set->n - 1 right after it was
 * registered) is compared with case base: a variant (aa = 0), or base's
 * A/A copy (aa = 1: the same op timed as if it were another, the noise
 * check). A compared base without an A/A copy gets one made by the
 * harness. An A/A copy registered with its base's fn and arg is warmed up
 * and rebuilt with its base, as the harness's own copy is (its warm-up is
 * not made twice). REQUIRES: both registered; base compared with nothing itself
 * (checked when the sweep runs: TB_ERR_INVALID). */
int opb_compare(opb_set *set, size_t var, size_t base, int aa);

/* Gives case idx a rebuild: rebuild(arg) frees and reallocates what the
 * case's op works on (its buffers, refilled from the same seed or host
 * copy: what another run of the program would get, at other addresses and
 * on other pages), and touches every page it will write. The rounds call
 * it, untimed, every opb_rounds_cfg's rounds_per_build rounds (less often
 * when it is dear: rounds.h, TB_ROUNDS_REBUILD_SHARE), then make `warmups`
 * untimed calls of the case (OPB_REBUILD_WARMUPS; 0 where one call is long
 * and the rebuild already touched every page: a GEMM of seconds, whose
 * primitive outlives its buffers), and compare the case over builds
 * (tb_stats_paired_builds): a result's interval then holds the spread that
 * buffer placement (cache sets, 4 KiB aliasing between inputs and outputs,
 * pages near the cache's size) puts between two runs of the program, which
 * one process's rounds cannot show. A case and its base should each
 * own what they rebuild (a shared buffer rebuilt by one case changes the
 * other's state behind its build count). An A/A copy the harness makes
 * (opb_plan.h) is rebuilt with its base.
 * REQUIRES: idx registered; rebuild leaves the case runnable, or returns an
 * error (the sweep ends with it). */
int opb_set_rebuild(opb_set *set, size_t idx, int (*rebuild)(void *arg), int warmups);

/* Untimed calls of a case after a rebuild, as a rule (its pages are
 * touched by the rebuild: one call loads its caches and any lazy state). */
#define OPB_REBUILD_WARMUPS 1

/* The builds the interval of run's comparison spans (the arm's cmp.builds
 * for a compared case; for a baseline, its A/A arm's), inside report; 0 for
 * a run not from the current sweep's rounds or never compared. */
size_t opb_builds(const gb_run *run);

/* The share of a technique's budget kept for its correctness pass and rows
 * after the rounds (an idle run: gelu's took 2.2 s of 26, fused_layernorm's
 * 1.4 s of 10). */
#define OPB_CHECK_SHARE 0.10

/* The rounds configuration of b's profile: minimum repetition time and
 * the floor it may shrink to so that the minimum rounds fit the budget
 * (rounds.h: min_rep_floor_s), rounds from --reps (at least 5) to a cap,
 * the target half-width (2%), the rounds between rebuilds of the cases
 * that have one (opb_set_rebuild), b's technique's budget for the profile
 * (technique.h: budget_seconds; 0 there: the harness's default) less what
 * the sweep's checks after the rounds need (OPB_CHECK_SHARE of it), and a
 * seed derived from the technique's name, so that a rerun shuffles its
 * rounds the same way (printed on stderr). */
void opb_rounds_cfg(const tb_bench *b, tb_rounds_cfg *cfg);
/* The gpu profile's floor of a sweep's repetition, seconds (opb_rounds_cfg). */
#define OPB_GPU_MIN_REP_FLOOR 0.005

/* A sweep as callbacks on its own state: setup allocates and registers
 * the cases; report checks correctness, adds rows and draws figures (the
 * rows are saved between the two); teardown frees, whatever happened. */
typedef struct opb_sweep {
    int (*setup)(tb_bench *b, void *state, opb_set *set);
    int (*report)(tb_bench *b, void *state, const gb_results *r);
    int (*plot)(tb_bench *b, void *state);
    void (*teardown)(tb_bench *b, void *state);
} opb_sweep;

/* setup, the rounds of every registered case (one experiment), report,
 * save, plot, teardown. report gets each arm's per-round times per call as
 * a gb_run named "<case name>/" (repetitions: the rounds), for opb_need and
 * the fillers below. When setup registered nothing (every row n/a on this
 * backend), nothing is timed and report gets r == NULL. */
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
 * noise floor from base vs again: the paired A/A interval of the rounds
 * (max(0, hi - 1, 1 - lo)), with its rounds, minimum detectable effect, why
 * the rounds stopped, unreliable (the A/A interval excludes 1), busy and
 * the load average. Runs that did not come from this sweep's rounds (the
 * DDP sweep's): the unpaired bootstrap of harness.h. */
int opb_fill_base(tb_result_row *row, const gb_run *base, const gb_run *again, double scale,
                  const char *unit);
/* Variant row: timing, the paired speedup over base (tb_stats_paired of the
 * per-round times) with its interval, minimum detectable effect and rounds,
 * the noise floor and unreliable flag from base's A/A pair (again, or the
 * A/A arm the harness made when again is NULL), the verdict
 * (tb_stats_paired_verdict), busy and load. TB_ERR_INVALID when me was not
 * declared compared with base (opb_compare). Runs not from this sweep's
 * rounds: the unpaired bootstrap of harness.h. */
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
