/*
 * waterfall.c - bench:waterfall: the training step with the
 * techniques switched on one after another (cumulative speedup per stage)
 * and leave-one-out (all on, each one off in turn), written as
 * results/<device>/waterfall.csv; then time to 85% test accuracy on
 * Fashion-MNIST with every technique off and with all on (in the full
 * profile also each technique alone), as time_to_accuracy.csv. Both CSVs
 * are described in results/README.md; the report picks them up by name.
 *
 *   bazel run //bench:waterfall -- [--device=cpu] [--profile=default|full|tiny]
 *
 * The step part runs on three workloads (issue 15): the small CNN on
 * Fashion-MNIST, ResNet-50 and GPT-2 (reduced in the default profile, the
 * real models in the full and gpu ones; lib/train/workload.h; the gpu
 * profile leaves the small CNN out: on a GPU its steps are launch-bound, so
 * its rows would time launches, and its 61 s of tools/gpu_estimate.py's
 * model go to the models the tips are for), each with
 * its own baseline (all off) and rows carrying the workload column, so that
 * a reader sees a tip that helps the transformer do nothing for the CNN. A
 * stage whose model lacks what it acts on (GELU in ResNet-50, convolutions
 * in GPT-2, layer norm and attention in the CNNs, a loader for the big
 * models' synthetic batches) is an n/a row saying so on that workload, and
 * is left out of that workload's "all on". The budget is shared: each
 * workload gets what is left of it divided by the workloads still to time.
 *
 * Stages are the training-step toggles lib/train/config.h has; a new toggle joins
 * by one line in `stages`. "debug APIs off" is on when --detect-anomaly is
 * off, so "all off" runs with anomaly detection (the technique off). Host
 * syncs (--loss-read-every) is no stage: tb_trainer_step, which both parts
 * time, reads the loss every step whatever the flag (bench:host_syncs times
 * it through tb_train_epoch). bf16 autocast runs emulated on a CPU without
 * AVX512_BF16 (this VM): there it is expected to slow the step down.
 *
 * GPU-only stages (tensors_on_device, augment_on_device, pinned memory +
 * non_blocking, cuda_graphs) come after the CPU's: on CUDA they are
 * cumulative stages, part of "all on" and left out in turn; on the CPU
 * backend their rows are n/a with the trainer's reason, and "all on" holds the CPU stages only (the masks are
 * built per backend, build_masks). CUDA graphs need anomaly detection off,
 * so on CUDA "all on except 'debug APIs off'" is n/a saying so, and in the
 * full profile "cuda_graphs alone" runs with debug APIs off.
 *
 * The default profile's time to accuracy allows 30 s of training per run:
 * on this loaded 2-core VM 85% is not reached in that time, and the rows
 * are n/a saying so; the full profile allows 900 s.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/harness/gemm_ceiling.h"
#include "bench/harness/rounds.h"
#include "bench/harness/step_harness.h"
#include "lib/core/clock.h"
#include "lib/core/rng.h"

typedef struct stage {
    const char *name;
    void (*on)(tb_config *cfg);   /* switches the technique on */
    void (*off)(tb_config *cfg);  /* and off (the baseline's value) */
    const char *cpu_na;           /* NULL: runs on the CPU backend; else why it means
                                     nothing there (the trainer's reason) */
    const char *wl_na[TB_WORKLOADS]; /* NULL: the workload has what the technique acts
                                        on; else why it does not */
    int needs;                    /* index of a stage it cannot run without, -1: none */
    const char *needs_why;
} stage;

