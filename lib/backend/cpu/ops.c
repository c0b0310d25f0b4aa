/*
 * ops.c - the CPU backend's own kernels: every op slot of lib/backend/backend.h
 * except gelu_* (lib/backend/cpu/gelu.c), gemm and conv_* (lib/backend/cpu/dnnl.c).
 *
 *   element-wise  relu_fwd/bwd, add, axpby, bias_add, dropout_fwd/bwd
 *   reductions    bias_grad, reduce_sum, count_nonfinite
 *   batch norm    bn_fwd_train, bn_fwd_infer, bn_bwd (NCHW and NHWC)
 *   pooling       pool_fwd/bwd, max (with argmax) and average (NCHW, NHWC)
 *   loss          softmax_xent_fwd/bwd
 *   optimizers    opt_step: SGD and AdamW, per tensor or fused; LARS, LAMB and
 *                 NovoGrad (per-tensor norms: two phases over fixed chunks)
 *
 * The per-element math comes from kernels/ *_math.h, shared with the CUDA
 * kernels; lib/backend/ref/ops.c is the plain reference each op is tested against
 * (lib/backend/cpu/ops_test.c: bazel test //lib/backend/cpu:cpu_ops_test).
 *
 * Speed: OpenMP with ctx->threads threads and a static schedule; the inner
 * loops are `omp simd` so GCC vectorizes them at -O2 for the baseline
 * x86-64 ISA (GCC 12's -O2 cost model would not). Work below PAR_MIN
 * elements runs on one thread: waking a second costs more. Built with
 * -fno-math-errno (else sqrtf does not vectorize) and
 * -fno-trapping-math (else GCC keeps a branch around a multiply instead of
 * a select); neither changes a result.
 *
 * Determinism: every reduction has a fixed split that depends on the sizes
 * only, never on the thread count, and sums the parts in a fixed order, so
 * results are the same run to run and for any number of threads:
 *   reduce_sum       chunks of RS_CHUNK, partial sums in double, added in order
 *   bias_grad, bn    one thread owns each channel (NCHW) or column block
 *                    and sums its rows in order, in double
 *   bn NHWC          BN_ROW_CHUNKS fixed row ranges, partial sums in double,
 *                    added in chunk order
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bn_math.h"
#include "kernels/elementwise_math.h"
#include "kernels/optim_math.h"
#include "kernels/rng_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/core/status.h"

#define PAR_MIN ((size_t)16384)
#define RS_CHUNK ((size_t)16384)
#define RS_MAX_CHUNKS ((size_t)1024)
#define BG_BLOCK 64 /* bias_grad columns per thread task */
#define BN_ROW_CHUNKS ((size_t)64) /* NHWC batch norm: fixed row chunks of the sums */

/* Scratch memory of one backend; lives in ((tb_cpu_ctx *)be->ctx)->ops. */
typedef struct cpu_ops_ws {
    float *tmp;        /* per-tensor optimizer temporaries, bn_fwd_infer invstd */
    size_t tmp_cap;    /* floats */
    size_t *off;       /* fused optimizer: first element of each tensor */
    size_t off_cap;
    void *lb;          /* large-batch optimizers: chunks, partial sums, scalars */
    size_t lb_cap;     /* bytes */
} cpu_ops_ws;

static int threads_of(tb_backend *be) { return ((tb_cpu_ctx *)be->ctx)->threads; }

static cpu_ops_ws *ws_of(tb_backend *be) { return ((tb_cpu_ctx *)be->ctx)->ops; }

/* *out = at least n floats of scratch, valid until the next op. */
static int ws_floats(tb_backend *be, size_t n, float **out)
{
    cpu_ops_ws *w = ws_of(be);
    if (n > w->tmp_cap) {
        size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
        float *p = aligned_alloc(64, bytes);
        if (!p)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory for a %zu-byte op workspace", bytes);
        free(w->tmp);
        w->tmp = p;
        w->tmp_cap = n;
    }
    *out = w->tmp;
    return TB_OK;
}

static int ws_offsets(tb_backend *be, size_t n, size_t **out)
{
    cpu_ops_ws *w = ws_of(be);
    if (n > w->off_cap) {
        size_t *p = malloc(n * sizeof *p);
        if (!p)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory for %zu tensor offsets", n);
        free(w->off);
        w->off = p;
        w->off_cap = n;
    }
    *out = w->off;
    return TB_OK;
}

/* This thread's static share [*lo, *hi) of n items, inside a parallel region. */
static void thread_range(size_t n, size_t *lo, size_t *hi)
{
    size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    *lo = n * id / nt;
    *hi = n * (id + 1) / nt;
}

/* ---------------------------------------------------------------- element-wise */

static int cpu_relu_fwd(tb_backend *be, const float *x, float *y, size_t n)
{
    int t = threads_of(be);
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y[i] = tb_relu_f(x[i]);
    return TB_OK;
}

static int cpu_relu_bwd(tb_backend *be, const float *y, const float *dy, float *dx, size_t n)
{
    int t = threads_of(be);
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dx[i] = tb_relu_bwd_f(y[i], dy[i]);
    return TB_OK;
}

static int cpu_add(tb_backend *be, const float *a, const float *b, float *y, size_t n)
{
    int t = threads_of(be);
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y[i] = tb_add_f(a[i], b[i]);
    return TB_OK;
}

static int cpu_axpby(tb_backend *be, float alpha, const float *x, float beta, float *y, size_t n)
{
    int t = threads_of(be);
    if (beta == 0.0f) {
        /* y may hold garbage (NaN): never read it */
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
        for (size_t i = 0; i < n; i++)
            y[i] = alpha * x[i];
        return TB_OK;
    }
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y[i] = tb_axpby_f(alpha, x[i], beta, y[i]);
    return TB_OK;
}

static int cpu_bias_add(tb_backend *be, float *y, const float *bias, int rows, int cols)
{
    int t = threads_of(be);
    if (rows < 0 || cols < 0)
        return TB_FAIL(TB_ERR_INVALID, "bias_add: rows %d, cols %d", rows, cols);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++)
            yr[c] += bias[c];
    }
    return TB_OK;
}

/* dbias[c0, c0 + cw) from all rows, in row order, in double. */
static void bias_grad_block(const float *dy, float *dbias, int rows, int cols, int c0, int cw,
                            int accumulate)
{
    double acc[BG_BLOCK] = {0};
    for (int r = 0; r < rows; r++) {
        const float *row = dy + (size_t)r * cols + c0;
#pragma omp simd
        for (int j = 0; j < cw; j++)
            acc[j] += row[j];
    }
    for (int j = 0; j < cw; j++)
        dbias[c0 + j] = (float)((accumulate ? (double)dbias[c0 + j] : 0.0) + acc[j]);
}

