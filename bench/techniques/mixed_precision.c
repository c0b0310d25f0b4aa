/*
 * mixed_precision.c - bench:mixed_precision: autocast on the training step
 * (--amp): conv and linear in bf16 or fp16 with fp32 accumulation, the rest
 * computing in fp32; on the CPU the conv trunk's activations are stored in
 * bf16 (as PyTorch's are; lib/nn/amp.h), and the bf16 rows' note says so;
 * fp16 adds dynamic loss scaling (GradScaler). Baseline: fp32 (off).
 * Peak memory in memory_bytes. On the CPU, fp16 is an n/a row quoting the
 * backend's refusal; bf16 runs through oneDNN: natively with AVX512_BF16,
 * emulated by its avx512_core kernels without it, and widened to fp32 on a
 * CPU without AVX-512 (each bf16 row's note says which). The
 * GEMM and convolution alone are bench:mixed_precision_ops.
 *
 *   bazel run //bench:mixed_precision -- [--device=cpu] [--profile=default|full|tiny]
 */
#include <stdio.h>
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

/* The row's remark after its check: for fp16, how many of the check's
 * updates the loss scaler skipped (gradients with Inf/NaN at its scale:
 * GradScaler's start at 65536 often overflows the first steps), since a
 * loss after fewer updates differs from the baseline's for that alone; for
 * bf16 on the CPU, which kernels ran, from its flags (oneDNN 2.6 picks by
 * ISA; lib/backend/cpu/dnnl.h: bf16_mode): the same technique is three
 * different things on three kinds of CPU. */
static int amp_note(tb_step_ctx *c, char *note, size_t cap)
{
    const tb_device_info *info = &c->bench->info;
    if (c->setting->param == TB_AMP_FP16 && c->t->loss_scaling) {
        const tb_loss_scaler *s = &c->t->scaler;
        snprintf(note, cap, "loss scaler skipped %ld of its %ld steps (scale now %g)",
                 s->skipped_steps, s->steps, (double)s->scale);
        return TB_OK;
    }
    if (strcmp(info->backend, "cuda") == 0 && c->setting->param != TB_AMP_OFF) {
        /* autocast's half-width activations save memory and element-wise
         * traffic in PyTorch; not here yet (lib/nn/amp.h) */
        snprintf(note, cap, "CUDA: convolutions and linear layers in %s with fp32 "
                 "accumulation, their outputs widened back to fp32: activations stay fp32 "
                 "(no memory saved, element-wise work at full width, unlike PyTorch's "
                 "autocast)", c->setting->param == TB_AMP_BF16 ? "bf16" : "fp16");
        return TB_OK;
    }
    if (strcmp(info->backend, "cpu") != 0 || c->setting->param != TB_AMP_BF16)
        return TB_OK;
    const char *flags = info->cpu_flags;
    int n = snprintf(note, cap, "%s",
             strstr(flags, "avx512_bf16") ? "bf16 on oneDNN's native AVX512_BF16 kernels"
             : strstr(flags, "avx512bw")
                 ? "bf16 on oneDNN's avx512_core kernels, which emulate it (no AVX512_BF16)"
                 : "no AVX-512: oneDNN has no bf16 kernels here, so bf16 operands are widened "
                   "to fp32 for its fp32 ones (a bf16 computation; its time is the casts "
                   "plus fp32 work)");
    if (c->t->model->ctx.act == TB_BF16 && n > 0 && (size_t)n < cap)
        snprintf(note + n, cap - (size_t)n, "; activations bf16 through the conv trunk (batch "
                 "norm, ReLU, pooling, residual adds; lib/nn/amp.h)");
    return TB_OK;
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
        .est_seconds = {16, 120, 10, 31}, /* default, full, tiny, gpu */
        .budget_seconds = {18, 60, 2, 18}, /* of its rounds, same order */
        .order = 230,
        .tiny = {.min_rows = 3, .plots = "mixed_precision"},
    },
    .param_name = "amp",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = na_reason,
    .check_note = amp_note,
    .tolerance = 5e-2,
    .tolerance_why = "bf16 keeps 8 mantissa bits (~4e-3 a rounding; fp16 11), amplified by "
                     "SGD: amp_test's bound after 50 steps, measured 1.4e-2",
};

TB_STEP_MAIN(tech)
