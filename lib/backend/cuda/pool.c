/*
 * pool.c - the CUDA backend's pool_fwd/bwd: max (with argmax) and average,
 * NCHW and NHWC (kernels/pool.cu, gather backward).
 *
 * Nothing here synchronizes: results are ready once the compute stream is.
 */
#include <stdint.h>

#include "kernels/pool.h"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

/* The CPU backend's rules (lib/backend/cpu/pool.c pool_check), PyTorch's floor mode. */
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

void tb_cuda_install_pool(tb_backend *be)
{
    be->pool_fwd = cuda_pool_fwd;
    be->pool_bwd = cuda_pool_bwd;
}
