/*
 * train.c - selfcheck's training step checks: one entry per
 * toggle setting in sc_step_checks[], the same few optimizer steps on the
 * backend under test and on the CPU backend, compared by the loss after
 * them (lib/selfcheck/selfcheck.h, tb_step_check). The checks that need two devices
 * or compare two copy paths are in lib/selfcheck/dist.c; parking (the step
 * harness's, between an arm's repetitions) is compared with never parking
 * on the same backend, bitwise, here.
 *
 *   bazel run //bench:selfcheck -- --device=cpu
 *   bazel test //lib/selfcheck:selfcheck_test
 */
#include <stddef.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/status.h"
#include "lib/train/train.h"

#define STEP_TOL SC_STEP_TOL_F32
#define STEP_WHY SC_STEP_WHY_F32

void sc_step_defaults(tb_config *c)
{
    tb_config_defaults(c);
    /* fp32 convolutions: the device's result against the CPU's fp32 at fp32
     * tolerance (PyTorch's default TF32 cuDNN convolutions are checked by
     * the tf32 cases, which turn it on) */
    c->cudnn_tf32 = 0;
    c->dataset = TB_DATA_SYNTHETIC;
    c->data_limit = 256;
    c->test_limit = 64;
    c->batch_size = 32;
    c->max_steps = 4;
    c->lr = 0.01;
    c->seed = 7;
}

int sc_config_loss(tb_backend *be, const tb_config *cfg, int evaluate, double *loss)
{
    tb_config c = *cfg; /* validation resolves recipe values in place */
    tb_epoch_stats es;
    tb_eval_stats ev;
    TB_TRY(tb_trainer_one_epoch(&c, be, NULL, NULL, &es, evaluate ? &ev : NULL));
    *loss = evaluate ? ev.mean_loss : es.mean_loss;
    return TB_OK;
}

static int run_loss(tb_backend *be, void (*tweak)(tb_config *), int evaluate, double *loss)
{
    tb_config c;
    sc_step_defaults(&c);
    tweak(&c);
    return sc_config_loss(be, &c, evaluate, loss);
}

int sc_step_loss(tb_backend *be, void (*tweak)(tb_config *), double *loss)
{
    return run_loss(be, tweak, 0, loss);
}

int sc_on_be_and_cpu(tb_backend *be, int (*loss_of)(tb_backend *, const void *, double *),
                     const void *arg, double *got, double *ref)
{
    tb_backend *cpu;
    TB_TRY(tb_backend_open(TB_DEVICE_CPU, 0, 0, &cpu));
    int rc = loss_of(be, arg, got);
    if (rc == TB_OK)
        rc = loss_of(cpu, arg, ref);
    tb_backend_close(cpu);
    return rc;
}

int sc_ref_repeats(const tb_backend *be, double ref, double again, const char *ref_name,
                   const char *what)
{
    if (memcmp(&ref, &again, sizeof again) == 0)
        return TB_OK;
    return TB_FAIL(TB_ERR_NUMERIC, "two %s runs on %s gave losses %.9g and %.9g: its training "
                   "does not repeat bitwise (a non-deterministic algorithm?), so %s cannot be "
                   "compared bitwise", ref_name, be->name, ref, again, what);
}

typedef struct step_run {
    void (*tweak)(tb_config *);
    int evaluate;
} step_run;

static int step_run_loss(tb_backend *be, const void *arg, double *loss)
{
    const step_run *r = arg;
    return run_loss(be, r->tweak, r->evaluate, loss);
}

