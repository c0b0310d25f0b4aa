/* step_harness.c - see step_harness.h. */
#include "bench/harness/step_harness.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/harness/gemm_ceiling.h"
#include "bench/harness/rounds.h"
#include "bench/harness/step_plan.h"
#include "lib/core/atomic_file.h"
#include "lib/core/clock.h"
#include "lib/nn/flops.h"
#include "lib/report/plot.h"

/* Per profile: the subset, the batch, the correctness pass, and the rounds
 * (bench/harness/rounds.h). The default keeps every sweep point; its
 * repetitions last at least 0.05 s (4-5 steps of the small CNN at batch 32,
 * or one of the short epochs: the subset is 256 images, 8 steps): each
 * setting is compared with the baseline repetitions just around it, so
 * short repetitions track the VM's drifting speed best (measured on an
 * idle 2-core VM with a 15 s budget: grads_to_none reached +-2% in 8 s at
 * 0.05 s, 12 s at 0.1 s, and stopped on the budget at 0.2 s), and each
 * setting's rounds go on until its interval is within +-2% or the
 * technique's budget is spent. Tiny (tests) runs the minimum of rounds of very short
 * repetitions: shapes, not timings.
 *
 * The gpu profile has a row of its own (its sizes are full's: the batch and
 * subset below are full's too). The first GPU run (results/gpu-h200-
 * 2026-11-28, full's row) spent most of each workload before and between
 * its rounds, not in them: per arm 3 warm-up steps on every build plus the
 * engine's 6 settling probes (ResNet-50's and GPT-2's steps settle by the
 * second), 2 steps a repetition for full's 0.2 s, and with trainers rebuilt
 * every round (checkpointing's 6 GPT-2 arms do not fit together) the 3 steps
 * again on every rebuild: ~17 s a workload for 5 rounds of 1.7 s, and host_syncs'
 * 1 s epochs 9 s a warm-up per arm. On a GPU a step is timed by the device's
 * events (microseconds) and its time held to +-0.2-0.4% over GPT-2's rounds
 * there, so a repetition of one step (0.1 s: ResNet-50 at batch 64 and GPT-2 at
 * 4x1024 run 0.09-0.16 s a step on an H200), one warm-up step per build, and
 * the engine's settling capped at 0.5 s (at least 3 probes: rounds.c) lose nothing the
 * intervals would show. */
typedef struct step_profile {
    int batch;
    long long train_n, test_n;
    int warmup;               /* units a freshly built trainer runs, untimed */
    int check_steps;          /* steps of the correctness pass */
    long check_samples;       /* per_sample entries: samples of the check */
    double min_rep_s;         /* a repetition lasts at least this */
    int max_rounds;           /* cap of the rounds (at least --reps) */
    double target;            /* half-width the rounds aim at, relative */
    double budget_s;          /* a technique's budget when it declares none */
    double warmup_max_s;      /* cap of one arm's warm-up */
    /* Kept-alive trainers are built afresh every this many rounds (rounds.h:
     * intervals over builds), per tb_step_metric. A step's build is cheap
     * (the small CNN: ~0.03 s and two warm-up steps), and a build a round
     * makes every round an independent draw, so the per-round interval
     * holds the build-to-build spread with all its degrees of freedom (an
     * idle waterfall: median half-width 4.4% and noise floor 1.8% rebuilt
     * every round, 4.7% and 3.3% every 4 rounds, same budget). An epoch's
     * build restarts its loader and warms up two epochs: every 4 rounds. */
    int rounds_per_build[2];
} step_profile;

static const step_profile step_profiles[TB_PROFILES] = {
    [TB_PROFILE_DEFAULT] = {32, 256, 1000, 2, 20, 1024, 0.05, 100, 0.02, 15, 1.0, {1, 4}},
    [TB_PROFILE_FULL] = {64, 2048, 10000, 3, 100, 16384, 0.2, 200, 0.02, 120, 10, {1, 5}},
    [TB_PROFILE_TINY] = {16, 64, 256, 1, 5, 128, 0.002, 5, 0.02, 2, 0.1, {2, 2}},
    [TB_PROFILE_GPU] = {64, 2048, 10000, 1, 100, 16384, 0.1, 200, 0.02, 10, 0.5, {1, 5}},
};

/* What the correctness pass learned about one setting. */
typedef struct setting_state {
    int na;                   /* 1: an n/a row, not timed */
    int alias;                /* 1 + the earlier setting it is the same configuration as
                                 (same_as): not checked or timed, its row that one's
                                 numbers; 0: its own */
    char why[200];            /* the n/a reason */
    float loss, loss_again;   /* last loss of the check; a baseline's second run */
    int classes;              /* its model's outputs per prediction (ln of it: the loss
                                 of a model that predicts nothing, uniform logits) */
    /* The first check step's weight change, per parameter tensor: its L2
     * norm, the tensor's name and size (record_update); nupd 0: none. */
    int nupd;
    double *upd;
    char (*upd_name)[32];
    size_t *upd_n;
    double upd_control;       /* the first update's rounding control (witness_controls):
                                 how far the setting's own first update moved from
                                 nudged weights, the farthest draw; 0: not run */
    int upd_draws;            /* the draws it took (at most TB_WITNESS_CONTROL_RUNS) */
    int control;              /* a baseline: 1 once its rounding control ran */
    float loss_control;       /* its loss from weights moved by TB_CONTROL_NUDGE: the
                                 farthest of TB_CONTROL_RUNS draws */
    /* fp16's loss scaler in the check (lib/nn/loss_scaler.h, GradScaler's
     * rules): the steps its first check skipped for overflowing gradients at
     * the scale its trainer began with (0: none), that scale, the scale its
     * checks then begin from (what the scaler had backed off to; 0: the
     * trainer's own), and the steps the check skipped again from there */
    long skipped, skipped_again;
    float scale0, check_scale;
    double peak_bytes;
    double build_s;           /* what its check's build and first warm-up units took: a
                                 rebuild's cost, known before the rounds (tb_arm.build_s) */
    double kept_bytes;        /* what its check's trainer held parked (tb_trainer_park):
                                 its parameters, gradients, optimizer state; 0: not
                                 measured (it may not park: can_park) */
    int steps;                /* steps of its check (per-sample techniques: its own) */
    double flops_per_sample;  /* its model's, fwd+bwd (lib/nn/flops.h), or the forward's
                                 alone for a forward-only unit; 0: unknown */
    double unit_samples;      /* samples a unit processes where not the batch (its
                                 check's tb_step_ctx.unit_samples); 0: the batch */
    char note[320];
    /* the technique's own check of it (tb_step_ctx's own_verdict) */
    int own_verdict;
    tb_compare own;
    char own_against[48];     /* as tb_result_row's checked_against */
    /* Its checks' trainers, parked, for its arms' first builds (adopts):
     * held[0] its check's, held[1] a baseline's second check's (its A/A
     * arm's); ctx.t NULL: none. */
    tb_step_ctx held[2];
} setting_state;

typedef struct step_run step_run;

/* One arm of the experiment: a setting and its own trainer, alive across
 * rounds (or rebuilt every round when they cannot all be). */
typedef struct step_arm {
    step_run *run;
    int idx;                  /* setting */
    int mode;                 /* TB_ARM_ALIVE; TB_ARM_REBUILT: rebuilt every round;
                                 TB_ARM_PARKED: alive, parked while other arms run
                                 (one of those alive, or unparked, at a time) */
    tb_step_ctx ctx;          /* ctx.t NULL: not built (yet, or any more) */
} step_arm;

struct step_run {
    const tb_step_technique *tech;
    tb_technique desc;        /* tech->desc, its tiny test told the workloads */
    char wl_names[64];        /* "resnet50,gpt2": desc.tiny.workloads, then the run's */
    char wl_gpu_names[64];    /* the gpu profile's: desc.gpu_workloads */
    tb_bench b;
    step_profile prof;
    tb_config base_cfg;
    tb_dataset *train, *test;
    setting_state *st;
    double mem_limit_mib;
    int check_steps;          /* of the workload being run */
    int check_steps_flag;     /* --check-steps; 0: the profile's */
    int loader_workers_flag;  /* --loader-workers; -1: auto (loader_workers_of) */
    /* the workloads */
    int wl_size_flag;         /* --workload-size: 0 auto, else tb_workload_size + 1 */
    int control_flag;         /* --rounding-control: CONTROL_AUTO, _ALWAYS or _NEVER */
    int wl;                   /* tb_workload being run */
    int wl_size;              /* tb_workload_size of the big models */
    int n_wl;                 /* workloads of the technique */
    int wl_left;              /* of them not yet timed, the one being timed included */
    char wl_label[48];        /* the rows' workload column */
    char wl_fit[128];         /* "batch 64 of the gpu profile's 256: ..."; "" */
    char wl_desc[320];        /* its configuration and FLOP shares */
    /* the rounds */
    double target, budget;    /* flags; 0: the profile's, the technique's */
    double min_rep;           /* flag; 0: the profile's */
    int max_rounds;           /* flag; 0: the profile's */
    int rounds_per_build;     /* flag; 0: the profile's */
    long long seed;           /* flag; 0: from the technique's name */
    tb_step_plan plan;
    step_arm *arms;           /* (plan.n_arms) */
    tb_arm *tarms;            /* (plan.n_arms) what the engine runs */
    int *modes;               /* (plan.n_arms) TB_ARM_*: that arm is rebuilt every round
                                 (tb_step_plan_park, or every arm: rebuild_each_round,
                                 a prepare hook), or parked between its repetitions */
    int n_alone;              /* how many are not TB_ARM_ALIVE */
    step_arm *live;           /* of those, the arm whose trainer is alive (unparked) */
    int n_held;               /* checks' trainers held for the arms (setting_state.held) */
    int base_known;           /* 1: base_in_use measured (after the workload's first check) */
    double base_in_use;       /* bytes in use once the first check's trainer closed: what a
                                 trainer's peak is read above (check_once) */
    int adopted;              /* of them, taken by an arm as its first build */
    double held_bytes;        /* what they keep, parked */
};

/* ---- building one setting's trainer ---- */

/* Loader worker threads of the technique's trainers (step_harness.h, "The
 * loader"): --loader-workers, or TB_STEP_GPU_LOADER_WORKERS on a GPU; 0 on
 * the CPU and for an entry that sets the loader itself. */
static int loader_workers_of(const step_run *r)
{
    if (r->tech->own_loader)
        return 0;
    if (r->loader_workers_flag >= 0)
        return r->loader_workers_flag;
    return strcmp(r->b.info.backend, "cuda") == 0 ? TB_STEP_GPU_LOADER_WORKERS : 0;
}

/* The big models' training subset: 8 batches (an epoch metric: the
 * technique's epoch_batches where it sets one), or STEP_LOADER_BATCHES
 * when worker threads build them and the unit is a step (an epoch's first
 * batch waits for a worker: rarer in longer epochs). */
#define STEP_LOADER_BATCHES 32
static void big_data(const step_run *r, tb_config *c, int batch)
{
    int step = r->tech->metric == TB_METRIC_STEP;
    long long batches = !step && r->tech->epoch_batches > 0 ? r->tech->epoch_batches : 8;
    c->data_limit = (c->workers > 0 && step ? STEP_LOADER_BATCHES : batches) * batch;
    c->test_limit = 2LL * batch;
}

static void base_config(step_run *r)
{
    tb_config *c = &r->base_cfg;
    tb_config_defaults(c);
    int workers = loader_workers_of(r);
    if (workers > 0) {
        c->workers = workers;
        c->persistent_workers = 1;
        c->worker_mode = TB_WORKERS_THREADS;
    }
    c->batch_size = r->prof.batch;
    c->data_limit = r->prof.train_n;
    c->test_limit = r->prof.test_n;
    /* train_test's lr for batch 32: at 0.05 a few steps of SGD with momentum
     * amplify rounding differences beyond what the tolerances mean to catch. */
    c->lr = 0.01;
    /* A bitwise check (tolerance 0) compares two runs: a convolution
     * algorithm that adds with atomics (cuDNN's BWD_*_ALGO_0) differs from
     * run to run and would fail it with nothing wrong. Both arms run the
     * same deterministic algorithms, so the timing comparison stays fair;
     * the row's note says so. */
    c->cudnn_deterministic = r->tech->tolerance == 0;
    if (r->tech->setup)
        r->tech->setup(c, r->b.profile);
    if (r->wl == TB_WL_SMALL_CNN)
        return;
    /* the big models: their own batch, 8 steps of data (big_data: an
     * epoch metric's own length), 2 test batches */
    tb_workload_apply(c, (tb_workload)r->wl, (tb_workload_size)r->wl_size);
    /* ResNet-50's recipe lr (0.1 x batch / 256): small batches of it are
     * ill-conditioned (lib/nn/model_resnet.c), and 0.01 at batch 2 let
     * rounding differences grow past the tolerances in a few steps */
    if (r->wl == TB_WL_RESNET50)
        c->lr = TB_FLAG_UNSET;
    tb_config v = *c;
    if (tb_config_validate(&v) != TB_OK) {
        tb_error_clear(); /* ctx_open reports it, per setting */
        return;
    }
    /* the model's own batch (0 at full size) made explicit: a setting that
     * scales it (checkpointing's 4x) must scale the batch that runs, not 0 */
    c->batch_size = v.batch_size;
    big_data(r, c, v.batch_size);
}

