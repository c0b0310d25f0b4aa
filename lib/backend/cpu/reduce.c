/*
 * reduce.c - the CPU backend's reductions: bias_grad, reduce_sum, count_nonfinite.
 *
 * Determinism (fixed splits, see ops_common.h):
 *   reduce_sum   chunks of RS_CHUNK, partial sums in double, added in order
 *   bias_grad    one thread owns each column block and sums its rows in
 *                order, in double
 */
#include <stddef.h>

#include "kernels/elementwise_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

#define RS_CHUNK ((size_t)16384)
#define RS_MAX_CHUNKS ((size_t)1024)
#define BG_BLOCK 64 /* bias_grad columns per thread task */

/* dbias[c0, c0 + cw) from all rows, in row order, in double. */
static void bias_grad_block(const float *dy, float *dbias, int rows, int cols, int c0, int cw,
                            int accumulate)
{
    double acc[BG_BLOCK] = {0};
    for (int r = 0; r < rows; r++) {
        const float *row = dy + (size_t)r * cols + c0;
#pragma omp simd
        for (int j = 0; j < cw; j++)
            acc[j] += row[j];
    }
    for (int j = 0; j < cw; j++)
        dbias[c0 + j] = (float)((accumulate ? (double)dbias[c0 + j] : 0.0) + acc[j]);
}

static int cpu_bias_grad(tb_backend *be, const float *dy, float *dbias, int rows, int cols,
                         int accumulate)
{
    int t = threads_of(be);
    if (rows < 0 || cols < 0)
        return TB_FAIL(TB_ERR_INVALID, "bias_grad: rows %d, cols %d", rows, cols);
    int blocks = (cols + BG_BLOCK - 1) / BG_BLOCK;
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int b = 0; b < blocks; b++) {
        int c0 = b * BG_BLOCK;
        int cw = cols - c0 < BG_BLOCK ? cols - c0 : BG_BLOCK;
        bias_grad_block(dy, dbias, rows, cols, c0, cw, accumulate);
    }
    return TB_OK;
}

static int cpu_reduce_sum(tb_backend *be, const float *x, size_t n, float *out)
{
    int t = threads_of(be);
    size_t chunks = (n + RS_CHUNK - 1) / RS_CHUNK;
    chunks = chunks < 1 ? 1 : chunks > RS_MAX_CHUNKS ? RS_MAX_CHUNKS : chunks;
    size_t per = (n + chunks - 1) / chunks;
    double part[RS_MAX_CHUNKS];
#pragma omp parallel for num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t lo = c * per < n ? c * per : n;
        size_t hi = lo + per < n ? lo + per : n;
        part[c] = sum_f64(x + lo, hi - lo);
    }
    double total = 0.0;
    for (size_t c = 0; c < chunks; c++)
        total += part[c];
    out[0] = (float)total;
    return TB_OK;
}

static int cpu_count_nonfinite(tb_backend *be, const float *x, size_t n, float *out)
{
    int t = threads_of(be);
    size_t count = 0;
#pragma omp parallel for simd num_threads(t) schedule(static) reduction(+ : count) \
    if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        count += (size_t)tb_nonfinite_f(x[i]);
    out[0] = (float)count;
    return TB_OK;
}

void tb_cpu_install_reduce(tb_backend *be)
{
    be->bias_grad = cpu_bias_grad;
    be->reduce_sum = cpu_reduce_sum;
    be->count_nonfinite = cpu_count_nonfinite;
}
