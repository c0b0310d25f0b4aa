/*
 * pool_body.h - pooling's loops over activations, written once and
 * instantiated by pool.c for each element type of x, y, dy and dx: fp32
 * and bf16 (tb_pool_desc.dtype). No include guard: pool.c includes it once
 * per type (it #undefs them at its end), after defining
 *
 *   POOL_T                     the element type (float; uint16_t holding bf16 bits)
 *   POOL_LOAD(p, i)            element i of p widened to float (exact)
 *   POOL_LOAD2(p, i, a, b)     a, b = elements i, i + 1 (bf16: one 4-byte load;
 *                              GCC gathered the 2-byte ones of a 2x2 window)
 *   POOL_STORE(p, i, v)        element i of p = the float v (bf16: nearest even)
 *   POOL_STORE_EXACT(p, i, v)  the same for a v that is an element (a maximum):
 *                              bf16 keeps its top half, nothing to round
 *   POOL_NAME(f)               f with the type's suffix (f##_f32, f##_bf16)
 * and the functions
 *   pool_acc_T(out, tile)      where the fp32 sums for outputs at out go
 *   pool_flush_T(out, acc, n)  out[0, n) = the sums acc[0, n), rounded
 *
 * Compares and sums run in fp32 on the widened values, and a value is
 * rounded once, when it is stored: a bf16 tensor gives the bits the fp32
 * kernel would give on the same values, rounded to bf16. Where a result
 * accumulates over several steps in memory (NHWC forward across a
 * window's pixels, backward's scatter) the sums are fp32: in the output
 * itself for fp32, in a per-thread tile for bf16, rounded into the output
 * when complete (tb_cpu_bf16_round_row, bf16_rows.h).
 *
 * Every omp simd loop says safelen(16), as batchnorm_body.h's do (16
 * channels, the small CNN's, would otherwise run in bf16's scalar
 * remainder).
 */

/* fp32 outputs are their own accumulators; bf16 ones get a tile. */
#define POOL_IN_PLACE (sizeof(POOL_T) == sizeof(float))

static void POOL_NAME(pool_max_one)(const tb_pool_desc *d, const pool_geom *g, size_t in0,
                                    size_t out0, int p, int h0, int h1, int q, const POOL_T *x,
                                    POOL_T *y, int32_t *argmax)
{
    int w0, w1;
    clip(q * d->stride - d->pad, d->window, d->w, &w0, &w1);
    int32_t bi = (int32_t)(in0 + (size_t)h0 * d->w + w0);
    float best = POOL_LOAD(x, bi);
    for (int h = h0; h < h1; h++) {
        const POOL_T *row = x + in0 + (size_t)h * d->w;
        int32_t i0 = (int32_t)(in0 + (size_t)h * d->w);
        for (int w = w0; w < w1; w++) {
            float v = POOL_LOAD(row, w);
            /* all ones when v replaces best: masks, so GCC emits no branch */
            uint32_t m = 0u - (uint32_t)((v > best) | (v != v));
            best = f32_of((bits_of(v) & m) | (bits_of(best) & ~m));
            bi = (int32_t)(((uint32_t)(i0 + w) & m) | ((uint32_t)bi & ~m));
        }
    }
    size_t o = out0 + (size_t)p * g->Q + q;
    POOL_STORE_EXACT(y, o, best);
    argmax[o] = bi;
}

/* Outputs [qa, qb) of row p, whose windows lie inside the row: vectorized
 * across q (omp simd), each lane scanning its window in pool_max_one's
 * order from the same first element, so the same result. The ResNet stem's
 * 3x3 stride-2 pool took 2.7% of a step one output at a time. */
static void POOL_NAME(pool_max_row_inner)(const tb_pool_desc *d, const pool_geom *g, size_t in0,
                                          size_t out0, int p, int h0, int h1, int qa, int qb,
                                          const POOL_T *x, POOL_T *y, int32_t *argmax)
{
    int W = d->w, win = d->window, st = d->stride, pad = d->pad;
    POOL_T *yo = y + out0 + (size_t)p * g->Q;
    int32_t *ao = argmax + out0 + (size_t)p * g->Q;
    int32_t r0 = (int32_t)(in0 + (size_t)h0 * W);
#pragma omp simd safelen(16)
    for (int q = qa; q < qb; q++) {
        int32_t first = r0 + q * st - pad, bi = first;
        float best = POOL_LOAD(x, first);
        for (int h = 0; h < h1 - h0; h++)
            for (int w = 0; w < win; w++) {
                int32_t i = first + h * W + w;
                float v = POOL_LOAD(x, i);
                MAX_TAKE(best, bi, v, i);
            }
        POOL_STORE_EXACT(yo, q, best);
        ao[q] = bi;
    }
}

