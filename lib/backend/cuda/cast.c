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
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static int cast_check(tb_dtype dtype, const void *a, const void *b, size_t n, const char *op)
{
    if (dtype != TB_BF16 && dtype != TB_F16)
        return TB_FAIL(TB_ERR_INVALID, "%s: dtype %d is not bf16 or fp16", op, (int)dtype);
    if (n > 0 && (!a || !b))
        return TB_FAIL(TB_ERR_INVALID, "%s: NULL buffer for %zu elements", op, n);
    return TB_OK;
}

static int cuda_cast_f32_to_lowp(tb_backend *be, tb_dtype dtype, const float *x, void *lowp,
                                 size_t n)
{
    TB_TRY(cast_check(dtype, x, lowp, n, "cast_f32_to_lowp"));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_cast_f32_to_lowp(dtype == TB_BF16, x, lowp, n,
                                    (void *)tb_cuda_ctx(be)->compute);
}

static int cuda_cast_lowp_to_f32(tb_backend *be, tb_dtype dtype, const void *lowp, float *y,
                                 size_t n)
{
    TB_TRY(cast_check(dtype, lowp, y, n, "cast_lowp_to_f32"));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_cast_lowp_to_f32(dtype == TB_BF16, lowp, y, n,
                                    (void *)tb_cuda_ctx(be)->compute);
}

void tb_cuda_install_cast(tb_backend *be)
{
    be->cast_f32_to_lowp = cuda_cast_f32_to_lowp;
    be->cast_lowp_to_f32 = cuda_cast_lowp_to_f32;
}