static int cpu_bias_grad(tb_backend *be, const float *dy, float *dbias, int rows, int cols,
                         int accumulate)
{
    int t = threads_of(be);
    if (rows < 0 || cols < 0)
        return TB_FAIL(TB_ERR_INVALID, "bias_grad: rows %d, cols %d", rows, cols);
    int blocks = (cols + BG_BLOCK - 1) / BG_BLOCK;
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int b = 0; b < blocks; b++) {
        int c0 = b * BG_BLOCK;
        int cw = cols - c0 < BG_BLOCK ? cols - c0 : BG_BLOCK;
        bias_grad_block(dy, dbias, rows, cols, c0, cw, accumulate);
    }
    return TB_OK;
}

/* ---------------------------------------------------------------- reductions */

static double sum_f64(const float *x, size_t n)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s;
}

static int cpu_reduce_sum(tb_backend *be, const float *x, size_t n, float *out)
{
    int t = threads_of(be);
    size_t chunks = (n + RS_CHUNK - 1) / RS_CHUNK;
    chunks = chunks < 1 ? 1 : chunks > RS_MAX_CHUNKS ? RS_MAX_CHUNKS : chunks;
    size_t per = (n + chunks - 1) / chunks;
    double part[RS_MAX_CHUNKS];
#pragma omp parallel for num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t lo = c * per < n ? c * per : n;
        size_t hi = lo + per < n ? lo + per : n;
        part[c] = sum_f64(x + lo, hi - lo);
    }
    double total = 0.0;
    for (size_t c = 0; c < chunks; c++)
        total += part[c];
    out[0] = (float)total;
    return TB_OK;
}

static int cpu_count_nonfinite(tb_backend *be, const float *x, size_t n, float *out)
{
    int t = threads_of(be);
    size_t count = 0;
#pragma omp parallel for simd num_threads(t) schedule(static) reduction(+ : count) \
    if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        count += (size_t)tb_nonfinite_f(x[i]);
    out[0] = (float)count;
    return TB_OK;
}

/* ---------------------------------------------------------------- dropout */

/* Elements [lo, hi) of one call; splits where idx >> 32 changes so the block
 * key is computed once per block of 2^32 stream indices. */
static void dropout_range(uint64_t seed, uint64_t offset, uint32_t thr, float scale,
                          const float *x, float *y, uint8_t *mask, size_t lo, size_t hi)
{
    size_t i = lo;
    while (i < hi) {
        uint64_t idx = offset + i;
        uint64_t room = ((uint64_t)1 << 32) - (uint32_t)idx;
        size_t end = hi - i < room ? hi : i + (size_t)room;
        uint64_t key = tb_dropout_block_key(seed, (uint32_t)(idx >> 32));
        uint32_t lo32 = (uint32_t)idx;
        size_t base = i;
#pragma omp simd
        for (size_t j = base; j < end; j++) {
            uint8_t keep = tb_dropout_keep(tb_dropout_bits(key, lo32 + (uint32_t)(j - base)), thr);
            mask[j] = keep;
            y[j] = tb_dropout_apply_f(x[j], keep, scale);
        }
        i = end;
    }
}

static int cpu_dropout_fwd(tb_backend *be, float p, uint64_t seed, uint64_t offset, const float *x,
                           float *y, uint8_t *mask, size_t n)
{
    if (!(p >= 0.0f && p <= 1.0f))
        return TB_FAIL(TB_ERR_INVALID, "dropout probability %g is outside [0, 1]", (double)p);
    int t = threads_of(be);
    uint32_t thr = tb_dropout_threshold(p);
    float scale = tb_dropout_scale(p);
#pragma omp parallel num_threads(t) if (n >= PAR_MIN)
    {
        size_t lo, hi;
        thread_range(n, &lo, &hi);
        dropout_range(seed, offset, thr, scale, x, y, mask, lo, hi);
    }
    return TB_OK;
}

static int cpu_dropout_bwd(tb_backend *be, float p, const uint8_t *mask, const float *dy, float *dx,
                           size_t n)
{
    if (!(p >= 0.0f && p <= 1.0f))
        return TB_FAIL(TB_ERR_INVALID, "dropout probability %g is outside [0, 1]", (double)p);
    int t = threads_of(be);
    float scale = tb_dropout_scale(p);
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dx[i] = tb_dropout_apply_f(dy[i], mask[i], scale);
    return TB_OK;
}

/* ---------------------------------------------------------------- batch norm */

static int bn_check(const tb_bn_desc *d, int training)
{
    if (d->n < 1 || d->c < 1 || d->hw < 1 || (d->layout != TB_NCHW && d->layout != TB_NHWC))
        return TB_FAIL(TB_ERR_INVALID, "batch norm: bad shape n=%d c=%d hw=%d layout=%d", d->n,
                       d->c, d->hw, (int)d->layout);
    if (training && (size_t)d->n * d->hw < 2)
        return TB_FAIL(TB_ERR_INVALID,
                       "batch norm: training needs more than 1 value per channel (n=%d hw=%d)",
                       d->n, d->hw);
    return TB_OK;
}

/* Batch statistics done: rounds them, saves mean and invstd, moves the
 * running statistics. */
static void bn_finish_channel(const tb_bn_desc *d, int c, double mean, double var,
                              float *running_mean, float *running_var, float *save_mean,
                              float *save_invstd)
{
    double m = (double)d->n * d->hw;
    save_mean[c] = (float)mean;
    save_invstd[c] = tb_bn_invstd_f((float)var, d->eps);
    running_mean[c] = tb_bn_running_f(running_mean[c], (float)mean, d->momentum);
    running_var[c] = tb_bn_running_f(running_var[c], (float)tb_bn_unbiased(var, m), d->momentum);
}

static double sqdev_f64(const float *x, size_t n, double mu)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) {
        double e = x[i] - mu;
        s += e * e;
    }
    return s;
}

/* NCHW: channel c is n runs of hw floats, C * hw apart. */
static void bn_train_channel_nchw(const tb_bn_desc *d, int c, const float *x, const float *gamma,
                                  const float *beta, float *y, float *rm, float *rv, float *sm,
                                  float *si)
{
    size_t hw = (size_t)d->hw, stride = (size_t)d->c * hw;
    double m = (double)d->n * hw, s = 0.0, q = 0.0;
    const float *xc = x + (size_t)c * hw;
    for (int n = 0; n < d->n; n++)
        s += sum_f64(xc + n * stride, hw);
    double mean = s / m;
    for (int n = 0; n < d->n; n++)
        q += sqdev_f64(xc + n * stride, hw, mean);
    bn_finish_channel(d, c, mean, q / m, rm, rv, sm, si);
    float mu = sm[c], inv = si[c], g = gamma[c], b = beta[c];
    for (int n = 0; n < d->n; n++) {
        const float *xr = xc + n * stride;
        float *yr = y + (size_t)c * hw + n * stride;
#pragma omp simd
        for (size_t i = 0; i < hw; i++)
            yr[i] = tb_bn_fwd_f(xr[i], mu, inv, g, b);
    }
}