static void POOL_NAME(pool_max_plane)(const tb_pool_desc *d, const pool_geom *g, size_t pl,
                                      const POOL_T *x, POOL_T *y, int32_t *argmax)
{
    size_t in0 = pl * d->h * d->w, out0 = pl * g->P * g->Q;
    int qa, qb;
    pool_inner_cols(d, g, &qa, &qb);
    for (int p = 0; p < g->P; p++) {
        int h0, h1;
        clip(p * d->stride - d->pad, d->window, d->h, &h0, &h1);
        for (int q = 0; q < qa; q++)
            POOL_NAME(pool_max_one)(d, g, in0, out0, p, h0, h1, q, x, y, argmax);
        POOL_NAME(pool_max_row_inner)(d, g, in0, out0, p, h0, h1, qa, qb, x, y, argmax);
        for (int q = qb; q < g->Q; q++)
            POOL_NAME(pool_max_one)(d, g, in0, out0, p, h0, h1, q, x, y, argmax);
    }
}

/* pool_max_plane for the common 2x2 window, stride 2, no padding: one row
 * of outputs at a time, vectorized across q (omp simd); same scan order,
 * so the same result. */
static void POOL_NAME(pool_max_plane_2x2)(const tb_pool_desc *d, const pool_geom *g, size_t pl,
                                          const POOL_T *x, POOL_T *y, int32_t *argmax)
{
    size_t in0 = pl * d->h * d->w, out0 = pl * g->P * g->Q;
    for (int p = 0; p < g->P; p++) {
        int32_t r0 = (int32_t)(in0 + (size_t)(2 * p) * d->w), r1 = r0 + d->w;
        POOL_T *yo = y + out0 + (size_t)p * g->Q;
        int32_t *ao = argmax + out0 + (size_t)p * g->Q;
#pragma omp simd safelen(16)
        for (int q = 0; q < g->Q; q++) {
            int32_t i = r0 + 2 * q, bi = i;
            float best, v, v2, v3;
            POOL_LOAD2(x, i, best, v);
            POOL_LOAD2(x, r1 + 2 * q, v2, v3);
            MAX_TAKE(best, bi, v, i + 1);
            MAX_TAKE(best, bi, v2, r1 + 2 * q);
            MAX_TAKE(best, bi, v3, r1 + 2 * q + 1);
            POOL_STORE_EXACT(yo, q, best);
            ao[q] = bi;
        }
    }
}

static void POOL_NAME(pool_avg_plane)(const tb_pool_desc *d, const pool_geom *g, size_t pl,
                                      const POOL_T *x, POOL_T *y)
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
                    sum += POOL_LOAD(x, in0 + (size_t)h * d->w + w);
            POOL_STORE(y, out0 + (size_t)p * g->Q + q, sum / g->area);
        }
    }
}

static void POOL_NAME(pool_fwd_plane)(const tb_pool_desc *d, const pool_geom *g, size_t pl,
                                      const POOL_T *x, POOL_T *y, int32_t *argmax)
{
    if (d->kind == TB_POOL_MAX && d->window == 2 && d->stride == 2 && d->pad == 0)
        POOL_NAME(pool_max_plane_2x2)(d, g, pl, x, y, argmax);
    else if (d->kind == TB_POOL_MAX)
        POOL_NAME(pool_max_plane)(d, g, pl, x, y, argmax);
    else
        POOL_NAME(pool_avg_plane)(d, g, pl, x, y);
}

/* One output pixel of NHWC, all channels (the vectorized dimension),
 * accumulated over the window's pixels in acc (C fp32 sums). */
