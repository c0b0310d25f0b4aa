/*
 * conv_autotuner_step.c - bench:conv_autotuner_step: the convolution
 * autotuner (cudnn.benchmark: time every algorithm per shape, keep the
 * fastest; on the CPU, oneDNN's list of implementations) on the training
 * step, with a fixed batch, and with a batch size that changes every step
 * (a shape never seen before, so the autotuner tunes again each time).
 * The shape sweep of the op alone is the op-level conv autotuner bench.
 * The default profile runs batch 16 (each tuning of a new shape is then
 * cheaper); the sizes cycle through 16 .. 2, and the algorithm cache is
 * emptied at each turn, so every step of every round sees a shape not seen
 * before.
 *
 *   bazel run //bench:conv_autotuner_step -- [--device=cpu] [--profile=...]
 */
#include "bench/harness/step_harness.h"

static void set_autotune(tb_config *cfg, double on)
{
    cfg->conv_autotune = on != 0;
}

/* One step on the next batch cut to a size not used before on this trainer:
 * batch, batch-1, ... down to 2, then around again. The trainer lives
 * across the harness's rounds (hundreds of steps), so at each turn the
 * algorithm cache is emptied: every size is again one never seen, as on
 * the first turn (with the autotuner off, that only drops the cached
 * default choices). */
static int step_new_batch_size(tb_step_ctx *c, float *loss)
{
    tb_batch b;
    TB_TRY(tb_step_next_batch(c, &b));
    int span = b.size > 2 ? b.size - 1 : 1;
    if (c->calls > 0 && c->calls % span == 0)
        tb_conv_algo_cache_free(&c->t->model->ctx.algos);
    b.size -= (int)(c->calls % span);
    tb_model_train_mode(c->t->model, 1);
    TB_TRY(tb_model_zero_grad(c->t->model, c->cfg.grads_to_none));
    TB_TRY(tb_train_micro_batch(c->t, &b, 1.0f, loss));
    c->calls++;
    return tb_optim_step(&c->t->opt);
}

static void setup(tb_config *cfg, int profile)
{
    if (profile == TB_PROFILE_DEFAULT)
        cfg->batch_size = 16;
}

static const tb_step_setting settings[] = {
    {"off", 0, 0, set_autotune, NULL, NULL},
    {"on", 1, 0, set_autotune, NULL, NULL},
    {"off, batch varies", 0, 2, set_autotune, step_new_batch_size, NULL},
    {"on, batch varies", 1, 2, set_autotune, step_new_batch_size, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "conv_autotuner_step",
        .headline = "on",
        .what = "conv autotuner on the training step, fixed and changing batch size",
        .est_seconds = {27, 130, 10, 15}, /* default, full, tiny, gpu */
        .budget_seconds = {24, 120, 2, 13}, /* of its rounds, same order */
        .order = 90,
        .tiny = {.min_rows = 4, .plots = "conv_autotuner_step"},
    },
    .param_name = "autotune",
    TB_STEP_SETTINGS(settings),
    /* Not yet on ResNet-50 (issue 15): there the autotuned algorithms' loss
     * differs from the default ones' by ~1e-3 relative at the first forward
     * (tiny: width 8, 64x64, batch 4) and by 8% after 5 steps, past the
     * tolerance; to be understood in lib/backend/cpu's conv_find first. */
    .metric = TB_METRIC_STEP,
    .setup = setup,
    .na_reason = tb_step_na_never,
    .tolerance = 5e-2,
    .tolerance_why = "another algorithm sums in another order; SGD amplifies it "
                     "(train_test measured 1.1e-2 after 50 steps; a wrong algorithm gives O(1))",
};

TB_STEP_MAIN(tech)
