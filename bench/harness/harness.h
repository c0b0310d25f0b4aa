/*
 * harness.h - what every technique binary shares: the common flags, opening
 * the backend, the output folders and fingerprint, running the Google
 * Benchmark runs, and turning per-repetition times into result rows with
 * speedups, intervals and verdicts. Measuring is kept apart from reporting:
 * a technique registers benchmarks and runs them; then it builds rows from
 * the JSON Google Benchmark wrote, then it checks correctness in a separate
 * pass, never inside the timed loop.
 *
 * Common flags: --device, --threads, --profile=auto|default|full|tiny|gpu
 * (auto: gpu on the CUDA backend, else default; technique.h),
 * --out-dir, --reps (at least 5), --describe (bench/harness/technique.h). Google Benchmark's own --benchmark_*
 * flags pass through (e.g. --benchmark_filter).
 */
#ifndef TB_BENCH_HARNESS_H
#define TB_BENCH_HARNESS_H

#include <stddef.h>

#include "bench/harness/gb_results.h"
#include "bench/harness/gbench_shim.h"
#include "bench/harness/technique.h"
#include "lib/backend/backend.h"
#include "lib/report/fingerprint.h"
#include "lib/core/flags.h"
#include "lib/core/outdir.h"
#include "lib/report/results.h"
#include "lib/core/stats.h"

#define TB_MIN_REPS 5
#define TB_MAX_EXTRA_FLAGS 32

/* The correctness checks' rounding control (bench/harness/step_harness.h's
 * step checks, bench:ddp_sweep's DataParallel check): the reference again,
 * TB_CONTROL_RUNS times, each initial weight moved by TB_CONTROL_NUDGE of
 * itself, up or down by draws from tb_control_seed(i) (tb_model_nudge_weights):
 * about what another summation order does to one layer's output (fp32 sums
 * of hundreds of terms). A result differs only when further from the
 * reference than TB_CONTROL_K times the farthest of those ended, and than
 * the declared tolerance. Several draws, because one is a poor estimate
 * where a few SGD steps amplify rounding chaotically: on the tiny ResNet-50
 * with conv biases before batch norm, six draws ended 0.66-5.8% from the
 * baseline after 5 steps. */
#define TB_CONTROL_NUDGE 0x1p-17 /* 7.6e-6 relative */
#define TB_CONTROL_SEED 0x6e75646765ull
#define TB_CONTROL_K 2.0
#define TB_CONTROL_RUNS 3
/* The first update's control (step_harness.c, witness_controls) takes more
 * draws: its distances spread wider. On the tiny ResNet-50 under bf16
 * autocast with bf16 activations, six draws moved the first update by
 * 0.053-0.29, the first three by at most 0.12: a tolerance of twice the
 * farthest of three would judge rounding as a difference. */
#define TB_WITNESS_CONTROL_RUNS 6
/* The widest loss tolerance a check may end with: where rounding alone
 * (the control) moves the baseline's loss so far that TB_CONTROL_K times
 * it passes past this, or the control diverged, the loss cannot tell a
 * setting from its baseline and the row's correctness is n/a saying so. */
#define TB_CHECK_TOL_MAX 0.5

/* Draw i < TB_CONTROL_RUNS of the rounding control (draw 0: TB_CONTROL_SEED). */
static inline unsigned long long tb_control_seed(int i)
{
    return TB_CONTROL_SEED + (unsigned long long)i;
}

typedef struct tb_bench {
    const tb_technique *tech;  /* its declaration */
    const char *technique;     /* "gelu": file names and the technique column */
    /* common flags */
    const char *device_spec;
    int threads;
    /* The profile asked for (tb_profile, TB_PROFILE_GPU included; auto
     * resolved once the backend is open): its budgets apply. */
    int run_profile;
    /* tb_profile_sizes(run_profile), 0..2: the profile whose sizes apply,
     * what the per-profile tables of the techniques are indexed by. */
    int profile;
    const char *out_dir;
    int reps;
    double extra_budget;       /* seconds added to the technique's declared budget */
    double t_start;            /* CLOCK_MONOTONIC seconds when tb_bench_init began */
    /* opened by tb_bench_init */
    tb_backend *be;
    tb_device_info info;
    tb_outdir od;
    tb_fingerprint fp;
    tb_results res;
    int argc;                  /* what is left for Google Benchmark */
    char **argv;
} tb_bench;

/* Parses the common flags plus the technique's own (extra), opens the
 * backend, creates results/<device>/ and plots/<device>/ and collects the
 * fingerprint (tb_bench_save writes it). Returns TB_OK, or an error. *done is set (and TB_OK
 * returned) when --help or --describe was answered and the program should
 * exit 0. REQUIRES: tech outlives b. */
int tb_bench_init(tb_bench *b, const tb_technique *tech, const tb_flag *extra, size_t nextra,
                  int argc, char **argv, int *done);

/* The technique's time budget for its profile: the declared one
 * (tech->budget_seconds; 0 when it declares none) plus --extra-budget. It
 * is the whole technique's: set-up and correctness checks count against it
 * (tb_bench_budget_left), so that bench:all's plan, the sum of the
 * budgets, is what a run takes. */
double tb_bench_budget(const tb_bench *b);

