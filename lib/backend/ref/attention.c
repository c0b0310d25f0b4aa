/*
 * attention.c - plain double-precision layer norm and attention: see
 * lib/backend/ref/attention.h. Tested (finite differences) by lib/backend/cpu/attention_test.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/ref/attention.h"
#include "lib/core/status.h"

/* ---------------------------------------------------------------- layer norm */

void tb_ref_layernorm_fwd_f64(const double *x, const double *gamma, const double *beta,
                              double eps, int rows, int cols, double *y, double *save_mean,
                              double *save_rstd)
{
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * cols;
        double mean = 0.0, var = 0.0;
        for (int c = 0; c < cols; c++)
            mean += xr[c];
        mean /= cols;
        for (int c = 0; c < cols; c++)
            var += (xr[c] - mean) * (xr[c] - mean);
        var /= cols;
        double rstd = 1.0 / sqrt(var + eps);
        for (int c = 0; c < cols; c++)
            y[(size_t)r * cols + c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
        save_mean[r] = mean;
        save_rstd[r] = rstd;
    }
}

void tb_ref_layernorm_bwd_f64(const double *x, const double *dy, const double *gamma,
                              const double *save_mean, const double *save_rstd, int rows,
                              int cols, double *dx, double *dgamma, double *dbeta,
                              int accumulate)
{
    if (!accumulate) {
        memset(dgamma, 0, sizeof *dgamma * (size_t)cols);
        memset(dbeta, 0, sizeof *dbeta * (size_t)cols);
    }
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * cols, *dyr = dy + (size_t)r * cols;
        double mean = save_mean[r], rstd = save_rstd[r], a = 0.0, c2 = 0.0;
        for (int c = 0; c < cols; c++) {
            double xhat = (xr[c] - mean) * rstd, g = dyr[c] * gamma[c];
            a += g;
            c2 += g * xhat;
            dgamma[c] += dyr[c] * xhat;
            dbeta[c] += dyr[c];
        }
        a /= cols;
        c2 /= cols;
        for (int c = 0; c < cols; c++) {
            double xhat = (xr[c] - mean) * rstd, g = dyr[c] * gamma[c];
            dx[(size_t)r * cols + c] = (g - a - xhat * c2) * rstd;
        }
    }
}

static double *widen(const float *src, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (d && src)
        for (size_t i = 0; i < n; i++)
            d[i] = src[i];
    return d;
}

static void narrow(float *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (float)src[i];
}

int tb_ref_layernorm_fwd(const float *x, const float *gamma, const float *beta, float eps,
                         int rows, int cols, float *y, float *save_mean, float *save_rstd)
{
    size_t n = (size_t)rows * cols;
    double *xd = widen(x, n), *gd = widen(gamma, cols), *bd = widen(beta, cols);
    double *yd = widen(NULL, n), *md = widen(NULL, rows), *rd = widen(NULL, rows);
    int rc = TB_OK;
    if (!xd || !gd || !bd || !yd || !md || !rd) {
        rc = TB_FAIL(TB_ERR_NOMEM, "reference layer norm: out of host memory");
        goto out_free;
    }
    tb_ref_layernorm_fwd_f64(xd, gd, bd, eps, rows, cols, yd, md, rd);
    narrow(y, yd, n);
    narrow(save_mean, md, rows);
    narrow(save_rstd, rd, rows);
out_free:
    free(xd), free(gd), free(bd), free(yd), free(md), free(rd);
    return rc;
}