/* NHWC rows are C contiguous channels: every pass streams through memory
 * row by row. Statistics are per-chunk partial sums over BN_ROW_CHUNKS
 * fixed row ranges (fixed by the shape, not the thread count), added in
 * chunk order: deterministic, and each thread reads whole cache lines. */
static size_t bn_row_chunks(size_t rows) { return rows < BN_ROW_CHUNKS ? rows : BN_ROW_CHUNKS; }

/* Rows [lo, hi) of chunk k of rows split into kc chunks. */
static void bn_chunk(size_t rows, size_t kc, size_t k, size_t *lo, size_t *hi)
{
    *lo = rows * k / kc;
    *hi = rows * (k + 1) / kc;
}

/* part[c] = sum over rows [lo, hi) of x[r][c] (sqdev: of (x - mean[c])^2). */
static void nhwc_rows_sum(const float *x, size_t C, size_t lo, size_t hi, const double *mean,
                          double *part)
{
    memset(part, 0, C * sizeof *part);
    for (size_t r = lo; r < hi; r++) {
        const float *xr = x + r * C;
        if (!mean) {
#pragma omp simd
            for (size_t c = 0; c < C; c++)
                part[c] += xr[c];
        } else {
#pragma omp simd
            for (size_t c = 0; c < C; c++) {
                double e = xr[c] - mean[c];
                part[c] += e * e;
            }
        }
    }
}

/* out[c] = sum of part[k][c] over the kc chunks, in chunk order. */
static void bn_combine(const double *part, size_t kc, size_t C, double *out)
{
    memset(out, 0, C * sizeof *out);
    for (size_t k = 0; k < kc; k++)
        for (size_t c = 0; c < C; c++)
            out[c] += part[k * C + c];
}

static int bn_fwd_train_nhwc(tb_backend *be, const tb_bn_desc *d, const float *x,
                             const float *gamma, const float *beta, float *y, float *rm, float *rv,
                             float *sm, float *si)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, rows = (size_t)d->n * d->hw, kc = bn_row_chunks(rows);
    float *ws;
    TB_TRY(ws_floats(be, 2 * (kc * C + 2 * C), &ws));
    double *part = (double *)ws, *mean = part + kc * C, *var = mean + C;
    int par = rows * C >= PAR_MIN;
    for (int pass = 0; pass < 2; pass++) {
#pragma omp parallel for num_threads(t) schedule(static) if (par)
        for (size_t k = 0; k < kc; k++) {
            size_t lo, hi;
            bn_chunk(rows, kc, k, &lo, &hi);
            nhwc_rows_sum(x, C, lo, hi, pass ? mean : NULL, part + k * C);
        }
        bn_combine(part, kc, C, pass ? var : mean);
        for (size_t c = 0; c < C; c++)
            (pass ? var : mean)[c] /= (double)rows;
    }
    for (size_t c = 0; c < C; c++)
        bn_finish_channel(d, (int)c, mean[c], var[c], rm, rv, sm, si);
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t r = 0; r < rows; r++) {
#pragma omp simd
        for (size_t c = 0; c < C; c++)
            y[r * C + c] = tb_bn_fwd_f(x[r * C + c], sm[c], si[c], gamma[c], beta[c]);
    }
    return TB_OK;
}

static int cpu_bn_fwd_train(tb_backend *be, const tb_bn_desc *d, const float *x, const float *gamma,
                            const float *beta, float *y, float *running_mean, float *running_var,
                            float *save_mean, float *save_invstd)
{
    TB_TRY(bn_check(d, 1));
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->hw;
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (int c = 0; c < d->c; c++)
            bn_train_channel_nchw(d, c, x, gamma, beta, y, running_mean, running_var, save_mean,
                                  save_invstd);
        return TB_OK;
    }
    return bn_fwd_train_nhwc(be, d, x, gamma, beta, y, running_mean, running_var, save_mean,
                             save_invstd);
}

static int cpu_bn_fwd_infer(tb_backend *be, const tb_bn_desc *d, const float *x, const float *gamma,
                            const float *beta, const float *running_mean, const float *running_var,
                            float *y)
{
    TB_TRY(bn_check(d, 0));
    int t = threads_of(be), C = d->c;
    size_t hw = (size_t)d->hw, total = (size_t)d->n * C * hw;
    float *inv;
    TB_TRY(ws_floats(be, (size_t)C, &inv));
    for (int c = 0; c < C; c++)
        inv[c] = tb_bn_invstd_f(running_var[c], d->eps);
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (size_t pl = 0; pl < (size_t)d->n * C; pl++) {
            int c = (int)(pl % (size_t)C);
            float mu = running_mean[c], is = inv[c], g = gamma[c], b = beta[c];
#pragma omp simd
            for (size_t i = 0; i < hw; i++)
                y[pl * hw + i] = tb_bn_fwd_f(x[pl * hw + i], mu, is, g, b);
        }
        return TB_OK;
    }
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (size_t r = 0; r < (size_t)d->n * hw; r++) {
#pragma omp simd
        for (int c = 0; c < C; c++)
            y[r * C + c] = tb_bn_fwd_f(x[r * C + c], running_mean[c], inv[c], gamma[c], beta[c]);
    }
    return TB_OK;
}

/* Where backward writes: dx always; dgamma/dbeta written or added to. */
typedef struct bn_grads {
    float *dx, *dgamma, *dbeta;
    int accumulate;
} bn_grads;

/* Per-channel sums done: writes dgamma/dbeta, returns the dx coefficients. */
static void bn_bwd_finish(const tb_bn_desc *d, int c, double sum_dy, double sum_dy_xmu,
                          const float *gamma, const float *save_invstd, const bn_grads *gr,
                          float *k, float *mean_dy, float *mean_dy_xhat)
{
    double m = (double)d->n * d->hw, inv = save_invstd[c];
    double dg = sum_dy_xmu * inv;
    gr->dbeta[c] = (float)((gr->accumulate ? (double)gr->dbeta[c] : 0.0) + sum_dy);
    gr->dgamma[c] = (float)((gr->accumulate ? (double)gr->dgamma[c] : 0.0) + dg);
    *k = gamma[c] * save_invstd[c];
    *mean_dy = (float)(sum_dy / m);
    *mean_dy_xhat = (float)(dg / m);
}