/* Setting i's configuration, as its trainer had it. */
static tb_config setting_config(const step_run *r, int i)
{
    tb_config c = r->base_cfg;
    if (r->tech->settings[i].apply)
        r->tech->settings[i].apply(&c, r->tech->settings[i].param);
    return c;
}

/* A test-only variable: *out from name's value, a number in (0, max];
 * *set 0 when name is unset or empty. TB_ERR_INVALID naming it otherwise. */
static int test_env(const char *name, double max, double *out, int *set)
{
    const char *v = getenv(name);
    *set = 0;
    if (!v || !*v)
        return TB_OK;
    char *end;
    double x = strtod(v, &end);
    if (*end || !(x > 0) || !(x <= max))
        return TB_FAIL(TB_ERR_INVALID, "%s=%s: not a number in (0, %g]", name, v, max);
    *out = x;
    *set = 1;
    return TB_OK;
}

/* Test only: with TB_TEST_LR=X in the environment every trainer of the
 * technique trains at learning rate X, so check_verdicts_test can make the
 * check's training diverge (nan) and see the rows say so. */
static int test_lr(tb_config *c)
{
    double lr;
    int set;
    TB_TRY(test_env("TB_TEST_LR", DBL_MAX, &lr, &set));
    if (set)
        c->lr = lr;
    return TB_OK;
}

static int ctx_open(step_run *r, int idx, tb_step_ctx *c)
{
    const tb_step_setting *s = &r->tech->settings[idx];
    memset(c, 0, sizeof *c);
    c->tech = r->tech;
    c->setting = s;
    c->bench = &r->b;
    c->workload = r->wl;
    c->train = r->train;
    c->test = r->test;
    c->cfg = setting_config(r, idx);
    TB_TRY(test_lr(&c->cfg));
    TB_TRY(tb_config_validate(&c->cfg));
    if (s->prepare)
        TB_TRY(s->prepare(r->b.be, s->param));
    return tb_trainer_create_with_data(&c->cfg, r->b.be, r->train, r->test, &c->t);
}

static void ctx_close(tb_step_ctx *c)
{
    tb_trainer_destroy(c->t);
    free(c->user);
    c->t = NULL;
    c->user = NULL;
}

int tb_step_next_batch(tb_step_ctx *c, tb_batch *b)
{
    return tb_trainer_next_batch(c->t, b);
}

/* One unit of the metric: the setting's own, or a step, or an epoch. */
static int run_unit(tb_step_ctx *c, float *loss)
{
    int rc = TB_OK;
    if (c->setting->run_once)
        rc = c->setting->run_once(c, loss);
    else if (c->tech->metric == TB_METRIC_STEP)
        rc = tb_trainer_step(c->t, loss);
    else
        for (int i = tb_loader_num_batches(c->t->train_ld); i > 0 && rc == TB_OK; i--)
            rc = tb_trainer_step(c->t, loss);
    c->calls++;
    return rc;
}

int tb_step_loader_note(tb_step_ctx *c, char *note, size_t cap)
{
    tb_epoch_stats es;
    /* epoch 1: the check's steps ran in epoch 0 */
    TB_TRY(tb_train_epoch(c->t, 1, &es));
    double share = es.seconds > 0 ? es.loader_wait_s / es.seconds : 0;
    snprintf(note, cap, "the step waited for batches %.1f%% of an epoch (%.1f of %.1f ms%s): "
             "the most a loader setting can save here; workers are processes, as PyTorch's",
             100 * share, 1e3 * es.loader_wait_s, 1e3 * es.seconds,
             c->cfg.workers == 0 ? "; with 0 workers, building them" : "");
    return TB_OK;
}

const char *tb_step_na_never(const char *backend, const tb_step_setting *s)
{
    (void)backend;
    (void)s;
    return NULL;
}

/* ---- the correctness pass ---- */

/* Marks setting idx n/a when its check ran out of memory, or when the
 * backend has no implementation of it on this machine (TB_ERR_UNSUPPORTED:
 * bf16 on a CPU without AVX-512, say); a baseline stays an error, since
 * every row is read against it. Any other failure is returned. */