/* Seconds since tb_bench_init began (CLOCK_MONOTONIC): what the budget
 * counts against. */
double tb_bench_elapsed(const tb_bench *b);

/* What is left of tb_bench_budget for the timing rounds: the budget less
 * the seconds since tb_bench_init began, but never under TB_BUDGET_FLOOR of
 * the budget (the rounds keep their minimum; a check that ate the budget
 * is said on stderr). 0 when there is no budget. */
double tb_bench_budget_left(const tb_bench *b);
#define TB_BUDGET_FLOOR 0.2

/* Runs the registered benchmarks; Google Benchmark's JSON is kept as
 * results/<device>/<technique>.gbench.json (written to a temporary name and
 * renamed, so its own compare.py can read two runs) and parsed into *out. */
int tb_bench_run(tb_bench *b, gb_results **out);

/* Finds a run by registered name prefix ("gelu_fwd_fused/1024/"); NULL if
 * missing. Names carry options GB appends, so match on the prefix. */
const gb_run *tb_bench_find(const gb_results *r, const char *prefix);

/* Fills the timing columns of row from run (seconds converted to unit_scale
 * units, e.g. 1e3 for ms): reps, median, a bootstrap 95% interval of the
 * median, min, max. Fails with TB_ERR_DATA if the run reported an error or
 * has fewer than TB_MIN_REPS repetitions. */
int tb_bench_fill_timing(tb_result_row *row, const gb_run *run, double unit_scale,
                         const char *unit);

/* The CSV's timing verdict for a comparison's (lib/core/stats.h). */
tb_timing_verdict tb_bench_timing_verdict(tb_speed_verdict v);

/* Speedup of var over base with its bootstrap interval, the noise floor from
 * base vs base_again (the baseline timed twice in the same run), and the
 * verdict. base_again may be NULL (noise floor 0). */
int tb_bench_fill_speedup(tb_result_row *row, const gb_run *base, const gb_run *base_again,
                          const gb_run *var);

/* The CSV's correctness verdict for a comparison's (lib/core/stats.h):
 * exact, within tolerance or DIFFERS. */
tb_correctness tb_bench_correctness(tb_match m);

/* Noise floor of a baseline timed twice, for the baseline's own row. */
int tb_bench_noise_floor(const gb_run *base, const gb_run *base_again, double *noise);

/* A row with identity columns (technique, backend, device) filled in. */
void tb_bench_row(const tb_bench *b, tb_result_row *row, const char *setting, int is_baseline,
                  const char *param_name, double param_value, const char *metric);

/* Writes results/<device>/fingerprint.json, <technique>.csv and .json
 * atomically and prints the rows as a short table on stdout: a run
 * interrupted before its results leaves the fingerprint of the run that
 * wrote the CSVs there. */
int tb_bench_save(tb_bench *b);

void tb_bench_close(tb_bench *b);

/* Times one call of op with the backend's events (CUDA events on the GPU,
 * CLOCK_MONOTONIC on the CPU): the manual time every benchmark reports. */
typedef int (*tb_timed_op)(void *arg);
int tb_bench_time_op(tb_backend *be, tb_timed_op op, void *arg, double *seconds);

/* n seeded uniform random floats in [lo, hi) (tb_rng_fill) into device
 * memory dev, through a host buffer; the copy has finished on return. */
int tb_bench_upload_random(tb_backend *be, float *dev, size_t n, uint64_t seed, double lo,
                           double hi);

/* The most bytes one call of op had allocated at once beyond what was in
 * use before it (the backend's counted peak: the bytes asked for), the
 * device synchronized before and after: what a call allocates for itself. */
int tb_bench_peak_of(tb_backend *be, tb_timed_op op, void *arg, double *bytes);

/* The body of a Google Benchmark function for one backend op: runs op
 * twice to warm up (caches, lazy initialization, autotuner caches), then
 * times each iteration with tb_bench_time_op and reports it as manual time.
 * A failing op ends the run with GB's skip-with-error and its message. */
void tb_bench_timed_loop(tbb_state *st, tb_backend *be, tb_timed_op op, void *arg);

/* tb_bench_timed_loop without the warm-up: the timed iterations only, for
 * callers that warm up their own way (bench/harness/opbench.c: once per case). */
void tb_bench_timed_iterations(tbb_state *st, tb_backend *be, tb_timed_op op, void *arg);

/* Prints the error chain and returns the exit code for status rc. */
int tb_bench_fail(const char *technique, int rc);

/* path is removed (unlink, or rmdir for an empty folder) if SIGINT or
 * SIGTERM ends the process before tb_bench_keep_on_signal(path): a
 * temporary being written, data staged for the run. Register a folder
 * after the files in it. At most 8 at a time. */
int tb_bench_remove_on_signal(const char *path);
void tb_bench_keep_on_signal(const char *path);

/* A temporary next to path (tb_atomic_reserve) that a signal removes
 * (tb_bench_remove_on_signal); on failure none is left. */
int tb_bench_reserve_tmp(const char *path, char *tmp, size_t cap);
/* Ends tmp's watch: rc TB_OK publishes it as path (tb_atomic_publish),
 * anything else removes it. Returns rc, or the publish's error. */
int tb_bench_finish_tmp(int rc, const char *tmp, const char *path);

#endif
