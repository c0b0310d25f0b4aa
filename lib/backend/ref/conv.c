/*
 * conv.c - the reference convolution and GEMM; see conv.h.
 *
 * Every output element is one double sum over its inputs, so the result is
 * the correctly rounded float of a near-exact value: fast paths are compared
 * against it with a tolerance that only has to cover their own rounding.
 */
#include "lib/backend/ref/conv.h"

#include <stdlib.h>

/* Offsets of one element in each tensor, for either layout. */
static size_t x_at(const tb_conv_desc *d, int n, int c, int h, int w)
{
    if (d->layout == TB_NHWC)
        return (((size_t)n * d->h + h) * d->w + w) * d->c + c;
    return (((size_t)n * d->c + c) * d->h + h) * d->w + w;
}

static size_t w_at(const tb_conv_desc *d, int k, int c, int r, int s)
{
    if (d->layout == TB_NHWC)
        return (((size_t)k * d->r + r) * d->s + s) * d->c + c;
    return (((size_t)k * d->c + c) * d->r + r) * d->s + s;
}

static size_t y_at(const tb_conv_desc *d, int n, int k, int p, int q)
{
    int P = tb_conv_out_h(d), Q = tb_conv_out_w(d);
    if (d->layout == TB_NHWC)
        return (((size_t)n * P + p) * Q + q) * d->k + k;
    return (((size_t)n * d->k + k) * P + p) * Q + q;
}

static int check_desc(const tb_conv_desc *d)
{
    if (d->dtype != TB_F32)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "reference convolution is fp32 only (dtype %d)",
                       (int)d->dtype);
    if (d->n <= 0 || d->c <= 0 || d->h <= 0 || d->w <= 0 || d->k <= 0 || d->r <= 0 ||
        d->s <= 0 || d->stride <= 0 || d->pad < 0 || tb_conv_out_h(d) <= 0 ||
        tb_conv_out_w(d) <= 0)
        return TB_FAIL(TB_ERR_INVALID, "bad convolution shape");
    return TB_OK;
}

/* The input pixel under output (p, q) and window tap (r, s); 0 if padding. */
static int in_pixel(const tb_conv_desc *d, int p, int q, int r, int s, int *h, int *w)
{
    *h = p * d->stride - d->pad + r;
    *w = q * d->stride - d->pad + s;
    return *h >= 0 && *h < d->h && *w >= 0 && *w < d->w;
}

int tb_conv_ref_fwd(const tb_conv_desc *d, const float *x, const float *w, const float *bias,
                    float *y)
{
    TB_TRY(check_desc(d));
    int P = tb_conv_out_h(d), Q = tb_conv_out_w(d);
    for (int n = 0; n < d->n; n++)
        for (int k = 0; k < d->k; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double acc = bias ? bias[k] : 0.0;
                    for (int c = 0; c < d->c; c++)
                        for (int r = 0; r < d->r; r++)
                            for (int s = 0; s < d->s; s++) {
                                int h, ww;
                                if (in_pixel(d, p, q, r, s, &h, &ww))
                                    acc += (double)x[x_at(d, n, c, h, ww)] *
                                           w[w_at(d, k, c, r, s)];
                            }
                    y[y_at(d, n, k, p, q)] = (float)acc;
                }
    return TB_OK;
}

int tb_conv_ref_bwd_data(const tb_conv_desc *d, const float *dy, const float *w, float *dx)
{
    TB_TRY(check_desc(d));
    int P = tb_conv_out_h(d), Q = tb_conv_out_w(d);
    size_t nx = (size_t)d->n * d->c * d->h * d->w;
    double *acc = calloc(nx, sizeof *acc);
    if (!acc)
        return TB_FAIL(TB_ERR_NOMEM, "reference bwd-data: out of memory");
    /* Scatter each output gradient back onto the inputs it was made from. */
    for (int n = 0; n < d->n; n++)
        for (int k = 0; k < d->k; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++)
                    for (int c = 0; c < d->c; c++)
                        for (int r = 0; r < d->r; r++)
                            for (int s = 0; s < d->s; s++) {
                                int h, ww;
                                if (in_pixel(d, p, q, r, s, &h, &ww))
                                    acc[x_at(d, n, c, h, ww)] +=
                                        (double)dy[y_at(d, n, k, p, q)] * w[w_at(d, k, c, r, s)];
                            }
    for (size_t i = 0; i < nx; i++)
        dx[i] = (float)acc[i];
    free(acc);
    return TB_OK;
}

int tb_conv_ref_bwd_filter(const tb_conv_desc *d, const float *x, const float *dy, float *dw,
                           float *dbias, int accumulate)
{
    TB_TRY(check_desc(d));
    int P = tb_conv_out_h(d), Q = tb_conv_out_w(d);
    for (int k = 0; k < d->k; k++)
        for (int c = 0; c < d->c; c++)
            for (int r = 0; r < d->r; r++)
                for (int s = 0; s < d->s; s++) {
                    double acc = 0.0;
                    for (int n = 0; n < d->n; n++)
                        for (int p = 0; p < P; p++)
                            for (int q = 0; q < Q; q++) {
                                int h, ww;
                                if (in_pixel(d, p, q, r, s, &h, &ww))
                                    acc += (double)x[x_at(d, n, c, h, ww)] *
                                           dy[y_at(d, n, k, p, q)];
                            }
                    size_t i = w_at(d, k, c, r, s);
                    dw[i] = (float)(accumulate ? dw[i] + acc : acc);
                }
    if (!dbias)
        return TB_OK;
    for (int k = 0; k < d->k; k++) {
        double acc = 0.0;
        for (int n = 0; n < d->n; n++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++)
                    acc += dy[y_at(d, n, k, p, q)];
        dbias[k] = (float)(accumulate ? dbias[k] + acc : acc);
    }
    return TB_OK;
}

int tb_gemm_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return TB_FAIL(TB_ERR_INVALID, "reference gemm: m %d n %d k %d must be > 0", m, n, k);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0.0;
            for (int p = 0; p < k; p++) {
                float av = trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                float bv = trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                acc += (double)av * bv;
            }
            double old = beta != 0.0f ? (double)beta * c[(size_t)i * ldc + j] : 0.0;
            c[(size_t)i * ldc + j] = (float)(alpha * acc + old);
        }
    return TB_OK;
}