static void gtn_on(tb_config *c) { c->grads_to_none = 1; }
static void gtn_off(tb_config *c) { c->grads_to_none = 0; }
static void gelu_on(tb_config *c) { c->fused_gelu = 1; }
static void gelu_off(tb_config *c) { c->fused_gelu = 0; }
static void bias_on(tb_config *c) { c->conv_bias = 0; }
static void bias_off(tb_config *c) { c->conv_bias = 1; }
static void fopt_on(tb_config *c) { c->fused_optimizer = 1; }
static void fopt_off(tb_config *c) { c->fused_optimizer = 0; }
static void tune_on(tb_config *c) { c->conv_autotune = 1; }
static void tune_off(tb_config *c) { c->conv_autotune = 0; }
static void work_on(tb_config *c) { c->workers = 2, c->persistent_workers = 1; }
static void work_off(tb_config *c) { c->workers = 0, c->persistent_workers = 0; }
static void tf32_on(tb_config *c) { c->tf32 = 1; }
static void tf32_off(tb_config *c) { c->tf32 = 0; }
static void debug_on(tb_config *c) { c->detect_anomaly = 0; }
static void debug_off(tb_config *c) { c->detect_anomaly = 1; }
static void nhwc_on(tb_config *c) { c->channels_last = 1; }
static void nhwc_off(tb_config *c) { c->channels_last = 0; }
static void tb_amp_on(tb_config *c) { c->amp_dtype = TB_AMP_BF16; }
static void amp_off(tb_config *c) { c->amp_dtype = TB_AMP_OFF; }
static void ln_on(tb_config *c) { c->fused_layernorm = 1; }
static void ln_off(tb_config *c) { c->fused_layernorm = 0; }
static void attn_on(tb_config *c) { c->fused_attention = 1; }
static void attn_off(tb_config *c) { c->fused_attention = 0; }
static void tod_on(tb_config *c) { c->tensors_on_device = 1; }
static void tod_off(tb_config *c) { c->tensors_on_device = 0; }
static void aod_on(tb_config *c) { c->augment_on_device = 1; }
static void aod_off(tb_config *c) { c->augment_on_device = 0; }
static void pin_on(tb_config *c) { c->pin_memory = 1, c->non_blocking = 1; }
static void pin_off(tb_config *c) { c->pin_memory = 0, c->non_blocking = 0; }
static void graphs_on(tb_config *c) { c->cuda_graphs = 1; }
static void graphs_off(tb_config *c) { c->cuda_graphs = 0; }

#define DEBUG_STAGE 7

/* The GPU-only stages come last, so the CPU's stages, "all on" and
 * leave-one-out rows are those of the CPU stages alone. Pinned memory goes
 * with non_blocking, as PyTorch recommends them (bench:pinned_memory times
 * each); with CUDA graphs the trainer copies each staged batch into the
 * graph's fixed inputs on the device (lib/train/train_device.c). */
/* Why a stage means nothing on a workload: the model lacks what it acts on. */
#define NO_CONV_GPT2 "n/a on GPT-2: it has no convolutions"
#define NO_LN(model) "n/a on " model ": it has no layer norm"
#define NO_ATTN(model) "n/a on " model ": it has no attention"
#define NO_LOAD(model) "n/a on " model ": its synthetic batches are made once in memory, " \
                       "leaving nothing to load in workers (bench:workers times loaders on " \
                       "Fashion-MNIST)"