static void bn_bwd_channel_nchw(const tb_bn_desc *d, int c, const float *x, const float *dy,
                                const float *gamma, const float *sm, const float *si,
                                const bn_grads *gr)
{
    size_t hw = (size_t)d->hw, stride = (size_t)d->c * hw, off = (size_t)c * hw;
    double mu = sm[c], s = 0.0, sx = 0.0;
    for (int n = 0; n < d->n; n++) {
        const float *xr = x + off + n * stride, *gr_ = dy + off + n * stride;
        double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
        for (size_t i = 0; i < hw; i++) {
            a += gr_[i];
            b += gr_[i] * (xr[i] - mu);
        }
        s += a;
        sx += b;
    }
    float k, mdy, mdyx;
    bn_bwd_finish(d, c, s, sx, gamma, si, gr, &k, &mdy, &mdyx);
    float muf = sm[c], inv = si[c];
    for (int n = 0; n < d->n; n++) {
        const float *xr = x + off + n * stride, *dyr = dy + off + n * stride;
        float *dxr = gr->dx + off + n * stride;
#pragma omp simd
        for (size_t i = 0; i < hw; i++)
            dxr[i] = tb_bn_bwd_dx_f(xr[i], dyr[i], muf, inv, k, mdy, mdyx);
    }
}

/* Backward sums over rows [lo, hi): part[c] = sum dy, part[C + c] =
 * sum dy (x - mean). */
static void nhwc_rows_bwd_sums(const float *x, const float *dy, size_t C, size_t lo, size_t hi,
                               const float *mean, double *part)
{
    memset(part, 0, 2 * C * sizeof *part);
    for (size_t r = lo; r < hi; r++) {
        const float *xr = x + r * C, *dyr = dy + r * C;
#pragma omp simd
        for (size_t c = 0; c < C; c++) {
            part[c] += dyr[c];
            part[C + c] += dyr[c] * (xr[c] - mean[c]);
        }
    }
}

static int bn_bwd_nhwc(tb_backend *be, const tb_bn_desc *d, const float *x, const float *dy,
                       const float *gamma, const float *sm, const float *si, const bn_grads *gr)
{
    int t = threads_of(be);
    size_t C = (size_t)d->c, rows = (size_t)d->n * d->hw, kc = bn_row_chunks(rows);
    float *ws;
    TB_TRY(ws_floats(be, 2 * (2 * kc * C + 2 * C) + 3 * C, &ws));
    double *part = (double *)ws, *sums = part + 2 * kc * C;
    float *k = (float *)(sums + 2 * C), *mdy = k + C, *mdyx = mdy + C;
    float *dx = gr->dx;
    int par = rows * C >= PAR_MIN;
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t q = 0; q < kc; q++) {
        size_t lo, hi;
        bn_chunk(rows, kc, q, &lo, &hi);
        nhwc_rows_bwd_sums(x, dy, C, lo, hi, sm, part + 2 * q * C);
    }
    bn_combine(part, kc, 2 * C, sums);
    for (size_t c = 0; c < C; c++)
        bn_bwd_finish(d, (int)c, sums[c], sums[C + c], gamma, si, gr, &k[c], &mdy[c], &mdyx[c]);
#pragma omp parallel for num_threads(t) schedule(static) if (par)
    for (size_t r = 0; r < rows; r++) {
#pragma omp simd
        for (size_t c = 0; c < C; c++)
            dx[r * C + c] = tb_bn_bwd_dx_f(x[r * C + c], dy[r * C + c], sm[c], si[c], k[c],
                                           mdy[c], mdyx[c]);
    }
    return TB_OK;
}

static int cpu_bn_bwd(tb_backend *be, const tb_bn_desc *d, const float *x, const float *dy,
                      const float *gamma, const float *save_mean, const float *save_invstd,
                      float *dx, float *dgamma, float *dbeta, int accumulate)
{
    TB_TRY(bn_check(d, 1));
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->hw;
    bn_grads gr = {dx, dgamma, dbeta, accumulate};
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (int c = 0; c < d->c; c++)
            bn_bwd_channel_nchw(d, c, x, dy, gamma, save_mean, save_invstd, &gr);
        return TB_OK;
    }
    return bn_bwd_nhwc(be, d, x, dy, gamma, save_mean, save_invstd, &gr);
}

/* ---------------------------------------------------------------- pooling */

/* Output size of a pooling problem, PyTorch's floor mode. */
typedef struct pool_geom {
    int P, Q;
    float area; /* window * window: padding counts (count_include_pad) */
} pool_geom;

static int pool_check(const tb_pool_desc *d, pool_geom *g)
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
    g->P = (d->h + 2 * d->pad - d->window) / d->stride + 1;
    g->Q = (d->w + 2 * d->pad - d->window) / d->stride + 1;
    g->area = (float)d->window * (float)d->window;
    return TB_OK;
}

/* Clips a window [start, start + window) to [0, size). */
static void clip(int start, int window, int size, int *lo, int *hi)
{
    *lo = start < 0 ? 0 : start;
    *hi = start + window > size ? size : start + window;
}

/* One (n, c) plane of NCHW: pl = n * C + c. Max takes the first of equal
 * values and propagates NaN, as PyTorch does. */
static void pool_fwd_plane(const tb_pool_desc *d, const pool_geom *g, size_t pl, const float *x,
                           float *y, int32_t *argmax)
{
    size_t in0 = pl * d->h * d->w, out0 = pl * g->P * g->Q;
    for (int p = 0; p < g->P; p++) {
        int h0, h1, w0, w1;
        clip(p * d->stride - d->pad, d->window, d->h, &h0, &h1);
        for (int q = 0; q < g->Q; q++) {
            clip(q * d->stride - d->pad, d->window, d->w, &w0, &w1);
            float best = 0.0f, sum = 0.0f;
            int32_t bi = -1;
            for (int h = h0; h < h1; h++) {
                for (int w = w0; w < w1; w++) {
                    float v = x[in0 + (size_t)h * d->w + w];
                    sum += v;
                    if (bi < 0 || v > best || v != v) {
                        best = v;
                        bi = (int32_t)(in0 + (size_t)h * d->w + w);
                    }
                }
            }
            size_t o = out0 + (size_t)p * g->Q + q;
            y[o] = d->kind == TB_POOL_MAX ? best : sum / g->area;
            if (d->kind == TB_POOL_MAX)
                argmax[o] = bi;
        }
    }
}