static void POOL_NAME(pool_fwd_pixel_nhwc)(const tb_pool_desc *d, const pool_geom *g, int n,
                                           int p, int q, const POOL_T *x, float *acc,
                                           int32_t *argmax)
{
    int C = d->c, h0, h1, w0, w1, first = 1;
    size_t o = (((size_t)n * g->P + p) * g->Q + q) * C;
    clip(p * d->stride - d->pad, d->window, d->h, &h0, &h1);
    clip(q * d->stride - d->pad, d->window, d->w, &w0, &w1);
    for (int h = h0; h < h1; h++) {
        for (int w = w0; w < w1; w++) {
            size_t base = (((size_t)n * d->h + h) * d->w + w) * C;
            const POOL_T *xi = x + base;
            if (d->kind == TB_POOL_AVG) {
#pragma omp simd safelen(16)
                for (int c = 0; c < C; c++)
                    acc[c] = (first ? 0.0f : acc[c]) + POOL_LOAD(xi, c);
            } else {
                int32_t *ao = argmax + o;
#pragma omp simd safelen(16)
                for (int c = 0; c < C; c++) {
                    float v = POOL_LOAD(xi, c);
                    int take = first | (v > acc[c]) | (v != v); /* no short circuit: vectorizes */
                    acc[c] = take ? v : acc[c];
                    ao[c] = take ? (int32_t)(base + c) : ao[c];
                }
            }
            first = 0;
        }
    }
    if (d->kind == TB_POOL_AVG) {
#pragma omp simd safelen(16)
        for (int c = 0; c < C; c++)
            acc[c] /= g->area;
    }
}

/* REQUIRES: pool_check passed; argmax set for max pooling. NHWC: a row of
 * Q * C outputs at a time, summed in place (fp32) or in the thread's tile
 * (bf16, rounded out once the row is done). */
static int POOL_NAME(pool_fwd)(tb_backend *be, const tb_pool_desc *d, const pool_geom *g,
                               const POOL_T *x, POOL_T *y, int32_t *argmax)
{
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    if (d->layout == TB_NCHW) {
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
        for (size_t pl = 0; pl < (size_t)d->n * d->c; pl++)
            POOL_NAME(pool_fwd_plane)(d, g, pl, x, y, argmax);
        return TB_OK;
    }
    size_t row = (size_t)g->Q * d->c, tile_floats = POOL_IN_PLACE ? 0 : row;
    float *ws = NULL;
    TB_TRY(ws_floats(be, (size_t)t * tile_floats, &ws));
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (size_t np = 0; np < (size_t)d->n * g->P; np++) {
        POOL_T *yr = y + np * row;
        float *acc = POOL_NAME(pool_acc)(yr, ws + (size_t)omp_get_thread_num() * tile_floats);
        for (int q = 0; q < g->Q; q++)
            POOL_NAME(pool_fwd_pixel_nhwc)(d, g, (int)(np / g->P), (int)(np % g->P), q, x,
                                           acc + (size_t)q * d->c, argmax);
        POOL_NAME(pool_flush)(yr, acc, row);
    }
    return TB_OK;
}

/* Average pooling's share of output (p, q), dy of its C channels, added to
 * the window's inputs in rows [r0, r1): acc holds those rows, C floats a
 * pixel (NCHW: C = 1). Channels in blocks of POOL_SHARE_COLS, whose
 * shares are computed once for all the window's pixels. */
#define POOL_SHARE_COLS ((size_t)64)
static void POOL_NAME(avg_scatter_band)(const tb_pool_desc *d, const pool_geom *g, int p, int q,
                                        int r0, int r1, size_t C, const POOL_T *dy, float *acc)
{
    int h0, h1, w0, w1;
    clip(p * d->stride - d->pad, d->window, d->h, &h0, &h1);
    clip(q * d->stride - d->pad, d->window, d->w, &w0, &w1);
    h0 = h0 > r0 ? h0 : r0;
    h1 = h1 < r1 ? h1 : r1;
    if (C == 1) { /* NCHW: the channel loops cost more than the adds */
        float share = POOL_LOAD(dy, 0) / g->area;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++)
                acc[(size_t)(h - r0) * d->w + w] += share;
        return;
    }
    for (size_t c0 = 0; c0 < C; c0 += POOL_SHARE_COLS) {
        size_t m = C - c0 < POOL_SHARE_COLS ? C - c0 : POOL_SHARE_COLS;
        float share[POOL_SHARE_COLS];
#pragma omp simd safelen(16)
        for (size_t c = 0; c < m; c++)
            share[c] = POOL_LOAD(dy, c0 + c) / g->area;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) {
                float *a = acc + ((size_t)(h - r0) * d->w + w) * C + c0;
#pragma omp simd safelen(16)
                for (size_t c = 0; c < m; c++)
                    a[c] += share[c];
            }
    }
}

