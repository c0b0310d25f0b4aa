/*
 * cast.c - the CPU backend's mixed-precision casts: the slots
 * cast_f32_to_lowp and cast_lowp_to_f32 of lib/backend/backend.h.
 *
 * The per-element conversions are kernels/cast_math.h's (bf16 and fp16,
 * round to nearest even on the bits), the same code kernels/cast.cu runs on
 * the GPU; here one OpenMP loop with ctx->threads threads, one thread below
 * CAST_PAR_MIN elements (waking a second costs more).
 *
 * fp32 -> bf16 is autocast's hot cast (x, w and dy of every convolution
 * and linear layer, every step): on CPUs with AVX-512F it runs 16 lanes at
 * a time with integer ops that give tb_f32_to_bf16's exact bits (NaN
 * quieted, denormals kept; AVX512_BF16's vcvtneps2bf16 would flush
 * denormals, so it is not used). Elsewhere the portable loop runs. The path
 * is chosen at run time (tb_cpu_cast_set_path lets a test force one); it
 * made the cast 8-10% of a bf16 ResNet-50 step with the portable loop.
 *
 * Tests: bazel test //lib/backend/cpu:cast_test (edge cases, round trips, both backends'
 * math), bench:selfcheck (the slots against the header).
 */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cast_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/core/status.h"

#define CAST_PAR_MIN 32768
#define CAST_CHUNK 16384 /* elements a thread converts per call of a path */

static void bf16_generic(const float *x, uint16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = tb_f32_to_bf16(x[i]);
}

/* tb_f32_to_bf16 on 16 lanes: u + 0x7fff + ((u >> 16) & 1), top half; NaN
 * lanes (|u| > Inf's bits) take (u >> 16) | 0x40 instead. */
__attribute__((target("avx512f"))) static void bf16_avx512(const float *x, uint16_t *y,
                                                           size_t n)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512((const void *)(x + i));
        __m512i hi = _mm512_srli_epi32(u, 16);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one)));
        r = _mm512_mask_mov_epi32(_mm512_srli_epi32(r, 16), nan, _mm512_or_si512(hi, quiet));
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtepi32_epi16(r));
    }
    /* GCC 12 puts no vzeroupper before the tail call below: the upper
     * halves of the vector registers stayed dirty, and every SSE loop after
     * a cast ran about twice as slow (the optimizer's passes on ResNet-50's
     * weights: 17 -> 30 ms). */
    _mm256_zeroupper();
    bf16_generic(x + i, y + i, n - i);
}

static int cast_forced = TB_CPU_PATH_AUTO; /* set by tests only, before threads run */

static int path_supported(int path)
{
    if (path == TB_CPU_PATH_GENERIC)
        return 1;
    return path == TB_CPU_PATH_AVX512 && __builtin_cpu_supports("avx512f");
}

int tb_cpu_cast_path(void)
{
    if (cast_forced != TB_CPU_PATH_AUTO)
        return cast_forced;
    return tb_cpu_path_best(TB_CPU_PATHS_GENERIC_AVX512, path_supported);
}

int tb_cpu_cast_set_path(int path)
{
    return tb_cpu_path_force(&cast_forced, path, TB_CPU_PATHS_GENERIC_AVX512, path_supported,
                             "cast");
}

static void bf16_cast(int threads, const float *x, uint16_t *y, size_t n)
{
    void (*run)(const float *, uint16_t *, size_t) =
        tb_cpu_cast_path() == TB_CPU_PATH_AVX512 ? bf16_avx512 : bf16_generic;
    size_t chunks = (n + CAST_CHUNK - 1) / CAST_CHUNK;
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= CAST_PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t lo = c * CAST_CHUNK, len = n - lo < CAST_CHUNK ? n - lo : CAST_CHUNK;
        run(x + lo, y + lo, len);
    }
}

static int cpu_cast_f32_to_lowp(tb_backend *be, tb_dtype dtype, const float *x, void *lowp,
                                size_t n)
{
    TB_TRY(tb_check_cast(dtype, x, lowp, n, "cast_f32_to_lowp"));
    int t = ((tb_cpu_ctx *)be->ctx)->threads;
    uint16_t *y = lowp;
    if (dtype == TB_BF16) {
        bf16_cast(t, x, y, n);
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