static const stage stages[] = {
    {"grads_to_none", gtn_on, gtn_off, NULL, {NULL}, -1, NULL},
    {"fused_gelu", gelu_on, gelu_off, NULL,
     {[TB_WL_RESNET50] = "n/a on ResNet-50: it has no GELU (its activations are ReLU)"}, -1,
     NULL},
    {"no conv bias", bias_on, bias_off, NULL, {[TB_WL_GPT2] = NO_CONV_GPT2}, -1, NULL},
    {"fused_optimizer", fopt_on, fopt_off, NULL, {NULL}, -1, NULL},
    {"conv_autotune", tune_on, tune_off, NULL, {[TB_WL_GPT2] = NO_CONV_GPT2}, -1, NULL},
    {"2 persistent workers", work_on, work_off, NULL,
     {[TB_WL_RESNET50] = NO_LOAD("ResNet-50"), [TB_WL_GPT2] = NO_LOAD("GPT-2")}, -1, NULL},
    {"tf32", tf32_on, tf32_off, NULL, {NULL}, -1, NULL},
    [DEBUG_STAGE] = {"debug APIs off", debug_on, debug_off, NULL, {NULL}, -1, NULL},
    {"channels last", nhwc_on, nhwc_off, NULL,
     {[TB_WL_GPT2] = "n/a on GPT-2: it has no image tensors (no convolutions)"}, -1, NULL},
    {"bf16 autocast", tb_amp_on, amp_off, NULL, {NULL}, -1, NULL},
    {"fused layernorm", ln_on, ln_off, NULL,
     {[TB_WL_SMALL_CNN] = NO_LN("the small CNN"), [TB_WL_RESNET50] = NO_LN("ResNet-50")}, -1,
     NULL},
    {"fused attention", attn_on, attn_off, NULL,
     {[TB_WL_SMALL_CNN] = NO_ATTN("the small CNN"), [TB_WL_RESNET50] = NO_ATTN("ResNet-50")},
     -1, NULL},
    /* Both act on the Fashion-MNIST loader's uint8 batches (their own
     * targets time them on the small CNN only): the trainer refuses them on
     * GPT-2 (an image toggle), and ResNet-50's synthetic batches have 1,000
     * classes, which uint8 labels cannot carry, and no loader augmentation. */
    {"tensors_on_device", tod_on, tod_off,
     "n/a on the CPU backend: host and device memory are the same",
     {[TB_WL_RESNET50] = "n/a on ResNet-50: the toggle carries labels as uint8 bytes, and "
                         "its 1,000 classes need more (bench:tensors_on_device times it on "
                         "Fashion-MNIST)",
      [TB_WL_GPT2] = "n/a on GPT-2: it reads int32 token ids, not the uint8 image labels the "
                     "toggle carries"}, -1, NULL},
    {"augment_on_device", aod_on, aod_off,
     "n/a on the CPU backend: the CPU is the device, augmentation already runs where the "
     "model runs",
     {[TB_WL_RESNET50] = "n/a on ResNet-50: its synthetic batches are made once in memory, "
                         "with no loader crops or flips to move to the device",
      [TB_WL_GPT2] = "n/a on GPT-2: it has no images to crop or flip"}, -1, NULL},
    {"pinned memory + non_blocking", pin_on, pin_off,
     "n/a on the CPU backend: no copy to a device: batches are already where the kernels "
     "read them", {NULL}, -1, NULL},
    {"cuda_graphs", graphs_on, graphs_off,
     "n/a on the CPU backend: no kernel launches to capture", {NULL}, DEBUG_STAGE,
     "a replay cannot read the loss on the host mid-step (--detect-anomaly)"},
};
#define NSTAGES ((int)(sizeof stages / sizeof stages[0]))
#define NSETTINGS (2 * NSTAGES + 2)

/* Why stage k means nothing on backend or on workload wl (a tb_workload),
 * NULL when it runs there. */
static const char *stage_na(int k, const char *backend, int wl)
{
    if (strcmp(backend, "cpu") == 0 && stages[k].cpu_na)
        return stages[k].cpu_na;
    return stages[k].wl_na[wl];
}

/* The stages backend runs on workload wl. */
static unsigned stages_on(const char *backend, int wl)
{
    unsigned mask = 0;
    for (int k = 0; k < NSTAGES; k++)
        mask |= stage_na(k, backend, wl) ? 0u : 1u << k;
    return mask;
}

/* The workload being run (a tb_workload): set before each workload's
 * settings are applied (build_masks) and before time to accuracy. */
static int cur_wl;

/* param holds the mask of stages switched on. A stage the workload's model
 * has nothing for is left at the model's own value (GPT-2's conv bias is
 * "auto": it has no convolutions to give one). */
static void apply_mask(tb_config *cfg, double param)
{
    unsigned mask = (unsigned)param;
    for (int k = 0; k < NSTAGES; k++)
        if (!stages[k].wl_na[cur_wl])
            (mask >> k & 1 ? stages[k].on : stages[k].off)(cfg);
}

static tb_step_setting settings[NSETTINGS];
static char names[NSETTINGS][64];

/* Rows 0..NSTAGES are stages (0 = all off), then "all on" and each left out. */
static void row_hook(int idx, tb_result_row *row)
{
    int loo = idx > NSTAGES;
    snprintf(row->param_name, sizeof row->param_name, "%s", loo ? "leave-one-out" : "stage");
    row->param_value = loo ? idx - NSTAGES - 1 : idx;
}

