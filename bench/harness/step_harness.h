/*
 * step_harness.h - the technique-table machinery for training-step
 * techniques: a technique is one tb_step_technique entry (its
 * settings, which one each is compared with, the metric, the n/a reason per
 * backend, the correctness tolerance with its justification); tb_step_main
 * loops over the entry and never looks at names.
 *
 * What tb_step_main does, in this order (checks apart from timing, so that
 * no check is inside a timed region):
 *   1. the common flags (bench/harness/harness.h) plus --mem-limit,
 *      --check-steps and the rounds' --target, --budget, --max-rounds and
 *      --seed; the Fashion-MNIST subset of the profile, decoded once;
 *   2. the entry's workload_ready hook, when it has one; n/a rows for the
 *      settings the backend gives no meaning to (the
 *      baseline is always timed, so every technique has a reference);
 *   3. the correctness pass: per setting a fresh trainer from the same seed,
 *      check-steps steps, the last loss compared with its baseline's
 *      (tb_compare_values with the entry's tolerance), the peak memory the
 *      backend's allocator counted; a setting that runs out of memory under
 *      --mem-limit becomes an n/a row saying so, and is not timed. A
 *      baseline with a setting past the tolerance gets a rounding control
 *      (--rounding-control): the baseline again from weights moved by
 *      7.6e-6 of themselves; its rows' tolerance becomes at least twice how
 *      far that ended (results/README.md), so that only a difference past
 *      what rounding does to this model and recipe says DIFFERS;
 *   4. timing in one interleaved experiment (bench/harness/rounds.h): an
 *      arm per timed setting, each with its own trainer built from the same
 *      seed, plus an A/A arm per baseline (a second, independent trainer of
 *      the baseline's setting: the noise a comparison sees); the engine warms
 *      each arm up until settled, picks the units (steps, epochs) per
 *      repetition that last at least the profile's minimum (--min-rep), then
 *      runs rounds (every arm once, in an order shuffled per round from a
 *      recorded seed, each between two repetitions of its baseline) in which
 *      each arm stops once its interval is within --target (+-2%), until all
 *      have, or the technique's budget is spent, or --max-rounds; --reps is
 *      the minimum of rounds. Trainers stay alive across rounds where their check-pass
 *      peaks fit together (step_plan.h), else the largest groups (a baseline
 *      and the arms compared with it) park: alive with their activations
 *      freed between their repetitions, one of them unparked at a time
 *      (tb_trainer_park; the check measures what a parked trainer keeps),
 *      and where even that does not fit they are rebuilt every round,
 *      untimed, one of their arms alive at a time beside the rest. An arm's
 *      first build is its check's trainer, kept parked from the check (a
 *      step metric, no prepare hook: step_harness.c, adopts; not the
 *      workload's first check, whose closing tells what the shared state
 *      holds, nor an arm rebuilt every round); kept-alive
 *      (and parked) trainers are still built
 *      afresh every --rounds-per-build rounds (step times: every round;
 *      epoch times: every 4), so that the intervals hold the spread between
 *      builds (rounds.h). Google Benchmark times each repetition
 *      (<technique>.gbench.json holds every round);
 *   5. rows: per setting the median, interval, min and max of its per-round
 *      unit times (reps = rounds), the speedup over its baseline with the
 *      paired interval of the per-round ratios, the verdict and minimum
 *      detectable effect (tb_stats_paired, tb_stats_paired_verdict), the
 *      baseline's noise floor from its A/A pair, the rounds, why they
 *      stopped, the machine's load; <technique>.csv/.json and
 *      plots/<device>/<technique>.png (speedup per setting, 95% interval).
 *
 * Workloads (lib/train/workload.h, issue 15): an entry declares the
 * workloads it means something on (.workloads, a TB_WL_BIT set; none: the
 * small CNN on Fashion-MNIST), and steps 2-5 run once per workload, each
 * with an equal share of the technique's budget, its rows carrying the
 * workload column ("resnet50-reduced-synthetic": the synthetic data
 * named). ResNet-50 and GPT-2 run at the profile's size (--workload-size:
 * reduced in the default profile, tiny in the tiny one, full = the real
 * models), with their own batch: an entry's setup hook sets the small
 * CNN's batch and data only. Their subset is 8 steps of training data and
 * 2 batches of test data; their check pass is 3 steps in the default
 * profile (a reduced step lasts tenths of a second on 2 cores) and in the
 * gpu profile (ten steps of the real models amplify rounding past any
 * tolerance), 10 in full. Every timed row carries its throughput
 * (samples/s; images/s for ResNet-50, tokens/s for GPT-2), the model's
 * FLOP rate (lib/nn/flops.h on the setting's own model) and its MFU
 * against a GEMM ceiling in the setting's precision measured in the same
 * process (bench/harness/gemm_ceiling.h). The baseline row's note names
 * the workload's configuration and its FLOP shares beside the full
 * model's.
 *
 * The loader: on the CPU (the host is the device) the step builds its batch
 * on the main thread, as DataLoader(num_workers=0) does. On a GPU the
 * loader runs TB_STEP_GPU_LOADER_WORKERS worker threads (--loader-workers;
 * not for entries with own_loader), as training on a GPU does with
 * DataLoader(num_workers=N): the host's synthetic batch (37 ms for
 * ResNet-50 at 224x224, batch 64, on one core of the development VM) is
 * then built while the GPU runs earlier steps, instead of waiting in every
 * step whose loss the host reads. The baseline row's note says so.
 *
 * Epoch metrics: a unit is one epoch of the profile's subset (default 256
 * images, 8 steps), so a repetition is a few short epochs and every round
 * times every setting: the loader techniques get rounds like the others.
 *
 * Profiles: tiny (tests: batch 16, a few steps, 5 rounds of very short
 * repetitions), default (bench:all: every sweep point, repetitions of at
 * least 0.05 s, rounds until +-2% or the budget), full (batch 64, longer
 * repetitions, larger budgets).
 *
 * Use (bench/techniques/grads_to_none.c is the shortest example):
 *   static const tb_step_setting settings[] = {
 *       {"memset", 0, 0, set_memset}, {"to none", 1, 0, set_none}};
 *   static const tb_step_technique tech = {
 *       .desc = {.name = "grads_to_none", .what = ..., .est_seconds = ..., ...},
 *       TB_STEP_SETTINGS(settings), ...};
 *   TB_STEP_MAIN(tech)
 */
