/*
 * channels_last.c - bench:channels_last: memory_format=torch.channels_last
 * on the training step (--channels-last: NHWC activations and KRSC conv
 * weights) vs NCHW, the baseline. Same math in another layout; oneDNN may
 * pick other kernels, so the sums may run in another order.
 *
 * Twice: in fp32, and under bf16 autocast (each layout against NCHW in the
 * same precision), because the tuning guides pair the two: channels last is
 * what lets a GPU's tensor cores take convolutions without transposes, and
 * oneDNN's bf16 kernels are blocked NHWC-like too, so the fp32 pair alone
 * would answer a question few ask.
 *
 *   bazel run //bench:channels_last -- [--device=cpu] [--profile=default|full|tiny]
 */
#include "bench/harness/step_harness.h"

/* param: 1 under bf16 autocast, 0 in fp32 */
static void set_amp(tb_config *cfg, double bf16)
{
    cfg->amp_dtype = bf16 != 0 ? TB_AMP_BF16 : TB_AMP_OFF;
}

static void set_nchw(tb_config *cfg, double bf16)
{
    set_amp(cfg, bf16);
    cfg->channels_last = 0;
}

static void set_nhwc(tb_config *cfg, double bf16)
{
    set_amp(cfg, bf16);
    cfg->channels_last = 1;
}

static const tb_step_setting settings[] = {
    {"NCHW", 0, 0, set_nchw, NULL, NULL},
    {"channels last", 0, 0, set_nhwc, NULL, NULL},
    {"NCHW, bf16", 1, 2, set_nchw, NULL, NULL},
    {"channels last, bf16", 1, 2, set_nhwc, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "channels_last",
        .headline = "channels last",
        .what = "channels last (NHWC) vs NCHW on the training step, in fp32 and under bf16 autocast",
        .est_seconds = {12, 90, 12, 23}, /* default, full, tiny, gpu */
        .budget_seconds = {18, 80, 2, 13}, /* of its rounds, same order */
        .order = 240,
        .tiny = {.min_rows = 4, .plots = "channels_last"},
    },
    .param_name = "bf16_autocast",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 5e-2,
    .tolerance_why = "another kernel may sum in another order, and under bf16 round at other "
                     "points; SGD amplifies it (as the conv autotuner's: 1.1e-2 after 50 "
                     "steps); a wrong layout gives O(1)",
};

TB_STEP_MAIN(tech)