int tb_ref_layernorm_bwd(const float *x, const float *dy, const float *gamma, float eps,
                         int rows, int cols, float *dx, float *dgamma, float *dbeta,
                         int accumulate)
{
    size_t n = (size_t)rows * cols;
    double *xd = widen(x, n), *dyd = widen(dy, n), *gd = widen(gamma, cols);
    double *dxd = widen(NULL, n), *dgd = widen(dgamma, cols), *dbd = widen(dbeta, cols);
    double *yd = widen(NULL, n), *md = widen(NULL, rows), *rd = widen(NULL, rows);
    double *zero = calloc(cols, sizeof *zero);
    int rc = TB_OK;
    if (!xd || !dyd || !gd || !dxd || !dgd || !dbd || !yd || !md || !rd || !zero) {
        rc = TB_FAIL(TB_ERR_NOMEM, "reference layer norm: out of host memory");
        goto out_free;
    }
    tb_ref_layernorm_fwd_f64(xd, gd, zero, eps, rows, cols, yd, md, rd);
    tb_ref_layernorm_bwd_f64(xd, dyd, gd, md, rd, rows, cols, dxd, dgd, dbd, accumulate);
    narrow(dx, dxd, n);
    narrow(dgamma, dgd, cols);
    narrow(dbeta, dbd, cols);
out_free:
    free(xd), free(dyd), free(gd), free(dxd), free(dgd), free(dbd), free(yd), free(md),
        free(rd), free(zero);
    return rc;
}

/* ---------------------------------------------------------------- attention */

static int attn_desc_ok(const tb_attn_desc *d)
{
    if (d->batch < 1 || d->heads < 1 || d->seq < 1 || d->head_dim < 1)
        return TB_FAIL(TB_ERR_INVALID, "reference attention: B %d, H %d, T %d, D %d", d->batch,
                       d->heads, d->seq, d->head_dim);
    return TB_OK;
}

/* p[0..T) = softmax of query row i's scores against all keys of one head;
 * returns the row's logsumexp. */