/* Setting idx is an n/a row, the reason fmt's, said on stderr too. */
static void set_na(step_run *r, int idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_na(step_run *r, int idx, const char *fmt, ...)
{
    setting_state *s = &r->st[idx];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
    s->na = 1;
    fprintf(stderr, "%s: %s: %s\n", r->tech->desc.name, r->tech->settings[idx].name, s->why);
}

static int mark_na(step_run *r, int idx, int rc)
{
    int unsupported = rc == TB_ERR_UNSUPPORTED && r->tech->settings[idx].base != idx;
    if (rc != TB_ERR_DEVICE_OOM && !unsupported)
        return rc;
    if (unsupported)
        set_na(r, idx, "not available on this machine: %s", tb_error_message());
    else if (r->mem_limit_mib > 0)
        set_na(r, idx, "out of memory under --mem-limit=%g MiB (%s)", r->mem_limit_mib,
               tb_error_message());
    else /* no --mem-limit: the device's (or the host's) own memory ran out */
        set_na(r, idx, "out of memory (%s)", tb_error_message());
    tb_error_clear();
    return TB_OK;
}

/* Marks setting idx n/a when its step is larger than the training subset:
 * the loader would hand it the whole subset, the very batch a smaller
 * setting trains on, and its row would repeat that one's loss. */
static int mark_batch_past_data(step_run *r, int idx)
{
    tb_config cfg = setting_config(r, idx);
    TB_TRY(tb_config_validate(&cfg));
    long per_step = (long)cfg.batch_size * cfg.accum_steps;
    if (!r->train || per_step <= r->train->n)
        return TB_OK;
    set_na(r, idx, "a step of %ld samples is more than the %d training samples of this profile",
           per_step, r->train->n);
    return TB_OK;
}

/* The rounding control of the correctness pass (check_all; the constants
 * in bench/harness/harness.h): the baseline again from nudged weights; how
 * far its loss then ends after the check's steps is how much this model and
 * recipe amplify rounding, whatever made it. */
enum { CONTROL_AUTO, CONTROL_ALWAYS, CONTROL_NEVER }; /* --rounding-control */

static void free_update(setting_state *s)
{
    free(s->upd);
    free(s->upd_name);
    free(s->upd_n);
    s->upd = NULL, s->upd_name = NULL, s->upd_n = NULL;
    s->nupd = 0;
}

/* The update witness: per parameter tensor, the L2 norm of w1 - w0 (the
 * first step's weight change), into s. A check whose loss ends where a
 * model that predicts nothing would ("weak check") still sees every layer's
 * gradient through it: a wrong one changes its tensor's norm by O(1). */
static int record_update(const tb_model *m, const float *w0, const float *w1, setting_state *s)
{
    free_update(s);
    s->upd = calloc((size_t)m->nparams, sizeof *s->upd);
    s->upd_name = calloc((size_t)m->nparams, sizeof *s->upd_name);
    s->upd_n = calloc((size_t)m->nparams, sizeof *s->upd_n);
    if (!s->upd || !s->upd_name || !s->upd_n) {
        free_update(s);
        return TB_FAIL(TB_ERR_NOMEM, "update witness: %d tensors", m->nparams);
    }
    for (int i = 0; i < m->nparams; i++) {
        const tb_param *p = m->params[i];
        size_t at = (size_t)(p->w - m->flat_w);
        double sum = 0;
        for (size_t k = 0; k < p->n; k++) {
            double d = (double)w1[at + k] - (double)w0[at + k];
            sum += d * d;
        }
        s->upd[i] = sqrt(sum);
        snprintf(s->upd_name[i], sizeof s->upd_name[i], "%s", p->name);
        s->upd_n[i] = p->n;
    }
    s->nupd = m->nparams;
    return TB_OK;
}

/* After the check's first step: the update witness of s from the weights
 * w0 read before it. */
static int record_first_update(tb_trainer *t, const float *w0, setting_state *s)
{
    float *w1;
    TB_TRY(tb_trainer_sync(t));
    TB_TRY(tb_model_weights_to_host(t->model, &w1));
    int rc = record_update(t->model, w0, w1, s);
    free(w1);
    return rc;
}

/* The update witness runs where the loss is compared within a tolerance
 * (a bitwise check is strong already). */
static int wants_update(const step_run *r)
{
    return r->tech->tolerance > 0 && !r->tech->not_comparable;
}

/* Test only: with TB_TEST_LOSS_SCALE=S in the environment, every check's
 * trainer scales its loss as fp16's does, from scale S (the CPU has no fp16,
 * so loss_scaler_check_test drives the skipped-step rule on bf16 or fp32
 * with a scale that overflows). */
static int test_loss_scaling(tb_trainer *t)
{
    double scale;
    int set;
    TB_TRY(test_env("TB_TEST_LOSS_SCALE", FLT_MAX, &scale, &set));
    if (!set)
        return TB_OK;
    if (!t->loss_scaling)
        TB_TRY(tb_trainer_enable_loss_scaling(t));
    t->scaler.scale = (float)scale;
    return TB_OK;
}

/* Settings with a prepare hook set process-wide backend state (the
 * allocator's policy): where the timed settings' states differ, their
 * trainers cannot take turns while alive together, so they are rebuilt
 * every round, one at a time. Timed settings that all set the same state
 * (the caching allocator's baseline and its A/A copy, its compared setting
 * n/a) share it as any trainers do. */
static int prepares_differ(const step_run *r)
{
    const tb_step_setting *first = NULL;
    for (int i = 0; i < r->tech->n_settings; i++) {
        const tb_step_setting *s = &r->tech->settings[i];
        if (r->st[i].na || r->st[i].alias)
            continue;
        if (!first)
            first = s;
        else if (s->prepare != first->prepare || (s->prepare && s->param != first->param))
            return 1;
    }
    return 0;
}

/* Whether the technique's arms may park (tb_step_plan_park): not where
 * every round must build afresh (rebuild_each_round) or prepare hooks set
 * process-wide states that trainers alive together would share. Asked
 * once the checks have said which settings are timed. */
static int can_park(const step_run *r)
{
    return !r->tech->rebuild_each_round && !prepares_differ(r);
}

/* Whether a setting's check trainers become its arms' first builds
 * (setting_state.held): parked after the check, they wait for the rounds,
 * where the arm unparks instead of building (arm_open), which saves a
 * build and its warm-up units an arm (the GPU profile's ResNet-50: 0.4 s of
 * about 0.8). Not for an epoch metric (a loader's epochs are its own: a
 * check leaves one part-way), a per-sample technique (its check trains a
 * sample count of its own), nor where a prepare hook sets process-wide
 * state or every round builds afresh. */
static int any_prepare(const tb_step_technique *t)
{
    for (int i = 0; i < t->n_settings; i++)
        if (t->settings[i].prepare)
            return 1;
    return 0;
}

static int adopts(const step_run *r)
{
    const tb_step_technique *t = r->tech;
    return t->metric == TB_METRIC_STEP && !t->per_sample && !t->rebuild_each_round &&
           !any_prepare(t);
}

/* Closes the checks' trainers held for the arms: the arms that have not
 * taken theirs build their own. */
static void release_held(step_run *r)
{
    for (int i = 0; r->st && i < r->tech->n_settings; i++)
        for (int k = 0; k < 2; k++)
            ctx_close(&r->st[i].held[k]);
    r->n_held = 0;
    r->held_bytes = 0;
}

/* Whether work that returned rc should run again: it ran out of memory
 * with checks' trainers held for the arms, which are then released (the
 * room was theirs). */
static int room_again(step_run *r, int rc)
{
    if (rc != TB_ERR_DEVICE_OOM || r->n_held == 0)
        return 0;
    fprintf(stderr, "%s: out of memory with %d trainer%s of earlier checks kept for the rounds "
            "(%.1f MiB): released, the arms will build their own; trying again\n",
            r->tech->desc.name, r->n_held, r->n_held == 1 ? "" : "s", r->held_bytes / 1048576.0);
    tb_error_clear();
    release_held(r);
    return 1;
}

/* Setting idx's trainer for a check, its initial weights moved by the
 * rounding control's draw nudge - 1 (tb_control_seed) when nudge > 0; with
 * loss scaling, its scale the one the setting's checks begin from. */
static int check_open(step_run *r, int idx, int nudge, tb_step_ctx *c)
{
    int rc = ctx_open(r, idx, c);
    if (rc == TB_OK)
        rc = test_loss_scaling(c->t);
    if (rc == TB_OK && c->t->loss_scaling && r->st[idx].check_scale > 0)
        c->t->scaler.scale = r->st[idx].check_scale;
    if (rc == TB_OK && nudge)
        rc = tb_model_nudge_weights(c->t->model, TB_CONTROL_NUDGE, tb_control_seed(nudge - 1));
    return rc;
}

/* One step of a check: the setting's own unit where it has one (a step
 * metric), else a training step. */
static int check_step(const step_run *r, tb_step_ctx *c, float *loss)
{
    int own = c->setting->run_once && r->tech->metric == TB_METRIC_STEP;
    int rc = own ? c->setting->run_once(c, loss) : tb_trainer_step(c->t, loss);
    c->calls++; /* as run_unit counts them */
    return rc;
}

/* check_run's one try. A setting whose loss scaler (fp16) skipped steps in
 * its first check, their gradients overflowing at the initial scale
 * (GradScaler's 65536), would compare fewer updates than its baseline
 * made: its check runs again from the scale the scaler had backed off to,
 * as do its later checks (check_open), and its note says so (loss_note). */
static int check_once(step_run *r, int idx, float *loss, int with_note, int nudge, int keep)
{
    tb_backend *be = r->b.be;
    tb_step_ctx c;
    size_t in_use = 0, peak = 0, in_use0 = 0;
    float *w0 = NULL;
    TB_TRY(be->mem_stats(be, &in_use0, NULL));
    TB_TRY(be->mem_reset_peak(be));
    double t0 = tb_clock_s();
    int rc = check_open(r, idx, nudge, &c);
    double opened_s = tb_clock_s() - t0, steps_s = 0;
    float scale_start = rc == TB_OK ? c.t->scaler.scale : 0;
    int witness = rc == TB_OK && !nudge && with_note && wants_update(r);
    if (witness)
        rc = tb_model_weights_to_host(c.t->model, &w0);
    int steps = r->check_steps;
    if (rc == TB_OK && r->tech->per_sample) {
        long per_step = (long)c.cfg.batch_size * c.cfg.accum_steps;
        steps = (int)(r->prof.check_samples / per_step);
        steps = steps < 1 ? 1 : steps;
    }
    for (int i = 0; i < steps && rc == TB_OK; i++) {
        double s0 = tb_clock_s();
        rc = check_step(r, &c, loss);
        steps_s += tb_clock_s() - s0;
        if (i == 0 && witness && rc == TB_OK)
            rc = record_first_update(c.t, w0, &r->st[idx]);
    }
    free(w0);
    if (rc == TB_OK)
        rc = tb_trainer_sync(c.t);
    if (rc == TB_OK)
        rc = be->mem_stats(be, &in_use, &peak);
    if (rc == TB_OK) {
        tb_flops f;
        tb_model_flops(c.t->model, &f);
        r->st[idx].flops_per_sample = c.forward_only ? tb_flops_pass(&f, 0) : tb_flops_total(&f);
        r->st[idx].classes = c.t->model->classes;
    }
    if (rc == TB_OK && with_note && r->tech->check_note)
        rc = r->tech->check_note(&c, r->st[idx].note, sizeof r->st[idx].note);
    /* what its trainer would hold parked (tb_step_plan_park, where its
     * arms may park: can_park, once every check has run): after everything
     * else, since parking frees the activations; parked too where it is
     * kept for an arm */
    size_t kept = 0;
    int park = (with_note || keep) && !r->tech->rebuild_each_round;
    if (rc == TB_OK && !nudge && park) {
        rc = tb_trainer_park(c.t);
        if (rc == TB_OK)
            rc = be->mem_stats(be, &kept, NULL);
        kept = kept > in_use0 ? kept - in_use0 : 0;
        if (rc == TB_OK && with_note)
            r->st[idx].kept_bytes = (double)kept;
    }
    if (rc == TB_OK && with_note && c.own_verdict) {
        r->st[idx].own_verdict = 1;
        r->st[idx].own = c.own;
        snprintf(r->st[idx].own_against, sizeof r->st[idx].own_against, "%s", c.own_against);
    }
    /* the check found the setting means nothing here after all */
    if (rc == TB_OK && with_note && c.na_why[0] && r->tech->settings[idx].base != idx)
        set_na(r, idx, "%s", c.na_why);
    if (!nudge && with_note) {
        /* what the process held at its peak, as if no trainer were held for
         * the arms (adopts): the shared state (r->base_in_use) and what it
         * allocated above what was in use when it began */
        double own = r->base_known ? r->base_in_use + (double)(peak - in_use0) : (double)peak;
        r->st[idx].peak_bytes = c.own_peak_bytes > 0 ? c.own_peak_bytes : own;
        r->st[idx].steps = steps;
        r->st[idx].unit_samples = c.unit_samples;
        int warm = r->prof.warmup < steps ? r->prof.warmup : steps;
        r->st[idx].build_s = opened_s + (steps > 0 ? steps_s * warm / steps : 0);
    }
    setting_state *st = &r->st[idx];
    long skipped = rc == TB_OK && c.t->loss_scaling ? c.t->scaler.skipped_steps : 0;
    float scale_end = rc == TB_OK ? c.t->scaler.scale : 0;
    int again = skipped > 0 && !nudge && with_note && !(st->check_scale > 0);
    tb_step_ctx *hold = keep ? &st->held[keep - 1] : NULL;
    if (rc == TB_OK && hold && !again && !nudge && c.t->parked && adopts(r) && !st->na &&
        r->base_known) {
        ctx_close(hold);
        *hold = c;
        r->n_held++;
        r->held_bytes += (double)kept;
    } else {
        ctx_close(&c);
        /* the first check closed: what stays in use is shared (buffers a
         * backend grows once, the data), and every later peak is read
         * against it, held trainers or not */
        size_t now = 0;
        if (!r->base_known && be->mem_stats(be, &now, NULL) == TB_OK) {
            r->base_in_use = (double)now;
            r->base_known = 1;
        }
    }
    if (skipped > 0 && !nudge && with_note) {
        if (!again) {
            st->skipped_again = skipped;
        } else {
            st->skipped = skipped;
            st->scale0 = scale_start;
            st->check_scale = scale_end;
            return check_once(r, idx, loss, with_note, nudge, keep);
        }
    }
    return rc;
}

/* nudge: 0, or 1 + the rounding control's draw (check_open). keep: 0, or
 * where its trainer waits for an arm (adopts): 1 the setting's own arm,
 * 2 a baseline's A/A arm. Out of memory with trainers held for the arms,
 * they go and it runs again (room_again). */
static int check_run(step_run *r, int idx, float *loss, int with_note, int nudge, int keep)
{
    int rc;
    do
        rc = check_once(r, idx, loss, with_note, nudge, keep);
    while (room_again(r, rc));
    return rc;
}

/* "; loss scaler: ..." for a setting whose check skipped steps (check_run),
 * "" otherwise. */
static void loss_note(const setting_state *s, char *msg, size_t cap)
{
    msg[0] = '\0';
    if (!s->skipped)
        return;
    int n = snprintf(msg, cap, "; loss scaler: from scale %g, %ld of the %d check steps "
                     "overflowed and were skipped (as GradScaler skips them); checked again from "
                     "scale %g", s->scale0, s->skipped, s->steps, s->check_scale);
    if (s->skipped_again && n >= 0 && (size_t)n < cap)
        snprintf(msg + n, cap - (size_t)n, ", where %ld were skipped again: fewer updates than "
                 "its baseline's", s->skipped_again);
}

static double rel_diff(double ref, double got)
{
    return fabs(got - ref) / fmax(fabs(ref), 1e-30);
}

/* A setting compared by its loss that ended further from its baseline
 * than the entry's tolerance. */
static int past_tolerance(const step_run *r, int i)
{
    const tb_step_technique *t = r->tech;
    int b = t->settings[i].base;
    const setting_state *s = &r->st[i];
    if (t->tolerance <= 0 || t->not_comparable || s->na || s->alias || r->st[b].na)
        return 0;
    double got = b == i ? s->loss_again : s->loss;
    return !(rel_diff(r->st[b].loss, got) <= t->tolerance);
}

/* The distance between two first updates (record_update): tensors matched
 * in order, a bias of b that s lacks skipped (no conv bias before batch
 * norm); the relative L2 distance between the two vectors of per-tensor
 * norms, |s - b| / |b|. *at and *worst: the tensor furthest from its own
 * norm (floored at 1e-3 of b's largest) and by how much; *at < 0 when every
 * norm is the same to the last bit. Returns the distance, or -1 where the
 * tensors do not match (other parameters), -2 where b changed nothing, -3
 * where s did (a skipped step). */
static double update_distance(const setting_state *b, const setting_state *s, int *at,
                              double *worst)
{
    double top = 0, mine = 0;
    for (int k = 0; k < b->nupd; k++)
        top = fmax(top, b->upd[k]);
    for (int k = 0; k < s->nupd; k++)
        mine = fmax(mine, s->upd[k]);
    if (!(top > 0))
        return -2;
    if (!(mine > 0))
        return -3;
    double d2 = 0, b2 = 0;
    int j = 0;
    *at = -1, *worst = 0;
    for (int k = 0; k < b->nupd; k++) {
        int same = j < s->nupd && b->upd_n[k] == s->upd_n[j] &&
                   strcmp(b->upd_name[k], s->upd_name[j]) == 0;
        if (!same && strcmp(b->upd_name[k], "bias") == 0)
            continue; /* a bias the setting does not have */
        if (!same)
            return -1;
        double diff = s->upd[j] - b->upd[k];
        double rel = fabs(diff) / fmax(b->upd[k], 1e-3 * top);
        if (rel > *worst)
            *worst = rel, *at = k;
        d2 += diff * diff, b2 += b->upd[k] * b->upd[k];
        j++;
    }
    return j != s->nupd || !(b2 > 0) ? -1 : sqrt(d2 / b2);
}

/* The loss tolerance of baseline b's settings: the declared one, widened
 * to TB_CONTROL_K times how far b's rounding control ended where that is
 * more (check_controls; set_check says which). */
static double loss_tolerance(const step_run *r, int b)
{
    const setting_state *sb = &r->st[b];
    double tol = r->tech->tolerance;
    if (tol > 0 && sb->control) {
        double moved = rel_diff(sb->loss, sb->loss_control);
        if (!isfinite(moved)) /* the control diverged: no tolerance holds */
            return INFINITY;
        if (TB_CONTROL_K * moved > tol)
            tol = TB_CONTROL_K * moved;
    }
    return tol;
}

/* A loss check that cannot fail: baseline b's loss so near what a model
 * that predicts nothing scores (ln classes) that such a model would pass
 * too (the reduced ResNet-50 and GPT-2 after 3 steps from their
 * initialization: 7.05 against ln 1000 = 6.91, 7.66 against ln 2048 =
 * 7.62). Said in the note; there the first update judges too. */
static int weak_check(const step_run *r, int b)
{
    const setting_state *sb = &r->st[b];
    double tol = loss_tolerance(r, b), dead = sb->classes > 1 ? log((double)sb->classes) : 0;
    return tol > 0 && dead > 0 && rel_diff(sb->loss, dead) <= tol;
}

/* One draw of the first update's rounding control: setting idx's first
 * check step from weights nudged by draw k (tb_control_seed), its update
 * into *out (record_update). */
static int witness_control_once(step_run *r, int idx, int k, setting_state *out)
{
    tb_step_ctx c;
    float *w0 = NULL, loss;
    int rc = check_open(r, idx, 1 + k, &c);
    if (rc == TB_OK)
        rc = tb_model_weights_to_host(c.t->model, &w0);
    if (rc == TB_OK)
        rc = check_step(r, &c, &loss);
    if (rc == TB_OK)
        rc = record_first_update(c.t, w0, out);
    free(w0);
    ctx_close(&c);
    return rc;
}

static int witness_control_run(step_run *r, int idx, int k, setting_state *out)
{
    int rc;
    do
        rc = witness_control_once(r, idx, k, out);
    while (room_again(r, rc));
    return rc;
}

/* The first update's rounding control, for every setting that the witness
 * judges (a weak loss check) and finds past the declared tolerance: its own
 * first update again from nudged weights, up to TB_WITNESS_CONTROL_RUNS
 * draws, the farthest distance (update_distance) kept in upd_control;
 * update_verdict widens the witness's tolerance to TB_CONTROL_K times it.
 * The draws stop once TB_CONTROL_K times the farthest so far reaches the
 * setting's distance D: a farther draw could only widen a tolerance that
 * D is already within, so the verdict is the one all the draws would give
 * (only the tolerance stated is the narrower one of the draws taken). In
 * run 53's waterfall seven settings took 42 draws of a build and a step
 * each; their first draws alone had cleared D. The first step's
 * gradient of a small-batch BN net at its initialization is itself that
 * sensitive: on the tiny ResNet-50 (width 8, batch 4) weights moved by
 * 7.6e-6 moved its per-tensor norms by 1-2.5% in fp32 and 6-41% under bf16
 * autocast, whose first update was 12-25% from fp32's. A setting whose
 * first update only rounds differently stays within it; a dead layer or a
 * wrong scale, O(1), does not. */
static int witness_controls(step_run *r)
{
    const tb_step_technique *t = r->tech;
    for (int i = 0; i < t->n_settings; i++) {
        setting_state *s = &r->st[i];
        int b = t->settings[i].base, at;
        double worst;
        if (r->control_flag == CONTROL_NEVER || b == i || s->na || s->alias || r->st[b].na ||
            !weak_check(r, b))
            continue;
        double dist = update_distance(&r->st[b], s, &at, &worst);
        if (!(dist > t->tolerance))
            continue;
        for (int k = 0; k < TB_WITNESS_CONTROL_RUNS && !(TB_CONTROL_K * s->upd_control >= dist);
             k++) {
            setting_state ctl = {0};
            int rc = witness_control_run(r, i, k, &ctl);
            double d = rc == TB_OK ? update_distance(s, &ctl, &at, &worst) : -1;
            free_update(&ctl);
            if (rc == TB_ERR_DEVICE_OOM || rc == TB_ERR_UNSUPPORTED) {
                tb_error_clear(); /* its verdict keeps the declared tolerance */
                break;
            }
            TB_TRY(rc);
            fprintf(stderr, "%s: check %-24s first update's rounding control %d of at most %d: "
                    "its per-tensor norms moved %.3g\n", t->desc.name, t->settings[i].name, k + 1,
                    TB_WITNESS_CONTROL_RUNS, d);
            if (d > s->upd_control)
                s->upd_control = d;
            s->upd_draws = k + 1;
        }
    }
    return TB_OK;
}

/* For every baseline with a setting past the tolerance: the rounding
 * control (TB_CONTROL_NUDGE, TB_CONTROL_RUNS draws, the farthest kept).
 * Only then (--rounding-control=auto; always:
 * for every baseline; never: none): a check that passes costs nothing
 * more. set_check widens that baseline's tolerance to TB_CONTROL_K times
 * the control's distance, so that a verdict says "differs" only past what
 * rounding alone moved the baseline itself. */
static int check_controls(step_run *r)
{
    const tb_step_technique *t = r->tech;
    for (int b = 0; b < t->n_settings; b++) {
        setting_state *sb = &r->st[b];
        if (t->settings[b].base != b || sb->na)
            continue;
        int need = r->control_flag == CONTROL_ALWAYS && t->tolerance > 0 && !t->not_comparable;
        for (int i = 0; i < t->n_settings && !need && r->control_flag == CONTROL_AUTO; i++)
            need = t->settings[i].base == b && past_tolerance(r, i);
        if (!need)
            continue;
        int rc = TB_OK;
        for (int k = 0; k < TB_CONTROL_RUNS; k++) {
            float loss = NAN;
            rc = check_run(r, b, &loss, 0, 1 + k, 0);
            if (rc != TB_OK)
                break;
            fprintf(stderr, "%s: check %-24s rounding control %d of %d (weights moved by %.1e): "
                    "loss %.9g, %.2g%% from the baseline's\n", t->desc.name, t->settings[b].name,
                    k + 1, TB_CONTROL_RUNS, TB_CONTROL_NUDGE, loss, 100 * rel_diff(sb->loss, loss));
            /* the farthest draw; one that diverged (nan, inf) stays */
            if (k == 0 || !isfinite(loss) ||
                (isfinite(sb->loss_control) &&
                 !(rel_diff(sb->loss, loss) <= rel_diff(sb->loss, sb->loss_control))))
                sb->loss_control = loss;
        }
        if (rc == TB_ERR_DEVICE_OOM || rc == TB_ERR_UNSUPPORTED) {
            tb_error_clear(); /* its verdicts keep the declared tolerance */
            continue;
        }
        TB_TRY(rc);
        sb->control = 1;
    }
    return TB_OK;
}

/* The earlier compared setting that setting i repeats, or -1: one with the
 * same baseline, checked and timed, that is i but for its name (the same
 * apply, param, unit and prepare hook, so that no hook can tell them apart)
 * and whose configuration (both built from the workload's base) is i's
 * byte for byte. The waterfall's last stage on a workload is its "all on"
 * (the same mask): one measurement, two rows, instead of two draws of the
 * same thing. */
static int same_as(const step_run *r, int i)
{
    const tb_step_setting *si = &r->tech->settings[i];
    if (si->base == i)
        return -1;
    tb_config ci = setting_config(r, i);
    for (int j = 0; j < i; j++) {
        const tb_step_setting *sj = &r->tech->settings[j];
        if (sj->base != si->base || sj->base == j || r->st[j].na || r->st[j].alias ||
            sj->apply != si->apply || sj->param != si->param || sj->run_once != si->run_once ||
            sj->prepare != si->prepare)
            continue;
        tb_config cj = setting_config(r, j);
        if (memcmp(&ci, &cj, sizeof ci) == 0)
            return j;
    }
    return -1;
}

/* The batch-size search of the gpu size (TB_WL_GPU): its batches fill an
 * 80 GB GPU; where memory is smaller, the workload's first check (its
 * first baseline's) running out of memory halves the batch and the checks
 * begin again (check_all returns that one's TB_ERR_DEVICE_OOM instead of
 * an n/a row), until it fits, and the rows say so; batch 1 out of memory
 * too: its settings become n/a rows saying why (never a crash). The check
 * is the trial: no trainer of its own (a build, a step and the data made
 * twice, each workload of the gpu profile). Whether the batch may still
 * halve. */
static int fits_by_halving(const step_run *r)
{
    return r->wl != TB_WL_SMALL_CNN && r->wl_size == TB_WL_GPU && r->base_cfg.batch_size > 1;
}

static int check_all(step_run *r)
{
    const tb_step_technique *t = r->tech;
    int first = 1;
    for (int i = 0; i < t->n_settings; i++) {
        setting_state *s = &r->st[i];
        const char *na = t->na_reason ? t->na_reason(r->b.info.backend, &t->settings[i]) : NULL;
        if (na && t->settings[i].base != i) {
            s->na = 1;
            snprintf(s->why, sizeof s->why, "%s", na);
            continue;
        }
        TB_TRY(mark_batch_past_data(r, i));
        if (s->na)
            continue;
        int j = same_as(r, i);
        if (j >= 0) {
            s->alias = 1 + j;
            fprintf(stderr, "%s: check %-24s the same configuration as '%s': checked and "
                    "timed once, for both rows\n", t->desc.name, t->settings[i].name,
                    t->settings[j].name);
            continue;
        }
        int rc = check_run(r, i, &s->loss, 1, 0, 1);
        if (rc == TB_ERR_DEVICE_OOM && first && fits_by_halving(r))
            return rc; /* the batch-size search (run_workload) */
        first = 0;
        TB_TRY(mark_na(r, i, rc));
        if (!s->na && t->settings[i].base == i)
            TB_TRY(mark_na(r, i, check_run(r, i, &s->loss_again, 0, 0, 2)));
        if (!s->na)
            fprintf(stderr, "%s: check %-24s loss at step %d %.9g, peak %.1f MiB (%.1f "
                    "parked)%s\n", t->desc.name, t->settings[i].name, s->steps, s->loss,
                    s->peak_bytes / 1048576.0, s->kept_bytes / 1048576.0,
                    s->skipped ? " (its loss scaler skipped steps: checked again, see its note)"
                               : "");
    }
    TB_TRY(check_controls(r));
    return witness_controls(r);
}

/* ---- timing: one interleaved experiment (bench/harness/rounds.h) ---- */

/* Before arm a's trainer is built or unparked: the one arm of the others
 * rebuilt every round or parked that is alive closes or parks, so that one
 * such trainer at a time holds its activations. */
static int make_room(step_arm *a)
{
    step_run *r = a->run;
    if (a->mode == TB_ARM_ALIVE)
        return TB_OK;
    step_arm *l = r->live;
    r->live = a;
    if (!l || l == a || !l->ctx.t)
        return TB_OK;
    if (l->mode == TB_ARM_REBUILT) {
        ctx_close(&l->ctx);
        return TB_OK;
    }
    return tb_trainer_park(l->ctx.t);
}

/* arm_resume's work, and an adopted check trainer's first use (arm_open):
 * its warm-up units ran in its check, and its first step comes back as a
 * resumed one's does. */
static int unpark_arm(step_arm *a)
{
    TB_TRY(make_room(a));
    TB_TRY(tb_trainer_unpark(a->ctx.t));
    int capture = tb_trainer_graph_settle_steps(&a->ctx.cfg) > 0;
    int cpu = strcmp(a->run->b.info.backend, "cpu") == 0;
    if (a->run->tech->metric != TB_METRIC_STEP || !(capture || cpu))
        return TB_OK;
    float loss;
    TB_TRY(run_unit(&a->ctx, &loss));
    return tb_trainer_sync(a->ctx.t);
}

/* Builds arm a's trainer when it has none, warmed up by the profile's few
 * units (the engine's own warm-up, until unit times settle, comes on top
 * for trainers that stay alive). An arm rebuilt every round first closes
 * the one such arm alive before it. Untimed. */
static int arm_open(step_arm *a)
{
    step_run *r = a->run;
    if (a->ctx.t) /* alive, or its check's trainer (adopts), parked since */
        return a->ctx.t->parked ? unpark_arm(a) : TB_OK;
    TB_TRY(make_room(a));
    int rc = ctx_open(r, a->idx, &a->ctx);
    if (rc != TB_OK) {
        ctx_close(&a->ctx);
        return rc;
    }
    float loss;
    int warmup = r->tech->per_sample ? 1 : r->prof.warmup;
    /* a step timed from a fresh build must be a replay where graphs are on:
     * after a rebuild the rounds time straight away, and the gpu profile's
     * one warm-up step would leave launches and the capture itself in the
     * timed repetitions (the H100 run's cuda_graphs "on" rows) */
    int settle = tb_trainer_graph_settle_steps(&a->ctx.cfg);
    if (r->tech->metric == TB_METRIC_STEP && !r->tech->per_sample && warmup < settle)
        warmup = settle;
    for (int w = 0; w < warmup; w++)
        TB_TRY(run_unit(&a->ctx, &loss));
    return tb_trainer_sync(a->ctx.t);
}

/* The engine's prepare for an arm rebuilt every round (its rebuild for the
 * others): a fresh trainer from the same seed, built (and warmed up)
 * before the round times it. */
static int arm_rebuild(void *user)
{
    step_arm *a = user;
    ctx_close(&a->ctx);
    return arm_open(a);
}

/* The engine's resume for a parked arm (TB_ARM_PARKED): the arm alive
 * before it parks, its activations come back, and where its first step
 * would not be one an arm alive throughout runs, one unit runs untimed:
 * with CUDA graphs (that step captures again; the warm-up ran at the
 * build) and on the CPU (that step's first touches of the new memory
 * fault its pages in). On CUDA otherwise the blocks come back from the
 * allocator's cache, touched before, and the step is the same. An epoch's
 * unit is left alone (its loader's epochs are its own; its first step's
 * share is one of many). */
static int arm_resume(void *user)
{
    step_arm *a = user;
    if (!a->ctx.t || !a->ctx.t->parked) /* not built yet: arm_run builds it */
        return TB_OK;
    return unpark_arm(a);
}


typedef struct unit_run {
    tb_step_ctx *c;
    long units;
} unit_run;

static int timed_units(void *arg)
{
    unit_run *u = arg;
    float loss;
    for (long i = 0; i < u->units; i++)
        TB_TRY(run_unit(u->c, &loss));
    return TB_OK;
}

/* The engine's run: `units` units back to back, timed with the backend's
 * events as one span (the trainer is built before, untimed). */
static int arm_run(void *user, long units, double *seconds)
{
    step_arm *a = user;
    TB_TRY(arm_open(a));
    unit_run u = {&a->ctx, units};
    return tb_bench_time_op(a->run->b.be, timed_units, &u, seconds);
}

static int plan_arms(step_run *r)
{
    const tb_step_technique *t = r->tech;
    size_t n = t->n_settings > 0 ? (size_t)t->n_settings : 1;
    int *base = calloc(n, sizeof *base), *timed = calloc(n, sizeof *timed);
    double *peak = calloc(n, sizeof *peak), *kept = calloc(n, sizeof *kept);
    int *graphs = calloc(n, sizeof *graphs);
    int rc = base && timed && peak && kept && graphs
                 ? TB_OK : TB_FAIL(TB_ERR_NOMEM, "out of memory planning arms");
    for (int i = 0; i < t->n_settings && rc == TB_OK; i++) {
        base[i] = t->settings[i].base;
        timed[i] = !r->st[i].na && !r->st[i].alias;
        peak[i] = r->st[i].peak_bytes;
        kept[i] = r->st[i].kept_bytes;
        tb_config c = setting_config(r, i);
        graphs[i] = tb_trainer_graph_settle_steps(&c) > 0;
    }
    if (rc == TB_OK)
        rc = tb_step_plan_make(base, timed, t->n_settings, &r->plan);
    if (rc == TB_OK) {
        /* all alive only where they fit: under --mem-limit when there is one,
         * else in half of host RAM on the CPU (shared with everything else)
         * and 85% of a GPU's memory (its own; the rest for the cuDNN and
         * cuBLAS workspaces a peak may not have counted) */
        double share = strcmp(r->b.info.backend, "cuda") == 0 ? 0.85 : 0.5;
        double limit = r->mem_limit_mib > 0 ? r->mem_limit_mib * 1048576.0
                                             : (double)r->b.info.total_mem * share;
        /* and in what the backend can still allocate now (the CPU's
         * MemAvailable or ulimit -v): under a ulimit, trainers that fit half
         * of RAM ran out of memory in the rounds (batch_size, review) */
        tb_device_info now;
        if (r->mem_limit_mib <= 0 && r->b.be->device_info(r->b.be, &now) == TB_OK &&
            now.avail_mem > 0 && (double)now.avail_mem < limit)
            limit = (double)now.avail_mem;
        tb_error_clear();
        int n_arms = r->plan.n_arms;
        r->modes = calloc(n_arms > 0 ? (size_t)n_arms : 1, sizeof *r->modes);
        if (!r->modes) {
            rc = TB_FAIL(TB_ERR_NOMEM, "out of memory planning %d arms", n_arms);
        } else if (!can_park(r)) {
            for (int a = 0; a < n_arms; a++)
                r->modes[a] = TB_ARM_REBUILT;
            r->n_alone = n_arms;
        } else {
            r->n_alone = tb_step_plan_park(&r->plan, peak, kept, graphs, limit, r->modes);
        }
    }
    free(base);
    free(timed);
    free(peak);
    free(kept);
    free(graphs);
    return rc;
}

/* A compared setting whose baseline is not timed (out of memory in the
 * check) is an n/a row saying so. */
static void orphans_na(step_run *r)
{
    const tb_step_technique *t = r->tech;
    for (int i = 0; i < t->n_settings; i++) {
        setting_state *s = &r->st[i];
        if (s->na || s->alias || r->plan.set_arm[i] >= 0)
            continue;
        char base_why[128]; /* its own copy: i is never its base, the compiler cannot know */
        snprintf(base_why, sizeof base_why, "%.100s", r->st[t->settings[i].base].why);
        s->na = 1;
        snprintf(s->why, sizeof s->why, "not timed: its baseline %.40s is n/a (%.100s)",
                 t->settings[t->settings[i].base].name, base_why);
    }
}

static int make_arms(step_run *r)
{
    int n = r->plan.n_arms;
    r->arms = calloc((size_t)n, sizeof *r->arms);
    r->tarms = calloc((size_t)n, sizeof *r->tarms);
    if (!r->arms || !r->tarms)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory for %d arms", n);
    for (int a = 0; a < n; a++) {
        step_arm *sa = &r->arms[a];
        sa->run = r;
        sa->idx = r->plan.arm_setting[a];
        sa->mode = r->modes[a];
        int rebuilt = sa->mode == TB_ARM_REBUILT;
        char *name = malloc(16);
        if (!name)
            return TB_FAIL(TB_ERR_NOMEM, "out of memory for arm names");
        /* the names the Google Benchmark JSON had before the rounds */
        snprintf(name, 16, "%s%02d", r->plan.arm_aa[a] ? "again" : "set", sa->idx);
        /* rebuilt every round (prepare), or kept alive and rebuilt every
         * rounds_per_build rounds (rebuild), unparked before each of its
         * repetitions where parked (resume) */
        r->tarms[a] = (tb_arm){name, r->plan.arm_base[a], r->plan.arm_aa[a], arm_run,
                               rebuilt ? arm_rebuild : NULL, sa, rebuilt ? NULL : arm_rebuild,
                               sa->mode == TB_ARM_PARKED ? arm_resume : NULL,
                               r->st[sa->idx].build_s};
        /* its check's trainer, parked (adopts), as its first build: not
         * where it is rebuilt every round */
        tb_step_ctx *held = &r->st[sa->idx].held[r->plan.arm_aa[a] ? 1 : 0];
        if (held->t && !rebuilt) {
            sa->ctx = *held;
            memset(held, 0, sizeof *held);
            r->n_held--;
            r->adopted++;
        }
    }
    release_held(r); /* the rest: settings not timed, arms rebuilt every round */
    return TB_OK;
}

static void free_arms(step_run *r)
{
    release_held(r);
    r->adopted = 0;
    for (int a = 0; r->arms && a < r->plan.n_arms; a++)
        ctx_close(&r->arms[a].ctx);
    for (int a = 0; r->tarms && a < r->plan.n_arms; a++)
        free((char *)r->tarms[a].name);
    free(r->arms);
    free(r->tarms);
    free(r->modes);
    r->arms = NULL;
    r->tarms = NULL;
    r->modes = NULL;
    r->n_alone = 0;
    r->live = NULL;
    tb_step_plan_free(&r->plan);
}

/* FNV-1a of the technique's name: a fixed seed per technique, so a run is
 * repeatable unless --seed says otherwise. */
static uint64_t name_seed(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return h;
}

/* The half-width the rounds aim at: --target, else the profile's. */
static double target_of(const step_run *r)
{
    return r->target > 0 ? r->target : r->prof.target;
}

static void rounds_config(const step_run *r, tb_rounds_cfg *c)
{
    const step_profile *p = &r->prof;
    double declared = tb_bench_budget_left(&r->b);
    int cap = r->max_rounds > 0 ? r->max_rounds : p->max_rounds;
    *c = (tb_rounds_cfg){
        .min_rep_s = r->min_rep > 0 ? r->min_rep : p->min_rep_s,
        .min_rounds = r->b.reps,
        .max_rounds = cap < r->b.reps ? r->b.reps : cap,
        .target_half_width = target_of(r),
        /* --budget: split evenly between the workloads; the technique's
         * budget: what is left of it, between the workloads still to time */
        .budget_s = r->budget > 0 ? r->budget / (r->n_wl > 0 ? r->n_wl : 1)
                    : declared > 0 ? declared / (r->wl_left > 0 ? r->wl_left : 1)
                                   : p->budget_s / (r->n_wl > 0 ? r->n_wl : 1),
        .warmup_max_s = p->warmup_max_s,
        .seed = r->seed != 0 ? (uint64_t)r->seed : name_seed(r->tech->desc.name),
        .rounds_per_build = r->rounds_per_build > 0 ? r->rounds_per_build
                                                    : p->rounds_per_build[r->tech->metric],
    };
}

/* Runs the experiment; Google Benchmark's JSON of every round is kept as
 * results/<device>/<technique>.gbench.json (written under a temporary
 * name, renamed once complete). */
static int time_all(step_run *r, tb_rounds_result *res)
{
    char path[PATH_MAX + 64], name[96], tmp[PATH_MAX + 96];
    tb_rounds_cfg cfg;
    rounds_config(r, &cfg);
    /* one file per workload when there are several: <technique>.<workload>.gbench.json */
    if (r->n_wl > 1)
        snprintf(name, sizeof name, "%s.%s.gbench.json", r->b.technique, r->wl_label);
    else
        snprintf(name, sizeof name, "%s.gbench.json", r->b.technique);
    TB_TRY(tb_outdir_join(r->b.od.results, name, path, sizeof path));
    TB_TRY(tb_bench_reserve_tmp(path, tmp, sizeof tmp));
    cfg.gbench_json = tmp;
    char how[256];
    int parked = 0;
    for (int a = 0; a < r->plan.n_arms; a++)
        parked += r->arms[a].mode == TB_ARM_PARKED;
    if (parked > 0)
        snprintf(how, sizeof how, "%d of them parked between their repetitions, their "
                 "activations freed, one unparked at a time: not all fit in memory whole; "
                 "trainers rebuilt every %d rounds", parked, cfg.rounds_per_build);
    else if (r->n_alone == r->plan.n_arms)
        snprintf(how, sizeof how, "rebuilt every round");
    else if (r->n_alone > 0)
        snprintf(how, sizeof how, "%d of them rebuilt every round, one at a time, the others "
                 "every %d rounds: not all fit in memory", r->n_alone, cfg.rounds_per_build);
    else
        snprintf(how, sizeof how, "trainers rebuilt every %d rounds", cfg.rounds_per_build);
    size_t at = strlen(how);
    if (r->adopted > 0)
        snprintf(how + at, sizeof how - at, "; %d first built for their checks and kept",
                 r->adopted);
    fprintf(stderr, "%s: %s: timing %d arms (%s) in rounds of >= %g s repetitions: %d..%d "
            "rounds, target +-%g%%, budget %g s, seed %#llx\n", r->tech->desc.name, r->wl_label,
            r->plan.n_arms, how, cfg.min_rep_s, cfg.min_rounds, cfg.max_rounds,
            100 * cfg.target_half_width, cfg.budget_s, (unsigned long long)cfg.seed);
    int rc = tb_rounds_run(&cfg, r->tarms, r->plan.n_arms, res);
    if (rc == TB_OK)
        fprintf(stderr, "%s: %s: %d rounds in %.1f s, stopped by %s; load %.2f%s\n",
                r->tech->desc.name, r->wl_label, res->rounds, res->seconds,
                tb_rounds_stop_name(res->stop), res->load_avg,
                res->busy ? " (busy machine)" : "");
    return tb_bench_finish_tmp(rc, tmp, path);
}

/* ---- rows ---- */

/* Seconds of one unit as reported: per 1000 samples when the entry asks
 * (its settings differ in batch size, so a step is not the same work). */
static double report_scale(const step_run *r, int i)
{
    tb_config c = setting_config(r, i);
    return r->tech->per_sample ? 1000.0 / ((double)c.batch_size * c.accum_steps) : 1.0;
}

/* Arm a's per-round times as reported, into out (its rounds). */
static void arm_times(const step_run *r, const tb_rounds_result *res, int a, double *out)
{
    const tb_rounds_arm_result *ar = &res->arms[a];
    double k = report_scale(r, r->plan.arm_setting[a]);
    for (int i = 0; i < ar->rounds; i++)
        out[i] = ar->seconds[i] * k;
}

/* Arm a's comparison (the engine's, per unit, over builds) as reported:
 * per 1000 samples when the entry asks, which scales the speedup and its
 * interval by the ratio of the two settings' scales (widths and mde are
 * relative: unchanged). */
static tb_paired arm_cmp(const step_run *r, const tb_rounds_result *res, int a)
{
    tb_paired p = res->arms[a].cmp;
    double k = report_scale(r, r->plan.arm_setting[r->plan.arm_base[a]]) /
               report_scale(r, r->plan.arm_setting[a]);
    p.speedup *= k;
    p.lo *= k;
    p.hi *= k;
    return p;
}

/* Only where determinism was a choice: the CPU's algorithms all repeat. */
static const char *deterministic_note(const step_run *r)
{
    return r->base_cfg.cudnn_deterministic && strcmp(r->b.be->name, "cuda") == 0
               ? "; deterministic conv algorithms (cudnn.deterministic): the check is bitwise"
               : "";
}

/* The update witness of setting s against its baseline b (update_distance):
 * a dead or wrong layer moves the distance by its share of the update, a
 * wrong scale of the whole update by O(1). Judged past tol, or past
 * TB_CONTROL_K times the first update's own rounding control (s's
 * upd_control, witness_controls) where that is more. Not judged, reported:
 * the tensor furthest from its own norm: a batch-norm beta's gradient is a
 * sum that cancels, so bf16's rounding of the dy it sums can move it by
 * tens of percent (0.44 in the reduced ResNet-50) where the whole update
 * moves by 1e-2. set_check asks only where the loss check is weak. Writes
 * "; first update: ..." to msg; returns 1 when the distance is past the
 * tolerance. A setting whose first step changed no weight is not judged
 * when its loss scaler skipped steps of that check (fp16's, GradScaler's);
 * without a skipped step it DIFFERS: it did not train. */
static int update_verdict(const setting_state *b, const setting_state *s, double tol,
                          char *msg, size_t cap, double *dist_out, double *tol_out)
{
    if (!b->nupd || !s->nupd || tol <= 0)
        return 0;
    int at;
    double worst, dist = update_distance(b, s, &at, &worst);
    if (dist == -3 && s->skipped_again == 0) {
        /* no loss scaler skipped a step of the check that recorded it: the
         * setting did not train (or its update was nan) */
        snprintf(msg, cap, "; first update: none, and no step of its check was skipped: this "
                 "setting's first step left its weights as they were (or made them nan)");
        *dist_out = INFINITY;
        *tol_out = tol;
        return 1;
    }
    if (dist == -3)
        snprintf(msg, cap, "; first update: none (a skipped step), not compared");
    if (dist == -2 || dist == -3)
        return 0;
    if (dist < 0) {
        snprintf(msg, cap, "; first update: other parameters (%d tensors vs %d), not compared",
                 b->nupd, s->nupd);
        return 0;
    }
    if (at < 0) { /* every tensor's norm the same to the last bit */
        snprintf(msg, cap, "; first update: the same per-tensor norms (%d tensors)", s->nupd);
        return 0;
    }
    char widened[128] = "";
    if (TB_CONTROL_K * s->upd_control > tol) {
        tol = TB_CONTROL_K * s->upd_control;
        snprintf(widened, sizeof widened, ", tolerance %.2g (from nudged weights its own "
                 "moved %.2g, the farthest of %d draw%s)", tol, s->upd_control, s->upd_draws,
                 s->upd_draws == 1 ? "" : "s");
    }
    int bad = dist > tol;
    snprintf(msg, cap, "; first update: per-tensor norms %.2g apart%s%s (furthest: tensor %d, %s, "
             "%.2g)", dist, widened, bad ? ", past the tolerance" : "", at, b->upd_name[at], worst);
    *dist_out = dist;
    *tol_out = tol;
    return bad;
}

static void set_check(step_run *r, int i, tb_result_row *row)
{
    const tb_step_technique *t = r->tech;
    const setting_state *s = &r->st[i];
    int base = t->settings[i].base;
    if (t->not_comparable && base != i) {
        row->correctness = TB_CORRECT_NA;
        snprintf(row->note, sizeof row->note, "%s%s%s", t->not_comparable, s->note[0] ? "; " : "",
                 s->note);
        return;
    }
    tb_compare cmp;
    const setting_state *sb = &r->st[base];
    double ref = sb->loss, got = base == i ? s->loss_again : s->loss;
    double tol = loss_tolerance(r, base), moved = 0;
    char control[200] = "";
    if (t->tolerance > 0 && sb->control) {
        moved = rel_diff(ref, sb->loss_control);
        if (tol > t->tolerance) {
            snprintf(control, sizeof control,
                     "; tolerance widened to %.3g (%g x the rounding control: from weights "
                     "moved by %.1e, the farthest of %d draws, the baseline itself ended %.3g "
                     "away)", tol, TB_CONTROL_K, TB_CONTROL_NUDGE, TB_CONTROL_RUNS, moved);
        } else {
            snprintf(control, sizeof control,
                     "; rounding control: from weights moved by %.1e, the farthest of %d draws, "
                     "the baseline ended %.3g away", TB_CONTROL_NUDGE, TB_CONTROL_RUNS, moved);
        }
    }
    /* A baseline whose loss diverged (nan, inf), or whose rounding control
     * did or moved it past TB_CHECK_TOL_MAX / TB_CONTROL_K: its loss cannot
     * tell a setting from it (nan against nan compared as equal, and any
     * loss passes an unbounded tolerance). */
    if (!isfinite(ref) || (base == i && !isfinite(got)) || tol > TB_CHECK_TOL_MAX) {
        row->correctness = TB_CORRECT_NA;
        if (!isfinite(ref) || !isfinite(got))
            snprintf(row->note, sizeof row->note, "not checked: the baseline's loss at step %d "
                     "is %g (training diverged at this recipe), so the check cannot tell this "
                     "setting's result from the baseline's (this setting's: %g)%s%s",
                     sb->steps, (double)(isfinite(ref) ? got : ref), (double)got,
                     s->note[0] ? "; " : "", s->note);
        else
            snprintf(row->note, sizeof row->note, "not checked: rounding alone (the baseline "
                     "from weights moved by %.1e) moved the baseline's loss at step %d by %.3g%s, "
                     "so a tolerance of %g times that would pass any result (this setting's loss "
                     "%.7g vs %.7g)%s%s", TB_CONTROL_NUDGE, sb->steps, moved,
                     isfinite(sb->loss_control) ? "" : " (it diverged)", TB_CONTROL_K,
                     (double)got, (double)ref, s->note[0] ? "; " : "", s->note);
        return;
    }
    double dead = sb->classes > 1 ? log((double)sb->classes) : 0;
    int is_weak = weak_check(r, base);
    char weak[200] = "";
    if (is_weak)
        snprintf(weak, sizeof weak,
                 "; weak loss check: a model predicting nothing (uniform over %d) scores %.4g, "
                 "within this tolerance", sb->classes, dead);
    if (tb_compare_values(ref, got, tol, &cmp) != TB_OK) {
        tb_error_clear();
        return;
    }
    /* Where the loss cannot fail, the first update judges too. Not
     * elsewhere: bf16 moves a small-batch BN net's update norms by up to
     * 25% (the tiny ResNet-50) while its loss stays within tolerance. */
    char upd[256] = "";
    const char *against = base == i ? "baseline run again" : "baseline";
    double upd_dist = 0, upd_tol = 0;
    if (is_weak && base != i &&
        update_verdict(sb, s, t->tolerance, upd, sizeof upd, &upd_dist, &upd_tol)) {
        /* the witness decided: its distance and tolerance in the columns */
        cmp.verdict = TB_MATCH_DIFFERS;
        cmp.max_rel = upd_dist;
        tol = upd_tol;
        against = "baseline's first update (per-tensor norms)";
    }
    if (base != i && s->own_verdict) {
        /* the technique's own check exercised what the steps could not */
        cmp = s->own;
        tol = s->own.tol;
        against = s->own_against;
    }
    row->correctness = tb_bench_correctness(cmp.verdict);
    row->max_rel_err = cmp.max_rel;
    if (tol > 0)
        row->tolerance = tol;
    snprintf(row->checked_against, sizeof row->checked_against, "%s", against);
    char scaler[240];
    loss_note(s, scaler, sizeof scaler);
    /* the setting's own note before the technique's tolerance text, the
     * same on every row and the first to go when the note is full */
    snprintf(row->note, sizeof row->note, "loss at step %d %.7g vs %.7g%s%s%s%s%s%s%s%s%s",
             s->steps, got, ref, scaler, upd, weak, control, s->note[0] ? "; " : "", s->note,
             t->tolerance > 0 ? "; tolerance: " : "", t->tolerance > 0 ? t->tolerance_why : "",
             deterministic_note(r));
}

static double samples_per_unit(const step_run *r, int i)
{
    tb_config c = setting_config(r, i);
    if (r->tech->per_sample)
        return 1000.0;
    if (r->tech->metric == TB_METRIC_EPOCH)
        return (double)r->train->n;
    if (r->st[i].unit_samples > 0)
        return r->st[i].unit_samples;
    return (double)c.batch_size * c.accum_steps;
}

/* The paired timings behind a row: its per-round times (n_me rounds) and,
 * for a compared row, its reference's in the same rounds; the baseline's
 * A/A copy's and that copy's reference (n_aa rounds). */
typedef struct row_times {
    int n_me, n_aa;
    double *me;          /* (n_me) the row's per-round unit times, as reported */
    tb_paired cmp, aa;   /* the engine's comparisons, over builds (rounds.h), as
                            reported; rounds 0: none (cmp: a baseline row) */
    tb_rounds_stop stop; /* why the row's arm stopped */
} row_times;

static int times_of(const step_run *r, const tb_rounds_result *res, int i, row_times *t)
{
    const tb_step_plan *p = &r->plan;
    int b = r->tech->settings[i].base, am = p->set_arm[i], aa = p->aa_arm[b];
    t->n_me = res->arms[am].rounds;
    t->n_aa = aa >= 0 ? res->arms[aa].rounds : 0;
    t->stop = res->arms[am].stop;
    if (am != p->set_arm[b])
        t->cmp = arm_cmp(r, res, am);
    if (aa >= 0)
        t->aa = arm_cmp(r, res, aa);
    if (am == p->set_arm[b] && aa >= 0)
        t->stop = res->arms[aa].stop; /* a baseline row reads its A/A pair */
    t->me = calloc((size_t)t->n_me + 1, sizeof *t->me);
    if (!t->me)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory for %d rounds", t->n_me);
    arm_times(r, res, am, t->me);
    return TB_OK;
}

/* Median, its interval, min and max of the per-round unit times, as the
 * CSV had them for Google Benchmark's repetitions: reps = rounds. */
static int fill_times(tb_result_row *row, const row_times *t, int epoch)
{
    gb_run run = {.name = row->setting, .repetitions = t->n_me, .seconds = t->me};
    return tb_bench_fill_timing(row, &run, epoch ? 1.0 : 1e3, epoch ? "s" : "ms");
}

/* The paired columns. A compared row: its speedup over the baseline with
 * the paired interval, the verdict (lib/core/stats.h: the noise counted
 * once), the minimum detectable effect, and its baseline's noise floor. The
 * baseline's row: its A/A pair's noise floor and minimum detectable effect.
 * noise_floor is the farthest the A/A interval strays from 1
 * (tb_stats_paired_noise_floor), as it was before the rounds. Both rows: flagged
 * unreliable when the A/A interval excludes 1. */
static int fill_paired(tb_result_row *row, const row_times *t, int baseline)
{
    if (t->aa.rounds < 2 || (!baseline && t->cmp.rounds < 2))
        return TB_FAIL(TB_ERR_INTERNAL, "%s: fewer than 2 paired rounds", row->setting);
    const tb_paired *aa = &t->aa, *cmp = &t->cmp;
    row->noise_floor = tb_stats_paired_noise_floor(aa);
    row->rounds = baseline ? t->n_aa : t->n_me;
    if (baseline) {
        tb_stats_paired_verdict(aa, aa, &row->unreliable);
        row->mde = aa->mde;
        return TB_OK;
    }
    row->speedup = cmp->speedup;
    row->speedup_ci_low = cmp->lo;
    row->speedup_ci_high = cmp->hi;
    row->mde = cmp->mde;
    row->timing_verdict =
        tb_bench_timing_verdict(tb_stats_paired_verdict(cmp, aa, &row->unreliable));
    return TB_OK;
}

/* The rate columns: throughput in the workload's unit (samples/s; images/s
 * for ResNet-50, tokens/s for GPT-2), the model's FLOP rate, and its MFU
 * against the GEMM ceiling of the setting's precision (gemm_ceiling.h). */
static int set_rates(step_run *r, int i, tb_result_row *row, double samples_per_s)
{
    tb_config c = setting_config(r, i);
    TB_TRY(tb_config_validate(&c));
    row->rate = samples_per_s;
    snprintf(row->rate_unit, sizeof row->rate_unit, "samples/s");
    if (c.model == TB_MODEL_RESNET50)
        snprintf(row->rate_unit, sizeof row->rate_unit, "images/s");
    if (c.model == TB_MODEL_GPT2) {
        row->rate = samples_per_s * c.context;
        snprintf(row->rate_unit, sizeof row->rate_unit, "tokens/s");
    }
    double fps = r->st[i].flops_per_sample;
    if (!(fps > 0) || !isfinite(samples_per_s))
        return TB_OK;
    row->model_gflops = samples_per_s * fps / 1e9;
    int n = r->b.profile == TB_PROFILE_TINY ? 128
            : strcmp(r->b.info.backend, "cuda") == 0 ? 8192 : 1024;
    char how[96];
    /* the precision of most of its FLOPs: a convolution net's (99% of
     * ResNet-50's) are its convolutions', TF32 by cuDNN's default */
    int tf32 = c.model == TB_MODEL_GPT2 ? c.tf32 : tb_config_conv_tf32(&c, r->b.info.backend);
    TB_TRY(tb_gemm_ceiling(r->b.be, c.amp_dtype, tf32, n, &row->gemm_ceiling, how, sizeof how));
    if (isfinite(row->gemm_ceiling) && row->gemm_ceiling > 0)
        row->mfu = row->model_gflops / row->gemm_ceiling;
    return TB_OK;
}

/* Puts text and "; " before row's note, cut to the note's size. */
static void prefix_note(tb_result_row *row, const char *text)
{
    char old[sizeof row->note];
    memcpy(old, row->note, sizeof old);
    int n = snprintf(row->note, sizeof row->note, "%s%s", text, old[0] ? "; " : "");
    if (n >= 0 && (size_t)n < sizeof row->note)
        memcpy(row->note + n, old, sizeof row->note - (size_t)n - 1);
    row->note[sizeof row->note - 1] = '\0';
}

static int add_row(step_run *r, const tb_rounds_result *res, int i)
{
    const tb_step_technique *t = r->tech;
    const tb_step_setting *s = &t->settings[i];
    const char *metric = t->per_sample                 ? "time per 1000 samples"
                         : t->metric_name              ? t->metric_name
                         : t->metric == TB_METRIC_EPOCH ? "epoch time"
                                                        : "step time";
    if (r->st[i].na) {
        TB_TRY(tb_results_add_na(&r->b.res, t->desc.name, r->b.info.backend, r->b.info.name,
                                 s->name, metric, r->st[i].why));
        tb_result_row *na = &r->b.res.rows[r->b.res.n - 1];
        snprintf(na->workload, sizeof na->workload, "%s", r->wl_label);
        return TB_OK;
    }
    /* the setting whose check and timing the row gives: its own, or the one
     * it repeats (same_as) */
    int d = r->st[i].alias ? r->st[i].alias - 1 : i;
    tb_result_row row;
    row_times tm = {0};
    int epoch = t->metric == TB_METRIC_EPOCH;
    tb_bench_row(&r->b, &row, s->name, s->base == i, t->param_name, s->param, metric);
    TB_TRY(times_of(r, res, d, &tm));
    int rc = fill_times(&row, &tm, epoch);
    if (rc == TB_OK)
        rc = fill_paired(&row, &tm, s->base == i);
    free(tm.me);
    TB_TRY(rc);
    snprintf(row.stopped_by, sizeof row.stopped_by, "%s", tb_rounds_stop_name(tm.stop));
    row.busy = res->busy;
    row.load_avg = res->load_avg;
    row.xcore_ns = res->xcore_ns;
    row.memory_bytes = r->st[d].peak_bytes;
    snprintf(row.workload, sizeof row.workload, "%s", r->wl_label);
    TB_TRY(set_rates(r, d, &row, samples_per_unit(r, d) / (row.median / (epoch ? 1.0 : 1e3))));
    set_check(r, d, &row);
    if (d != i) {
        char what[160];
        snprintf(what, sizeof what, "the same configuration as '%.60s' on this workload: one "
                 "check and one timing, given in both rows", t->settings[d].name);
        prefix_note(&row, what);
    }
    if (s->base != i && tm.cmp.between > 0) {
        size_t len = strlen(row.note);
        int pooled = tm.cmp.between_df > (double)tm.cmp.builds - 1;
        /* an arm stops on its target with the pool of that round; the final
         * pool, with the builds of the arms that ran on, can be wider */
        int after = tm.stop == TB_STOP_TARGET && tm.cmp.half_width > target_of(r);
        snprintf(row.note + len, sizeof row.note - len, "%s%zu build%s; builds differ by sd "
                 "%.1f%% (%s): interval widened%s", len ? "; " : "", tm.cmp.builds,
                 tm.cmp.builds == 1 ? "" : "s", 100 * tm.cmp.between,
                 pooled ? "pooled over the arms' builds" : "its own",
                 after ? ", after it had stopped on its target (the spread pooled at the end, "
                         "with the builds of the arms that ran on, is wider than when it stopped)"
                       : "");
    }
    if (s->base == i && r->wl != TB_WL_SMALL_CNN) {
        prefix_note(&row, r->wl_desc);
        int batch = setting_config(r, i).batch_size;
        if (batch != r->base_cfg.batch_size) { /* checkpointing's 4x: not the line's batch */
            char what[96];
            snprintf(what, sizeof what, "this row's batch: %d (the workload line gives the "
                     "technique's base batch)", batch);
            prefix_note(&row, what);
        }
    }
    int workers = s->base == i && loader_workers_of(r) > 0 ? setting_config(r, i).workers : 0;
    if (workers > 0) {
        char what[160];
        snprintf(what, sizeof what, "loader: %d worker threads build the batches ahead of the "
                 "step (DataLoader num_workers=%d)", workers, workers);
        prefix_note(&row, what);
    }
    if (t->row_hook)
        t->row_hook(i, &row);
    return tb_results_add(&r->b.res, &row);
}

/* Series in a technique's figure: as many as the plot has styles (8:
 * tb_plot_colors), enough for the waterfall's two sweeps on each of its
 * three workloads (at 4, its GPT-2 series were left out). */
#define MAX_PLOT_GROUPS 8

/* The model part of a workload label ("gpt2" of "gpt2-reduced-synthetic"),
 * in a static buffer: the plot's series names copy it at once. */
static const char *workload_model(const char *label)
{
    static char model[48];
    size_t n = strcspn(label, "-");
    snprintf(model, sizeof model, "%.*s", (int)(n < sizeof model ? n : sizeof model - 1), label);
    return model;
}

/* Index of row's series among names[0..*n), added when new; -1 when there
 * are already MAX_PLOT_GROUPS. A series is a param_name, and with several
 * workloads the workload's model too ("gpt2: fused"). */
static int plot_group(char names[][96], size_t *n, const tb_result_row *row, int n_wl)
{
    char name[96];
    if (n_wl > 1)
        snprintf(name, sizeof name, "%.40s: %.40s", workload_model(row->workload),
                 row->param_name);
    else
        snprintf(name, sizeof name, "%s", row->param_name);
    for (size_t g = 0; g < *n; g++)
        if (strcmp(names[g], name) == 0)
            return (int)g;
    if (*n == MAX_PLOT_GROUPS)
        return -1;
    snprintf(names[*n], 96, "%s", name);
    return (int)(*n)++;
}

/* Speedup over the baseline per setting (time 0) or the median time
 * itself (time 1), with its 95% interval: one series per param_name, so
 * rows that sweep different things (the waterfall's cumulative stages and
 * its leave-one-out) are not joined by one line. The baseline is drawn
 * too (at 1x in the speedup figure), so a sweep shows where it starts. */
static int plot_rows(step_run *r, int time)
{
    size_t cap = (size_t)r->tech->n_settings, ng = 0, count[MAX_PLOT_GROUPS] = {0};
    char names[MAX_PLOT_GROUPS][96];
    const char *unit = "", *metric = "time";
    int no_ci = 0; /* time points without an interval */
    double *buf = calloc(cap * 4 * MAX_PLOT_GROUPS, sizeof *buf);
    if (!buf)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory for the plot");
    for (size_t i = 0; i < r->b.res.n; i++) {
        const tb_result_row *row = &r->b.res.rows[i];
        int base = row->is_baseline && !isnan(row->median);
        int shown = time ? !isnan(row->median) : base || !isnan(row->speedup);
        int g = shown ? plot_group(names, &ng, row, r->n_wl) : -1;
        if (g < 0 || count[g] >= cap)
            continue;
        double *x = buf + (size_t)g * 4 * cap;
        size_t k = count[g]++;
        x[k] = row->param_value;
        if (time) {
            x[cap + k] = row->median, x[2 * cap + k] = row->ci_low;
            x[3 * cap + k] = row->ci_high, unit = row->unit, metric = row->metric;
            no_ci += isnan(row->ci_low) || isnan(row->ci_high);
        } else {
            x[cap + k] = base ? 1 : row->speedup;
            x[2 * cap + k] = base ? 1 : row->speedup_ci_low;
            x[3 * cap + k] = base ? 1 : row->speedup_ci_high;
        }
    }
    tb_plot_series sp[MAX_PLOT_GROUPS];
    for (size_t g = 0; g < ng; g++) {
        const double *x = buf + g * 4 * cap;
        sp[g] = (tb_plot_series){ng > 1 ? names[g] : time ? "median" : "speedup", x, x + cap,
                                 x + 2 * cap, x + 3 * cap, count[g]};
    }
    int rc = TB_OK;
    if (ng > 0) {
        char title[256], xl[96], yl[96], name[128];
        /* a median's interval needs 6 repetitions (harness.c): without
         * one a point has no bar, and the title says why */
        snprintf(title, sizeof title, "%s: %s, %s (median, 95%% CI%s)", r->tech->desc.name,
                 time ? metric : "speedup over the technique off", r->b.info.name,
                 no_ci ? "; no bar: under 6 rounds" : "");
        snprintf(xl, sizeof xl, "%s", r->tech->param_name);
        snprintf(yl, sizeof yl, "%s (%s)", metric, unit);
        snprintf(name, sizeof name, "%s%s", r->tech->desc.name, time ? "_time" : "");
        tb_plot_hline one = {"no change", 1.0};
        tb_plot p = {title, xl, time ? yl : "speedup (x)", 0, 0, sp, ng, time ? NULL : &one,
                     time ? 0 : 1, 0};
        rc = tb_plot_render(&p, r->b.od.plots, name, TB_PLOT_ALL);
    }
    free(buf);
    return rc;
}

/* ---- main ---- */

/* The workload's data: the Fashion-MNIST subset, or the big models'
 * synthetic images or tokens (lib/train/train.h), shared by its settings. */
static int open_data(step_run *r)
{
    tb_config c = r->base_cfg;
    if (r->wl == TB_WL_SMALL_CNN) {
        TB_TRY(tb_dataset_open_fashion_mnist(c.data_dir, TB_SPLIT_TRAIN, (long)c.data_limit,
                                             &r->train));
        return tb_dataset_open_fashion_mnist(c.data_dir, TB_SPLIT_TEST, (long)c.test_limit,
                                             &r->test);
    }
    TB_TRY(tb_config_validate(&c));
    TB_TRY(tb_train_open_split(&c, TB_SPLIT_TRAIN, &r->train));
    return tb_train_open_split(&c, TB_SPLIT_TEST, &r->test);
}

/* The baseline row's remark on a big model: its configuration and FLOP
 * shares beside the full model's (tb_workload_full_share). */
static void describe_workload(step_run *r)
{
    tb_config c = r->base_cfg;
    r->wl_desc[0] = '\0';
    if (r->wl == TB_WL_SMALL_CNN || tb_config_validate(&c) != TB_OK) {
        tb_error_clear();
        return;
    }
    tb_flops f;
    if (tb_workload_flops(&c, r->b.be, &f) != TB_OK) {
        tb_error_clear();
        return;
    }
    char cfg[96];
    tb_workload_describe(&c, cfg, sizeof cfg);
    size_t at = (size_t)snprintf(r->wl_desc, sizeof r->wl_desc, "%s%s; FLOP shares", r->wl_fit,
                                 cfg);
    for (int k = 0; k < TB_FLOP_FAMILIES && at < sizeof r->wl_desc; k++) {
        double here = tb_flops_share(&f, (tb_flop_family)k);
        double full = tb_workload_full_share((tb_workload)r->wl, (tb_flop_family)k);
        if (here < 0.0005 && full < 0.0005)
            continue;
        at += (size_t)snprintf(r->wl_desc + at, sizeof r->wl_desc - at, " %s %.1f%% (full %.1f%%)",
                               tb_flops_family_name((tb_flop_family)k), 100 * here, 100 * full);
    }
    fprintf(stderr, "%s: %s: %s\n", r->tech->desc.name, r->wl_label, r->wl_desc);
}

static int time_and_report(step_run *r)
{
    const tb_step_technique *t = r->tech;
    tb_rounds_result res = {0};
    TB_TRY(plan_arms(r));
    orphans_na(r);
    int rc = make_arms(r);
    /* no arm: every setting is n/a (its baseline ran out of memory), rows say why */
    if (rc == TB_OK && r->plan.n_arms > 0)
        rc = time_all(r, &res);
    /* the trainers go before the rows: nothing below needs them */
    for (int a = 0; r->arms && a < r->plan.n_arms; a++)
        ctx_close(&r->arms[a].ctx);
    for (int i = 0; i < t->n_settings && rc == TB_OK; i++)
        rc = add_row(r, &res, i);
    tb_rounds_result_free(&res);
    return rc;
}

/* The steps of a big model's check pass per profile (a reduced step lasts
 * tenths of a second on 2 cores; a tiny one milliseconds). */
static const int big_check_steps[3] = {
    [TB_PROFILE_DEFAULT] = 3, [TB_PROFILE_FULL] = 10, [TB_PROFILE_TINY] = 5};

/* The gpu profile's check pass on the real models: 3 steps, not full's 10.
 * On an H100, two fp32 ResNet-50 runs that differed only in cuDNN's
 * algorithms ended 8% apart after 10 steps at the recipe's learning rate
 * (results/gpu-h100-2026-11-24): ten steps witness SGD's amplification of
 * any rounding, not the setting. Three still see the backward and the
 * optimizer (steps 2 and 3 run on updated weights), and cost a third. */
#define GPU_CHECK_STEPS 3

/* The check's steps where a setting that runs here captures CUDA graphs:
 * at least two replays past its settling (tb_trainer_graph_settle_steps),
 * else its 3 check steps would all be warm-up launches and its "exact"
 * would compare launches with launches; every setting of the workload
 * runs as many, so that their losses compare. */
static int graph_check_steps(const step_run *r, int steps)
{
    const tb_step_technique *t = r->tech;
    for (int i = 0; i < t->n_settings; i++) {
        if (t->na_reason && t->na_reason(r->b.info.backend, &t->settings[i]))
            continue;
        tb_config c = setting_config(r, i);
        int settle = tb_trainer_graph_settle_steps(&c);
        if (settle > 0 && steps < settle + 2)
            steps = settle + 2;
    }
    return steps;
}

/* The settings' states of the workload run last (r->st), witnesses too. */
static void free_states(step_run *r)
{
    release_held(r);
    for (int i = 0; r->st && i < r->tech->n_settings; i++)
        free_update(&r->st[i]);
    free(r->st);
    r->st = NULL;
}

static void free_data(step_run *r)
{
    tb_dataset_free(r->train);
    tb_dataset_free(r->test);
    r->train = r->test = NULL;
}

/* The batch-size search's next batch (fits_by_halving), said on stderr and
 * in the rows. */
static void halve_batch(step_run *r, int asked)
{
    int b = r->base_cfg.batch_size;
    fprintf(stderr, "%s: %s: batch %d does not fit in device memory (%s): halving it\n",
            r->tech->desc.name, r->wl_label, b, tb_error_message());
    tb_error_clear();
    r->base_cfg.batch_size = b / 2;
    big_data(r, &r->base_cfg, b / 2);
    snprintf(r->wl_fit, sizeof r->wl_fit, "batch %d of the gpu profile's %d: the largest that "
             "fits (batch-size search); ", b / 2, asked);
}

/* Checks, times and adds the rows of one workload, r->wl. */
static int run_workload(step_run *r)
{
    const tb_step_technique *t = r->tech;
    tb_workload_label((tb_workload)r->wl, (tb_workload_size)r->wl_size, r->wl_label,
                      sizeof r->wl_label);
    if (t->workload_ready)
        t->workload_ready(r->b.info.backend, r->wl);
    base_config(r);
    r->wl_fit[0] = '\0';
    int asked = r->base_cfg.batch_size;
    r->check_steps = r->check_steps_flag > 0           ? r->check_steps_flag
                     : r->wl == TB_WL_SMALL_CNN          ? r->prof.check_steps
                     : r->b.run_profile == TB_PROFILE_GPU ? GPU_CHECK_STEPS
                                                          : big_check_steps[r->b.profile];
    if (r->check_steps_flag <= 0)
        r->check_steps = graph_check_steps(r, r->check_steps);
    for (;;) {
        TB_TRY(open_data(r));
        describe_workload(r);
        free_states(r);
        r->st = calloc((size_t)t->n_settings, sizeof *r->st);
        if (!r->st)
            return TB_FAIL(TB_ERR_NOMEM, "out of memory planning %s", t->desc.name);
        r->base_known = 0;
        int rc = check_all(r);
        if (rc != TB_ERR_DEVICE_OOM || !fits_by_halving(r)) {
            TB_TRY(rc);
            break;
        }
        free_states(r);
        free_data(r);
        halve_batch(r, asked);
    }
    TB_TRY(time_and_report(r));
    free_arms(r);
    free_data(r);
    return TB_OK;
}

static unsigned workload_set(const tb_step_technique *t, int run_profile)
{
    if (run_profile == TB_PROFILE_GPU && t->gpu_workloads)
        return t->gpu_workloads;
    return t->workloads ? t->workloads : TB_WL_BIT(TB_WL_SMALL_CNN);
}

/* The workloads run_profile runs: their count, and their models' names
 * ("resnet50,gpt2") in names. */
static int name_workloads(const tb_step_technique *t, int run_profile, char *names, size_t cap)
{
    unsigned set = workload_set(t, run_profile);
    int n = 0;
    names[0] = '\0';
    for (int w = 0; w < TB_WORKLOADS; w++) {
        if (!(set & TB_WL_BIT(w)))
            continue;
        n++;
        size_t at = strlen(names);
        snprintf(names + at, cap - at, "%s%s", at ? "," : "",
                 tb_workload_model_name((tb_workload)w));
    }
    return n;
}

static int run(step_run *r)
{
    const tb_step_technique *t = r->tech;
    if (r->mem_limit_mib > 0)
        TB_TRY(r->b.be->mem_set_limit(r->b.be, (size_t)(r->mem_limit_mib * 1048576.0)));
    r->wl_size = r->wl_size_flag > 0                 ? r->wl_size_flag - 1
                 : r->b.profile == TB_PROFILE_TINY ? TB_WL_TINY
                 : r->b.run_profile == TB_PROFILE_GPU ? TB_WL_GPU
                 : strcmp(r->b.info.backend, "cuda") == 0 ? TB_WL_FULL
                                                         : TB_WL_REDUCED;
    r->wl_left = r->n_wl;
    for (r->wl = 0; r->wl < TB_WORKLOADS; r->wl++)
        if (workload_set(t, r->b.run_profile) & TB_WL_BIT(r->wl)) {
            TB_TRY(run_workload(r));
            r->wl_left--;
        }
    TB_TRY(tb_bench_save(&r->b));
    TB_TRY(plot_rows(r, 0));
    return plot_rows(r, 1);
}

/* The rounds' flags beyond their ranges (tb_step_main's table): a cap of 0
 * (the profile's) or at least --reps. */
static int check_round_flags(const step_run *r)
{
    if (r->max_rounds != 0 && r->max_rounds < r->b.reps)
        return TB_FAIL(TB_ERR_INVALID, "--max-rounds=%d: at least --reps=%d (or 0: the "
                       "profile's)", r->max_rounds, r->b.reps);
    /* The rounds engine registers and runs each round itself: a
     * --benchmark_* flag (filter, repetitions) would be silently ignored. */
    if (r->b.argc > 1)
        return TB_FAIL(TB_ERR_INVALID, "%s: Google Benchmark's flags do not apply to a step "
                       "technique (its rounds are run by bench/harness/rounds.c); see --help",
                       r->b.argv[1]);
    return TB_OK;
}

/* --workload-size: index 0 auto, else tb_workload_size + 1 */
static const char *const wl_size_names[] = {"auto", "reduced", "full", "tiny", "gpu", NULL};
static const char *const control_names[] = {"auto", "always", "never", NULL};

/* The step harness's own flags (beside tb_bench's common ones), bound to
 * the step_run r: a macro, not a function returning the table, since the
 * ranges are compound literals that live as long as the block that holds
 * the table. */
#define STEP_FLAGS(r) \
        {"mem-limit", TB_FLAG_DOUBLE_AUTO, &(r)->mem_limit_mib, \
         "device memory limit in MiB counted by the backend's allocator (0 = none; " \
         "auto: the technique's for the profile)", NULL, TB_RANGE_MIN(0)}, \
        {"check-steps", TB_FLAG_INT, &(r)->check_steps_flag, \
         "steps of the correctness pass (0 = the profile's)", NULL, TB_RANGE(0, 1000000)}, \
        {"loader-workers", TB_FLAG_INT, &(r)->loader_workers_flag, \
         "loader worker threads that build the batches ahead of the step (-1 = auto: " \
         "4 on a GPU, 0 on the CPU, where the host is the device; techniques of the loader " \
         "set their own)", NULL, TB_RANGE(-1, 64)}, \
        {"target", TB_FLAG_DOUBLE, &(r)->target, \
         "rounds stop once every speedup's 95% interval is within +-this (relative; 0 = the " \
         "profile's, 0.02 by default), or on --budget, or at --max-rounds", NULL, \
         TB_RANGE_HALF_OPEN(0, 0.5)}, \
        {"budget", TB_FLAG_DOUBLE, &(r)->budget, \
         "seconds of warm-up and rounds at most (0 = the technique's for the profile)", NULL, \
         TB_RANGE_MIN(0)}, \
        {"min-rep", TB_FLAG_DOUBLE, &(r)->min_rep, \
         "a repetition lasts at least this many seconds (0 = the profile's)", NULL, \
         TB_RANGE(0, 60)}, \
        {"max-rounds", TB_FLAG_INT, &(r)->max_rounds, \
         "cap of the rounds (0 = the profile's); --reps is their minimum", NULL, \
         TB_RANGE_MIN(0)}, \
        {"seed", TB_FLAG_LONG, &(r)->seed, \
         "seed of the rounds' shuffled orders (0 = one fixed per technique)", NULL}, \
        {"rounds-per-build", TB_FLAG_INT, &(r)->rounds_per_build, \
         "kept-alive trainers are built afresh every this many rounds, and intervals count " \
         "the spread between builds (0 = the profile's: 1 for step times, 4 for epoch times)", \
         NULL, \
         TB_RANGE(0, 100000)}, \
        {"workload-size", TB_FLAG_CHOICE, &(r)->wl_size_flag, \
         "size of the ResNet-50 and GPT-2 workloads (lib/train/workload.h): auto (tiny in the " \
         "tiny profile, gpu in the gpu one, full on CUDA, else reduced), reduced, full (the " \
         "real models), tiny or gpu (the real models at batches 256 and 16, halved until they " \
         "fit)", \
         wl_size_names, NULL}, \
        {"rounding-control", TB_FLAG_CHOICE, &(r)->control_flag, \
         "the correctness pass's rounding control (the baseline again from weights moved by " \
         "7.6e-6; a setting differs only past twice how far that ended): auto (only for a " \
         "baseline with a setting past the technique's tolerance), always, never (the " \
         "declared tolerance alone)", \
         control_names, NULL},

int tb_step_only_flag(const char *arg)
{
    step_run r0 = {0}, *r = &r0;
    const tb_flag f[] = {STEP_FLAGS(r)};
    size_t n = TB_COUNT(f);
    if (strncmp(arg, "--", 2) != 0)
        return 0;
    arg += 2;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(f[i].name);
        /* the two a time-to-accuracy part declares too (waterfall.c) */
        if (!strcmp(f[i].name, "mem-limit") || !strcmp(f[i].name, "check-steps") ||
            strncmp(arg, f[i].name, len) != 0)
            continue;
        if (arg[len] == '=')
            return 1;
        if (arg[len] == '\0')
            return 2;
    }
    return 0;
}