/* step_<id>: the default config changed by stmt, on be and on the CPU. */
#define STEP_CHECK(id, evaluate, stmt)                                                  \
    static void tweak_##id(tb_config *c) { (void)c; stmt; }                             \
    static int step_##id(tb_backend *be, double *got, double *ref)                      \
    {                                                                                   \
        static const step_run run = {tweak_##id, evaluate};                             \
        return sc_on_be_and_cpu(be, step_run_loss, &run, got, ref);                     \
    }

STEP_CHECK(default, 0, (void)0)
STEP_CHECK(lars, 0, c->optimizer = TB_OPT_LARS; c->lr = 1.0)
STEP_CHECK(lars_fused, 0, c->optimizer = TB_OPT_LARS; c->lr = 1.0; c->fused_optimizer = 1)
STEP_CHECK(lamb, 0, c->optimizer = TB_OPT_LAMB; c->lr = 0.005)
STEP_CHECK(lamb_fused, 0, c->optimizer = TB_OPT_LAMB; c->lr = 0.005; c->fused_optimizer = 1)
STEP_CHECK(novograd_fused, 0, c->optimizer = TB_OPT_NOVOGRAD; c->fused_optimizer = 1)
STEP_CHECK(anomaly, 0, c->detect_anomaly = 1)
STEP_CHECK(loss_read, 0, c->loss_read_every = 3)
STEP_CHECK(checkpointing, 0, c->checkpointing = 1)
/* --eval-no-grad changes evaluation only: the test loss after the steps. */
STEP_CHECK(eval_no_grad, 1, c->eval_no_grad = 1)

#define STAGED_WHY "the copy does not change the data: bitwise equal"

/* ---- parking (tb_trainer_park): what the step harness does to an arm
 * between its repetitions, and to a check's trainer it keeps for an arm ---- */

/* Past --cuda-graphs' warm-up and capture (3 warm-up micro-batches, the
 * capture, replays), so that a graph is dropped by each park and captured
 * again after each unpark. */
#define PARK_STEPS 7

/* The loss of PARK_STEPS steps of the default config changed by tweak,
 * parked and unparked between every two steps when park is set. */
static int park_loss(tb_backend *be, void (*tweak)(tb_config *), int park, double *loss)
{
    tb_config c;
    sc_step_defaults(&c);
    c.cudnn_deterministic = 1; /* two runs must repeat bitwise to be compared so */
    tweak(&c);
    TB_TRY(tb_config_validate(&c));
    tb_trainer *t;
    TB_TRY(tb_trainer_create(&c, be, &t));
    float l = 0;
    int rc = TB_OK;
    for (int i = 0; i < PARK_STEPS && rc == TB_OK; i++) {
        rc = tb_trainer_step(t, &l);
        if (rc == TB_OK && park && i + 1 < PARK_STEPS)
            rc = tb_trainer_park(t);
        if (rc == TB_OK && park && i + 1 < PARK_STEPS)
            rc = tb_trainer_unpark(t);
    }
    if (rc == TB_OK)
        rc = tb_trainer_sync(t);
    tb_trainer_destroy(t);
    *loss = l;
    return rc;
}

/* Training parked between its steps is the training never parked, to the
 * bit (train.h). Never parked runs twice: a backend whose training does not
 * repeat bitwise could not tell a park that lost state from that. */
static int parked_vs_never(tb_backend *be, void (*tweak)(tb_config *), double *got, double *ref)
{
    double again;
    TB_TRY(park_loss(be, tweak, 1, got)); /* first: refused at once where n/a */
    TB_TRY(park_loss(be, tweak, 0, ref));
    TB_TRY(park_loss(be, tweak, 0, &again));
    return sc_ref_repeats(be, *ref, again, "never-parked", "parked vs never parked");
}

static void tweak_none(tb_config *c) { (void)c; }
static void tweak_graphs(tb_config *c) { c->cuda_graphs = 1; }

static int step_parked(tb_backend *be, double *got, double *ref)
{
    return parked_vs_never(be, tweak_none, got, ref);
}

static int step_parked_graphs(tb_backend *be, double *got, double *ref)
{
    return parked_vs_never(be, tweak_graphs, got, ref);
}

#define PARK_WHY "parking frees and brings back activations only: bitwise equal"

const tb_step_check sc_step_checks[] = {
    {"default config", STEP_TOL, STEP_WHY, step_default},
    {"optimizer=lars", STEP_TOL, STEP_WHY, step_lars},
    {"optimizer=lars fused-optimizer", STEP_TOL, STEP_WHY, step_lars_fused},
    {"optimizer=lamb", STEP_TOL, STEP_WHY, step_lamb},
    {"optimizer=lamb fused-optimizer", STEP_TOL, STEP_WHY, step_lamb_fused},
    {"optimizer=novograd fused-optimizer", STEP_TOL, STEP_WHY, step_novograd_fused},
    {"detect-anomaly", STEP_TOL, STEP_WHY, step_anomaly},
    {"loss-read-every=3", STEP_TOL, STEP_WHY, step_loss_read},
    {"checkpointing", STEP_TOL, STEP_WHY, step_checkpointing},
    {"eval-no-grad (test loss)", STEP_TOL, STEP_WHY, step_eval_no_grad},
    {"DataParallel on 2 GPUs, one thread", STEP_TOL, STEP_WHY, sc_step_dp_two_gpus},
    {"pin-memory (vs pageable, same backend)", 0, STAGED_WHY, sc_step_pinned, "pageable"},
    {"pin-memory non-blocking (vs pageable, same backend)", 0, STAGED_WHY,
     sc_step_pinned_async, "pageable"},
    {"parked between steps (vs never parked, same backend)", 0, PARK_WHY, step_parked,
     "never parked"},
    {"cuda-graphs parked between steps (vs never parked, same backend)", 0, PARK_WHY,
     step_parked_graphs, "never parked"},
    {NULL, 0.0, NULL, NULL, NULL},
};
