/*
 * no_grad_eval.c - bench:no_grad_eval: evaluation under torch.no_grad()
 * (--eval-no-grad: no activations kept for backward) vs evaluation that
 * keeps them, the baseline: time of one pass over the profile's test subset
 * ("evaluation time", one unit = one evaluation: the rate counts its
 * images, the FLOP rate the forward's FLOPs) and peak memory (memory_bytes:
 * tb_trainer_evaluate's own peak, also in the note). The forward is the
 * same: the mean test loss is bitwise equal.
 *
 *   bazel run //bench:no_grad_eval -- [--device=cpu] [--profile=default|full|tiny]
 */
#include <stdio.h>

#include "bench/harness/step_harness.h"

static void setup(tb_config *cfg, int profile)
{
    static const long long test_n[3] = {[TB_PROFILE_DEFAULT] = 256, [TB_PROFILE_FULL] = 10000,
                                        [TB_PROFILE_TINY] = 64};
    cfg->test_limit = test_n[profile];
}

static void set_no_grad(tb_config *cfg, double on)
{
    cfg->eval_no_grad = on != 0;
}

static int evaluate(tb_step_ctx *c, float *loss)
{
    tb_eval_stats ev;
    TB_TRY(tb_trainer_evaluate(c->t, &ev));
    *loss = (float)ev.mean_loss;
    /* the row's columns: a unit is the evaluation of ev.images (not a
     * training batch), its FLOPs the forward's, its memory the
     * evaluation's own peak (the trainer's build not counted) */
    c->unit_samples = (double)ev.images;
    c->forward_only = 1;
    c->own_peak_bytes = (double)ev.mem_peak;
    return TB_OK;
}

static int eval_note(tb_step_ctx *c, char *note, size_t cap)
{
    tb_eval_stats ev;
    TB_TRY(tb_trainer_evaluate(c->t, &ev));
    snprintf(note, cap, "evaluation of %ld images: peak %.2f MiB, accuracy %.1f%%", ev.images,
             ev.mem_peak / 1048576.0, 100.0 * ev.accuracy);
    return TB_OK;
}

static const tb_step_setting settings[] = {
    {"grad kept", 0, 0, set_no_grad, evaluate, NULL},
    {"no_grad", 1, 0, set_no_grad, evaluate, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "no_grad_eval",
        .headline = "no_grad",
        .what = "evaluation under no_grad vs keeping activations: time and peak memory",
        .est_seconds = {6, 120, 11, 8}, /* default, full, tiny, gpu */
        .budget_seconds = {12, 60, 2, 8}, /* of its rounds, same order */
        .order = 260,
        .tiny = {.min_rows = 2, .plots = "no_grad_eval"},
    },
    .param_name = "no_grad",
    TB_STEP_SETTINGS(settings),
    .metric = TB_METRIC_STEP,
    .metric_name = "evaluation time",
    .setup = setup,
    .na_reason = tb_step_na_never,
    .tolerance = 0,
    .check_note = eval_note,
};

TB_STEP_MAIN(tech)
