/*
 * cast.c - the CPU backend's mixed-precision casts: the slots
 * cast_f32_to_lowp and cast_lowp_to_f32 of lib/backend/backend.h.
 *
 * The per-element conversions are kernels/cast_math.h's (bf16 and fp16,
 * round to nearest even on the bits), the same code kernels/cast.cu runs on
 * the GPU; here one OpenMP loop with ctx->threads threads, one thread below
 * CAST_PAR_MIN elements (waking a second costs more).
 *
 * Tests: bazel test //lib/backend/cpu:cast_test (edge cases, round trips, both backends'
 * math), bench:selfcheck (the slots against the header).
 */
#include <stdint.h>

#include "kernels/cast_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/core/status.h"

#define CAST_PAR_MIN 32768

static int cpu_cast_f32_to_lowp(tb_backend *be, tb_dtype dtype, const float *x, void *lowp,
                                size_t n)
{
    TB_TRY(tb_check_cast(dtype, x, lowp, n, "cast_f32_to_lowp"));
    int t = ((tb_cpu_ctx *)be->ctx)->threads;
    uint16_t *y = lowp;
    if (dtype == TB_BF16) {
#pragma omp parallel for num_threads(t) schedule(static) if (n >= CAST_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = tb_f32_to_bf16(x[i]);
    } else {
#pragma omp parallel for num_threads(t) schedule(static) if (n >= CAST_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = tb_f32_to_f16(x[i]);
    }
    return TB_OK;
}

static int cpu_cast_lowp_to_f32(tb_backend *be, tb_dtype dtype, const void *lowp, float *y,
                                size_t n)
{
    TB_TRY(tb_check_cast(dtype, lowp, y, n, "cast_lowp_to_f32"));
    int t = ((tb_cpu_ctx *)be->ctx)->threads;
    const uint16_t *x = lowp;
    if (dtype == TB_BF16) {
#pragma omp parallel for num_threads(t) schedule(static) if (n >= CAST_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = tb_bf16_to_f32(x[i]);
    } else {
#pragma omp parallel for num_threads(t) schedule(static) if (n >= CAST_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = tb_f16_to_f32(x[i]);
    }
    return TB_OK;
}

int tb_cpu_install_cast_ops(tb_backend *be)
{
    be->cast_f32_to_lowp = cpu_cast_f32_to_lowp;
    be->cast_lowp_to_f32 = cpu_cast_lowp_to_f32;
    return TB_OK;
}
