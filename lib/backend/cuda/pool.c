/*
 * pool.c - the CUDA backend's pool_fwd/bwd: max (with argmax) and average,
 * NCHW and NHWC (kernels/pool.cu, gather backward).
 *
 * Nothing here synchronizes: results are ready once the compute stream is.
 */
#include <stdint.h>

#include "kernels/pool.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

/* lib/backend/checks.h's rules, PyTorch's floor mode. */
static int pool_geom_make(const tb_pool_desc *d, tb_pool_geom *g)
{
    int p, q;
    TB_TRY(tb_check_pool(d, &p, &q));
    if (d->dtype != TB_F32) /* no low-precision activations here (relu_fwd_lowp NULL) */
        return TB_FAIL(TB_ERR_UNSUPPORTED, "pooling: the CUDA backend keeps activations fp32");
    *g = (tb_pool_geom){
        .kind = (int)d->kind, .layout = (int)d->layout,
        .n = d->n, .c = d->c, .h = d->h, .w = d->w,
        .window = d->window, .stride = d->stride, .pad = d->pad,
        .p = p,
        .q = q,
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
