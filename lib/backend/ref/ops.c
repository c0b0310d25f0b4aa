/*
 * ops.c - plain reference ops; see ops.h. Straight loops, one
 * thread, double arithmetic, written to be obviously right rather than fast.
 * Tested through lib/backend/cpu/ops_test.c (bazel test //lib/backend/cpu:cpu_ops_test).
 */
#include "lib/backend/ref/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rng_math.h"
#include "lib/core/status.h"

/* ---------------------------------------------------------------- element-wise */

void tb_ref_relu_fwd(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] < 0.0f ? 0.0f : x[i]; /* NaN stays NaN */
}

void tb_ref_relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void tb_ref_add(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)((double)a[i] + b[i]);
}

void tb_ref_axpby(float alpha, const float *x, float beta, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)((double)alpha * x[i] + (beta == 0.0f ? 0.0 : (double)beta * y[i]));
}

void tb_ref_bias_add(float *y, const float *bias, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            y[(size_t)r * cols + c] = (float)((double)y[(size_t)r * cols + c] + bias[c]);
}

void tb_ref_bias_grad(const float *dy, float *dbias, int rows, int cols, int accumulate)
{
    for (int c = 0; c < cols; c++) {
        double s = accumulate ? dbias[c] : 0.0;
        for (int r = 0; r < rows; r++)
            s += dy[(size_t)r * cols + c];
        dbias[c] = (float)s;
    }
}

void tb_ref_reduce_sum(const float *x, size_t n, float *out)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    out[0] = (float)s;
}

void tb_ref_count_nonfinite(const float *x, size_t n, float *out)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += !isfinite(x[i]);
    out[0] = (float)count;
}

/* ---------------------------------------------------------------- dropout */

static float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

void tb_ref_dropout_fwd(float p, uint64_t seed, uint64_t offset, const float *x, float *y,
                        uint8_t *mask, size_t n)
{
    uint32_t thr = tb_dropout_threshold(p);
    float scale = dropout_scale(p);
    for (size_t i = 0; i < n; i++) {
        mask[i] = tb_dropout_keep_at(seed, offset + i, thr);
        y[i] = x[i] * (mask[i] ? scale : 0.0f);
    }
}

void tb_ref_dropout_bwd(float p, const uint8_t *mask, const float *dy, float *dx, size_t n)
{
    float scale = dropout_scale(p);
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * (mask[i] ? scale : 0.0f);
}

/* ---------------------------------------------------------------- batch norm */

/* Index of element i (of hw) of sample n, channel c. */
static size_t bn_at(const tb_bn_desc *d, int n, int c, int i)
{
    if (d->layout == TB_NHWC)
        return ((size_t)n * d->hw + i) * d->c + c;
    return ((size_t)n * d->c + c) * d->hw + i;
}

void tb_ref_bn_fwd_train_f64(const tb_bn_desc *d, const double *x, const double *gamma,
                             const double *beta, double *y, double *running_mean,
                             double *running_var, double *save_mean, double *save_invstd)
{
    double m = (double)d->n * d->hw;
    for (int c = 0; c < d->c; c++) {
        double s = 0.0, q = 0.0;
        for (int n = 0; n < d->n; n++)
            for (int i = 0; i < d->hw; i++)
                s += x[bn_at(d, n, c, i)];
        double mean = s / m;
        for (int n = 0; n < d->n; n++)
            for (int i = 0; i < d->hw; i++)
                q += (x[bn_at(d, n, c, i)] - mean) * (x[bn_at(d, n, c, i)] - mean);
        double var = q / m, invstd = 1.0 / sqrt(var + d->eps);
        for (int n = 0; n < d->n; n++)
            for (int i = 0; i < d->hw; i++) {
                size_t k = bn_at(d, n, c, i);
                y[k] = (x[k] - mean) * invstd * gamma[c] + beta[c];
            }
        save_mean[c] = mean;
        save_invstd[c] = invstd;
        running_mean[c] = (1.0 - d->momentum) * running_mean[c] + d->momentum * mean;
        running_var[c] = (1.0 - d->momentum) * running_var[c] + d->momentum * var * m / (m - 1.0);
    }
}

void tb_ref_bn_fwd_infer_f64(const tb_bn_desc *d, const double *x, const double *gamma,
                             const double *beta, const double *running_mean,
                             const double *running_var, double *y)
{
    for (int c = 0; c < d->c; c++) {
        double invstd = 1.0 / sqrt(running_var[c] + d->eps);
        for (int n = 0; n < d->n; n++)
            for (int i = 0; i < d->hw; i++) {
                size_t k = bn_at(d, n, c, i);
                y[k] = (x[k] - running_mean[c]) * invstd * gamma[c] + beta[c];
            }
    }
}