/* The stage a row is about: the one it adds or leaves out; -1 for "all
 * off" and "all on". */
static int row_stage(int idx)
{
    if (idx <= NSTAGES)
        return idx - 1;
    return idx - NSTAGES - 2;
}

static void build_names(void)
{
    for (int i = 0; i < NSETTINGS; i++) {
        int k = row_stage(i);
        if (i <= NSTAGES)
            snprintf(names[i], sizeof names[i], i ? "+ %s" : "all off", i ? stages[k].name : "");
        else if (k < 0)
            snprintf(names[i], sizeof names[i], "all on");
        else
            /* quoted: a stage named for its state ("no conv bias", "debug
             * APIs off") read as "all on but no conv bias" says the opposite */
            snprintf(names[i], sizeof names[i], "all on except '%s'", stages[k].name);
        settings[i] = (tb_step_setting){names[i], 0, 0, apply_mask, NULL, NULL};
    }
}

/* The masks for the stages backend runs on workload wl (the harness's
 * workload_ready, before each workload). */
static void build_masks(const char *backend, int wl)
{
    unsigned all = stages_on(backend, wl);
    cur_wl = wl;
    for (int i = 0; i < NSETTINGS; i++) {
        int k = row_stage(i);
        unsigned mask = i <= NSTAGES ? ((1u << i) - 1) & all : k < 0 ? all : all & ~(1u << k);
        settings[i].param = (double)mask;
    }
}

/* A stage the backend or the workload gives no meaning to, or a stage on
 * without one it needs. */
static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    static char why[256];
    int k = row_stage((int)(s - settings));
    if (k >= 0 && stage_na(k, backend, cur_wl))
        return stage_na(k, backend, cur_wl);
    unsigned mask = (unsigned)s->param;
    for (int j = 0; j < NSTAGES; j++) {
        int need = stages[j].needs;
        if (!(mask >> j & 1) || need < 0 || mask >> need & 1)
            continue;
        snprintf(why, sizeof why, "%s needs %s: %s", stages[j].name, stages[need].name,
                 stages[j].needs_why);
        return why;
    }
    return NULL;
}

/* A row that runs anomaly detection under bf16 autocast on a conv model
 * (all off is fp32; "all on except 'debug APIs off'" is the one) keeps its conv
 * trunk's activations in fp32, where its neighbours with detection off keep
 * them in bf16 (anomaly detection counts fp32 values: lib/nn/amp.h): that
 * row then differs in more than its stage, and its note says so. */
static int act_note(tb_step_ctx *c, char *note, size_t cap)
{
    const tb_config *cfg = &c->cfg;
    int n = 0;
    if (cfg->detect_anomaly && cfg->amp_dtype == TB_AMP_BF16 && !tb_config_token_model(cfg) &&
        c->t->be->relu_fwd_lowp && c->t->model->ctx.act != TB_BF16)
        n = snprintf(note, cap, "its conv trunk's activations stay fp32 under bf16 autocast "
                     "(anomaly detection counts fp32 values), where the rows with debug APIs "
                     "off keep them bf16: this row differs in that too");
    /* the tf32 stage's rows on a CPU whose oneDNN computes TF32 (its bf16
     * fpmath mode) in fp32: measured, as bench:tf32 does, not assumed */
    int k = row_stage((int)(c->setting - settings)), differs = 1;
    if (k < 0 || stages[k].on != tf32_on || strcmp(c->bench->info.backend, "cpu") != 0)
        return TB_OK;
    TB_TRY(tb_gemm_tf32_differs(c->t->be, &differs));
    if (!differs && n >= 0 && (size_t)n < cap)
        snprintf(note + n, cap - (size_t)n, "%sthis CPU's oneDNN computes TF32 (its bf16 fpmath "
                 "mode) in fp32 (" TB_TF32_PROBE_SAME "): the tf32 stage changes no arithmetic "
                 "here", n ? "; " : "");
    return TB_OK;
}