/* acc[i - in0] += dy[o] for the outputs o in [o0, o1) whose argmax i lies
 * in [in0, in0 + len). Kept out of line: inlined into the backward's
 * task loop, its pointers lived on the stack and the 28x28 backward took
 * 1.7x as long; unrolled, it matches the loop it replaced (0.039 against
 * 0.037 ms; 0.043 rolled). */
__attribute__((noinline)) static void POOL_NAME(max_scatter)(const int32_t *argmax,
                                                             const POOL_T *dy, size_t o0,
                                                             size_t o1, size_t in0, size_t len,
                                                             float *acc)
{
#pragma GCC unroll 4
    for (size_t o = o0; o < o1; o++) {
        size_t i = (size_t)argmax[o] - in0; /* wraps when before the band */
        if (i < len)
            acc[i] += POOL_LOAD(dy, o);
    }
}

/* Backward of one task (pool_band): dx of its inputs summed in acc (zeroed
 * here) from every output whose window reaches them, in (p, q) order. */
static void POOL_NAME(pool_bwd_band)(const tb_pool_desc *d, const pool_geom *g,
                                     const pool_band *b, const POOL_T *dy,
                                     const int32_t *argmax, float *acc)
{
    size_t C = b->C, row = (size_t)g->Q * C, unit_len = (size_t)d->h * d->w * C;
    memset(acc, 0, b->len * sizeof *acc);
    for (size_t u = b->u0; u < b->u1; u++) {
        /* output rows [p0, p1) of unit u: contiguous, in (p, q, c) order */
        size_t o0 = (u * g->P + b->p0) * row, o1 = (u * g->P + b->p1) * row;
        if (d->kind == TB_POOL_MAX) {
            POOL_NAME(max_scatter)(argmax, dy, o0, o1, b->in0, b->len, acc);
            continue;
        }
        float *acc_u = acc + (u - b->u0) * unit_len; /* at row r0 of unit u */
        for (int p = b->p0; p < b->p1; p++)
            for (int q = 0; q < g->Q; q++)
                POOL_NAME(avg_scatter_band)(d, g, p, q, b->r0, b->r1, C,
                                            dy + o0 + ((size_t)(p - b->p0) * g->Q + q) * C, acc_u);
    }
}

/* REQUIRES: pool_check passed; argmax set for max pooling. */
static int POOL_NAME(pool_bwd)(tb_backend *be, const tb_pool_desc *d, const pool_geom *g,
                               const POOL_T *dy, const int32_t *argmax, POOL_T *dx)
{
    int t = threads_of(be);
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    pool_bands bs;
    pool_bands_of(d, POOL_IN_PLACE, &bs);
    float *ws = NULL;
    TB_TRY(ws_floats(be, POOL_IN_PLACE ? 0 : (size_t)t * bs.tile_floats, &ws));
#pragma omp parallel for num_threads(t) schedule(static) if (total >= PAR_MIN)
    for (size_t task = 0; task < bs.tasks; task++) {
        pool_band b;
        pool_band_of(d, g, &bs, task, &b);
        float *acc = POOL_NAME(pool_acc)(dx + b.in0,
                                         ws + (size_t)omp_get_thread_num() * bs.tile_floats);
        POOL_NAME(pool_bwd_band)(d, g, &b, dy, argmax, acc);
        POOL_NAME(pool_flush)(dx + b.in0, acc, b.len);
    }
    return TB_OK;
}

#undef POOL_IN_PLACE
#undef POOL_SHARE_COLS
/* the parameters of this instantiation: the next one defines its own */
#undef POOL_T
#undef POOL_LOAD
#undef POOL_LOAD2
#undef POOL_STORE
#undef POOL_STORE_EXACT
#undef POOL_NAME