void tb_ref_bn_bwd_f64(const tb_bn_desc *d, const double *x, const double *dy,
                       const double *gamma, const double *save_mean, const double *save_invstd,
                       double *dx, double *dgamma, double *dbeta, int accumulate)
{
    double m = (double)d->n * d->hw;
    for (int c = 0; c < d->c; c++) {
        double mean = save_mean[c], invstd = save_invstd[c], s = 0.0, sx = 0.0;
        for (int n = 0; n < d->n; n++)
            for (int i = 0; i < d->hw; i++) {
                size_t k = bn_at(d, n, c, i);
                s += dy[k];
                sx += dy[k] * (x[k] - mean) * invstd;
            }
        for (int n = 0; n < d->n; n++)
            for (int i = 0; i < d->hw; i++) {
                size_t k = bn_at(d, n, c, i);
                double xhat = (x[k] - mean) * invstd;
                dx[k] = gamma[c] * invstd / m * (m * dy[k] - s - xhat * sx);
            }
        dbeta[c] = (accumulate ? dbeta[c] : 0.0) + s;
        dgamma[c] = (accumulate ? dgamma[c] : 0.0) + sx;
    }
}

/* A double copy of n floats into dst. */
static void widen(double *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

static void narrow(float *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (float)src[i];
}

static int alloc_f64(double **p, size_t n)
{
    *p = calloc(n ? n : 1, sizeof **p); /* zeroed: keeps -Wmaybe-uninitialized quiet */
    if (!*p)
        return TB_FAIL(TB_ERR_NOMEM, "reference op: out of host memory for %zu doubles", n);
    return TB_OK;
}

int tb_ref_bn_fwd_train(const tb_bn_desc *d, const float *x, const float *gamma,
                        const float *beta, float *y, float *running_mean, float *running_var,
                        float *save_mean, float *save_invstd)
{
    size_t total = (size_t)d->n * d->c * d->hw, C = (size_t)d->c;
    double *buf;
    TB_TRY(alloc_f64(&buf, 2 * total + 6 * C));
    double *xd = buf, *yd = xd + total, *g = yd + total, *b = g + C, *rm = b + C, *rv = rm + C,
           *sm = rv + C, *si = sm + C;
    widen(xd, x, total);
    widen(g, gamma, C);
    widen(b, beta, C);
    widen(rm, running_mean, C);
    widen(rv, running_var, C);
    tb_ref_bn_fwd_train_f64(d, xd, g, b, yd, rm, rv, sm, si);
    narrow(y, yd, total);
    narrow(running_mean, rm, C);
    narrow(running_var, rv, C);
    narrow(save_mean, sm, C);
    narrow(save_invstd, si, C);
    free(buf);
    return TB_OK;
}

int tb_ref_bn_fwd_infer(const tb_bn_desc *d, const float *x, const float *gamma,
                        const float *beta, const float *running_mean, const float *running_var,
                        float *y)
{
    size_t total = (size_t)d->n * d->c * d->hw, C = (size_t)d->c;
    double *buf;
    TB_TRY(alloc_f64(&buf, 2 * total + 4 * C));
    double *xd = buf, *yd = xd + total, *g = yd + total, *b = g + C, *rm = b + C, *rv = rm + C;
    widen(xd, x, total);
    widen(g, gamma, C);
    widen(b, beta, C);
    widen(rm, running_mean, C);
    widen(rv, running_var, C);
    tb_ref_bn_fwd_infer_f64(d, xd, g, b, rm, rv, yd);
    narrow(y, yd, total);
    free(buf);
    return TB_OK;
}

int tb_ref_bn_bwd(const tb_bn_desc *d, const float *x, const float *dy, const float *gamma,
                  const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                  float *dbeta, int accumulate)
{
    size_t total = (size_t)d->n * d->c * d->hw, C = (size_t)d->c;
    double *buf;
    TB_TRY(alloc_f64(&buf, 3 * total + 5 * C));
    double *xd = buf, *dyd = xd + total, *dxd = dyd + total, *g = dxd + total, *sm = g + C,
           *si = sm + C, *dg = si + C, *db = dg + C;
    widen(xd, x, total);
    widen(dyd, dy, total);
    widen(g, gamma, C);
    widen(sm, save_mean, C);
    widen(si, save_invstd, C);
    widen(dg, dgamma, C);
    widen(db, dbeta, C);
    tb_ref_bn_bwd_f64(d, xd, dyd, g, sm, si, dxd, dg, db, accumulate);
    narrow(dx, dxd, total);
    narrow(dgamma, dg, C);
    narrow(dbeta, db, C);
    free(buf);
    return TB_OK;
}

/* ---------------------------------------------------------------- pooling */

int tb_ref_pool_out(const tb_pool_desc *d, int *p, int *q)
{
    if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->window < 1 || d->stride < 1 ||
        d->pad < 0 || 2 * d->pad > d->window || d->h + 2 * d->pad < d->window ||
        d->w + 2 * d->pad < d->window)
        return TB_FAIL(TB_ERR_INVALID, "reference pooling: bad descriptor");
    *p = (d->h + 2 * d->pad - d->window) / d->stride + 1;
    *q = (d->w + 2 * d->pad - d->window) / d->stride + 1;
    return TB_OK;
}