int tb_step_main(const tb_step_technique *tech, int argc, char **argv)
{
    step_run *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "%s: out of memory\n", tech->desc.name);
        return 1;
    }
    r->tech = tech;
    r->mem_limit_mib = TB_FLAG_UNSET;
    r->loader_workers_flag = -1;
    tb_flag extra[] = {STEP_FLAGS(r)};
    size_t nextra = TB_COUNT(extra);
    /* the tiny test learns the workloads from --describe */
    r->desc = tech->desc;
    name_workloads(tech, TB_PROFILE_TINY, r->wl_names, sizeof r->wl_names);
    r->desc.tiny.workloads = r->wl_names;
    name_workloads(tech, TB_PROFILE_GPU, r->wl_gpu_names, sizeof r->wl_gpu_names);
    r->desc.gpu_workloads = r->wl_gpu_names;
    int done = 0;
    int rc = tb_bench_init(&r->b, &r->desc, extra, nextra, argc, argv, &done);
    if (rc == TB_OK && !done)
        rc = check_round_flags(r);
    if (rc == TB_OK && !done) {
        r->prof = step_profiles[r->b.run_profile]; /* gpu: its own row, full's sizes */
        r->n_wl = name_workloads(tech, r->b.run_profile, r->wl_names, sizeof r->wl_names);
        if (tb_flag_unset(r->mem_limit_mib))
            r->mem_limit_mib = tech->mem_limit_mib[r->b.profile];
        rc = run(r);
    }
    free_arms(r);
    tb_dataset_free(r->train);
    tb_dataset_free(r->test);
    free_states(r);
    tb_bench_close(&r->b);
    free(r);
    if (rc != TB_OK)
        return tb_bench_fail(tech->desc.name, rc);
    return 0;
}
