/*
 * fused_gelu_step.c - bench:fused_gelu_step: the fused GELU (one pass) vs
 * five element-wise passes, as eager PyTorch runs a GELU written out from
 * its formula, on the whole training step of GPT-2 (nn.GELU is already one
 * kernel in PyTorch: this is the gain of fusing a hand-written one, as
 * torch.jit.script or torch.compile do). The kernel alone over sizes is
 * bench:gelu.
 *
 *   bazel run //bench:fused_gelu_step -- [--device=cpu] [--profile=...]
 */
#include "bench/harness/step_harness.h"

static void set_fused(tb_config *cfg, double on)
{
    cfg->fused_gelu = on != 0;
}

static const tb_step_setting settings[] = {
    {"unfused", 0, 0, set_fused, NULL, NULL},
    {"fused", 1, 0, set_fused, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "fused_gelu_step",
        .headline = "fused",
        .what = "fused vs unfused GELU on the training step",
        .est_seconds = {8, 70, 10, 12}, /* default, full, tiny, gpu */
        /* of its rounds, same order; default: the whole technique took 4.4-6.6 s
         * in six idle runs (it stops on its target), so 9 (was 12) */
        .budget_seconds = {9, 60, 2, 13},
        .order = 70,
        .tiny = {.min_rows = 2, .plots = "fused_gelu_step"},
    },
    .param_name = "fused",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 1e-5,
    .tolerance_why = "same math, possibly another rounding order (fp32; train_test: 1e-5 after 50 steps)",
};

TB_STEP_MAIN(tech)
