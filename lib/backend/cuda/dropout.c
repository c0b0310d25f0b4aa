/*
 * dropout.c - the CUDA backend's dropout_fwd/bwd: kernels/elementwise.cu, with
 * the counter-based mask of kernels/rng_math.h (the same mask as the CPU
 * backend's for the same seed and offset).
 *
 * Nothing here synchronizes: results are ready once the compute stream is.
 */
#include <stdint.h>

#include "kernels/elementwise.h"
#include "kernels/elementwise_math.h"
#include "kernels/rng_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

static int cuda_dropout_fwd(tb_backend *be, float p, uint64_t seed, uint64_t offset,
                            const float *x, float *y, uint8_t *mask, size_t n)
{
    TB_TRY(tb_check_dropout(p));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_dropout_fwd(seed, offset, tb_dropout_threshold(p), tb_dropout_scale(p), x, y,
                               mask, n, stream_of(be));
}

static int cuda_dropout_bwd(tb_backend *be, float p, const uint8_t *mask, const float *dy,
                            float *dx, size_t n)
{
    TB_TRY(tb_check_dropout(p));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_dropout_bwd(tb_dropout_scale(p), mask, dy, dx, n, stream_of(be));
}

void tb_cuda_install_dropout(tb_backend *be)
{
    be->dropout_fwd = cuda_dropout_fwd;
    be->dropout_bwd = cuda_dropout_bwd;
}
