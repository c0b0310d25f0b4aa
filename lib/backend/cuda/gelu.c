/*
 * gelu.c - the CUDA backend's gelu_fwd/bwd and gelu_tanh_fwd/bwd: the fused
 * and unfused variants of kernels/gelu.cu (kernels/gelu_math.h, the same
 * math as the CPU backend's lib/backend/cpu/gelu.c).
 *
 * Build check (no GPU here): bazel build //lib/backend/cuda/...
 */
#include "kernels/gelu.h"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static cuda_ctx *ctx_of(tb_backend *be) { return (cuda_ctx *)be->ctx; }

/* The unfused variant materializes intermediates as eager PyTorch does;
 * they come from this backend's allocator (so peak memory shows them) and
 * are kept between calls, grown when n grows. */
static int gelu_scratch(tb_backend *be, size_t n, float **t1, float **t2)
{
    cuda_ctx *c = ctx_of(be);

    if (c->gelu_tmp_n < n) {
        /* cudaFree waits for queued kernels that may still read them. */
        TB_TRY(tb_cuda_dev_free(be, c->gelu_tmp1));
        TB_TRY(tb_cuda_dev_free(be, c->gelu_tmp2));
        c->gelu_tmp1 = c->gelu_tmp2 = NULL;
        c->gelu_tmp_n = 0;
        TB_TRY(tb_cuda_dev_alloc(be, (void **)&c->gelu_tmp1, n * sizeof(float)));
        TB_TRY(tb_cuda_dev_alloc(be, (void **)&c->gelu_tmp2, n * sizeof(float)));
        c->gelu_tmp_n = n;
    }
    tb_cuda_alloc_mark_graph(be, c->gelu_tmp1); /* held if grown while a graph lives */
    tb_cuda_alloc_mark_graph(be, c->gelu_tmp2);
    *t1 = c->gelu_tmp1;
    *t2 = c->gelu_tmp2;
    return TB_OK;
}

static int gelu_prepare(tb_backend *be, tb_gelu_variant v, size_t n, float **t1, float **t2)
{
    *t1 = *t2 = NULL;
    if (v != TB_GELU_FUSED && v != TB_GELU_UNFUSED)
        return TB_FAIL(TB_ERR_INVALID, "unknown GELU variant %d", (int)v);
    TB_TRY(tb_cuda_bind(be));
    if (v == TB_GELU_UNFUSED && n > 0)
        TB_TRY(gelu_scratch(be, n, t1, t2));
    return TB_OK;
}

static int cuda_gelu_fwd(tb_backend *be, tb_gelu_variant v, const float *x, float *y, size_t n)
{
    float *t1, *t2;

    TB_TRY(gelu_prepare(be, v, n, &t1, &t2));
    TB_TRY(tb_cuda_gelu_fwd((int)v, x, y, n, t1, t2, ctx_of(be)->compute));
    return TB_OK;
}

static int cuda_gelu_bwd(tb_backend *be, tb_gelu_variant v, const float *x, const float *dy,
                         float *dx, size_t n)
{
    float *t1, *t2;

    TB_TRY(gelu_prepare(be, v, n, &t1, &t2));
    TB_TRY(tb_cuda_gelu_bwd((int)v, x, dy, dx, n, t1, t2, ctx_of(be)->compute));
    return TB_OK;
}

/* The unfused tanh backward's third temporary, kept and grown as the
 * other two (tb_cuda_alloc_release frees it with the backend). */
static int gelu_scratch3(tb_backend *be, size_t n, float **t3)
{
    cuda_ctx *c = ctx_of(be);

    if (c->gelu_tmp3_n < n) {
        TB_TRY(tb_cuda_dev_free(be, c->gelu_tmp3));
        c->gelu_tmp3 = NULL;
        c->gelu_tmp3_n = 0;
        TB_TRY(tb_cuda_dev_alloc(be, (void **)&c->gelu_tmp3, n * sizeof(float)));
        c->gelu_tmp3_n = n;
    }
    tb_cuda_alloc_mark_graph(be, c->gelu_tmp3);
    *t3 = c->gelu_tmp3;
    return TB_OK;
}

static int cuda_gelu_tanh_fwd(tb_backend *be, tb_gelu_variant v, const float *x, float *y,
                              size_t n)
{
    float *t1, *t2;

    TB_TRY(gelu_prepare(be, v, n, &t1, &t2));
    TB_TRY(tb_cuda_gelu_tanh_fwd((int)v, x, y, n, t1, t2, ctx_of(be)->compute));
    return TB_OK;
}

static int cuda_gelu_tanh_bwd(tb_backend *be, tb_gelu_variant v, const float *x, const float *dy,
                              float *dx, size_t n)
{
    float *t1, *t2, *t3 = NULL;

    TB_TRY(gelu_prepare(be, v, n, &t1, &t2));
    if (v == TB_GELU_UNFUSED && n > 0)
        TB_TRY(gelu_scratch3(be, n, &t3));
    TB_TRY(tb_cuda_gelu_tanh_bwd((int)v, x, dy, dx, n, t1, t2, t3, ctx_of(be)->compute));
    return TB_OK;
}

void tb_cuda_install_gelu(tb_backend *be)
{
    be->gelu_fwd = cuda_gelu_fwd;
    be->gelu_bwd = cuda_gelu_bwd;
    be->gelu_tanh_fwd = cuda_gelu_tanh_fwd;
    be->gelu_tanh_bwd = cuda_gelu_tanh_bwd;
}