/* Flat index of (n, c, h, w) in a tensor of height hh and width ww. */
static size_t pool_at(const tb_pool_desc *d, int n, int c, int h, int w, int hh, int ww)
{
    if (d->layout == TB_NHWC)
        return (((size_t)n * hh + h) * ww + w) * d->c + c;
    return (((size_t)n * d->c + c) * hh + h) * ww + w;
}

/* One output: max (first of equal values; NaN wins) or average over the
 * window, padding counted as zeros in the divisor. */
static void pool_one(const tb_pool_desc *d, const double *x, int n, int c, int p, int q,
                     double *y, int32_t *argmax)
{
    double best = 0.0, sum = 0.0;
    long bi = -1;
    for (int kh = 0; kh < d->window; kh++) {
        for (int kw = 0; kw < d->window; kw++) {
            int h = p * d->stride - d->pad + kh, w = q * d->stride - d->pad + kw;
            if (h < 0 || h >= d->h || w < 0 || w >= d->w)
                continue;
            size_t k = pool_at(d, n, c, h, w, d->h, d->w);
            sum += x[k];
            if (bi < 0 || x[k] > best || isnan(x[k])) {
                best = x[k];
                bi = (long)k;
            }
        }
    }
    if (d->kind == TB_POOL_MAX) {
        *y = best;
        if (argmax)
            *argmax = (int32_t)bi;
    } else {
        *y = sum / ((double)d->window * d->window);
    }
}

int tb_ref_pool_fwd_f64(const tb_pool_desc *d, const double *x, double *y, int32_t *argmax)
{
    int P, Q;
    TB_TRY(tb_ref_pool_out(d, &P, &Q));
    for (int n = 0; n < d->n; n++)
        for (int c = 0; c < d->c; c++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    size_t o = pool_at(d, n, c, p, q, P, Q);
                    pool_one(d, x, n, c, p, q, &y[o], argmax ? &argmax[o] : NULL);
                }
    return TB_OK;
}

int tb_ref_pool_bwd_f64(const tb_pool_desc *d, const double *dy, const int32_t *argmax,
                        double *dx)
{
    int P, Q;
    TB_TRY(tb_ref_pool_out(d, &P, &Q));
    memset(dx, 0, (size_t)d->n * d->c * d->h * d->w * sizeof *dx);
    double area = (double)d->window * d->window;
    for (int n = 0; n < d->n; n++)
        for (int c = 0; c < d->c; c++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    size_t o = pool_at(d, n, c, p, q, P, Q);
                    if (d->kind == TB_POOL_MAX) {
                        dx[argmax[o]] += dy[o];
                        continue;
                    }
                    for (int kh = 0; kh < d->window; kh++)
                        for (int kw = 0; kw < d->window; kw++) {
                            int h = p * d->stride - d->pad + kh, w = q * d->stride - d->pad + kw;
                            if (h >= 0 && h < d->h && w >= 0 && w < d->w)
                                dx[pool_at(d, n, c, h, w, d->h, d->w)] += dy[o] / area;
                        }
                }
    return TB_OK;
}

int tb_ref_pool_fwd(const tb_pool_desc *d, const float *x, float *y, int32_t *argmax)
{
    int P, Q, rc;
    TB_TRY(tb_ref_pool_out(d, &P, &Q));
    size_t nin = (size_t)d->n * d->c * d->h * d->w, nout = (size_t)d->n * d->c * P * Q;
    double *buf;
    TB_TRY(alloc_f64(&buf, nin + nout));
    widen(buf, x, nin);
    TB_TRY_GOTO(rc, tb_ref_pool_fwd_f64(d, buf, buf + nin, argmax), out_free_buf);
    narrow(y, buf + nin, nout);
out_free_buf:
    free(buf);
    return rc;
}