static const tb_step_technique waterfall = {
    .desc = {
        .name = "waterfall",
        .what = "techniques switched on one after another, and all on but one",
        .est_seconds = {145, 1800, 30, 289}, /* default, full, tiny, gpu */
        /* The step part's checks and rounds on the three workloads (each
         * workload's configurations interleaved); the rest of est_seconds is
         * the time-to-accuracy part (2 runs of at most 30 s in the default
         * profile), which is not timed in rounds. Default: 135 s, about 45
         * s a workload (the small CNN alone had 80 s and stopped on its
         * target after 67 s of rounds). At 105 s its 55 rows were half of
         * the step and loader rows and 32-37 of their 49-52 rows above +-2%,
         * nearly all stopped on the budget (runs 30, 31): the 30 s came from
         * techniques that stop on their target well within theirs
         * (ceilings, validation_frequency, checkpointing, fused_gelu_step).
         * gpu: 34 s, 17 s for each of its two workloads, not yet measured on a GPU;
         * its est_seconds is tools/gpu_estimate.py's, time to accuracy's
         * 6 runs (tta_plans) included. */
        .budget_seconds = {135, 900, 10, 34},
        .order = 270,
        .tiny = {.min_rows = 3 * NSETTINGS, .plots = "waterfall", .na_note = "n/a on "},
    },
    .param_name = "stage",
    TB_STEP_SETTINGS(settings),
    .metric = TB_METRIC_STEP,
    .own_loader = 1, /* its "DataLoader workers" stage */
    .na_reason = na_reason,
    .check_note = act_note,
    /* Its configurations combine techniques each held to 5% by its own
     * target, and their differences add: on the tiny ResNet-50 (width 8,
     * batch 4, 5 steps) "all on except 'no conv bias'" ended 6.1% and "all
     * on except 'channels last'" 5.4% from all off, where the rounding control
     * (fp32, weights moved by 7.6e-6) ended 1.5% away; on the reduced one
     * (3 steps) at most 3.3%. */
    .tolerance = 1e-1,
    .tolerance_why = "combinations of techniques each within 5% of its own baseline (bf16's 8-bit "
                     "mantissas, another summation order in the autotuner's and channels-last's "
                     "kernels, amplified by SGD), whose differences add: up to 6.1% on the tiny "
                     "ResNet-50",
    .row_hook = row_hook,
    .workload_ready = build_masks,
    .workloads = TB_WL_BIT(TB_WL_SMALL_CNN) | TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .gpu_workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
};

/* ---- time to accuracy ---- */

typedef struct tta_plan {
    int batch, eval_every;      /* steps between evaluations */
    long long test_n;
    double budget_s;            /* training wall time allowed per run */
    int reps;                   /* seeds */
    int each_alone;             /* also every technique alone */
} tta_plan;

/* Per run profile (tb_profile). The gpu profile has a row of its own: it
 * ran full's (5 seeds of baseline, all on and each of the 16 stages alone,
 * up to 900 s a run), which no estimate counted. The small CNN's recipe
 * reaches 85% in 100-120 steps of 256 (25,600-30,720 samples, seeds 0-2, on
 * the CPU: 18-22 s a run on 2 cores), seconds a run on a GPU: 3 seeds of the
 * baseline and of all on, 60 s a run at most; each stage alone is the full
 * profile's. */
static const tta_plan tta_plans[TB_PROFILES] = {
    [TB_PROFILE_DEFAULT] = {128, 25, 1000, 30, 1, 0},
    [TB_PROFILE_FULL] = {256, 20, 10000, 900, 5, 1},
    [TB_PROFILE_TINY] = {64, 4, 500, 6, 1, 0},
    [TB_PROFILE_GPU] = {256, 20, 10000, 60, 3, 0},
};

/* 0.85; tests only: TB_TEST_TTA_TARGET and TB_TEST_TTA_REPS in the
 * environment lower the target and set the seeds (tta_test_env), so that
 * the tiny profile reaches it and pairs 5 seeds in seconds. */
static double tta_target = 0.85;

/* Trains until the test accuracy reaches the target or the budget runs out.
 * *seconds is NaN when it did not reach it; *acc the last accuracy. */
