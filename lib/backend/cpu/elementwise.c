/*
 * elementwise.c - the CPU backend's element-wise slots relu_fwd/bwd, add, axpby and
 * bias_add (kernels/elementwise_math.h). Shared setup: ops_common.h.
 */
#include <stddef.h>

#include "kernels/elementwise_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

/* ---------------------------------------------------------------- element-wise */

static int cpu_relu_fwd(tb_backend *be, const float *x, float *y, size_t n)
{
    PAR_MAP(threads_of(be), n, y, tb_relu_f(x[i]));
    return TB_OK;
}

static int cpu_relu_bwd(tb_backend *be, const float *y, const float *dy, float *dx, size_t n)
{
    PAR_MAP(threads_of(be), n, dx, tb_relu_bwd_f(y[i], dy[i]));
    return TB_OK;
}

static int cpu_add(tb_backend *be, const float *a, const float *b, float *y, size_t n)
{
    PAR_MAP(threads_of(be), n, y, tb_add_f(a[i], b[i]));
    return TB_OK;
}

static int cpu_axpby(tb_backend *be, float alpha, const float *x, float beta, float *y, size_t n)
{
    int t = threads_of(be);
    if (beta == 0.0f) /* y may hold garbage (NaN): never read it */
        PAR_MAP(t, n, y, alpha * x[i]);
    else
        PAR_MAP(t, n, y, tb_axpby_f(alpha, x[i], beta, y[i]));
    return TB_OK;
}

static int cpu_bias_add(tb_backend *be, float *y, const float *bias, int rows, int cols)
{
    int t = threads_of(be);
    if (rows < 0 || cols < 0)
        return TB_FAIL(TB_ERR_INVALID, "bias_add: rows %d, cols %d", rows, cols);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++)
            yr[c] += bias[c];
    }
    return TB_OK;
}

void tb_cpu_install_elementwise(tb_backend *be)
{
    be->relu_fwd = cpu_relu_fwd;
    be->relu_bwd = cpu_relu_bwd;
    be->add = cpu_add;
    be->axpby = cpu_axpby;
    be->bias_add = cpu_bias_add;
}
