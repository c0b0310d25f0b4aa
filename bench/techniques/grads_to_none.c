/*
 * grads_to_none.c - bench:grads_to_none: zero_grad(set_to_none=True) on the
 * training step. Off (the baseline): every gradient is memset to 0 and the
 * first backward adds into it; on: the memset is skipped and the first
 * backward writes. Bitwise the same: 0 + x == x.
 *
 *   bazel run //bench:grads_to_none -- [--device=cpu] [--profile=default|full|tiny]
 */
#include "bench/harness/step_harness.h"

static void set_mode(tb_config *cfg, double on)
{
    cfg->grads_to_none = on != 0;
}

static const tb_step_setting settings[] = {
    {"memset", 0, 0, set_mode, NULL, NULL},
    {"to none", 1, 0, set_mode, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "grads_to_none",
        .headline = "to none",
        .what = "zero_grad(set_to_none=True) vs memset on the training step",
        .est_seconds = {12, 70, 5, 24}, /* default, full, tiny, gpu */
        .budget_seconds = {18, 60, 2, 18}, /* of its rounds, same order */
        .order = 60,
        .tiny = {.min_rows = 2, .plots = "grads_to_none"},
    },
    .param_name = "set_to_none",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 0,
};

TB_STEP_MAIN(tech)