static int tta_run(tb_backend *be, const tta_plan *p, unsigned mask, long long seed,
                   const tb_dataset *train, const tb_dataset *test, double *seconds,
                   double *acc, long *samples)
{
    tb_config cfg;
    tb_config_defaults(&cfg);
    cfg.batch_size = p->batch;
    cfg.seed = seed;
    apply_mask(&cfg, mask);
    TB_TRY(tb_config_validate(&cfg));
    tb_trainer *t;
    TB_TRY(tb_trainer_create_with_data(&cfg, be, train, test, &t));
    int rc = TB_OK;
    double t0 = tb_clock_s();
    *seconds = NAN;
    *acc = 0;
    while (rc == TB_OK && tb_clock_s() - t0 < p->budget_s) {
        float loss;
        for (int i = 0; i < p->eval_every && rc == TB_OK; i++)
            rc = tb_trainer_step(t, &loss);
        tb_eval_stats ev;
        if (rc == TB_OK)
            rc = tb_trainer_evaluate(t, &ev);
        if (rc != TB_OK)
            break;
        *acc = ev.accuracy;
        if (ev.accuracy >= tta_target) {
            *seconds = tb_clock_s() - t0;
            break;
        }
    }
    *samples = t->steps * cfg.batch_size;
    tb_trainer_destroy(t);
    return rc;
}

/* One configuration of time to accuracy: its runs, a seed each. */
#define TTA_MAX_REPS 8
#define TTA_MAX_ARMS (2 + NSTAGES)
typedef struct tta_arm {
    char name[64];
    unsigned mask;
    const char *na;             /* n/a reason (not run); NULL: run */
    double secs[TTA_MAX_REPS];  /* NaN: not reached */
    double acc;                 /* the last run's last accuracy */
    double load_sum;            /* the 1-minute load average after each run, summed */
    int load_n;
    long samples;               /* the last run's samples */
    int reached;
} tta_arm;

/* The paired interval of arm a against the baseline from their per-seed
 * times (the same seed trains both from the same initial weights and
 * data order), from 5 seeds (the rounds' minimum: an interval needs them). */
#define TTA_MIN_PAIRED 5

static int tta_row(tb_bench *b, const tta_plan *p, const tta_arm *a, const tta_arm *base,
                   const tb_dataset *test)
{
    int is_base = a == base;
    if (a->na)
        return tb_results_add_na(&b->res, "time_to_accuracy", b->info.backend, b->info.name,
                                 a->name, "time to accuracy", a->na);
    if (a->reached < p->reps) {
        char why[256];
        snprintf(why, sizeof why, "did not reach %.0f%% within %.0f s of training (%d of %d seeds "
                 "did; last: %.1f%% after %ld samples, batch %d)", 100 * tta_target, p->budget_s,
                 a->reached, p->reps, 100 * a->acc, a->samples, p->batch);
        return tb_results_add_na(&b->res, "time_to_accuracy", b->info.backend, b->info.name,
                                 a->name, "time to accuracy", why);
    }
    tb_result_row row;
    tb_bench_row(b, &row, a->name, is_base, "target accuracy", tta_target, "time to accuracy");
    tb_summary sm;
    TB_TRY(tb_stats_summary(a->secs, (size_t)p->reps, &sm));
    row.reps = p->reps;
    row.median = sm.median, row.min = sm.min, row.max = sm.max;
    snprintf(row.unit, sizeof row.unit, "s");
    /* busy by the load average over its runs (the runs are this process's
     * threads alone: tb_rounds_busy_by_load's rule) */
    row.load_avg = a->load_n ? a->load_sum / a->load_n : NAN;
    row.busy = tb_rounds_busy_by_load(row.load_avg);
    char ratio[160] = "";
    int base_ok = base->reached == p->reps && !base->na;
    if (!is_base && base_ok && p->reps >= TTA_MIN_PAIRED) {
        tb_paired cmp;
        TB_TRY(tb_stats_paired(base->secs, a->secs, (size_t)p->reps, 0, &cmp));
        int unreliable = 0;
        tb_speed_verdict v = tb_stats_paired_verdict(&cmp, NULL, &unreliable);
        row.speedup = cmp.speedup;
        row.speedup_ci_low = cmp.lo;
        row.speedup_ci_high = cmp.hi;
        row.rounds = p->reps;
        row.mde = cmp.mde;
        snprintf(row.stopped_by, sizeof row.stopped_by, "cap");
        row.timing_verdict = v == TB_SPEED_FASTER   ? TB_TIMING_FASTER
                             : v == TB_SPEED_SLOWER ? TB_TIMING_SLOWER
                                                    : TB_TIMING_WITHIN_NOISE;
        snprintf(ratio, sizeof ratio, "; paired by seed with the baseline (the seeds' runs "
                 "interleaved), no A/A pair: no noise floor");
    } else if (!is_base) {
        /* No interval from so few seeds (1 in the default profile): the
         * ratio of medians goes in the note, not in the speedup columns. */
        row.timing_verdict = TB_TIMING_NA;
        tb_summary bs;
        if (base_ok && tb_stats_summary(base->secs, (size_t)p->reps, &bs) == TB_OK)
            snprintf(ratio, sizeof ratio, "; baseline / this = %.3gx from %d seed(s), no "
                     "interval (one needs %d)", bs.median / sm.median, p->reps,
                     TTA_MIN_PAIRED);
    }
    snprintf(row.note, sizeof row.note, "%d seed(s); last reached %.1f%% after %ld samples "
             "(batch %d, test accuracy on %d images, evaluated every %d steps, evaluation "
             "time included)%s", p->reps, 100 * a->acc, a->samples, p->batch, test->n,
             p->eval_every, ratio);
    return tb_results_add(&b->res, &row);
}

