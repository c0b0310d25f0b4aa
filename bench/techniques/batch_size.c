/*
 * batch_size.c - bench:batch_size: batch 16, 32, ... up to the largest that
 * fits in device memory: time per 1000 samples (throughput), peak memory,
 * and test accuracy after a fixed number of training samples, so the
 * speed/accuracy trade-off shows. The learning rate is scaled linearly with
 * the batch (0.05 at 256) with a warm-up over the first 512 samples. On the
 * CPU, where Linux never refuses a malloc, --mem-limit (counted by the
 * backend's allocator) plays the device memory: a batch that does not fit
 * is an n/a row saying so, found in the check pass and never timed.
 *
 *   bazel run //bench:batch_size -- [--device=cpu] [--mem-limit=MiB] [--profile=...]
 */
#include <stdio.h>

#include "bench/harness/step_harness.h"

static void setup(tb_config *cfg, int profile)
{
    /* Room for the largest batch (1024; a larger one would train on the
     * same samples, and the harness makes it an n/a row); the test subset
     * stays the profile's. */
    cfg->data_limit = profile == TB_PROFILE_TINY ? 1024 : 2048;
    cfg->lr = 0.05;
    cfg->lr_base_batch = 256;
}

static void set_batch(tb_config *cfg, double b)
{
    cfg->batch_size = (int)b;
    cfg->warmup_steps = (int)((512 + b - 1) / b);
}

static int accuracy_note(tb_step_ctx *c, char *note, size_t cap)
{
    tb_eval_stats ev;
    TB_TRY(tb_trainer_evaluate(c->t, &ev));
    /* warm-up over the first 512 samples: from batch 512 on that is one
     * step, at the peak lr, i.e. none (said, not hidden) */
    snprintf(note, cap, "test accuracy %.1f%% (%ld test images) after %ld training samples, "
             "lr %.4g, warm-up %d step%s%s, one seed", 100.0 * ev.accuracy, ev.images,
             c->t->steps * c->cfg.batch_size, tb_config_peak_lr(&c->cfg), c->cfg.warmup_steps,
             c->cfg.warmup_steps == 1 ? "" : "s",
             c->cfg.warmup_steps <= 1 ? " (none: the first step is at the peak)" : "");
    return TB_OK;
}

static const tb_step_setting settings[] = {
    {"batch=16", 16, 0, set_batch, NULL, NULL},     {"batch=32", 32, 0, set_batch, NULL, NULL},
    {"batch=64", 64, 0, set_batch, NULL, NULL},     {"batch=128", 128, 0, set_batch, NULL, NULL},
    {"batch=256", 256, 0, set_batch, NULL, NULL},   {"batch=512", 512, 0, set_batch, NULL, NULL},
    {"batch=1024", 1024, 0, set_batch, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "batch_size",
        .headline = "batch=64",
        .what = "batch size 16.. the largest that fits: throughput, memory, accuracy",
        .est_seconds = {14, 300, 15, 12}, /* default, full, tiny, gpu */
        .budget_seconds = {28, 160, 2, 16}, /* of its rounds, same order */
        .order = 110,
        .tiny = {.min_rows = 7, .plots = "batch_size"},
    },
    .param_name = "batch",
    TB_STEP_SETTINGS(settings),
    .metric = TB_METRIC_STEP,
    .per_sample = 1,
    /* tiny: 16..64 fit, 128 is the OOM point; default: up to 256; full: all */
    .mem_limit_mib = {[TB_PROFILE_DEFAULT] = 256, [TB_PROFILE_FULL] = 1024,
                      [TB_PROFILE_TINY] = 48},
    .setup = setup,
    .na_reason = tb_step_na_never,
    .not_comparable = "another batch size and learning rate train another trajectory: "
                      "compare the accuracy instead",
    .check_note = accuracy_note,
};

TB_STEP_MAIN(tech)
