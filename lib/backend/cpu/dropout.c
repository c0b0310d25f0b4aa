/*
 * dropout.c - the CPU backend's dropout_fwd/bwd. The mask is the counter-based hash
 * of kernels/rng_math.h, a function of (seed, offset + i) only, so it is
 * the same for any thread count and on the CUDA backend.
 */
#include <stdint.h>

#include "kernels/elementwise_math.h"
#include "kernels/rng_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

/* Elements [lo, hi) of one call; splits where idx >> 32 changes so the block
 * key is computed once per block of 2^32 stream indices. */
static void dropout_range(uint64_t seed, uint64_t offset, uint32_t thr, float scale,
                          const float *x, float *y, uint8_t *mask, size_t lo, size_t hi)
{
    size_t i = lo;
    while (i < hi) {
        uint64_t idx = offset + i;
        uint64_t room = ((uint64_t)1 << 32) - (uint32_t)idx;
        size_t end = hi - i < room ? hi : i + (size_t)room;
        uint64_t key = tb_dropout_block_key(seed, (uint32_t)(idx >> 32));
        uint32_t lo32 = (uint32_t)idx;
        size_t base = i;
#pragma omp simd
        for (size_t j = base; j < end; j++) {
            uint8_t keep = tb_dropout_keep(tb_dropout_bits(key, lo32 + (uint32_t)(j - base)), thr);
            mask[j] = keep;
            y[j] = tb_dropout_apply_f(x[j], keep, scale);
        }
        i = end;
    }
}

static int cpu_dropout_fwd(tb_backend *be, float p, uint64_t seed, uint64_t offset, const float *x,
                           float *y, uint8_t *mask, size_t n)
{
    TB_TRY(tb_check_dropout(p));
    int t = threads_of(be);
    uint32_t thr = tb_dropout_threshold(p);
    float scale = tb_dropout_scale(p);
#pragma omp parallel num_threads(t) if (n >= PAR_MIN)
    {
        size_t lo, hi;
        thread_range(n, &lo, &hi);
        dropout_range(seed, offset, thr, scale, x, y, mask, lo, hi);
    }
    return TB_OK;
}

static int cpu_dropout_bwd(tb_backend *be, float p, const uint8_t *mask, const float *dy, float *dx,
                           size_t n)
{
    TB_TRY(tb_check_dropout(p));
    float scale = tb_dropout_scale(p);
    PAR_MAP(threads_of(be), n, dx, tb_dropout_apply_f(dy[i], mask[i], scale));
    return TB_OK;
}

void tb_cpu_install_dropout(tb_backend *be)
{
    be->dropout_fwd = cpu_dropout_fwd;
    be->dropout_bwd = cpu_dropout_bwd;
}
