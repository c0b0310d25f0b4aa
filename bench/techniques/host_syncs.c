/*
 * host_syncs.c - bench:host_syncs: no needless host syncs (avoid .item()
 * every step): the loss read by the host every step (the baseline, the
 * technique off) vs summed on the device and read every 10 or 50 steps
 * (--loss-read-every). The unit timed is an epoch of 50 steps (tb_train_epoch,
 * which reads at the interval and once at the epoch's end), at a small batch
 * where a step is short and a sync would show. The tiny profile (tests)
 * trains epochs of 10 steps, so there both intervals read once an epoch. On the CPU the "device" is
 * host memory: the read is a 4-byte copy and there is no host-device sync to
 * avoid, so the rows are measured but expected within the noise floor; on
 * CUDA each read waits for the queued step.
 *
 * Correctness: the harness's check (tb_trainer_step) reads every step whatever
 * the setting, so the note carries the real one: a fresh trainer trains one
 * epoch the setting's way and its mean loss is compared with the baseline's
 * (relative 1e-5: float sums on the device vs double sums on the host); a
 * larger difference fails the run.
 *
 *   bazel run //bench:host_syncs -- [--device=cpu] [--profile=default|full|tiny]
 */
#include <math.h>
#include <stdio.h>

#include "bench/harness/step_harness.h"

#define MEAN_LOSS_TOL 1e-5

static double base_mean_loss = NAN;

static void setup(tb_config *cfg, int profile)
{
    static const int batch[3] = {[TB_PROFILE_DEFAULT] = 4, [TB_PROFILE_FULL] = 32,
                                 [TB_PROFILE_TINY] = 2};
    static const int steps[3] = {[TB_PROFILE_DEFAULT] = 50, [TB_PROFILE_FULL] = 50,
                                 [TB_PROFILE_TINY] = 10};
    cfg->batch_size = batch[profile];
    cfg->data_limit = (long long)steps[profile] * cfg->batch_size;
}

static void set_read_every(tb_config *cfg, double n)
{
    cfg->loss_read_every = (int)n;
}

static int epoch(tb_step_ctx *c, float *loss)
{
    tb_epoch_stats es;
    TB_TRY(tb_train_epoch(c->t, (int)c->calls, &es));
    *loss = es.last_loss;
    return TB_OK;
}

static int mean_loss_note(tb_step_ctx *c, char *note, size_t cap)
{
    tb_trainer *t;
    tb_epoch_stats es;
    TB_TRY(tb_trainer_create_with_data(&c->cfg, c->t->be, c->train, c->test, &t));
    int rc = tb_train_epoch(t, 0, &es);
    tb_trainer_destroy(t);
    TB_TRY(rc);
    if (c->cfg.loss_read_every == 1)
        base_mean_loss = es.mean_loss;
    double rel = fabs(es.mean_loss - base_mean_loss) / fabs(base_mean_loss);
    if (!(rel <= MEAN_LOSS_TOL))
        return TB_FAIL(TB_ERR_DATA, "%s: epoch mean loss %.9g vs %.9g read every step "
                       "(rel %.2g > %g)", c->setting->name, es.mean_loss, base_mean_loss, rel,
                       MEAN_LOSS_TOL);
    snprintf(note, cap, "epoch of %ld steps, mean loss %.7g (rel diff %.1e, tol %g); CPU: no "
             "host-device sync to avoid", es.steps, es.mean_loss, rel, MEAN_LOSS_TOL);
    return TB_OK;
}

static const tb_step_setting settings[] = {
    {"read every step", 1, 0, set_read_every, epoch, NULL},
    {"read every 10", 10, 0, set_read_every, epoch, NULL},
    {"read every 50", 50, 0, set_read_every, epoch, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "host_syncs",
        .headline = "read every 10",
        .what = "loss read by the host every step (.item()) vs every 10 / 50 steps",
        .est_seconds = {31, 600, 75, 124}, /* default, full, tiny, gpu */
        /* the whole technique's, same order: its checks on GPT-2 and
         * ResNet-50 alone took 16.6 s in an idle default run */
        .budget_seconds = {28, 80, 2, 18},
        .order = 200,
        .tiny = {.min_rows = 3, .plots = "host_syncs"},
    },
    .param_name = "loss_read_every",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_EPOCH,
    .setup = setup,
    .na_reason = tb_step_na_never,
    .tolerance = 0,
    .check_note = mean_loss_note,
};

TB_STEP_MAIN(tech)
