/*
 * layernorm.cu - layer norm forward and backward: the CUDA backend's
 * layernorm_fwd/bwd (lib/backend/cuda/attention.c calls the launchers of layernorm.h).
 *
 * Variants (tb_ln_variant), picked at run time:
 *   unfused  eager PyTorch's decomposition: one kernel per step, each a
 *            pass over global memory through the temporaries (mean, center,
 *            square, variance, rstd, normalize, scale, shift: 8 launches
 *            forward; 13 backward). The baseline of the fused layer norm
 *            technique.
 *   fused    apex FusedLayerNorm: one block per row computes the row's
 *            statistics and writes y (dx in the backward) in one launch;
 *            the backward adds one column kernel for dgamma/dbeta.
 * Both run kernels/layernorm_math.h's steps (shared with lib/backend/cpu/attention.c and
 * tested there). Row sums are in double with a fixed tree (each thread
 * strides the row, then xor-butterfly warp sums, then warp 0 sums the
 * warps), one function for both variants: fused and unfused give the same
 * bits on one GPU. Column sums (dgamma, dbeta): kernels/colsum.cuh's
 * two-stage column sum (32-column blocks by row chunks, then the chunks in
 * order), in double, both sums in one pass. Deterministic. The unfused
 * passes walk a 2-D grid (rows on y, columns on x): no per-element division.
 *
 * Build check (no GPU needed): bazel build //kernels:attn_cuda.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "kernels/colsum.cuh"
#include "kernels/launch.cuh"
#include "kernels/layernorm.h"
#include "kernels/layernorm_math.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

#define LN_THREADS 256
#define LN_WARPS (LN_THREADS / 32)
#define FULL_MASK 0xffffffffu

/* Sum over the block, in double, returned to every thread. REQUIRES: all
 * LN_THREADS threads call it; sh has LN_WARPS doubles. */
__device__ double ln_block_sum(double v, double *sh)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int d = 16; d > 0; d /= 2)
        v += __shfl_xor_sync(FULL_MASK, v, d);
    __syncthreads(); /* sh may still be read by a previous call */
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    double t = lane < LN_WARPS ? sh[lane] : 0.0;
    for (int d = 16; d > 0; d /= 2)
        t += __shfl_xor_sync(FULL_MASK, t, d);
    return t;
}

/* ---------------------------------------------------------------- fused */

__global__ void __launch_bounds__(LN_THREADS)
    ln_fwd_fused_kernel(const float *x, const float *gamma, const float *beta, float eps,
                        int cols, float *y, float *save_mean, float *save_rstd)
{
    __shared__ double sh[LN_WARPS];
    size_t o = (size_t)blockIdx.x * cols;
    double s = 0.0;
    for (int c = threadIdx.x; c < cols; c += LN_THREADS)
        s += x[o + c];
    float mean = (float)(ln_block_sum(s, sh) / cols);
    double v = 0.0;
    for (int c = threadIdx.x; c < cols; c += LN_THREADS)
        v += tb_ln_square_f(tb_ln_center_f(x[o + c], mean));
    float rstd = tb_ln_rstd_f((float)(ln_block_sum(v, sh) / cols), eps);
    for (int c = threadIdx.x; c < cols; c += LN_THREADS)
        y[o + c] = tb_ln_affine_f(tb_ln_normalize_f(tb_ln_center_f(x[o + c], mean), rstd),
                                  gamma[c], beta[c]);
    if (threadIdx.x == 0) {
        save_mean[blockIdx.x] = mean;
        save_rstd[blockIdx.x] = rstd;
    }
}

__global__ void __launch_bounds__(LN_THREADS)
    ln_bwd_fused_kernel(const float *x, const float *dy, const float *gamma,
                        const float *save_mean, const float *save_rstd, int cols, float *dx)
{
    __shared__ double sh[LN_WARPS];
    size_t o = (size_t)blockIdx.x * cols;
    float mean = save_mean[blockIdx.x], rstd = save_rstd[blockIdx.x];
    double a = 0.0, c2 = 0.0;
    for (int c = threadIdx.x; c < cols; c += LN_THREADS) {
        float xhat = tb_ln_normalize_f(tb_ln_center_f(x[o + c], mean), rstd);
        float g = TB_MUL(dy[o + c], gamma[c]);
        a += g;
        c2 += TB_MUL(g, xhat);
    }
    float af = (float)(ln_block_sum(a, sh) / cols);
    float cf = (float)(ln_block_sum(c2, sh) / cols);
    for (int c = threadIdx.x; c < cols; c += LN_THREADS) {
        float xhat = tb_ln_normalize_f(tb_ln_center_f(x[o + c], mean), rstd);
        dx[o + c] = tb_ln_dx_f(TB_MUL(dy[o + c], gamma[c]), xhat, af, cf, rstd);
    }
}

