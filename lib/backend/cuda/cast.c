/*
 * cast.c - the CUDA backend's cast_f32_to_lowp / cast_lowp_to_f32
 * slots (lib/backend/backend.h): argument checks on the host with the CPU backend's
 * rules, then kernels/cast.cu on the compute stream (the same
 * kernels/cast_math.h the CPU runs, so results are bitwise equal).
 * Nothing here synchronizes.
 */
#include <stdint.h>

#include "kernels/cast.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static int cuda_cast_f32_to_lowp(tb_backend *be, tb_dtype dtype, const float *x, void *lowp,
                                 size_t n)
{
    TB_TRY(tb_check_cast(dtype, x, lowp, n, "cast_f32_to_lowp"));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_cast_f32_to_lowp(dtype == TB_BF16, x, lowp, n,
                                    (void *)tb_cuda_ctx(be)->compute);
}

static int cuda_cast_lowp_to_f32(tb_backend *be, tb_dtype dtype, const void *lowp, float *y,
                                 size_t n)
{
    TB_TRY(tb_check_cast(dtype, lowp, y, n, "cast_lowp_to_f32"));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_cast_lowp_to_f32(dtype == TB_BF16, lowp, y, n,
                                    (void *)tb_cuda_ctx(be)->compute);
}

void tb_cuda_install_cast(tb_backend *be)
{
    be->cast_f32_to_lowp = cuda_cast_f32_to_lowp;
    be->cast_lowp_to_f32 = cuda_cast_lowp_to_f32;
}