/* One output pixel of NHWC, all channels (the vectorized dimension). */
static void pool_fwd_pixel_nhwc(const tb_pool_desc *d, const pool_geom *g, int n, int p, int q,
                                const float *x, float *y, int32_t *argmax)
{
    int C = d->c, h0, h1, w0, w1, first = 1;
    size_t o = (((size_t)n * g->P + p) * g->Q + q) * C;
    float *yo = y + o;
    clip(p * d->stride - d->pad, d->window, d->h, &h0, &h1);
    clip(q * d->stride - d->pad, d->window, d->w, &w0, &w1);
    for (int h = h0; h < h1; h++) {
        for (int w = w0; w < w1; w++) {
            size_t base = (((size_t)n * d->h + h) * d->w + w) * C;
            const float *xi = x + base;
            if (d->kind == TB_POOL_AVG) {
#pragma omp simd
                for (int c = 0; c < C; c++)
                    yo[c] = (first ? 0.0f : yo[c]) + xi[c];
            } else {
                int32_t *ao = argmax + o;
#pragma omp simd
                for (int c = 0; c < C; c++) {
                    float v = xi[c];
                    int take = first | (v > yo[c]) | (v != v); /* no short circuit: vectorizes */
                    yo[c] = take ? v : yo[c];
                    ao[c] = take ? (int32_t)(base + c) : ao[c];
                }
            }
            first = 0;
        }
    }
    if (d->kind == TB_POOL_AVG) {
#pragma omp simd
        for (int c = 0; c < C; c++)
            yo[c] /= g->area;
    }
}

static int cpu_pool_fwd(tb_backend *be, const tb_pool_desc *d, const float *x, float *y,
                        int32_t *argmax)
{
    pool_geom g;
    TB_TRY(pool_check(d, &g));
    if (d->kind == TB_POOL_MAX && !argmax)
        return TB_FAIL(TB_ERR_INVALID, "max pooling needs an argmax buffer");
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (size_t pl = 0; pl < (size_t)d->n * d->c; pl++)
            pool_fwd_plane(d, &g, pl, x, y, argmax);
        return TB_OK;
    }
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (size_t np = 0; np < (size_t)d->n * g.P; np++) {
        for (int q = 0; q < g.Q; q++)
            pool_fwd_pixel_nhwc(d, &g, (int)(np / g.P), (int)(np % g.P), q, x, y, argmax);
    }
    return TB_OK;
}

/* Adds dy / area to every input of the window of output (p, q); inputs of
 * one pixel are `step` floats apart in dx (1 for NCHW, C for NHWC). */
static void avg_scatter(const tb_pool_desc *d, const pool_geom *g, int p, int q, float v,
                        float *dx0, size_t step)
{
    int h0, h1, w0, w1;
    clip(p * d->stride - d->pad, d->window, d->h, &h0, &h1);
    clip(q * d->stride - d->pad, d->window, d->w, &w0, &w1);
    float share = v / g->area;
    for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++)
            dx0[((size_t)h * d->w + w) * step] += share;
}

/* NCHW plane pl; max pooling's argmax indices of this plane stay in it. */
static void pool_bwd_plane(const tb_pool_desc *d, const pool_geom *g, size_t pl, const float *dy,
                           const int32_t *argmax, float *dx)
{
    size_t in0 = pl * d->h * d->w, out0 = pl * g->P * g->Q, nout = (size_t)g->P * g->Q;
    memset(dx + in0, 0, (size_t)d->h * d->w * sizeof *dx);
    for (size_t o = out0; o < out0 + nout; o++) {
        if (d->kind == TB_POOL_MAX)
            dx[argmax[o]] += dy[o];
        else
            avg_scatter(d, g, (int)((o - out0) / g->Q), (int)((o - out0) % g->Q), dy[o],
                        dx + in0, 1);
    }
}

/* NHWC image n: windows overlap across pixels, so one thread owns an image. */
static void pool_bwd_image_nhwc(const tb_pool_desc *d, const pool_geom *g, int n, const float *dy,
                                const int32_t *argmax, float *dx)
{
    int C = d->c;
    size_t in0 = (size_t)n * d->h * d->w * C, out0 = (size_t)n * g->P * g->Q * C;
    memset(dx + in0, 0, (size_t)d->h * d->w * C * sizeof *dx);
    for (int p = 0; p < g->P; p++) {
        for (int q = 0; q < g->Q; q++) {
            size_t o = out0 + ((size_t)p * g->Q + q) * C;
            for (int c = 0; c < C; c++) {
                if (d->kind == TB_POOL_MAX)
                    dx[argmax[o + c]] += dy[o + c];
                else
                    avg_scatter(d, g, p, q, dy[o + c], dx + in0 + c, (size_t)C);
            }
        }
    }
}

static int cpu_pool_bwd(tb_backend *be, const tb_pool_desc *d, const float *dy,
                        const int32_t *argmax, float *dx)
{
    pool_geom g;
    TB_TRY(pool_check(d, &g));
    if (d->kind == TB_POOL_MAX && !argmax)
        return TB_FAIL(TB_ERR_INVALID, "max pooling backward needs the forward's argmax");
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (size_t pl = 0; pl < (size_t)d->n * d->c; pl++)
            pool_bwd_plane(d, &g, pl, dy, argmax, dx);
        return TB_OK;
    }
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (int n = 0; n < d->n; n++)
        pool_bwd_image_nhwc(d, &g, n, dy, argmax, dx);
    return TB_OK;
}

/* ---------------------------------------------------------------- loss */

static int xent_check(const int32_t *labels, int rows, int classes)
{
    if (rows < 0 || classes < 1)
        return TB_FAIL(TB_ERR_INVALID, "softmax cross-entropy: rows %d, classes %d", rows, classes);
    for (int r = 0; r < rows; r++)
        if (labels[r] < 0 || labels[r] >= classes)
            return TB_FAIL(TB_ERR_INVALID, "softmax cross-entropy: label %d of row %d is not in "
                           "[0, %d)", labels[r], r, classes);
    return TB_OK;
}

/* One row; subtracts the max so exp never overflows; the loss is
 * log(sum) - (z[label] - max), which stays accurate where probs[label]
 * underflows. */
static void xent_row(const float *z, int label, int k, float *p, float *loss)
{
    float mx = z[0];
    for (int j = 1; j < k; j++)
        mx = z[j] > mx ? z[j] : mx;
    double s = 0.0;
    for (int j = 0; j < k; j++) {
        p[j] = expf(z[j] - mx);
        s += p[j];
    }
    for (int j = 0; j < k; j++)
        p[j] = (float)(p[j] / s);
    *loss = (float)(log(s) - ((double)z[label] - mx));
}

static int cpu_softmax_xent_fwd(tb_backend *be, const float *logits, const int32_t *labels,
                                int rows, int classes, float *probs, float *loss)
{
    TB_TRY(xent_check(labels, rows, classes));
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) \
    if ((size_t)rows * classes >= PAR_MIN / 8)
    for (int r = 0; r < rows; r++)
        xent_row(logits + (size_t)r * classes, labels[r], classes, probs + (size_t)r * classes,
                 loss + r);
    return TB_OK;
}

