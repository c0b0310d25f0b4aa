/*
 * fused_optimizer_step.c - bench:fused_optimizer_step: the fused optimizer
 * (one pass over the flat parameter buffer, fused=True) vs one pass per
 * tensor, on the whole training step, for SGD with momentum and for AdamW
 * (each compared with its own per-tensor run). The op alone over parameter
 * counts is bench:fused_optimizer.
 *
 *   bazel run //bench:fused_optimizer_step -- [--device=cpu] [--profile=...]
 */
#include "bench/harness/step_harness.h"

static void set_sgd(tb_config *cfg, double fused)
{
    cfg->optimizer = TB_OPT_SGD;
    cfg->fused_optimizer = fused != 0;
}

static void set_adamw(tb_config *cfg, double fused)
{
    cfg->optimizer = TB_OPT_ADAMW;
    cfg->lr = 0.002;
    cfg->weight_decay = 0.01;
    cfg->fused_optimizer = fused != 0;
}

static const tb_step_setting settings[] = {
    {"per-tensor sgd", 0, 0, set_sgd, NULL, NULL},
    {"fused sgd", 1, 0, set_sgd, NULL, NULL},
    {"per-tensor adamw", 0, 2, set_adamw, NULL, NULL},
    {"fused adamw", 1, 2, set_adamw, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "fused_optimizer_step",
        .headline = "fused adamw",
        .what = "fused vs per-tensor optimizer (SGD, AdamW) on the training step (per-tensor "
                "is foreach=False; PyTorch 2's CUDA default, foreach, is not timed)",
        .est_seconds = {12, 130, 15, 22}, /* default, full, tiny, gpu */
        .budget_seconds = {22, 120, 2, 13}, /* of its rounds, same order */
        .order = 100,
        .tiny = {.min_rows = 4, .plots = "fused_optimizer_step"},
    },
    .param_name = "fused",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 1e-5,
    .tolerance_why = "same update per element, possibly another rounding order (fp32; "
                     "train_test: 1e-5 after 50 steps)",
};

TB_STEP_MAIN(tech)