int tb_ref_pool_bwd(const tb_pool_desc *d, const float *dy, const int32_t *argmax, float *dx)
{
    int P, Q, rc;
    TB_TRY(tb_ref_pool_out(d, &P, &Q));
    size_t nin = (size_t)d->n * d->c * d->h * d->w, nout = (size_t)d->n * d->c * P * Q;
    double *buf;
    TB_TRY(alloc_f64(&buf, nin + nout));
    widen(buf + nin, dy, nout);
    TB_TRY_GOTO(rc, tb_ref_pool_bwd_f64(d, buf + nin, argmax, buf), out_free_buf);
    narrow(dx, buf, nin);
out_free_buf:
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- loss */

void tb_ref_softmax_xent_fwd_f64(const double *logits, const int32_t *labels, int rows,
                                 int classes, double *probs, double *loss)
{
    for (int r = 0; r < rows; r++) {
        const double *z = logits + (size_t)r * classes;
        double *p = probs + (size_t)r * classes, mx = z[0], s = 0.0;
        for (int j = 1; j < classes; j++)
            mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < classes; j++)
            s += exp(z[j] - mx);
        for (int j = 0; j < classes; j++)
            p[j] = exp(z[j] - mx) / s;
        loss[r] = log(s) - (z[labels[r]] - mx);
    }
}

void tb_ref_softmax_xent_bwd_f64(const double *probs, const int32_t *labels, int rows,
                                 int classes, double scale, double *dlogits)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < classes; j++) {
            size_t k = (size_t)r * classes + j;
            dlogits[k] = scale * (probs[k] - (j == labels[r] ? 1.0 : 0.0));
        }
}

int tb_ref_softmax_xent_fwd(const float *logits, const int32_t *labels, int rows, int classes,
                            float *probs, float *loss)
{
    size_t total = (size_t)rows * classes;
    double *buf;
    TB_TRY(alloc_f64(&buf, 2 * total + (size_t)rows));
    widen(buf, logits, total);
    tb_ref_softmax_xent_fwd_f64(buf, labels, rows, classes, buf + total, buf + 2 * total);
    narrow(probs, buf + total, total);
    narrow(loss, buf + 2 * total, (size_t)rows);
    free(buf);
    return TB_OK;
}

void tb_ref_softmax_xent_bwd(const float *probs, const int32_t *labels, int rows, int classes,
                             float scale, float *dlogits)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < classes; j++) {
            size_t k = (size_t)r * classes + j;
            dlogits[k] = (float)((double)scale * (probs[k] - (j == labels[r] ? 1.0 : 0.0)));
        }
}

void tb_ref_xent_lse_fwd(const float *logits, const int32_t *labels, int rows, int classes,
                         float *loss, float *lse)
{
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * classes;
        double mx = z[0], s = 0.0;
        for (int j = 1; j < classes; j++)
            mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < classes; j++)
            s += exp((double)z[j] - mx);
        double l = mx + log(s);
        lse[r] = (float)l;
        loss[r] = (float)(l - z[labels[r]]);
    }
}

void tb_ref_xent_lse_bwd(const float *logits, const float *lse, const int32_t *labels, int rows,
                         int classes, float scale, float *dlogits)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < classes; j++) {
            size_t k = (size_t)r * classes + j;
            double p = exp((double)logits[k] - lse[r]);
            dlogits[k] = (float)((double)scale * (p - (j == labels[r] ? 1.0 : 0.0)));
        }
}

/* ---------------------------------------------------------------- optimizers */

static void ref_sgd(const tb_opt_hparams *hp, const tb_param_view *tv)
{
    for (size_t i = 0; i < tv->n; i++) {
        double p = tv->param[i], d = tv->grad[i] / (double)hp->grad_scale;
        d += (double)hp->weight_decay * p;
        if (hp->momentum != 0.0f) {
            double buf = hp->step <= 1 ? d : (double)hp->momentum * tv->state1[i] + d;
            tv->state1[i] = (float)buf;
            d = buf;
        }
        tv->param[i] = (float)(p - (double)hp->lr * d);
    }
}

static void ref_adamw(const tb_opt_hparams *hp, const tb_param_view *tv)
{
    double b1 = hp->beta1, b2 = hp->beta2, lr = hp->lr;
    double bc1 = 1.0 - pow(b1, hp->step), bc2 = 1.0 - pow(b2, hp->step);
    for (size_t i = 0; i < tv->n; i++) {
        double g = tv->grad[i] / (double)hp->grad_scale;
        double p = tv->param[i] * (1.0 - lr * hp->weight_decay);
        double m = b1 * tv->state1[i] + (1.0 - b1) * g;
        double v = b2 * tv->state2[i] + (1.0 - b2) * g * g;
        p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + hp->eps);
        tv->param[i] = (float)p;
        tv->state1[i] = (float)m;
        tv->state2[i] = (float)v;
    }
}