static double ref_softmax_row(const tb_attn_desc *d, const double *q, const double *k, int i,
                              double *p)
{
    int T = d->seq, D = d->head_dim;
    double mx = -INFINITY;
    for (int j = 0; j < T; j++) {
        if (d->causal && j > i) {
            p[j] = -INFINITY;
            continue;
        }
        double s = 0.0;
        for (int e = 0; e < D; e++)
            s += q[(size_t)i * D + e] * k[(size_t)j * D + e];
        p[j] = s * d->scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    double sum = 0.0;
    for (int j = 0; j < T; j++) {
        p[j] = p[j] == -INFINITY ? 0.0 : exp(p[j] - mx);
        sum += p[j];
    }
    for (int j = 0; j < T; j++)
        p[j] /= sum;
    return mx + log(sum);
}

int tb_ref_attention_fwd_f64(const tb_attn_desc *d, const double *q, const double *k,
                             const double *v, double *out, double *lse)
{
    TB_TRY(attn_desc_ok(d));
    int T = d->seq, D = d->head_dim;
    double *p = malloc(sizeof *p * (size_t)T);
    if (!p)
        return TB_FAIL(TB_ERR_NOMEM, "reference attention: out of host memory");
    for (size_t bh = 0; bh < (size_t)d->batch * d->heads; bh++) {
        size_t off = bh * T * D;
        for (int i = 0; i < T; i++) {
            double l = ref_softmax_row(d, q + off, k + off, i, p);
            if (lse)
                lse[bh * T + i] = l;
            for (int e = 0; e < D; e++) {
                double o = 0.0;
                for (int j = 0; j < T; j++)
                    o += p[j] * v[off + (size_t)j * D + e];
                out[off + (size_t)i * D + e] = o;
            }
        }
    }
    free(p);
    return TB_OK;
}

/* One head's gradients. dq, dk, dv of the head zeroed by the caller. */
static void ref_attn_bwd_head(const tb_attn_desc *d, const double *q, const double *k,
                              const double *v, const double *dout, double *dq, double *dk,
                              double *dv, double *p, double *dp)
{
    int T = d->seq, D = d->head_dim;
    for (int i = 0; i < T; i++) {
        ref_softmax_row(d, q, k, i, p);
        const double *doi = dout + (size_t)i * D;
        double rowdot = 0.0;
        for (int j = 0; j < T; j++) {
            double s = 0.0;
            for (int e = 0; e < D; e++) {
                dv[(size_t)j * D + e] += p[j] * doi[e];
                s += doi[e] * v[(size_t)j * D + e];
            }
            dp[j] = s;
            rowdot += p[j] * s;
        }
        for (int j = 0; j < T; j++) {
            double ds = p[j] * (dp[j] - rowdot) * d->scale;
            for (int e = 0; e < D; e++) {
                dq[(size_t)i * D + e] += ds * k[(size_t)j * D + e];
                dk[(size_t)j * D + e] += ds * q[(size_t)i * D + e];
            }
        }
    }
}

int tb_ref_attention_bwd_f64(const tb_attn_desc *d, const double *q, const double *k,
                             const double *v, const double *dout, double *dq, double *dk,
                             double *dv)
{
    TB_TRY(attn_desc_ok(d));
    int T = d->seq, D = d->head_dim;
    size_t n = (size_t)d->batch * d->heads * T * D;
    double *p = malloc(sizeof *p * 2 * (size_t)T);
    if (!p)
        return TB_FAIL(TB_ERR_NOMEM, "reference attention: out of host memory");
    memset(dq, 0, sizeof *dq * n);
    memset(dk, 0, sizeof *dk * n);
    memset(dv, 0, sizeof *dv * n);
    for (size_t bh = 0; bh < (size_t)d->batch * d->heads; bh++) {
        size_t off = bh * T * D;
        ref_attn_bwd_head(d, q + off, k + off, v + off, dout + off, dq + off, dk + off, dv + off,
                          p, p + T);
    }
    free(p);
    return TB_OK;
}

int tb_ref_attention_fwd(const tb_attn_desc *d, const float *q, const float *k, const float *v,
                         float *out, float *lse)
{
    TB_TRY(attn_desc_ok(d));
    size_t rows = (size_t)d->batch * d->heads * d->seq, n = rows * d->head_dim;
    double *qd = widen(q, n), *kd = widen(k, n), *vd = widen(v, n);
    double *od = widen(NULL, n), *ld = widen(NULL, rows);
    int rc = TB_OK;
    if (!qd || !kd || !vd || !od || !ld) {
        rc = TB_FAIL(TB_ERR_NOMEM, "reference attention: out of host memory");
        goto out_free;
    }
    TB_TRY_GOTO(rc, tb_ref_attention_fwd_f64(d, qd, kd, vd, od, ld), out_free);
    narrow(out, od, n);
    if (lse)
        narrow(lse, ld, rows);
out_free:
    free(qd), free(kd), free(vd), free(od), free(ld);
    return rc;
}

int tb_ref_attention_bwd(const tb_attn_desc *d, const float *q, const float *k, const float *v,
                         const float *dout, float *dq, float *dk, float *dv)
{
    TB_TRY(attn_desc_ok(d));
    size_t n = (size_t)d->batch * d->heads * d->seq * d->head_dim;
    double *qd = widen(q, n), *kd = widen(k, n), *vd = widen(v, n), *dod = widen(dout, n);
    double *dqd = widen(NULL, n), *dkd = widen(NULL, n), *dvd = widen(NULL, n);
    int rc = TB_OK;
    if (!qd || !kd || !vd || !dod || !dqd || !dkd || !dvd) {
        rc = TB_FAIL(TB_ERR_NOMEM, "reference attention: out of host memory");
        goto out_free;
    }
    TB_TRY_GOTO(rc, tb_ref_attention_bwd_f64(d, qd, kd, vd, dod, dqd, dkd, dvd), out_free);
    narrow(dq, dqd, n);
    narrow(dk, dkd, n);
    narrow(dv, dvd, n);
out_free:
    free(qd), free(kd), free(vd), free(dod), free(dqd), free(dkd), free(dvd);
    return rc;
}