#ifndef TB_BENCH_STEP_HARNESS_H
#define TB_BENCH_STEP_HARNESS_H

#include "bench/harness/harness.h"
#include "lib/train/config.h"
#include "lib/train/train.h"
#include "lib/train/workload.h"

/* Loader worker threads on a GPU (see "The loader" above): one keeps up
 * with a ResNet-50 step of the gpu profile only just; four leave room, and
 * a GPU machine's host has the cores. */
#define TB_STEP_GPU_LOADER_WORKERS 4

typedef enum tb_step_metric {
    TB_METRIC_STEP = 0,   /* one optimizer step ("step time", ms) */
    TB_METRIC_EPOCH = 1,  /* one pass over the profile's subset ("epoch time", s) */
} tb_step_metric;

struct tb_step_technique;
struct tb_step_setting;

/* One setting's live state while it is checked or timed. */
typedef struct tb_step_ctx {
    const struct tb_step_technique *tech;
    const struct tb_step_setting *setting;
    tb_bench *bench;
    tb_config cfg;            /* the setting's validated configuration */
    const tb_dataset *train, *test; /* the profile's subset, shared, decoded once */
    tb_trainer *t;
    long calls;               /* run_once calls on this trainer so far */
    int workload;             /* tb_workload being run */
    void *user;               /* the technique's own state (run_once's) */
    /* check_note may judge the setting by a check of its own, where the
     * check's training steps cannot exercise it (host_syncs: the loss read
     * later): own_verdict 1, own its comparison with its baseline's result,
     * own_against what that was; they replace the loss check in its row. */
    int own_verdict;
    tb_compare own;
    char own_against[48];     /* as tb_result_row's checked_against */
    /* A unit that is not one training step of the setting's batch says so
     * from run_once or check_note during its checks, for the row's rate,
     * FLOP and memory columns: unit_samples, the samples one unit
     * processes (an evaluation's images, a varying batch's mean; 0: the
     * batch); forward_only, 1 where a unit runs the forward alone (its
     * FLOPs then the forward's); own_peak_bytes, the unit's own peak
     * where the trainer's build is not part of it (0: the check's). */
    double unit_samples;
    int forward_only;
    double own_peak_bytes;
    /* check_note may find that a compared setting means nothing on this
     * workload after all (the caching allocator's where a step allocates
     * nothing: both policies would time the same step): na_why set, its row
     * is n/a with that reason and it is not timed. A baseline's is ignored
     * (every row is read against it). */
    char na_why[200];
} tb_step_ctx;

typedef struct tb_step_setting {
    const char *name;         /* the CSV's setting: "workers=2", "fused" */
    double param;             /* its sweep point (param_value) */
    int base;                 /* index of the setting it is compared with;
                                 its own index: it is a baseline (technique off) */
    void (*apply)(tb_config *cfg, double param); /* NULL: the entry's config as is */
    /* One unit of the metric; *loss is the last step's loss. NULL: the
     * metric's default (tb_trainer_step, or one epoch of tb_trainer_step). */
    int (*run_once)(tb_step_ctx *c, float *loss);
    /* Before the setting's trainer is built: backend state the config does
     * not hold (e.g. the allocator's policy). NULL: nothing. */
    int (*prepare)(tb_backend *be, double param);
} tb_step_setting;