static int cpu_softmax_xent_bwd(tb_backend *be, const float *probs, const int32_t *labels, int rows,
                                int classes, float scale, float *dlogits)
{
    TB_TRY(xent_check(labels, rows, classes));
    int t = threads_of(be);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * classes >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *pr = probs + (size_t)r * classes;
        float *dr = dlogits + (size_t)r * classes;
        int label = labels[r];
#pragma omp simd
        for (int j = 0; j < classes; j++)
            dr[j] = tb_xent_grad_f(pr[j], j == label, scale);
    }
    return TB_OK;
}

/* ---------------------------------------------------------------- optimizers
 * Per tensor: one pass per PyTorch op, each over the whole tensor (the
 * pass_* functions, named after the in-place op they stand for).
 * Fused: one parallel region over the elements of all tensors, each
 * element updated once in registers by the same steps (kernels/optim_math.h). */

/* dst = src * k (a.mul(k); dst == src is a.mul_(k)) */
static void pass_mul(int t, float *dst, const float *src, float k, size_t n)
{
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dst[i] = tb_opt_step_mul(src[i], k);
}

/* dst = a + k b (a.add(b, alpha=k); dst == a is in place) */
static void pass_add(int t, float *dst, const float *a, const float *b, float k, size_t n)
{
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dst[i] = tb_opt_step_add(a[i], b[i], k);
}

static void pass_copy(int t, float *dst, const float *src, size_t n)
{
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* a.addcmul_(b, c, value=k) */
static void pass_addcmul(int t, float *a, const float *b, const float *c, float k, size_t n)
{
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        a[i] = tb_opt_step_addcmul(a[i], b[i], c[i], k);
}

/* dst = src.sqrt() */
static void pass_sqrt(int t, float *dst, const float *src, size_t n)
{
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dst[i] = tb_opt_step_sqrt(src[i]);
}

/* a.div_(k) */
static void pass_div(int t, float *a, float k, size_t n)
{
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        a[i] = tb_opt_step_div(a[i], k);
}

/* a.add_(k), k a scalar */
static void pass_add_scalar(int t, float *a, float k, size_t n)
{
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        a[i] = tb_opt_step_add_scalar(a[i], k);
}

/* a.addcdiv_(b, c, value=k) */
static void pass_addcdiv(int t, float *a, const float *b, const float *c, float k, size_t n)
{
#pragma omp parallel for simd num_threads(t) schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        a[i] = tb_opt_step_addcdiv(a[i], b[i], c[i], k);
}

/* PyTorch's _single_tensor_sgd for one tensor; d lives in scratch. */
static int sgd_tensor(tb_backend *be, const tb_sgd_coef *k, const tb_param_view *tv)
{
    int t = threads_of(be);
    size_t n = tv->n;
    float *tmp;
    TB_TRY(ws_floats(be, n, &tmp));
    const float *d = tv->grad;
    if (k->inv_scale != 1.0f) { /* GradScaler's unscale */
        pass_mul(t, tmp, d, k->inv_scale, n);
        d = tmp;
    }
    if (k->weight_decay != 0.0f) { /* d_p = d_p.add(param, alpha=wd) */
        pass_add(t, tmp, d, tv->param, k->weight_decay, n);
        d = tmp;
    }
    if (k->momentum != 0.0f) {
        if (k->first) {
            pass_copy(t, tv->state1, d, n); /* buf = clone(d_p) */
        } else {
            pass_mul(t, tv->state1, tv->state1, k->momentum, n); /* buf.mul_(momentum) */
            pass_add(t, tv->state1, tv->state1, d, 1.0f, n);     /* .add_(d_p) */
        }
        d = tv->state1;
    }
    pass_add(t, tv->param, tv->param, d, k->neg_lr, n); /* param.add_(d_p, alpha=-lr) */
    return TB_OK;
}

/* PyTorch's _single_tensor_adamw for one tensor: ten passes (eleven with
 * grad scaling); the unscaled grads and denom live in scratch. */
static int adamw_tensor(tb_backend *be, const tb_adamw_coef *k, const tb_param_view *tv)
{
    int t = threads_of(be);
    size_t n = tv->n;
    float *tmp;
    TB_TRY(ws_floats(be, 2 * n, &tmp));
    float *denom = tmp + n, *p = tv->param, *m = tv->state1, *v = tv->state2;
    const float *g = tv->grad;
    if (k->inv_scale != 1.0f) {
        pass_mul(t, tmp, g, k->inv_scale, n);
        g = tmp;
    }
    pass_mul(t, p, p, k->decay, n);
    pass_mul(t, m, m, k->beta1, n);
    pass_add(t, m, m, g, k->one_minus_beta1, n);
    pass_mul(t, v, v, k->beta2, n);
    pass_addcmul(t, v, g, g, k->one_minus_beta2, n);
    pass_sqrt(t, denom, v, n);
    pass_div(t, denom, k->bc2_sqrt, n);
    pass_add_scalar(t, denom, k->eps, n);
    pass_addcdiv(t, p, m, denom, k->neg_step_size, n);
    return TB_OK;
}

/* Elements [a, b) of one tensor, in registers. */
static void sgd_slice(const tb_sgd_coef *k, const tb_param_view *tv, size_t a, size_t b)
{
    tb_sgd_coef kk = *k;
    float *p = tv->param, *buf = tv->state1;
    const float *g = tv->grad;
    if (kk.momentum == 0.0f) { /* no buffer: a per-element dummy */
#pragma omp simd
        for (size_t i = a; i < b; i++) {
            float unused = 0.0f;
            tb_sgd_elem(&kk, &p[i], g[i], &unused);
        }
        return;
    }
#pragma omp simd
    for (size_t i = a; i < b; i++)
        tb_sgd_elem(&kk, &p[i], g[i], &buf[i]);
}

static void adamw_slice(const tb_adamw_coef *k, const tb_param_view *tv, size_t a, size_t b)
{
    tb_adamw_coef kk = *k;
    float *p = tv->param, *m = tv->state1, *v = tv->state2;
    const float *g = tv->grad;
#pragma omp simd
    for (size_t i = a; i < b; i++)
        tb_adamw_elem(&kk, &p[i], g[i], &m[i], &v[i]);
}

/* The fused step: threads split the concatenated elements of all tensors
 * into equal static ranges, whatever the tensor boundaries. */
static int opt_fused(tb_backend *be, const tb_opt_hparams *hp, const tb_param_view *tensors,
                     int count, const tb_sgd_coef *sgd, const tb_adamw_coef *adamw)
{
    size_t *off;
    TB_TRY(ws_offsets(be, (size_t)count + 1, &off));
    off[0] = 0;
    for (int i = 0; i < count; i++)
        off[i + 1] = off[i] + tensors[i].n;
    size_t total = off[count];
    int t = threads_of(be);
#pragma omp parallel num_threads(t) if (total >= PAR_MIN)
    {
        size_t lo, hi;
        thread_range(total, &lo, &hi);
        int i = 0;
        while (i < count && off[i + 1] <= lo)
            i++;
        for (; i < count && off[i] < hi; i++) {
            size_t a = (lo > off[i] ? lo : off[i]) - off[i];
            size_t b = (hi < off[i + 1] ? hi : off[i + 1]) - off[i];
            if (hp->kind == TB_OPT_SGD)
                sgd_slice(sgd, &tensors[i], a, b);
            else
                adamw_slice(adamw, &tensors[i], a, b);
        }
    }
    return TB_OK;
}

static int opt_check(const tb_opt_hparams *hp, const tb_param_view *tensors, int count)
{
    if (count < 0 || (count > 0 && !tensors))
        return TB_FAIL(TB_ERR_INVALID, "opt_step: %d tensors", count);
    if (hp->step < 1 || !(hp->grad_scale > 0.0f) || isinf(hp->grad_scale))
        return TB_FAIL(TB_ERR_INVALID, "opt_step: step %d (1-based), grad_scale %g", hp->step,
                       (double)hp->grad_scale);
    if (hp->kind >= TB_OPT_LARS) /* lb_check */
        return TB_OK;
    int need1 = hp->kind == TB_OPT_ADAMW || hp->momentum != 0.0f;
    int need2 = hp->kind == TB_OPT_ADAMW;
    for (int i = 0; i < count; i++) {
        const tb_param_view *tv = &tensors[i];
        if (tv->n && (!tv->param || !tv->grad || (need1 && !tv->state1) ||
                      (need2 && !tv->state2)))
            return TB_FAIL(TB_ERR_INVALID, "opt_step: tensor %d lacks a buffer this optimizer "
                           "needs", i);
    }
    return TB_OK;
}

/* ---- large-batch optimizers (LARS, LAMB, NovoGrad; kernels/optim_math.h).
 * Every tensor is cut into chunks of LB_CHUNK elements; phase 1 reduces
 * each chunk's sums of squares into two doubles, the chunks of a tensor are
 * added in order (so the norms depend on the sizes only, not on threads),
 * the per-tensor scalar (trust ratio, step scale, NovoGrad's denominator)
 * is computed on the host, and phase 2 updates the elements. Fused: both
 * phases are one parallel loop over the chunks of all tensors; per tensor:
 * two parallel loops per tensor, as a for-loop optimizer runs. The two are
 * bitwise equal. */
#define LB_CHUNK ((size_t)16384)

typedef struct lb_chunk {
    int t;                    /* tensor */
    size_t a, b;              /* elements [a, b) of it */
} lb_chunk;

typedef struct lb_coefs {
    tb_opt_kind kind;
    tb_lars_coef lars;
    tb_lamb_coef lamb;
    tb_novograd_coef novo;
} lb_coefs;

static int lb_workspace(tb_backend *be, size_t nchunks, int count, lb_chunk **ch, double **part,
                        float **scal)
{
    cpu_ops_ws *w = ws_of(be);
    size_t bytes = nchunks * (sizeof(lb_chunk) + 2 * sizeof(double)) + (size_t)count * sizeof(float);
    if (bytes > w->lb_cap) {
        void *p = malloc(bytes);
        if (!p)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory for a %zu-byte optimizer workspace",
                           bytes);
        free(w->lb);
        w->lb = p;
        w->lb_cap = bytes;
    }
    *part = w->lb;
    *ch = (lb_chunk *)(*part + 2 * nchunks);
    *scal = (float *)(*ch + nchunks);
    return TB_OK;
}

