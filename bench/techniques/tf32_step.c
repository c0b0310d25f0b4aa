/*
 * tf32_step.c - bench:tf32_step: TF32 math on the training step, against
 * PyTorch's defaults: GEMMs in fp32 (torch.backends.cuda.matmul.allow_tf32
 * False) and convolutions in TF32 on cuDNN (torch.backends.cudnn.allow_tf32
 * True). "tf32" turns on the GEMMs' TF32 too (--tf32), the tip; "fp32
 * convolutions" turns the cuDNN default off (--cudnn-tf32=false), what a
 * user who sets allow_tf32 = False everywhere gets. On CUDA: cuBLAS/cuDNN
 * TF32 tensor cores. On the CPU there is no cuDNN and no such default:
 * "tf32" is oneDNN's bf16 fpmath mode for GEMMs and convolutions, which a
 * CPU without AVX512_BF16 computes in f32 (an n/a row there: both settings
 * would run the same kernels), and so may a CPU with it: Debian 12's oneDNN
 * 2.6 does on an AVX-512 BF16 EPYC. So on the CPU the checks decide
 * (same_math_note): a "tf32" check whose weights come out bitwise the fp32
 * check's is n/a too. "fp32 convolutions" is the baseline itself (n/a). GPT-2 has no convolution ("fp32 convolutions" n/a). The
 * GEMM sweep alone is bench:tf32.
 *
 *   bazel run //bench:tf32_step -- [--device=cpu] [--profile=default|full|tiny]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness/step_harness.h"

static void set_tf32(tb_config *cfg, double on)
{
    cfg->tf32 = on != 0;
}

static void set_fp32_convs(tb_config *cfg, double on)
{
    (void)on;
    cfg->tf32 = 0;
    cfg->cudnn_tf32 = 0;
}

static const tb_step_setting settings[] = {
    {"fp32", 0, 0, set_tf32, NULL, NULL},
    {"tf32", 1, 0, set_tf32, NULL, NULL},
    {"fp32 convolutions", 2, 0, set_fp32_convs, NULL, NULL},
};

/* The workload being run (workload_ready): GPT-2 has no convolution. */
static int current_wl;

static void workload_ready(const char *backend, int workload)
{
    (void)backend;
    current_wl = workload;
}

static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    int cpu = !strcmp(backend, "cpu");
    if (s->param == 1 && cpu && !__builtin_cpu_supports("avx512bf16"))
        return "n/a on this CPU: it lacks avx512_bf16, so oneDNN's bf16 fpmath mode (the CPU's "
               "TF32) computes in fp32 and both settings run the same kernels";
    if (s->param == 2 && cpu)
        return "n/a on the CPU: no cuDNN, and the convolutions' default is fp32 already (the "
               "baseline)";
    if (s->param == 2 && current_wl == TB_WL_GPT2)
        return "n/a on GPT-2: no convolution (its GEMMs are fp32 in the baseline)";
    return NULL;
}

/* The fp32 check's weights on the CPU, for the "tf32" check after it. */
static float *base_w;
static size_t base_n;

/* On the CPU: the fp32 check keeps its weights after its steps; a "tf32"
 * check whose weights are bitwise those ran the same kernels, and is n/a
 * (check_na: not timed). */
static int same_math_note(tb_step_ctx *c, char *note, size_t cap)
{
    (void)note;
    (void)cap;
    if (strcmp(c->bench->info.backend, "cpu") != 0 || c->setting->param == 2)
        return TB_OK;
    float *w;
    TB_TRY(tb_trainer_sync(c->t));
    TB_TRY(tb_model_weights_to_host(c->t->model, &w));
    size_t n = c->t->model->numel;
    if (c->setting->param == 0) {
        free(base_w);
        base_w = w;
        base_n = n;
        return TB_OK;
    }
    int same = base_w && base_n == n && !memcmp(base_w, w, n * sizeof *w);
    free(w);
    free(base_w);
    base_w = NULL;
    if (same)
        snprintf(c->na_why, sizeof c->na_why, "n/a on this CPU: its oneDNN computed the bf16 "
                 "fpmath mode (the CPU's TF32) in fp32: the check's weights came out bitwise "
                 "the fp32 check's, so both settings would time the same kernels");
    return TB_OK;
}

static const tb_step_technique tech = {
    .desc = {
        .name = "tf32_step",
        .headline = "tf32",
        .what = "TF32 GEMMs (matmul.allow_tf32) over PyTorch's defaults (fp32 GEMMs, TF32 cuDNN "
                "convolutions) on the training step, and fp32 convolutions (cudnn.allow_tf32 "
                "off); CPU: oneDNN bf16 fpmath",
        .est_seconds = {18, 70, 20, 28}, /* default, full, tiny, gpu */
        .budget_seconds = {18, 60, 2, 22}, /* of its rounds, same order */
        .order = 170,
        .tiny = {.min_rows = 2, .plots = "tf32_step"},
    },
    .param_name = "tf32",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = na_reason,
    .workload_ready = workload_ready,
    .check_note = same_math_note,
    .tolerance = 2e-2,
    .tolerance_why = "TF32 keeps 10 mantissa bits (bf16 fpmath 7): a few steps of SGD stay "
                     "within 2e-2 (train_test's bound after 50 steps; 0 where f32 is computed)",
};

TB_STEP_MAIN(tech)