typedef struct tb_step_technique {
    tb_technique desc;        /* name, what, time estimates, run order, tiny test */
    const char *param_name;   /* "workers", "batch", "on" */
    const tb_step_setting *settings;
    int n_settings;           /* TB_COUNT(settings) */
    tb_step_metric metric;
    /* The metric's name where a unit is not a training step (no_grad_eval:
     * "evaluation time", one pass over the test subset), so that the report
     * does not read it as one; NULL: "step time" / "epoch time". */
    const char *metric_name;
    int per_sample;           /* time per 1000 samples instead of per step
                                 (settings differ in batch size); also: one
                                 warm-up step, one step per repetition, and
                                 the check trains a fixed number of samples */
    double mem_limit_mib[3];  /* default --mem-limit per tb_profile (0: none) */
    /* Entry-wide changes to the defaults, e.g. augmentation on for loader
     * techniques; profile is a tb_profile. NULL: none. */
    void (*setup)(tb_config *cfg, int profile);
    /* NULL when the setting means something on this backend, else why not. */
    const char *(*na_reason)(const char *backend, const tb_step_setting *s);
    double tolerance;         /* relative, the loss at the check's last step; 0: must be bitwise equal */
    const char *tolerance_why; /* one line: why this tolerance */
    /* Non-NULL: losses are not comparable by design (e.g. another batch
     * size); the correctness column is n/a and this says why. */
    const char *not_comparable;
    /* Non-NULL: called after a setting's check with its trainer, to add a
     * remark to the row's note (e.g. the test accuracy reached). */
    int (*check_note)(tb_step_ctx *c, char *note, size_t cap);
    /* Non-NULL: adjusts a setting's row before it is added (e.g. the
     * waterfall's param_name per kind of row). */
    void (*row_hook)(int idx, tb_result_row *row);
    /* Non-NULL: called once the backend is open ("cpu", "cuda") and before
     * each workload (a tb_workload), before any setting is applied, checked
     * or asked for its n/a reason: for an entry whose settings depend on
     * the backend or the model (the waterfall's masks hold only the stages
     * that backend runs and that model has something for). */
    void (*workload_ready)(const char *backend, int workload);
    /* 1: every setting's trainer is rebuilt each round (from the same seed,
     * warmed up, untimed), one alive at a time, even where memory would
     * hold them all (e.g. a sweep of many configurations on a larger
     * model). 0: the harness decides (step_plan.h; settings with a prepare
     * hook are always rebuilt: the backend state it sets is process-wide). */
    int rebuild_each_round;
    /* TB_WL_BIT set (lib/train/workload.h) of the workloads it runs on, in
     * enum order; 0: the small CNN on Fashion-MNIST only. */
    unsigned workloads;
    /* The gpu profile's set, where it is smaller (0: workloads): a short
     * visit to a GPU machine times the models the tip is meant for, not
     * the small CNN, whose steps there are launch-bound (the waterfall). */
    unsigned gpu_workloads;
    /* 1: the technique sets the loader itself (workers, prefetch, formats):
     * the harness's loader workers on a GPU (--loader-workers) leave it
     * alone. */
    int own_loader;
    /* An epoch metric's epoch on ResNet-50 and GPT-2, in batches (their
     * training subset: step_harness.c, big_data); 0: 8. host_syncs' 4
     * holds its intervals (1, 2, 4) at half the GPU time of 8. */
    int epoch_batches;
} tb_step_technique;

/* Runs the technique: flags, checks, timing, rows, plot. Returns the exit
 * code (0, or tb_bench_fail's). */
int tb_step_main(const tb_step_technique *tech, int argc, char **argv);

/* Whether arg is one of the step harness's own flags that a second part
 * of the same binary does not declare (bench:waterfall's time to
 * accuracy): 1 for "--name=value", 2 for "--name" whose value is the next
 * argument, 0 otherwise (--mem-limit and --check-steps: 0, that part
 * declares them). */
int tb_step_only_flag(const char *arg);

/* In a tb_step_technique initializer: the settings array and its count. */
#define TB_STEP_SETTINGS(array) .settings = (array), .n_settings = (int)TB_COUNT(array)

/* The main() of a technique file that is one tb_step_technique. */
#define TB_STEP_MAIN(tech)                                                                        \
    int main(int argc, char **argv) { return tb_step_main(&(tech), argc, argv); }

/* The next training batch from the trainer's loader, beginning the next
 * epoch when one runs out (for run_once functions that build their own
 * step): tb_trainer_next_batch, the fetcher tb_trainer_step uses too. */
int tb_step_next_batch(tb_step_ctx *c, tb_batch *b);

/* A check_note for the loader techniques (workers, prefetch,
 * persistent_workers): one more epoch of the check's trainer, untimed by
 * the rounds, and the share of it the step waited for batches (with 0
 * workers: built them), "the step waited for batches X% of an epoch (a of b ms)":
 * what any loader setting could save at most on this workload. */
int tb_step_loader_note(tb_step_ctx *c, char *note, size_t cap);

/* n/a helpers for entries: no reason anywhere; n/a on the CPU backend. */
const char *tb_step_na_never(const char *backend, const tb_step_setting *s);

#endif
