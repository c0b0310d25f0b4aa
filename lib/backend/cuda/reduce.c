/*
 * reduce.c - the CUDA backend's reductions bias_grad, reduce_sum and
 * count_nonfinite: kernels/reduce.cu, deterministic (sums in double, as
 * the CPU backend's lib/backend/cpu/reduce.c).
 *
 * Nothing here synchronizes: results are ready once the compute stream is.
 */
#include "kernels/reduce.h"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

static int cuda_bias_grad(tb_backend *be, const float *dy, float *dbias, int rows, int cols,
                          int accumulate)
{
    if (rows < 0 || cols < 0)
        return TB_FAIL(TB_ERR_INVALID, "bias_grad: rows %d, cols %d", rows, cols);
    TB_TRY(tb_cuda_bind(be));
    void *part;
    TB_TRY(tb_cuda_scratch_get(be, &tb_cuda_ctx(be)->col_part,
                               tb_cuda_bias_grad_partials(rows, cols) * sizeof(double), &part));
    return tb_cuda_bias_grad(dy, dbias, rows, cols, accumulate, part, stream_of(be));
}

static int partials(tb_backend *be, double **part)
{
    void *p;
    TB_TRY(tb_cuda_scratch_get(be, &tb_cuda_ctx(be)->reduce_part,
                               TB_CUDA_REDUCE_PARTIALS * sizeof(double), &p));
    *part = p;
    return TB_OK;
}

static int cuda_reduce_sum(tb_backend *be, const float *x, size_t n, float *out)
{
    double *part;
    TB_TRY(tb_cuda_bind(be));
    TB_TRY(partials(be, &part));
    return tb_cuda_reduce_sum(x, n, out, part, stream_of(be));
}

static int cuda_count_nonfinite(tb_backend *be, const float *x, size_t n, float *out)
{
    double *part;
    TB_TRY(tb_cuda_bind(be));
    TB_TRY(partials(be, &part));
    return tb_cuda_count_nonfinite(x, n, out, part, stream_of(be));
}

void tb_cuda_install_reduce(tb_backend *be)
{
    be->bias_grad = cuda_bias_grad;
    be->reduce_sum = cuda_reduce_sum;
    be->count_nonfinite = cuda_count_nonfinite;
}
