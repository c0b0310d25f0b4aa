/*
 * elementwise.c - the CUDA backend's element-wise slots relu_fwd/bwd, add, axpby
 * and bias_add: host-side checks (the CPU backend's rules), then the
 * launchers of kernels/elementwise.cu on the compute stream.
 *
 * Nothing here synchronizes: results are ready once the compute stream is.
 */
#include "kernels/elementwise.h"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

static int cuda_relu_fwd(tb_backend *be, const float *x, float *y, size_t n)
{
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_relu_fwd(x, y, n, stream_of(be));
}

static int cuda_relu_bwd(tb_backend *be, const float *y, const float *dy, float *dx, size_t n)
{
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_relu_bwd(y, dy, dx, n, stream_of(be));
}

static int cuda_add(tb_backend *be, const float *a, const float *b, float *y, size_t n)
{
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_add(a, b, y, n, stream_of(be));
}

static int cuda_axpby(tb_backend *be, float alpha, const float *x, float beta, float *y, size_t n)
{
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_axpby(alpha, x, beta, y, n, stream_of(be));
}

static int cuda_bias_add(tb_backend *be, float *y, const float *bias, int rows, int cols)
{
    if (rows < 0 || cols < 0)
        return TB_FAIL(TB_ERR_INVALID, "bias_add: rows %d, cols %d", rows, cols);
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_bias_add(y, bias, (size_t)rows, (size_t)cols, stream_of(be));
}

void tb_cuda_install_elementwise(tb_backend *be)
{
    be->relu_fwd = cuda_relu_fwd;
    be->relu_bwd = cuda_relu_bwd;
    be->add = cuda_add;
    be->axpby = cuda_axpby;
    be->bias_add = cuda_bias_add;
}
