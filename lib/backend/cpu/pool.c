/*
 * pool.c - the CPU backend's pooling: pool_fwd/bwd, max (with argmax) and
 * average (count_include_pad), NCHW and NHWC.
 */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

/* Output size of a pooling problem, PyTorch's floor mode. */
typedef struct pool_geom {
    int P, Q;
    float area; /* window * window: padding counts (count_include_pad) */
} pool_geom;

static int pool_check(const tb_pool_desc *d, pool_geom *g)
{
    TB_TRY(tb_check_pool(d, &g->P, &g->Q));
    g->area = (float)d->window * (float)d->window;
    return TB_OK;
}

/* Clips a window [start, start + window) to [0, size). */
static void clip(int start, int window, int size, int *lo, int *hi)
{
    *lo = start < 0 ? 0 : start;
    *hi = start + window > size ? size : start + window;
}

static inline uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* One (n, c) plane of NCHW: pl = n * C + c. Max takes the first of equal
 * values and propagates NaN, as PyTorch does: a later value replaces the
 * best when greater or NaN, selected with bit masks, not branches (random data
 * mispredicts half the compares; the branchy loop was 20% of a small-CNN
 * step). Max and average are separate loops for the same reason. */
/* x <- v where v is greater or NaN (the scan order of pool_max_plane). */
#define MAX_TAKE(best, bi, v, i)                                                               \
    do {                                                                                     \
        int take_ = ((v) > (best)) | ((v) != (v));                                           \
        (best) = take_ ? (v) : (best);                                                       \
        (bi) = take_ ? (i) : (bi);                                                           \
    } while (0)

static void pool_max_one(const tb_pool_desc *d, const pool_geom *g, size_t in0, size_t out0,
                         int p, int h0, int h1, int q, const float *x, float *y,
                         int32_t *argmax)
{
    int w0, w1;
    clip(q * d->stride - d->pad, d->window, d->w, &w0, &w1);
    int32_t bi = (int32_t)(in0 + (size_t)h0 * d->w + w0);
    float best = x[bi];
    for (int h = h0; h < h1; h++) {
        const float *row = x + in0 + (size_t)h * d->w;
        int32_t i0 = (int32_t)(in0 + (size_t)h * d->w);
        for (int w = w0; w < w1; w++) {
            float v = row[w];
            /* all ones when v replaces best: masks, so GCC emits no branch */
            uint32_t m = 0u - (uint32_t)((v > best) | (v != v));
            best = f32_of((bits_of(v) & m) | (bits_of(best) & ~m));
            bi = (int32_t)(((uint32_t)(i0 + w) & m) | ((uint32_t)bi & ~m));
        }
    }
    size_t o = out0 + (size_t)p * g->Q + q;
    y[o] = best;
    argmax[o] = bi;
}

/* Outputs [qa, qb) of row p, whose windows lie inside the row: vectorized
 * across q (omp simd), each lane scanning its window in pool_max_one's
 * order from the same first element, so the same result. The ResNet stem's
 * 3x3 stride-2 pool took 2.7% of a step one output at a time. */
static void pool_max_row_inner(const tb_pool_desc *d, const pool_geom *g, size_t in0,
                               size_t out0, int p, int h0, int h1, int qa, int qb,
                               const float *x, float *y, int32_t *argmax)
{
    int W = d->w, win = d->window, st = d->stride, pad = d->pad;
    float *yo = y + out0 + (size_t)p * g->Q;
    int32_t *ao = argmax + out0 + (size_t)p * g->Q;
    int32_t r0 = (int32_t)(in0 + (size_t)h0 * W);
#pragma omp simd
    for (int q = qa; q < qb; q++) {
        int32_t first = r0 + q * st - pad, bi = first;
        float best = x[first];
        for (int h = 0; h < h1 - h0; h++)
            for (int w = 0; w < win; w++) {
                int32_t i = first + h * W + w;
                float v = x[i];
                MAX_TAKE(best, bi, v, i);
            }
        yo[q] = best;
        ao[q] = bi;
    }
}

