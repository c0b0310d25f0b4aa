/* amp.c - see amp.h. */
#include "lib/nn/amp.h"

#include <stdio.h>

int tb_amp_buf_alloc(tb_layer *l, size_t n, void **buf)
{
    *buf = NULL;
    if (!tb_amp_on(l->ctx))
        return TB_OK;
    tb_backend *be = l->ctx->be;
    int rc = be->dev_alloc(be, buf, n * TB_LOWP_BYTES);
    if (rc != TB_OK)
        return TB_FAIL(rc, "allocating low-precision copies of layer %s", l->name);
    return TB_OK;
}

void tb_amp_buf_free(tb_layer *l, void **buf)
{
    if (*buf)
        l->ctx->be->dev_free(l->ctx->be, *buf);
    *buf = NULL;
}

int tb_amp_cast(tb_layer_ctx *ctx, const float *x, void *lowp, size_t n)
{
    return ctx->be->cast_f32_to_lowp(ctx->be, ctx->amp, x, lowp, n);
}

int tb_amp_probe(tb_backend *be, tb_dtype dtype)
{
    if (dtype == TB_F32)
        return TB_OK;
    float one = 1.0f, *dev = NULL;
    void *lowp = NULL;
    int rc;
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&dev, sizeof one), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, &lowp, 2 * TB_LOWP_BYTES), out_free);
    TB_TRY_GOTO(rc, be->copy_h2d(be, dev, &one, sizeof one, NULL), out_free);
    TB_TRY_GOTO(rc, be->cast_f32_to_lowp(be, dtype, dev, lowp, 1), out_free);
    rc = be->gemm_lowp(be, dtype, 0, 0, 1, 1, 1, 1.0f, lowp, 1, lowp, 1, 0.0f, dev, 1);
    if (rc != TB_OK) {
        /* The refusal's own reason (which CPU ISA lacks what) leads the
         * message: callers that turn it into an n/a row show only this one. */
        char why[256];
        snprintf(why, sizeof why, "%s", tb_error_message());
        rc = TB_FAIL(rc, "--amp=%s is not available on the %s backend (%s)",
                     dtype == TB_F16 ? "fp16" : "bf16", be->name, why);
    }

out_free:
    if (lowp)
        be->dev_free(be, lowp);
    if (dev)
        be->dev_free(be, dev);
    return rc;
}

int tb_amp_gemm_ld(tb_layer_ctx *ctx, int ta, int tb, int m, int n, int k, const float *a,
                   const void *a_lowp, int lda, const float *b, const void *b_lowp, int ldb,
                   float beta, float *c, int ldc)
{
    tb_backend *be = ctx->be;
    if (!tb_amp_on(ctx))
        return be->gemm(be, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc, ctx->math);
    return be->gemm_lowp(be, ctx->amp, ta, tb, m, n, k, 1.0f, a_lowp, lda, b_lowp, ldb, beta,
                         c, ldc);
}

int tb_amp_gemm(tb_layer_ctx *ctx, int ta, int tb, int m, int n, int k, const float *a,
                const void *a_lowp, const float *b, const void *b_lowp, float beta, float *c)
{
    return tb_amp_gemm_ld(ctx, ta, tb, m, n, k, a, a_lowp, ta ? m : k, b, b_lowp, tb ? k : n,
                          beta, c, n);
}
