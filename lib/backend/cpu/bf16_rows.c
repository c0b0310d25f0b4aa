/*
 * bf16_rows.c - tb_cpu_bf16_round_row and _runs: fp32 -> bf16
 * (kernels/cast_math.h's tb_f32_to_bf16 bits) for the staged outputs of the
 * CPU kernels that run on bf16 activations; bf16_rows.h says why and how
 * they use it.
 *
 * Paths: AVX512 (AVX512_BF16's vcvtne2ps2bf16, 32 lanes an instruction;
 * lanes holding fp32 denormals, which it would flush to zero, are redone
 * with tb_f32_to_bf16) and GENERIC (tb_f32_to_bf16 in an omp simd loop,
 * compiled for x86-64-v4, v3 and the baseline).
 *
 * Tests: lib/backend/cpu/ops_test.c (every bf16 batch-norm and pooling
 * case on each path, against the reference rounded with tb_f32_to_bf16).
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cast_math.h"
#include "lib/backend/cpu/bf16_rows.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/core/status.h"

/* Under TSan one version (batchnorm.c's BN_CLONES says why). */
#ifdef __SANITIZE_THREAD__
#define ROW_CLONES
#else
#define ROW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

ROW_CLONES static void round_runs_generic(const bf16_run *runs, int k, const float *src)
{
    for (int r = 0; r < k; r++) {
        uint16_t *dst = runs[r].dst;
#pragma omp simd safelen(16) /* runs of 16 (NHWC rows) vectorized too */
        for (size_t i = 0; i < runs[r].n; i++)
            dst[i] = tb_f32_to_bf16(src[i]);
        src += runs[r].n;
    }
}

#define AVX512_BF16 __attribute__((target("avx512f,avx512dq,avx512bw,avx512bf16")))

/* 32 outputs (fewer where mask leaves lanes out: bit i for src[i]); fp32
 * denormals, which vcvtne2ps2bf16 flushes, redone one by one. */
AVX512_BF16 static inline void round32_avx512(uint16_t *dst, const float *src, __mmask32 mask)
{
    __m512 lo = _mm512_maskz_loadu_ps((__mmask16)mask, src);
    __m512 hi = _mm512_maskz_loadu_ps((__mmask16)(mask >> 16), src + 16);
    __m512bh r = _mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_epi16(dst, mask, (__m512i)r);
    /* fpclass 0x20: denormal */
    uint32_t den = (uint32_t)_mm512_fpclass_ps_mask(lo, 0x20) |
                   (uint32_t)_mm512_fpclass_ps_mask(hi, 0x20) << 16;
    for (; den; den &= den - 1) {
        int i = __builtin_ctz(den);
        dst[i] = tb_f32_to_bf16(src[i]);
    }
}

AVX512_BF16 static void round_runs_avx512(const bf16_run *runs, int k, const float *src)
{
    for (int r = 0; r < k; r++) {
        uint16_t *dst = runs[r].dst;
        size_t n = runs[r].n, i = 0;
        for (; i + 32 <= n; i += 32)
            round32_avx512(dst + i, src + i, ~(__mmask32)0);
        if (i < n)
            round32_avx512(dst + i, src + i, (__mmask32)((1ull << (n - i)) - 1));
        src += n;
    }
}

static int rows_forced = TB_CPU_PATH_AUTO; /* set by tests only, before threads run */

static int path_supported(int path)
{
    __builtin_cpu_init();
    if (path == TB_CPU_PATH_GENERIC)
        return 1;
    return path == TB_CPU_PATH_AVX512 && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
}

/* The best path, found on first use: kernels ask once a stage, from any
 * thread (atomic, so that they may race to fill it in). */
static int rows_best = TB_CPU_PATH_AUTO;

int tb_cpu_bf16_rows_path(void)
{
    if (rows_forced != TB_CPU_PATH_AUTO)
        return rows_forced;
    int best = __atomic_load_n(&rows_best, __ATOMIC_RELAXED);
    if (best == TB_CPU_PATH_AUTO) {
        best = tb_cpu_path_best(TB_CPU_PATHS_GENERIC_AVX512, path_supported);
        __atomic_store_n(&rows_best, best, __ATOMIC_RELAXED);
    }
    return best;
}

int tb_cpu_bf16_rows_set_path(int path)
{
    return tb_cpu_path_force(&rows_forced, path, TB_CPU_PATHS_GENERIC_AVX512, path_supported,
                             "bf16 rows");
}

void tb_cpu_bf16_round_runs(const bf16_run *runs, int k, const float *src)
{
    if (tb_cpu_bf16_rows_path() == TB_CPU_PATH_AVX512)
        round_runs_avx512(runs, k, src);
    else
        round_runs_generic(runs, k, src);
}

void tb_cpu_bf16_round_row(uint16_t *dst, const float *src, size_t n)
{
    bf16_run run = {dst, n};
    tb_cpu_bf16_round_runs(&run, 1, src);
}
