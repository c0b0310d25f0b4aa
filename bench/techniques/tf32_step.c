/*
 * tf32_step.c - bench:tf32_step: TF32 math (torch.backends.*.allow_tf32) on
 * the training step: GEMM and convolution in TB_MATH_TF32 (--tf32) vs plain
 * fp32. On CUDA: cuBLAS/cuDNN TF32 tensor cores. On the CPU: oneDNN's bf16
 * fpmath mode, which a CPU without AVX512_BF16 (this VM) ignores and
 * computes in f32, so the two settings run the same kernels here: expect a
 * speedup within the noise floor and the same loss. The GEMM sweep alone is
 * bench:tf32.
 *
 *   bazel run //bench:tf32_step -- [--device=cpu] [--profile=default|full|tiny]
 */
#include "bench/harness/step_harness.h"

static void set_tf32(tb_config *cfg, double on)
{
    cfg->tf32 = on != 0;
}

static const tb_step_setting settings[] = {
    {"fp32", 0, 0, set_tf32, NULL, NULL},
    {"tf32", 1, 0, set_tf32, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "tf32_step",
        .headline = "tf32",
        .what = "TF32 math (allow_tf32) vs fp32 on the training step (CPU: oneDNN bf16 fpmath)",
        .est_seconds = {18, 70, 20, 24}, /* default, full, tiny, gpu */
        .budget_seconds = {18, 60, 2, 18}, /* of its rounds, same order */
        .order = 170,
        .tiny = {.min_rows = 2, .plots = "tf32_step"},
    },
    .param_name = "tf32",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 2e-2,
    .tolerance_why = "TF32 keeps 10 mantissa bits (bf16 fpmath 7): a few steps of SGD stay "
                     "within 2e-2 (train_test's bound after 50 steps; 0 where f32 is computed)",
};

TB_STEP_MAIN(tech)
