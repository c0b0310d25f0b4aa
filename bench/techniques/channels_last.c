/*
 * channels_last.c - bench:channels_last: memory_format=torch.channels_last
 * on the training step (--channels-last: NHWC activations and KRSC conv
 * weights) vs NCHW, the baseline. Same math in another layout; oneDNN may
 * pick other kernels, so the sums may run in another order.
 *
 *   bazel run //bench:channels_last -- [--device=cpu] [--profile=default|full|tiny]
 */
#include "bench/harness/step_harness.h"

static void set_layout(tb_config *cfg, double nhwc)
{
    cfg->channels_last = nhwc != 0;
}

static const tb_step_setting settings[] = {
    {"NCHW", 0, 0, set_layout, NULL, NULL},
    {"channels last", 1, 0, set_layout, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "channels_last",
        .headline = "channels last",
        .what = "channels last (NHWC) vs NCHW on the training step",
        .est_seconds = {8, 70, 10, 15}, /* default, full, tiny, gpu */
        .budget_seconds = {12, 60, 2, 13}, /* of its rounds, same order */
        .order = 240,
        .tiny = {.min_rows = 2, .plots = "channels_last"},
    },
    .param_name = "channels_last",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 5e-2,
    .tolerance_why = "another kernel may sum in another order; SGD amplifies it (as the conv "
                     "autotuner's: 1.1e-2 after 50 steps); a wrong layout gives O(1)",
};

TB_STEP_MAIN(tech)