/* Stage k alone (with the stage it needs, if any); n/a where the backend
 * does not run it. */
static void tta_alone(const tb_bench *b, int k, tta_arm *a)
{
    const stage *st = &stages[k];
    a->na = stage_na(k, b->info.backend, TB_WL_SMALL_CNN);
    a->mask = 1u << k;
    if (st->needs >= 0)
        a->mask |= 1u << st->needs;
    snprintf(a->name, sizeof a->name, "%s alone%s%s", st->name, st->needs >= 0 ? " + " : "",
             st->needs >= 0 ? stages[st->needs].name : "");
}

/* Every configuration's run of seed s, the configurations in an order
 * shuffled per seed (from the seed: a run repeats), so that drift over
 * the minutes of runs falls on every configuration alike and each seed's
 * times pair (until 2026-11-30 every seed of the baseline ran first, then
 * every seed of all on). */
static int tta_seed(tb_bench *b, const tta_plan *p, tta_arm *arms, int n, int s,
                    const tb_dataset *train, const tb_dataset *test)
{
    int order[TTA_MAX_ARMS];
    for (int i = 0; i < n; i++)
        order[i] = i;
    tb_rng r = tb_rng_make(0x7474615f6f726465ull, (uint64_t)s, 0, TB_RNG_SHUFFLE);
    tb_rng_shuffle(&r, order, n);
    for (int k = 0; k < n; k++) {
        tta_arm *a = &arms[order[k]];
        if (a->na)
            continue;
        TB_TRY(tta_run(b->be, p, a->mask, s, train, test, &a->secs[s], &a->acc, &a->samples));
        a->reached += !isnan(a->secs[s]);
        double load = tb_rounds_load_avg();
        if (!isnan(load))
            a->load_sum += load, a->load_n++;
        fprintf(stderr, "time_to_accuracy: %s seed %d: %s%.1f s, accuracy %.1f%% after %ld "
                "samples\n", a->name, s, isnan(a->secs[s]) ? "not reached in " : "",
                isnan(a->secs[s]) ? p->budget_s : a->secs[s], 100 * a->acc, a->samples);
    }
    return TB_OK;
}

/* The second part of bench:waterfall: its own results file. */
static const tb_technique tta_part = {
    .name = "waterfall",
    .results = "time_to_accuracy",
    .what = "time to 85% test accuracy",
};

