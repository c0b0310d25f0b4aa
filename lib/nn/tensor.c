/* tensor.c - see tensor.h. */
#include "lib/nn/tensor.h"

#include <string.h>

int tb_tensor_alloc_as(tb_backend *be, int n, int c, int h, int w, tb_dtype dtype,
                       tb_tensor *t)
{
    memset(t, 0, sizeof *t);
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return TB_FAIL(TB_ERR_INVALID, "tb_tensor_alloc: bad shape (%d, %d, %d, %d)", n, c, h, w);
    void *p = NULL;
    size_t bytes = (size_t)n * c * h * w * tb_dtype_bytes(dtype);
    int rc = be->dev_alloc(be, &p, bytes);
    if (rc != TB_OK)
        return TB_FAIL(rc, "allocating a (%d, %d, %d, %d) tensor", n, c, h, w);
    *t = tb_tensor_view(be, p, n, c, h, w);
    t->dtype = dtype;
    t->owned = 1;
    return TB_OK;
}

int tb_tensor_alloc(tb_backend *be, int n, int c, int h, int w, tb_tensor *t)
{
    return tb_tensor_alloc_as(be, n, c, h, w, TB_F32, t);
}

void tb_tensor_free(tb_tensor *t)
{
    if (t->owned && t->be && t->data)
        t->be->dev_free(t->be, t->data);
    memset(t, 0, sizeof *t);
}

tb_tensor tb_tensor_view(tb_backend *be, float *data, int n, int c, int h, int w)
{
    tb_tensor t = {.be = be, .data = data, .n = n, .c = c, .h = h, .w = w, .cap_n = n,
                   .layout = TB_NCHW, .dtype = TB_F32, .owned = 0};
    return t;
}

int tb_tensor_set_batch(tb_tensor *t, int n)
{
    if (n <= 0 || n > t->cap_n)
        return TB_FAIL(TB_ERR_INVALID, "batch %d does not fit a tensor allocated for %d", n,
                       t->cap_n);
    t->n = n;
    return TB_OK;
}

int tb_tensor_to_host(const tb_tensor *t, float *host)
{
    TB_TRY(t->be->sync(t->be));
    return t->be->copy_d2h(t->be, host, t->data, tb_tensor_numel(t) * sizeof(float), NULL);
}

int tb_tensor_from_host(tb_tensor *t, const float *host)
{
    return t->be->copy_h2d(t->be, t->data, host, tb_tensor_numel(t) * sizeof(float), NULL);
}

int tb_tensor_zero(tb_tensor *t)
{
    return t->be->memset(t->be, t->data, 0, tb_tensor_numel(t) * sizeof(float), NULL);
}

void tb_tensor_host_nchw_to_nhwc(const float *src, float *dst, int n, int c, int h, int w)
{
    size_t hw = (size_t)h * w;
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++)
            for (size_t i = 0; i < hw; i++)
                dst[((size_t)b * hw + i) * c + ch] = src[((size_t)b * c + ch) * hw + i];
}
