/*
 * gemm.c - the CUDA backend's gemm slot (lib/backend/backend.h) on cuBLAS.
 *
 * Row-major through column-major cuBLAS: a row-major m x n matrix is the
 * column-major n x m matrix of its transpose, so C = op(A) op(B) in row
 * major is C^T = op(B)^T op(A)^T in column major: cublasGemmEx with the
 * operands swapped (B first), m and n swapped, and the same transpose
 * flags and leading dimensions. Nothing is copied.
 *
 * Math (tb_math):
 *   TB_MATH_F32   CUBLAS_COMPUTE_32F: plain fp32 (PyTorch's allow_tf32 = False)
 *   TB_MATH_TF32  CUBLAS_COMPUTE_32F_FAST_TF32: fp32 storage, tensor-core
 *                 TF32 multiplies with fp32 accumulation (allow_tf32 = True)
 *   TB_MATH_LOWP  not through gemm (its operands are float *): the gemm_lowp
 *                 slot takes bf16 / fp16 A and B (CUDA_R_16BF / CUDA_R_16F)
 *                 with an fp32 C and CUBLAS_COMPUTE_32F (fp32 accumulation,
 *                 tensor cores), autocast's linear.
 * The compute type is per call, so no handle state (cublasSetMathMode) is
 * touched and calls with different math can interleave.
 * beta == 0: cuBLAS does not read C then, as the slot requires.
 */
#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

static int gemm_check(int trans_a, int trans_b, int m, int n, int k, int lda, int ldb, int ldc,
                      tb_math math)
{
    if (math == TB_MATH_LOWP)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "gemm on CUDA: TB_MATH_LOWP takes bf16/fp16 operands: "
                       "use the gemm_lowp slot");
    if (math != TB_MATH_F32 && math != TB_MATH_TF32)
        return TB_FAIL(TB_ERR_INVALID, "gemm: unknown math mode %d", (int)math);
    if (m < 0 || n < 0 || k < 0)
        return TB_FAIL(TB_ERR_INVALID, "gemm: m %d, n %d, k %d", m, n, k);
    /* Row-major leading dimensions: columns of the stored matrices. */
    int cols_a = trans_a ? m : k, cols_b = trans_b ? k : n;
    if (lda < (cols_a > 1 ? cols_a : 1) || ldb < (cols_b > 1 ? cols_b : 1) ||
        ldc < (n > 1 ? n : 1))
        return TB_FAIL(TB_ERR_INVALID, "gemm: leading dimensions lda %d, ldb %d, ldc %d too small "
                       "for m %d, n %d, k %d (trans_a %d, trans_b %d)", lda, ldb, ldc, m, n, k,
                       trans_a, trans_b);
    return TB_OK;
}

static int cuda_gemm(tb_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc, tb_math math)
{
    TB_TRY(gemm_check(trans_a, trans_b, m, n, k, lda, ldb, ldc, math));
    if (m == 0 || n == 0)
        return TB_OK;
    TB_TRY(tb_cuda_bind(be));
    cublasComputeType_t compute =
        math == TB_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    TB_CHECK_CUBLAS(cublasGemmEx(tb_cuda_ctx(be)->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                                 CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta, c, CUDA_R_32F, ldc,
                                 compute, CUBLAS_GEMM_DEFAULT));
    return TB_OK;
}

static int cuda_gemm_lowp(tb_backend *be, tb_dtype dtype, int trans_a, int trans_b, int m, int n,
                          int k, float alpha, const void *a, int lda, const void *b, int ldb,
                          float beta, float *c, int ldc)
{
    if (dtype != TB_BF16 && dtype != TB_F16)
        return TB_FAIL(TB_ERR_INVALID, "gemm_lowp: dtype %d is not bf16 or fp16", (int)dtype);
    TB_TRY(gemm_check(trans_a, trans_b, m, n, k, lda, ldb, ldc, TB_MATH_F32));
    if (m == 0 || n == 0)
        return TB_OK;
    TB_TRY(tb_cuda_bind(be));
    cudaDataType_t t = dtype == TB_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    TB_CHECK_CUBLAS(cublasGemmEx(tb_cuda_ctx(be)->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, t, ldb,
                                 a, t, lda, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return TB_OK;
}

void tb_cuda_install_gemm(tb_backend *be)
{
    be->gemm = cuda_gemm;
    be->gemm_lowp = cuda_gemm_lowp;
}