/* The test-only overrides of tta_target and the seeds (see tta_target). */
static int tta_test_env(tta_plan *p)
{
    const char *t = getenv("TB_TEST_TTA_TARGET"), *r = getenv("TB_TEST_TTA_REPS");
    char *end = NULL;
    if (t && *t) {
        double v = strtod(t, &end);
        if (*end || !(v > 0 && v <= 1))
            return TB_FAIL(TB_ERR_INVALID, "TB_TEST_TTA_TARGET=%s: want a fraction in (0, 1]", t);
        tta_target = v;
    }
    if (r && *r) {
        long v = strtol(r, &end, 10);
        if (*end || v < 1 || v > TTA_MAX_REPS)
            return TB_FAIL(TB_ERR_INVALID, "TB_TEST_TTA_REPS=%s: want 1..%d", r, TTA_MAX_REPS);
        p->reps = (int)v;
    }
    return TB_OK;
}

static int tta_main(int argc, char **argv)
{
    tb_bench b;
    int done = 0, rc;
    double mem = 0;
    int steps = 0;
    tb_flag extra[] = {
        {"mem-limit", TB_FLAG_DOUBLE, &mem, "ignored here", NULL, TB_RANGE_MIN(0)},
        {"check-steps", TB_FLAG_INT, &steps, "ignored here", NULL, TB_RANGE_MIN(0)},
    };
    tb_dataset *train = NULL, *test = NULL;
    rc = tb_bench_init(&b, &tta_part, extra, TB_COUNT(extra), argc, argv, &done);
    if (rc != TB_OK || done)
        goto out_close;
    tta_plan plan = tta_plans[b.run_profile];
    const tta_plan *p = &plan;
    TB_TRY_GOTO(rc, tta_test_env(&plan), out_close);
    TB_TRY_GOTO(rc, tb_dataset_open_fashion_mnist(NULL, TB_SPLIT_TRAIN, 0, &train), out_close);
    TB_TRY_GOTO(rc, tb_dataset_open_fashion_mnist(NULL, TB_SPLIT_TEST, (long)p->test_n, &test),
                out_close);
    cur_wl = TB_WL_SMALL_CNN;
    {
        static tta_arm arms[TTA_MAX_ARMS];
        int n = 0;
        memset(arms, 0, sizeof arms);
        snprintf(arms[n].name, sizeof arms[n].name, "baseline");
        arms[n++].mask = 0;
        snprintf(arms[n].name, sizeof arms[n].name, "all step techniques");
        arms[n++].mask = stages_on(b.info.backend, cur_wl);
        for (int k = 0; p->each_alone && k < NSTAGES; k++)
            tta_alone(&b, k, &arms[n++]);
        for (int s = 0; s < p->reps && rc == TB_OK; s++)
            rc = tta_seed(&b, p, arms, n, s, train, test);
        for (int i = 0; i < n && rc == TB_OK; i++)
            rc = tta_row(&b, p, &arms[i], &arms[0], test);
    }
    if (rc != TB_OK)
        goto out_close;
    rc = tb_bench_save(&b);
out_close:
    tb_dataset_free(train);
    tb_dataset_free(test);
    tb_bench_close(&b);
    return rc;
}

int main(int argc, char **argv)
{
    /* The step part parses every flag first (an unknown one is refused
     * before any work); the time-to-accuracy part gets the same argv less
     * the step harness's own flags (--seed, --budget, --target...), which
     * mean nothing to it: it refused them after the step part's minutes
     * of work, and left its own CSV stale beside a new waterfall.csv. */
    char **copy = malloc(((size_t)argc + 1) * sizeof *copy);
    if (!copy)
        return 1;
    int n = 0, help = 0;
    for (int i = 0; i < argc; i++) {
        int kind = i > 0 ? tb_step_only_flag(argv[i]) : 0;
        help |= i > 0 && (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"));
        if (kind == 2)
            i++; /* and its value */
        else if (kind == 0)
            copy[n++] = argv[i];
    }
    copy[n] = NULL;
    build_names();
    int code = tb_step_main(&waterfall, argc, argv);
    if (code != 0 || help || tb_technique_wants_describe(n, copy)) {
        free(copy);
        return code;
    }
    int rc = tta_main(n, copy);
    free(copy);
    return rc == TB_OK ? 0 : tb_bench_fail("time_to_accuracy", rc);
}