/* dgamma, dbeta's terms for row r at element i: acc[0] += dy * xhat, acc[1]
 * += dy. prod == NULL: dy * xhat recomputed from x and the statistics
 * (fused); otherwise read from prod (unfused). */
struct ln_param_term {
    const float *x, *dy, *prod, *mean, *rstd;
    __device__ void operator()(int r, size_t i, double *acc) const
    {
        acc[0] += prod ? prod[i]
                       : TB_MUL(dy[i], tb_ln_normalize_f(tb_ln_center_f(x[i], mean[r]), rstd[r]));
        acc[1] += dy[i];
    }
};

/* ---------------------------------------------------------------- unfused */

template <int PASS>
__global__ void ln_pass_kernel(const float *a, const float *b, const float *row,
                               const float *col, float *out, int rows, int cols)
{
    TB_ROWS_COLS_2D(r, c, rows, cols)
    {
        size_t i = (size_t)r * cols + c;
        float v;
        switch (PASS) {
        case TB_LN_PASS_CENTER:
        case TB_LN_PASS_SUB_ROW: v = tb_ln_center_f(a[i], row[r]); break;
        case TB_LN_PASS_SQUARE: v = tb_ln_square_f(a[i]); break;
        case TB_LN_PASS_SCALE_ROW: v = tb_ln_normalize_f(a[i], row[r]); break;
        case TB_LN_PASS_MUL_COL: v = TB_MUL(a[i], col[c]); break;
        case TB_LN_PASS_ADD_COL: v = TB_ADD(a[i], col[c]); break;
        case TB_LN_PASS_MUL: v = TB_MUL(a[i], b[i]); break;
        default: v = TB_ADD(a[i], -b[i]); break;
        }
        out[i] = v;
    }
}

/* out[r] = mean of row r of a: one block per row, ln_block_sum. */
__global__ void __launch_bounds__(LN_THREADS)
    ln_row_mean_kernel(const float *a, float *out, int cols)
{
    __shared__ double sh[LN_WARPS];
    size_t o = (size_t)blockIdx.x * cols;
    double s = 0.0;
    for (int c = threadIdx.x; c < cols; c += LN_THREADS)
        s += a[o + c];
    s = ln_block_sum(s, sh);
    if (threadIdx.x == 0)
        out[blockIdx.x] = (float)(s / cols);
}

/* var -> rstd in place */
__global__ void ln_rstd_kernel(float *v, float eps, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows)
        v[r] = tb_ln_rstd_f(v[r], eps);
}

