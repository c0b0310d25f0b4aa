/*
 * host_syncs.c - bench:host_syncs: no needless host syncs (avoid .item()
 * every step): the loss read by the host every step (the baseline, the
 * technique off) vs summed on the device and read every 2 or every 4 steps
 * (--loss-read-every). The unit timed is an epoch (tb_train_epoch, which
 * reads at the interval and once at the epoch's end); on ResNet-50 and
 * GPT-2 its epochs are 4 steps in every profile (epoch_batches below;
 * step_harness.c, big_data), so the intervals are 2 (two reads an epoch)
 * and 4 (one, at its end): an interval past the epoch's length would read
 * once an epoch too, under another name (10 and 50 were, in the harness's
 * 8-step epochs: both rows then timed one read per 8 steps). 4 steps, not
 * the 8 of 4 and 8 before: the same reads a step (1, 1/2, 1/4) at half the
 * time, the GPU profile's epochs ~1 s each (the H200: 1.03-1.2 s for 8
 * steps). Each row's note says how many reads an
 * epoch its setting made. On the CPU the "device" is
 * host memory: the read is a 4-byte copy and there is no host-device sync to
 * avoid, so the compared settings are n/a there (the baseline is timed); on
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
#include <stdlib.h>
#include <string.h>

#include "bench/harness/step_harness.h"

#define MEAN_LOSS_TOL 1e-5

static double base_mean_loss = NAN;
static int copies_to_device; /* the backend has a device apart from the host (ready) */

static void ready(const char *backend, int workload)
{
    (void)workload;
    copies_to_device = strcmp(backend, "cpu") != 0;
}

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
    cfg->pin_memory = cfg->non_blocking = copies_to_device; /* the header says why */
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
    /* The row's verdict: the check's training steps read the loss every
     * step whatever the setting, so only this epoch exercises it (the
     * weights are the same; the epoch's mean loss is summed on the device
     * and read later, in another order) */
    TB_TRY(tb_compare_values(base_mean_loss, es.mean_loss, MEAN_LOSS_TOL, &c->own));
    c->own_verdict = 1;
    snprintf(c->own_against, sizeof c->own_against, "baseline's epoch mean loss");
    int every = c->cfg.loss_read_every;
    long reads = (es.steps + every - 1) / every;
    /* an interval longer than the epoch would be a one-read epoch
     * under another name: its row would not time what it says */
    if (every > es.steps)
        return TB_FAIL(TB_ERR_INVALID, "%s: an epoch of %ld steps reads once whatever the "
                       "interval past it; the settings' intervals must fit the epoch",
                       c->setting->name, es.steps);
    snprintf(note, cap, "epoch of %ld steps: the loss read %ld time%s an epoch; mean loss "
             "%.7g (rel diff %.1e, tol %g)%s", es.steps, reads, reads == 1 ? "" : "s",
             es.mean_loss, c->own.max_rel, MEAN_LOSS_TOL,
             !copies_to_device ? "; CPU: no host-device sync to avoid"
                               : "; batches pinned + non_blocking in every setting, so the "
                                 "loss reads are the step's only host syncs");
    return TB_OK;
}

/* TB_TEST_HOST_SYNCS_ON_CPU (tests only: check_verdicts_test) times them on
 * the CPU anyway, so that the epoch mean-loss check (device sums read
 * later) runs where CI runs. */
static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    const char *test = getenv("TB_TEST_HOST_SYNCS_ON_CPU");
    if (s->param == 1 || strcmp(backend, "cpu") != 0 || (test && *test))
        return NULL;
    return "n/a on the CPU backend: the loss is in host memory, so reading it is a 4-byte copy "
           "with no device to wait for (no host-device sync to avoid); on CUDA each read waits "
           "for the queued step";
}

static const tb_step_setting settings[] = {
    {"read every step", 1, 0, set_read_every, epoch, NULL},
    {"read every 2", 2, 0, set_read_every, epoch, NULL},
    {"read every 4", 4, 0, set_read_every, epoch, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "host_syncs",
        .headline = "read every 4",
        .what = "loss read by the host every step (.item()) vs every 2 / 4 steps",
        .est_seconds = {18, 600, 75, 78}, /* default, full, tiny, gpu */
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
    .na_reason = na_reason,
    .tolerance = 0,
    .check_note = mean_loss_note,
    .workload_ready = ready,
    .epoch_batches = 4,
};

TB_STEP_MAIN(tech)
