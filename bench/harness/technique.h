/*
 * technique.h - a technique's one declaration: its name, what it measures,
 * how long it takes per profile, where bench:all runs it, and what its
 * tiny-profile test expects. It is written once, in the technique's own
 * bench/techniques/<name>.c, and everything else asks the binary for it:
 * `<binary> --describe` prints it as one JSON line (tb_technique_describe),
 * bench:all reads that to plan and order its run, and the tiny-profile test
 * (technique_test.sh) reads it for what to check.
 */
#ifndef TB_BENCH_TECHNIQUE_H
#define TB_BENCH_TECHNIQUE_H

#include <stdio.h>

/* The number of entries of a static array. */
#define TB_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The profiles: how long a run is and what it is sized for.
 *   default  the CPU's: minutes, the big models reduced (lib/train/workload.h)
 *   full     real measurements: hours, the real models
 *   tiny     the tests': shapes, not timings
 *   gpu      one 80 GB GPU, aimed at 10 minutes (tools/gpu_estimate.py
 *            models ~18 on an H100 today): the real models at the batches
 *            that fill it (ResNet-50 224 x 224, batch 64; GPT-2 context 1024,
 *            batch 4), found smaller by the batch-size search where memory
 *            is short; chosen by default on the CUDA backend. Everything
 *            else (sweeps, subsets, rounds) is sized as in full
 *            (tb_profile_sizes), the budgets are its own. */
typedef enum tb_profile {
    TB_PROFILE_DEFAULT = 0,
    TB_PROFILE_FULL = 1,
    TB_PROFILE_TINY = 2,
    TB_PROFILE_GPU = 3,
} tb_profile;
#define TB_PROFILES 4
/* --profile=auto, after the profiles in the flag's choices: resolved to a
 * tb_profile by tb_profile_resolve once the backend is known. */
#define TB_PROFILE_AUTO TB_PROFILES

/* The profile whose sizes (sweeps, subsets, rounds; the per-profile tables
 * of bench/harness and bench/techniques, which have 3 entries) a run of
 * profile p uses: full for gpu, p otherwise. */
static inline int tb_profile_sizes(int p)
{
    return p == TB_PROFILE_GPU ? TB_PROFILE_FULL : p;
}

/* The most of a technique's declared budget bench:all's time keeper takes
 * off (bench/cmd/plan.h: tb_plan_budget_cut); tb_bench_budget never goes
 * below what is left then, whatever --extra-budget says. */
#define TB_BUDGET_MAX_CUT 0.5

#define TB_MAX_AFTER 4

/* What the tiny-profile test checks (bench/harness/check_outputs.py). */
typedef struct tb_tiny_test {
    int min_rows;             /* rows its CSV has at least */
    const char *plots;        /* the plots it draws, comma-separated; NULL: none */
    const char *na_note;      /* NULL, or the text every CPU n/a row's note holds
                                 (the test then also wants n/a rows) */
    int no_gbench;            /* times without Google Benchmark: no .gbench.json */
    /* NULL, or the models its rows must cover, comma-separated
     * ("resnet50,gpt2"; lib/train/workload.h): the step harness fills it */
    const char *workloads;
} tb_tiny_test;

typedef struct tb_technique {
    const char *name;         /* target and binary: bazel run //bench:<name> */
    const char *results;      /* results/<device>/<results>.csv and the technique
                                 column; NULL: name */
    const char *what;         /* one line for --help */
    /* The setting the report's summary shows, declared before anything is
     * measured (showing the fastest of several noisy settings would bias
     * every summary upward); must match a setting name of its rows. NULL:
     * none (the summary shows the fastest and says so). */
    const char *headline;
    /* The metric that summary row is read on where a technique times
     * several (fused_attention: fwd, fwd+bwd, causal or not; fused_optimizer:
     * sgd and adamw at four tensor sizes), declared as the one training
     * pays for; it must match a metric of its rows. NULL: "step time"
     * when timed, else the first metric its rows list. */
    const char *headline_metric;
    /* 1: times through Google Benchmark's runner (tb_bench_run: bench:ceilings),
     * which takes the --benchmark_* flags harness.c lets through (gbench_ok:
     * _filter, _min_time, _min_warmup_time); 0: tunebench's
     * own interleaved rounds, which refuse every --benchmark_* flag (they
     * used to be accepted and ignored) */
    int gbench_runner;
    double est_seconds[TB_PROFILES]; /* expected run time per tb_profile */
    /* Time budget of the whole technique per tb_profile: its set-up and
     * checks count against it, and its rounds (bench/harness/rounds.h) get
     * what is left (tb_bench_budget_left: at least TB_BUDGET_FLOOR of it)
     * and stop when every interval is narrow enough or that is spent;
     * bench:all checks that a profile's budgets add up to at most its
     * limit. 0: the harness's default. */
    double budget_seconds[TB_PROFILES];
    /* bench:all runs techniques by ascending order (ties by name), each one
     * after those named in `after` (whose results it reads). */
    int order;
    const char *after[TB_MAX_AFTER];
    tb_tiny_test tiny;
    /* The models the gpu profile runs ("resnet50,gpt2"): the step harness
     * fills it (fewer than the tiny test's where a technique declares
     * gpu_workloads); NULL for the other techniques */
    const char *gpu_workloads;
} tb_technique;

/* results, or name when results is NULL. */
const char *tb_technique_results(const tb_technique *t);

/* Writes t as one JSON line:
 * {"name":..,"results":..,"what":..,"headline":..,"headline_metric":..,
 *  "est_seconds":[d,f,t,g],
 *  "budget_seconds":[d,f,t,g],"order":..,
 *  "after":[..],"tiny":{"min_rows":..,"plots":..,"na_note":..,"gbench":..,
 *  "workloads":..},"gpu_workloads":..}
 * Returns TB_OK or TB_ERR_IO. */
int tb_technique_describe(const tb_technique *t, FILE *f);

/* Resolves --profile=auto (TB_PROFILE_AUTO: gpu on the CUDA backend, else
 * default) in *profile, saying on stderr when it picks gpu; a gpu profile
 * asked for on another backend gets a warning (it is sized for an 80 GB
 * GPU). who: the name the lines begin with. */
void tb_profile_resolve(int *profile, const char *backend, const char *who);

/* Whether argv holds --describe (for a main that must stop before its
 * later parts; tb_bench_init answers --describe itself). */
int tb_technique_wants_describe(int argc, char *const *argv);

#endif
