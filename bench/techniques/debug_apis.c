/*
 * debug_apis.c - bench:debug_apis: the technique "debug APIs off" (run
 * without torch.autograd.detect_anomaly) on the training step. As in every
 * sweep, the baseline is the technique off, which here means the debug API
 * ON: --detect-anomaly (a NaN/Inf count after every layer's forward output,
 * backward input and parameter gradients and the loss, each read by the
 * host); the compared setting is --detect-anomaly off, so a speedup > 1 is
 * what switching the checks off gains. The checks only read: the loss is
 * bitwise the same.
 *
 *   bazel run //bench:debug_apis -- [--device=cpu] [--profile=default|full|tiny]
 */
#include "bench/harness/step_harness.h"

/* param: 1 = the technique on = the debug API off. */
static void set_debug_off(tb_config *cfg, double off)
{
    cfg->detect_anomaly = off == 0;
}

/* What the baseline's checks are, against PyTorch's: a reader of the
 * speedup must know which cost it measures. */
static int checks_note(tb_step_ctx *c, char *note, size_t cap)
{
    if (c->cfg.detect_anomaly)
        snprintf(note, cap, "checks here: a NaN/Inf count read by the host after each layer's "
                 "forward and backward; PyTorch's checks backward per autograd node and "
                 "records forward tracebacks");
    return TB_OK;
}

static const tb_step_setting settings[] = {
    {"detect_anomaly on", 0, 0, set_debug_off, NULL, NULL},
    {"debug APIs off", 1, 0, set_debug_off, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "debug_apis",
        .headline = "debug APIs off",
        .what = "debug APIs off: baseline detect_anomaly ON (technique off) vs detect_anomaly off",
        .est_seconds = {14, 70, 12, 24}, /* default, full, tiny, gpu */
        .budget_seconds = {16, 60, 2, 18}, /* of its rounds, same order */
        .order = 180,
        .tiny = {.min_rows = 2, .plots = "debug_apis"},
    },
    .param_name = "debug_off",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 0,
    .check_note = checks_note,
};

TB_STEP_MAIN(tech)
