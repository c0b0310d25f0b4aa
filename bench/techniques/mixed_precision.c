/*
 * mixed_precision.c - bench:mixed_precision: autocast on the training step
 * (--amp): conv and linear in bf16 or fp16 with fp32 accumulation, the rest
 * fp32; fp16 adds dynamic loss scaling (GradScaler). Baseline: fp32 (off).
 * Peak memory in memory_bytes. On the CPU, fp16 is an n/a row quoting the
 * backend's refusal; bf16 runs through oneDNN (its avx512_core emulation
 * on this VM, which lacks AVX512_BF16: expect it slower, not faster). The
 * GEMM and convolution alone are bench:mixed_precision_ops.
 *
 *   bazel run //bench:mixed_precision -- [--device=cpu] [--profile=default|full|tiny]
 */
#include <string.h>

#include "bench/harness/step_harness.h"

static void set_amp(tb_config *cfg, double dtype)
{
    cfg->amp_dtype = (int)dtype;
}

static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    if (!strcmp(backend, "cpu") && s->param == TB_AMP_FP16)
        return "the CPU backend refuses it: \"fp16 is n/a (oneDNN 2.6 has no CPU fp16 "
               "training kernels; use bf16)\"";
    return NULL;
}

static const tb_step_setting settings[] = {
    {"fp32", TB_AMP_OFF, 0, set_amp, NULL, NULL},
    {"bf16", TB_AMP_BF16, 0, set_amp, NULL, NULL},
    {"fp16", TB_AMP_FP16, 0, set_amp, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "mixed_precision",
        .headline = "bf16",
        .what = "mixed precision (autocast) off / bf16 / fp16 on the training step",
        .est_seconds = {16, 120, 10, 20}, /* default, full, tiny, gpu */
        .budget_seconds = {18, 60, 2, 18}, /* of its rounds, same order */
        .order = 230,
        .tiny = {.min_rows = 3, .plots = "mixed_precision"},
    },
    .param_name = "amp",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = na_reason,
    .tolerance = 5e-2,
    .tolerance_why = "bf16 keeps 8 mantissa bits (~4e-3 a rounding; fp16 11), amplified by "
                     "SGD: amp_test's bound after 50 steps, measured 1.4e-2",
};

TB_STEP_MAIN(tech)