template <int PASS>
static int ln_pass(const float *a, const float *b, const float *row, const float *col,
                   float *out, int rows, int cols, cudaStream_t s)
{
    ln_pass_kernel<PASS><<<tb_grid_2d(rows, cols), TB_BLOCK, 0, s>>>(a, b, row, col, out, rows,
                                                                     cols);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

static int ln_row_mean(const float *a, float *out, int rows, int cols, cudaStream_t s)
{
    ln_row_mean_kernel<<<rows, LN_THREADS, 0, s>>>(a, out, cols);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

static int ln_param_grad(const float *x, const float *dy, const float *prod, const float *mean,
                         const float *rstd, int rows, int cols, float *dgamma, float *dbeta,
                         int accumulate, double *part, cudaStream_t s)
{
    tb_colsum_out<2> out = {{dgamma, dbeta}};
    return tb_colsum_launch<2>(ln_param_term{x, dy, prod, mean, rstd}, rows, cols, part, out,
                               accumulate, s);
}

static int ln_fwd_unfused(const float *x, const float *gamma, const float *beta, float eps,
                          int rows, int cols, float *y, float *mean, float *rstd, float *xc,
                          float *tmp, cudaStream_t s)
{
    TB_TRY(ln_row_mean(x, mean, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_CENTER>(x, NULL, mean, NULL, xc, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_SQUARE>(xc, NULL, NULL, NULL, tmp, rows, cols, s));
    TB_TRY(ln_row_mean(tmp, rstd, rows, cols, s));
    ln_rstd_kernel<<<(rows + 255) / 256, 256, 0, s>>>(rstd, eps, rows);
    TB_CHECK_LAUNCH();
    TB_TRY(ln_pass<TB_LN_PASS_SCALE_ROW>(xc, NULL, rstd, NULL, tmp, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_MUL_COL>(tmp, NULL, NULL, gamma, y, rows, cols, s));
    return ln_pass<TB_LN_PASS_ADD_COL>(y, NULL, NULL, beta, y, rows, cols, s);
}

/* native_layer_norm_backward's decomposition; lib/backend/cpu/attention.c's order. */
static int ln_bwd_unfused(const float *x, const float *dy, const float *gamma,
                          const float *mean, const float *rstd, int rows, int cols, float *dx,
                          float *dgamma, float *dbeta, int accumulate, float *xhat, float *g,
                          float *rowtmp, double *part, cudaStream_t s)
{
    float *a = rowtmp, *c = rowtmp + rows;
    TB_TRY(ln_pass<TB_LN_PASS_CENTER>(x, NULL, mean, NULL, xhat, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_SCALE_ROW>(xhat, NULL, rstd, NULL, xhat, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_MUL>(dy, xhat, NULL, NULL, dx, rows, cols, s));
    TB_TRY(ln_param_grad(x, dy, dx, mean, rstd, rows, cols, dgamma, dbeta, accumulate, part, s));
    TB_TRY(ln_pass<TB_LN_PASS_MUL_COL>(dy, NULL, NULL, gamma, g, rows, cols, s));
    TB_TRY(ln_row_mean(g, a, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_MUL>(g, xhat, NULL, NULL, dx, rows, cols, s));
    TB_TRY(ln_row_mean(dx, c, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_CENTER>(g, NULL, a, NULL, g, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_SCALE_ROW>(xhat, NULL, c, NULL, dx, rows, cols, s));
    TB_TRY(ln_pass<TB_LN_PASS_SUB>(g, dx, NULL, NULL, g, rows, cols, s));
    return ln_pass<TB_LN_PASS_SCALE_ROW>(g, NULL, rstd, NULL, dx, rows, cols, s);
}

extern "C" int tb_cuda_layernorm_fwd(int variant, const float *x, const float *gamma,
                                     const float *beta, float eps, int rows, int cols, float *y,
                                     float *save_mean, float *save_rstd, float *tmp1,
                                     float *tmp2, void *stream)
{
    if (rows <= 0 || cols <= 0)
        return TB_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (variant == 0)
        return ln_fwd_unfused(x, gamma, beta, eps, rows, cols, y, save_mean, save_rstd, tmp1,
                              tmp2, s);
    ln_fwd_fused_kernel<<<rows, LN_THREADS, 0, s>>>(x, gamma, beta, eps, cols, y, save_mean,
                                                    save_rstd);
    TB_CHECK_LAUNCH();
    return TB_OK;
}

extern "C" int tb_cuda_layernorm_bwd(int variant, const float *x, const float *dy,
                                     const float *gamma, const float *save_mean,
                                     const float *save_rstd, int rows, int cols, float *dx,
                                     float *dgamma, float *dbeta, int accumulate, float *tmp1,
                                     float *tmp2, float *rowtmp, double *col_part,
                                     void *stream)
{
    if (rows < 0 || cols <= 0)
        return TB_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (rows == 0) /* nothing to normalize; dgamma, dbeta still written */
        return ln_param_grad(x, dy, NULL, save_mean, save_rstd, 0, cols, dgamma, dbeta,
                             accumulate, col_part, s);
    if (variant == 0)
        return ln_bwd_unfused(x, dy, gamma, save_mean, save_rstd, rows, cols, dx, dgamma, dbeta,
                              accumulate, tmp1, tmp2, rowtmp, col_part, s);
    ln_bwd_fused_kernel<<<rows, LN_THREADS, 0, s>>>(x, dy, gamma, save_mean, save_rstd, cols,
                                                    dx);
    TB_CHECK_LAUNCH();
    return ln_param_grad(x, dy, NULL, save_mean, save_rstd, rows, cols, dgamma, dbeta,
                         accumulate, col_part, s);
}

extern "C" size_t tb_cuda_layernorm_bwd_partials(int rows, int cols)
{
    return tb_colsum_partials(2, rows, cols);
}