static void pool_max_plane(const tb_pool_desc *d, const pool_geom *g, size_t pl, const float *x,
                           float *y, int32_t *argmax)
{
    size_t in0 = pl * d->h * d->w, out0 = pl * g->P * g->Q;
    /* q in [qa, qb): the window starts at >= 0 and ends at <= w */
    int qa = (d->pad + d->stride - 1) / d->stride;
    int qb = d->w + d->pad >= d->window ? (d->w + d->pad - d->window) / d->stride + 1 : 0;
    qb = qb < g->Q ? qb : g->Q;
    qa = qa < qb ? qa : qb;
    for (int p = 0; p < g->P; p++) {
        int h0, h1;
        clip(p * d->stride - d->pad, d->window, d->h, &h0, &h1);
        for (int q = 0; q < qa; q++)
            pool_max_one(d, g, in0, out0, p, h0, h1, q, x, y, argmax);
        pool_max_row_inner(d, g, in0, out0, p, h0, h1, qa, qb, x, y, argmax);
        for (int q = qb; q < g->Q; q++)
            pool_max_one(d, g, in0, out0, p, h0, h1, q, x, y, argmax);
    }
}

/* pool_max_plane for the common 2x2 window, stride 2, no padding: one row
 * of outputs at a time, vectorized across q (omp simd); same scan order,
 * so the same result. */
static void pool_max_plane_2x2(const tb_pool_desc *d, const pool_geom *g, size_t pl,
                               const float *x, float *y, int32_t *argmax)
{
    size_t in0 = pl * d->h * d->w, out0 = pl * g->P * g->Q;
    for (int p = 0; p < g->P; p++) {
        int32_t r0 = (int32_t)(in0 + (size_t)(2 * p) * d->w), r1 = r0 + d->w;
        float *yo = y + out0 + (size_t)p * g->Q;
        int32_t *ao = argmax + out0 + (size_t)p * g->Q;
#pragma omp simd
        for (int q = 0; q < g->Q; q++) {
            int32_t i = r0 + 2 * q, bi = i;
            float best = x[i], v = x[i + 1];
            MAX_TAKE(best, bi, v, i + 1);
            v = x[r1 + 2 * q];
            MAX_TAKE(best, bi, v, r1 + 2 * q);
            v = x[r1 + 2 * q + 1];
            MAX_TAKE(best, bi, v, r1 + 2 * q + 1);
            yo[q] = best;
            ao[q] = bi;
        }
    }
}

static void pool_avg_plane(const tb_pool_desc *d, const pool_geom *g, size_t pl, const float *x,
                           float *y)
{
    size_t in0 = pl * d->h * d->w, out0 = pl * g->P * g->Q;
    for (int p = 0; p < g->P; p++) {
        int h0, h1, w0, w1;
        clip(p * d->stride - d->pad, d->window, d->h, &h0, &h1);
        for (int q = 0; q < g->Q; q++) {
            clip(q * d->stride - d->pad, d->window, d->w, &w0, &w1);
            float sum = 0.0f;
            for (int h = h0; h < h1; h++)
                for (int w = w0; w < w1; w++)
                    sum += x[in0 + (size_t)h * d->w + w];
            y[out0 + (size_t)p * g->Q + q] = sum / g->area;
        }
    }
}

static void pool_fwd_plane(const tb_pool_desc *d, const pool_geom *g, size_t pl, const float *x,
                           float *y, int32_t *argmax)
{
    if (d->kind == TB_POOL_MAX && d->window == 2 && d->stride == 2 && d->pad == 0)
        pool_max_plane_2x2(d, g, pl, x, y, argmax);
    else if (d->kind == TB_POOL_MAX)
        pool_max_plane(d, g, pl, x, y, argmax);
    else
        pool_avg_plane(d, g, pl, x, y);
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

void tb_cpu_install_pool(tb_backend *be)
{
    be->pool_fwd = cpu_pool_fwd;
    be->pool_bwd = cpu_pool_bwd;
}