static void lb_phase1(const lb_coefs *k, const tb_param_view *tv, size_t a, size_t b,
                      double *out)
{
    double s0 = 0.0, s1 = 0.0;
    float *p = tv->param, *m = tv->state1, *v = tv->state2;
    const float *g = tv->grad;
    if (k->kind == TB_OPT_LAMB) {
        tb_lamb_coef kk = k->lamb;
        for (size_t i = a; i < b; i++) {
            tb_lamb_moments(&kk, g[i], &m[i], &v[i]);
            float u = tb_lamb_dir(&kk, p[i], m[i], v[i]);
            s0 += (double)p[i] * p[i];
            s1 += (double)u * u;
        }
    } else {
        float inv = k->kind == TB_OPT_LARS ? k->lars.inv_scale : k->novo.inv_scale;
        for (size_t i = a; i < b; i++) {
            float gg = tb_lb_unscale(g[i], inv);
            s0 += (double)p[i] * p[i];
            s1 += (double)gg * gg;
        }
    }
    out[0] = s0;
    out[1] = s1;
}

/* The per-tensor scalar from its norms; NovoGrad's tensor state advances. */
static float lb_scalar(const lb_coefs *k, const tb_param_view *tv, double s0, double s1)
{
    float w_norm = (float)sqrt(s0), o_norm = (float)sqrt(s1);
    if (k->kind == TB_OPT_LARS)
        return tb_lars_trust(&k->lars, w_norm, o_norm);
    if (k->kind == TB_OPT_LAMB)
        return tb_lamb_scale(&k->lamb, w_norm, o_norm);
    float v = tb_novograd_v(&k->novo, tv->tensor_state[0], (float)s1);
    tv->tensor_state[0] = v;
    return tb_novograd_denom(&k->novo, v);
}

static void lb_phase2(const lb_coefs *k, float scalar, const tb_param_view *tv, size_t a,
                      size_t b)
{
    float *p = tv->param, *s1 = tv->state1, *s2 = tv->state2;
    const float *g = tv->grad;
    if (k->kind == TB_OPT_LARS) {
        tb_lars_coef kk = k->lars;
        float unused = 0.0f;
        for (size_t i = a; i < b; i++)
            tb_lars_elem(&kk, scalar, &p[i], g[i], kk.momentum != 0.0f ? &s1[i] : &unused);
    } else if (k->kind == TB_OPT_LAMB) {
        tb_lamb_coef kk = k->lamb;
#pragma omp simd
        for (size_t i = a; i < b; i++)
            tb_lamb_apply(&kk, scalar, &p[i], s1[i], s2[i]);
    } else {
        tb_novograd_coef kk = k->novo;
#pragma omp simd
        for (size_t i = a; i < b; i++)
            tb_novograd_elem(&kk, scalar, &p[i], g[i], &s1[i]);
    }
}

