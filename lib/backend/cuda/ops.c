/*
 * ops.c - the CUDA backend's own-kernel ops: the slots relu_fwd/bwd,
 * add, axpby, bias_add, bias_grad, reduce_sum, count_nonfinite,
 * dropout_fwd/bwd, pool_fwd/bwd and softmax_xent_fwd/bwd of lib/backend/backend.h.
 *
 * Each slot checks its arguments on the host with the CPU backend's rules
 * (lib/backend/cpu/ops.c), so both backends refuse the same calls, then launches
 * the kernels of one file of kernels/ on the compute stream:
 *   kernels/elementwise.cu  relu, add, axpby, bias_add, dropout
 *   kernels/reduce.cu       reduce_sum, count_nonfinite, bias_grad (deterministic)
 *   kernels/pool.cu         max/average pooling, NCHW/NHWC, gather backward
 *   kernels/xent.cu         softmax cross-entropy
 * The one check the GPU cannot make on the host is the labels' range
 * (they live in device memory): see kernels/xent.h.
 *
 * Nothing here synchronizes: results are ready once the compute stream is.
 */
#include <stdint.h>

#include "kernels/elementwise.h"
#include "kernels/elementwise_math.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/rng_math.h"
#include "kernels/xent.h"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

/* ---------------------------------------------------------------- element-wise */

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

/* ---------------------------------------------------------------- reductions */

static int cuda_bias_grad(tb_backend *be, const float *dy, float *dbias, int rows, int cols,
                          int accumulate)
{
    if (rows < 0 || cols < 0)
        return TB_FAIL(TB_ERR_INVALID, "bias_grad: rows %d, cols %d", rows, cols);
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_bias_grad(dy, dbias, (size_t)rows, (size_t)cols, accumulate, stream_of(be));
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

/* ---------------------------------------------------------------- dropout */

static int dropout_check(float p)
{
    if (!(p >= 0.0f && p <= 1.0f))
        return TB_FAIL(TB_ERR_INVALID, "dropout probability %g is outside [0, 1]", (double)p);
    return TB_OK;
}

static int cuda_dropout_fwd(tb_backend *be, float p, uint64_t seed, uint64_t offset,
                            const float *x, float *y, uint8_t *mask, size_t n)
{
    TB_TRY(dropout_check(p));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_dropout_fwd(seed, offset, tb_dropout_threshold(p), tb_dropout_scale(p), x, y,
                               mask, n, stream_of(be));
}

static int cuda_dropout_bwd(tb_backend *be, float p, const uint8_t *mask, const float *dy,
                            float *dx, size_t n)
{
    TB_TRY(dropout_check(p));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_dropout_bwd(tb_dropout_scale(p), mask, dy, dx, n, stream_of(be));
}

/* ---------------------------------------------------------------- pooling */

/* The CPU backend's rules (lib/backend/cpu/ops.c pool_check), PyTorch's floor mode. */
static int pool_geom_make(const tb_pool_desc *d, tb_pool_geom *g)
{
    if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->window < 1 || d->stride < 1 ||
        d->pad < 0 || (d->layout != TB_NCHW && d->layout != TB_NHWC) ||
        (d->kind != TB_POOL_MAX && d->kind != TB_POOL_AVG))
        return TB_FAIL(TB_ERR_INVALID, "pooling: bad descriptor n=%d c=%d h=%d w=%d window=%d "
                       "stride=%d pad=%d", d->n, d->c, d->h, d->w, d->window, d->stride, d->pad);
    if (2 * d->pad > d->window)
        return TB_FAIL(TB_ERR_INVALID, "pooling: pad %d is more than half the window %d",
                       d->pad, d->window);
    if (d->h + 2 * d->pad < d->window || d->w + 2 * d->pad < d->window)
        return TB_FAIL(TB_ERR_INVALID, "pooling: window %d larger than the padded %dx%d input",
                       d->window, d->h, d->w);
    if ((double)d->n * d->c * d->h * d->w > (double)INT32_MAX)
        return TB_FAIL(TB_ERR_INVALID, "pooling: input too large for int32 argmax indices");
    *g = (tb_pool_geom){
        .kind = (int)d->kind, .layout = (int)d->layout,
        .n = d->n, .c = d->c, .h = d->h, .w = d->w,
        .window = d->window, .stride = d->stride, .pad = d->pad,
        .p = (d->h + 2 * d->pad - d->window) / d->stride + 1,
        .q = (d->w + 2 * d->pad - d->window) / d->stride + 1,
        .area = (float)d->window * (float)d->window,
    };
    return TB_OK;
}

static int cuda_pool_fwd(tb_backend *be, const tb_pool_desc *d, const float *x, float *y,
                         int32_t *argmax)
{
    tb_pool_geom g;
    TB_TRY(pool_geom_make(d, &g));
    if (d->kind == TB_POOL_MAX && !argmax)
        return TB_FAIL(TB_ERR_INVALID, "max pooling needs an argmax buffer");
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_pool_fwd(&g, x, y, argmax, stream_of(be));
}

static int cuda_pool_bwd(tb_backend *be, const tb_pool_desc *d, const float *dy,
                         const int32_t *argmax, float *dx)
{
    tb_pool_geom g;
    TB_TRY(pool_geom_make(d, &g));
    if (d->kind == TB_POOL_MAX && !argmax)
        return TB_FAIL(TB_ERR_INVALID, "max pooling backward needs the forward's argmax");
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_pool_bwd(&g, dy, argmax, dx, stream_of(be));
}

/* ---------------------------------------------------------------- loss */

static int xent_check(int rows, int classes)
{
    if (rows < 0 || classes < 1)
        return TB_FAIL(TB_ERR_INVALID, "softmax cross-entropy: rows %d, classes %d", rows,
                       classes);
    return TB_OK;
}

static int cuda_softmax_xent_fwd(tb_backend *be, const float *logits, const int32_t *labels,
                                 int rows, int classes, float *probs, float *loss)
{
    TB_TRY(xent_check(rows, classes));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_softmax_xent_fwd(logits, labels, rows, classes, probs, loss, stream_of(be));
}

static int cuda_softmax_xent_bwd(tb_backend *be, const float *probs, const int32_t *labels,
                                 int rows, int classes, float scale, float *dlogits)
{
    TB_TRY(xent_check(rows, classes));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_softmax_xent_bwd(probs, labels, rows, classes, scale, dlogits, stream_of(be));
}

void tb_cuda_install_ops(tb_backend *be)
{
    be->relu_fwd = cuda_relu_fwd;
    be->relu_bwd = cuda_relu_bwd;
    be->add = cuda_add;
    be->axpby = cuda_axpby;
    be->bias_add = cuda_bias_add;
    be->bias_grad = cuda_bias_grad;
    be->reduce_sum = cuda_reduce_sum;
    be->count_nonfinite = cuda_count_nonfinite;
    be->dropout_fwd = cuda_dropout_fwd;
    be->dropout_bwd = cuda_dropout_bwd;
    be->pool_fwd = cuda_pool_fwd;
    be->pool_bwd = cuda_pool_bwd;
    be->softmax_xent_fwd = cuda_softmax_xent_fwd;
    be->softmax_xent_bwd = cuda_softmax_xent_bwd;
}
