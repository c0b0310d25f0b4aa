/*
 * grads_to_none.c - bench:grads_to_none: zero_grad(set_to_none=True) on the
 * training step. Off (the baseline): every gradient is memset to 0 and the
 * first backward adds into it; on: the memset is skipped and the first
 * backward writes. Bitwise the same: 0 + x == x. Time only: the gradient
 * buffer stays allocated either way, where PyTorch's set_to_none also frees
 * the .grad tensors until backward makes them again (its memory side, up to
 * the gradients' size off the peak: not measured here; the row says so).
 *
 *   bazel run //bench:grads_to_none -- [--device=cpu] [--profile=default|full|tiny]
 */
#include <stdio.h>

#include "bench/harness/step_harness.h"

static void set_mode(tb_config *cfg, double on)
{
    cfg->grads_to_none = on != 0;
}

static int memory_note(tb_step_ctx *c, char *note, size_t cap)
{
    if (c->setting->param != 0)
        snprintf(note, cap, "time only: the gradients stay allocated (PyTorch's set_to_none "
                 "also frees them until backward, up to their %.1f MiB off the peak: not "
                 "measured here)", (double)c->t->model->numel * sizeof(float) / 1048576.0);
    return TB_OK;
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
    .check_note = memory_note,
};

TB_STEP_MAIN(tech)