/* Both phases over tensors[0..count). */
static int lb_run(tb_backend *be, const lb_coefs *k, const tb_param_view *tensors, int count)
{
    size_t nchunks = 0, c = 0, total = 0;
    for (int i = 0; i < count; i++) {
        nchunks += (tensors[i].n + LB_CHUNK - 1) / LB_CHUNK;
        total += tensors[i].n;
    }
    lb_chunk *ch;
    double *part;
    float *scal;
    TB_TRY(lb_workspace(be, nchunks, count, &ch, &part, &scal));
    for (int i = 0; i < count; i++)
        for (size_t a = 0; a < tensors[i].n; a += LB_CHUNK, c++)
            ch[c] = (lb_chunk){i, a, a + LB_CHUNK < tensors[i].n ? a + LB_CHUNK : tensors[i].n};
    int t = threads_of(be);
    long nc = (long)nchunks;
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (long j = 0; j < nc; j++)
        lb_phase1(k, &tensors[ch[j].t], ch[j].a, ch[j].b, part + 2 * j);
    c = 0;
    for (int i = 0; i < count; i++) {
        double s0 = 0.0, s1 = 0.0;
        for (; c < nchunks && ch[c].t == i; c++) {
            s0 += part[2 * c];
            s1 += part[2 * c + 1];
        }
        if (tensors[i].n)
            scal[i] = lb_scalar(k, &tensors[i], s0, s1);
    }
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (long j = 0; j < nc; j++)
        lb_phase2(k, scal[ch[j].t], &tensors[ch[j].t], ch[j].a, ch[j].b);
    return TB_OK;
}

static int lb_check(const tb_opt_hparams *hp, const tb_param_view *tensors, int count)
{
    int need1 = hp->kind != TB_OPT_LARS || hp->momentum != 0.0f;
    int need2 = hp->kind == TB_OPT_LAMB, need_ts = hp->kind == TB_OPT_NOVOGRAD;
    /* trust_coef 0 would freeze every tensor with a nonzero norm (trust 0)
     * and step only the zero-norm ones: a LARS that silently never learns */
    if (hp->kind == TB_OPT_LARS && !(hp->trust_coef > 0.0f && isfinite(hp->trust_coef)))
        return TB_FAIL(TB_ERR_INVALID, "opt_step: LARS trust_coef %g must be finite and > 0 "
                       "(set tb_opt_hparams.trust_coef, e.g. 0.001)", (double)hp->trust_coef);
    for (int i = 0; i < count; i++) {
        const tb_param_view *tv = &tensors[i];
        if (tv->n && (!tv->param || !tv->grad || (need1 && !tv->state1) ||
                      (need2 && !tv->state2) || (need_ts && !tv->tensor_state)))
            return TB_FAIL(TB_ERR_INVALID, "opt_step: tensor %d lacks a buffer this optimizer "
                           "needs", i);
    }
    return TB_OK;
}

static int opt_large_batch(tb_backend *be, const tb_opt_hparams *hp,
                           const tb_param_view *tensors, int count, int fused)
{
    TB_TRY(lb_check(hp, tensors, count));
    lb_coefs k = {.kind = hp->kind};
    k.lars = tb_lars_coef_make(hp->lr, hp->momentum, hp->weight_decay, hp->trust_coef, hp->eps,
                               hp->step, hp->grad_scale);
    k.lamb = tb_lamb_coef_make(hp->lr, hp->weight_decay, hp->beta1, hp->beta2, hp->eps,
                               hp->step, hp->grad_scale);
    k.novo = tb_novograd_coef_make(hp->lr, hp->weight_decay, hp->beta1, hp->beta2, hp->eps,
                                   hp->step, hp->grad_scale);
    if (fused)
        return lb_run(be, &k, tensors, count);
    for (int i = 0; i < count; i++)
        TB_TRY(lb_run(be, &k, &tensors[i], 1));
    return TB_OK;
}

static int cpu_opt_step(tb_backend *be, const tb_opt_hparams *hp, const tb_param_view *tensors,
                        int count, int fused)
{
    if (hp->kind < TB_OPT_SGD || hp->kind > TB_OPT_NOVOGRAD)
        return TB_FAIL(TB_ERR_INVALID, "opt_step: unknown optimizer %d", (int)hp->kind);
    TB_TRY(opt_check(hp, tensors, count));
    if (hp->kind >= TB_OPT_LARS)
        return opt_large_batch(be, hp, tensors, count, fused);
    tb_sgd_coef sgd = tb_sgd_coef_make(hp->lr, hp->momentum, hp->weight_decay, hp->step,
                                       hp->grad_scale);
    tb_adamw_coef adamw = tb_adamw_coef_make(hp->lr, hp->weight_decay, hp->beta1, hp->beta2,
                                             hp->eps, hp->step, hp->grad_scale);
    if (fused)
        return opt_fused(be, hp, tensors, count, &sgd, &adamw);
    for (int i = 0; i < count; i++) {
        if (hp->kind == TB_OPT_SGD)
            TB_TRY(sgd_tensor(be, &sgd, &tensors[i]));
        else
            TB_TRY(adamw_tensor(be, &adamw, &tensors[i]));
    }
    return TB_OK;
}

/* ---------------------------------------------------------------- the table */

int tb_cpu_install_ops(tb_backend *be)
{
    tb_cpu_ctx *c = be->ctx;
    if (!c->ops) {
        c->ops = calloc(1, sizeof(cpu_ops_ws));
        if (!c->ops)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the CPU op workspaces");
    }
    be->relu_fwd = cpu_relu_fwd;
    be->relu_bwd = cpu_relu_bwd;
    be->add = cpu_add;
    be->axpby = cpu_axpby;
    be->bias_add = cpu_bias_add;
    be->bias_grad = cpu_bias_grad;
    be->bn_fwd_train = cpu_bn_fwd_train;
    be->bn_fwd_infer = cpu_bn_fwd_infer;
    be->bn_bwd = cpu_bn_bwd;
    be->pool_fwd = cpu_pool_fwd;
    be->pool_bwd = cpu_pool_bwd;
    be->softmax_xent_fwd = cpu_softmax_xent_fwd;
    be->softmax_xent_bwd = cpu_softmax_xent_bwd;
    be->reduce_sum = cpu_reduce_sum;
    be->count_nonfinite = cpu_count_nonfinite;
    be->dropout_fwd = cpu_dropout_fwd;
    be->dropout_bwd = cpu_dropout_bwd;
    be->opt_step = cpu_opt_step;
    return TB_OK;
}

void tb_cpu_release_ops(tb_backend *be)
{
    tb_cpu_ctx *c = be->ctx;
    cpu_ops_ws *w = c->ops;
    if (!w)
        return;
    free(w->tmp);
    free(w->off);
    free(w->lb);
    free(w);
    c->ops = NULL;
}