static double ref_sumsq(const float *x, size_t n, double scale)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (x[i] * scale) * (x[i] * scale);
    return s;
}

static void ref_lars(const tb_opt_hparams *hp, const tb_param_view *tv)
{
    double inv = 1.0 / (double)hp->grad_scale, wd = tv->no_adapt ? 0.0 : hp->weight_decay;
    double wn = sqrt(ref_sumsq(tv->param, tv->n, 1.0)), gn = sqrt(ref_sumsq(tv->grad, tv->n, inv));
    double trust = wn > 0 && gn > 0 ? hp->trust_coef * wn / (gn + wd * wn + hp->eps) : 1.0;
    if (tv->no_adapt) /* a bias or a norm's gamma, beta: plain momentum SGD */
        trust = 1.0;
    for (size_t i = 0; i < tv->n; i++) {
        double p = tv->param[i], d = trust * (tv->grad[i] * inv + wd * p);
        if (hp->momentum != 0.0f) {
            d = hp->step <= 1 ? d : (double)hp->momentum * tv->state1[i] + d;
            tv->state1[i] = (float)d;
        }
        tv->param[i] = (float)(p - (double)hp->lr * d);
    }
}

static void ref_lamb(const tb_opt_hparams *hp, const tb_param_view *tv)
{
    double b1 = hp->beta1, b2 = hp->beta2, inv = 1.0 / (double)hp->grad_scale;
    double bc1 = 1.0 - pow(b1, hp->step), bc2 = 1.0 - pow(b2, hp->step);
    double wd = tv->no_adapt ? 0.0 : hp->weight_decay; /* and trust 1: Adam */
    double wn2 = 0, un2 = 0;
    for (size_t i = 0; i < tv->n; i++) {
        double g = tv->grad[i] * inv, p = tv->param[i];
        double m = b1 * tv->state1[i] + (1.0 - b1) * g;
        double v = b2 * tv->state2[i] + (1.0 - b2) * g * g;
        double u = m / bc1 / (sqrt(v / bc2) + hp->eps) + wd * p;
        tv->state1[i] = (float)m;
        tv->state2[i] = (float)v;
        wn2 += p * p;
        un2 += u * u;
    }
    double trust = wn2 > 0 && un2 > 0 && !tv->no_adapt ? sqrt(wn2) / sqrt(un2) : 1.0;
    for (size_t i = 0; i < tv->n; i++) {
        double p = tv->param[i], m = tv->state1[i], v = tv->state2[i];
        double u = m / bc1 / (sqrt(v / bc2) + hp->eps) + wd * p;
        tv->param[i] = (float)(p - (double)hp->lr * trust * u);
    }
}

static void ref_novograd(const tb_opt_hparams *hp, const tb_param_view *tv)
{
    double inv = 1.0 / (double)hp->grad_scale, gn2 = ref_sumsq(tv->grad, tv->n, inv);
    double v = hp->step <= 1 ? gn2 : hp->beta2 * (double)tv->tensor_state[0] +
                                         (1.0 - hp->beta2) * gn2;
    tv->tensor_state[0] = (float)v;
    double denom = sqrt(v) + hp->eps;
    for (size_t i = 0; i < tv->n; i++) {
        double p = tv->param[i];
        double d = tv->grad[i] * inv / denom + hp->weight_decay * p;
        double m = hp->beta1 * tv->state1[i] + d;
        tv->state1[i] = (float)m;
        tv->param[i] = (float)(p - (double)hp->lr * m);
    }
}

int tb_ref_opt_step(const tb_opt_hparams *hp, const tb_param_view *tensors, int count)
{
    if (hp->kind < TB_OPT_SGD || hp->kind > TB_OPT_NOVOGRAD)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "reference optimizer %d not implemented",
                       (int)hp->kind);
    for (int i = 0; i < count; i++) {
        const tb_param_view *tv = &tensors[i];
        switch (hp->kind) {
        case TB_OPT_SGD: ref_sgd(hp, tv); break;
        case TB_OPT_ADAMW: ref_adamw(hp, tv); break;
        case TB_OPT_LARS: ref_lars(hp, tv); break;
        case TB_OPT_LAMB: ref_lamb(hp, tv); break;
        default: ref_novograd(hp, tv); break;
        }
    }
    return TB_OK;
}
