/*
 * pool.c - the CPU backend's pooling: pool_fwd/bwd, max (with argmax) and
 * average (count_include_pad), NCHW and NHWC, on fp32 or bf16 activations.
 *
 * Element types (tb_pool_desc.dtype): x, y, dy and dx are fp32, or bf16 as
 * PyTorch's autocast runs pooling on the CPU; argmax stays int32 and the
 * arithmetic fp32. The bf16 variants are whole kernels that read and write
 * the 2-byte elements in the same loops, widening on load and rounding to
 * nearest even (kernels/cast_math.h's bits) on store, rather than a cast
 * of the tensor to fp32 around the fp32 kernel: they move half the bytes.
 * pool_body.h holds the loops over activations, written once and included
 * below once per element type; this file holds the geometry they share
 * and the entry points.
 *
 * Speed, 2 threads on a 2-core Zen 4 (ms, fp32 / bf16): the 2x2 max pool's
 * NCHW forward from DRAM (64x64x56x56) is 1.25x faster in bf16 (2.25 /
 * 1.80) on the generic loops; at the small CNN's 32x16x28x28 the generic
 * bf16 loops are 0.6-0.9x as fast as fp32's (fwd 0.059 / 0.081-0.102, bwd
 * 0.040 / 0.072-0.085, the backward summing in an fp32 tile and rounding
 * that out), and the AVX-512 2x2 kernels below 2.3x and 1.8x faster than
 * fp32's (fwd 0.026, bwd 0.021). Other bf16 pooling runs the generic loops:
 * per element they do the fp32 work and more.
 *
 * Determinism: forward, each output is computed by one thread; backward,
 * each input's gradient is summed by one thread, from the outputs in
 * (p, q) order, whatever the split (pool_bands: whole NCHW planes or NHWC
 * images, a few small ones a task; for bf16, bands of rows of the large
 * ones, so that the fp32 sums stay in a tile in L2 until rounded into dx).
 * The split depends on the shape only.
 *
 * Tests: bazel test //lib/backend/cpu:cpu_ops_test (both types against
 * lib/backend/ref/ops.c, 1 and 2 threads).
 */
#include <float.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cast_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/bf16_rows.h"
#include "lib/backend/cpu/cpu.h"
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

/* Outputs [*qa, *qb) of a row have their windows inside the row (start at
 * >= 0, end at <= w): pool_max_row_inner's part. */
static void pool_inner_cols(const tb_pool_desc *d, const pool_geom *g, int *qa, int *qb)
{
    int b = d->w + d->pad >= d->window ? (d->w + d->pad - d->window) / d->stride + 1 : 0;
    *qb = b < g->Q ? b : g->Q;
    int a = (d->pad + d->stride - 1) / d->stride;
    *qa = a < *qb ? a : *qb;
}

/* Output rows [*p0, *p1) are those whose windows reach into input rows
 * [r0, r1): p * stride - pad < r1 and p * stride - pad + window > r0. */
static void pool_outputs_reaching(const tb_pool_desc *d, const pool_geom *g, int r0, int r1,
                                  int *p0, int *p1)
{
    int st = d->stride, lo = r0 + d->pad - d->window + 1, hi = (r1 + d->pad + st - 1) / st;
    *p0 = lo > 0 ? (lo + st - 1) / st : 0;
    *p1 = hi < g->P ? hi : g->P;
}

/* Backward tasks: whole units smaller than POOL_GROUP_FLOATS elements go
 * POOL_GROUP_FLOATS / unit a task (one 4x4 plane a task spent more time
 * starting than adding: 16x2048 planes 0.40 ms, grouped 0.25); bf16 sums
 * units larger than POOL_TILE_FLOATS in bands of rows, so that its fp32
 * tile (128 KB) stays in L2. */
#define POOL_GROUP_FLOATS ((size_t)4096)
#define POOL_TILE_FLOATS ((size_t)32768)

/* The backward's split. Units are NHWC images (C elements a pixel) or
 * NCHW planes (1 element a pixel). A task is `group` whole units, or a
 * band of `rows` input rows of one unit. */
typedef struct pool_bands {
    size_t units, C, unit_len; /* unit_len: h * w * C elements */
    size_t group, per_unit;    /* units per task; bands per unit */
    int rows;                  /* input rows per band */
    size_t tasks, tile_floats; /* tile_floats: the most elements of a task */
} pool_bands;

/* One task: units [u0, u1), their input rows [r0, r1) (all rows when
 * u1 > u0 + 1), reached by their output rows [p0, p1); input elements
 * [in0, in0 + len). */
typedef struct pool_band {
    size_t u0, u1, C, in0, len;
    int r0, r1, p0, p1;
} pool_band;

/* whole (fp32, whose sums go to dx itself): units are never banded. */
static void pool_bands_of(const tb_pool_desc *d, int whole, pool_bands *bs)
{
    int nhwc = d->layout == TB_NHWC;
    bs->C = nhwc ? (size_t)d->c : 1;
    bs->units = nhwc ? (size_t)d->n : (size_t)d->n * d->c;
    size_t row = (size_t)d->w * bs->C, fit = POOL_TILE_FLOATS / row;
    bs->unit_len = (size_t)d->h * row;
    bs->group = bs->unit_len >= POOL_GROUP_FLOATS ? 1 : POOL_GROUP_FLOATS / bs->unit_len;
    bs->rows = whole || fit >= (size_t)d->h ? d->h : fit < 1 ? 1 : (int)fit;
    bs->per_unit = ((size_t)d->h + bs->rows - 1) / bs->rows;
    bs->tasks = bs->per_unit > 1 ? bs->units * bs->per_unit
                                 : (bs->units + bs->group - 1) / bs->group;
    bs->tile_floats = bs->group * (size_t)bs->rows * row;
}

/* Task `task` of the split bs. */
static void pool_band_of(const tb_pool_desc *d, const pool_geom *g, const pool_bands *bs,
                         size_t task, pool_band *b)
{
    size_t row = (size_t)d->w * bs->C;
    b->C = bs->C;
    if (bs->per_unit == 1) {
        b->u0 = task * bs->group;
        b->u1 = b->u0 + bs->group < bs->units ? b->u0 + bs->group : bs->units;
        b->r0 = 0, b->r1 = d->h, b->p0 = 0, b->p1 = g->P;
    } else {
        b->u0 = task / bs->per_unit, b->u1 = b->u0 + 1;
        b->r0 = (int)(task % bs->per_unit) * bs->rows;
        b->r1 = b->r0 + bs->rows < d->h ? b->r0 + bs->rows : d->h;
        pool_outputs_reaching(d, g, b->r0, b->r1, &b->p0, &b->p1);
    }
    b->in0 = (b->u0 * d->h + b->r0) * row;
    b->len = (b->u1 - b->u0 - 1) * bs->unit_len + (size_t)(b->r1 - b->r0) * row;
}

/* The loops over activations, once per element type (pool_body.h says
 * what each definition is for). fp32: sums accumulate in the outputs. */
static inline float *pool_acc_f32(float *out, float *tile)
{
    (void)tile;
    return out;
}

static inline void pool_flush_f32(float *out, const float *acc, size_t n)
{
    (void)out, (void)acc, (void)n;
}

#define POOL_T float
#define POOL_LOAD(p, i) ((p)[i])
#define POOL_LOAD2(p, i, a, b) ((a) = (p)[i], (b) = (p)[(i) + 1])
#define POOL_STORE(p, i, v) ((p)[i] = (v))
#define POOL_STORE_EXACT(p, i, v) ((p)[i] = (v))
#define POOL_NAME(f) f##_f32
#include "lib/backend/cpu/pool_body.h"

/* bf16: sums accumulate in a per-thread fp32 tile, rounded out once. */
static inline float *pool_acc_bf16(uint16_t *out, float *tile)
{
    (void)out;
    return tile;
}

static inline void pool_flush_bf16(uint16_t *out, const float *acc, size_t n)
{
    tb_cpu_bf16_round_row(out, acc, n);
}

/* a, b = p[0], p[1] from one 4-byte load (x86: little-endian) */
static inline void bf16_pair(const uint16_t *p, float *a, float *b)
{
    uint32_t u;
    memcpy(&u, p, sizeof u);
    *a = f32_of(u << 16);
    *b = f32_of(u & 0xffff0000u);
}

#define POOL_T uint16_t
#define POOL_LOAD(p, i) tb_bf16_to_f32((p)[i])
#define POOL_LOAD2(p, i, a, b) bf16_pair((p) + (i), &(a), &(b))
#define POOL_STORE(p, i, v) ((p)[i] = tb_f32_to_bf16(v))
#define POOL_STORE_EXACT(p, i, v) ((p)[i] = (uint16_t)(bits_of(v) >> 16))
#define POOL_NAME(f) f##_bf16
#include "lib/backend/cpu/pool_body.h"

/* ---- the 2x2 stride-2 max pool on bf16 NCHW, AVX-512 (the small CNN's
 * and every VGG-style net's pooling) ----
 * GCC's vectorization of pool_body.h's loops for bf16 (-O2, x86-64, SSE2)
 * left it slower than fp32 at the small CNN's 32x16x28x28: forward 0.102
 * vs 0.059 ms, backward 0.085 vs 0.055 (2 threads, in cache). These work
 * on 16 windows a vector, each window's two bf16 pairs one 4-byte lane of
 * each input row, and give the bits pool_body.h's bf16 loops give (same
 * scan order and NaN rule forward; backward, each input is in one window
 * only, so its gradient is its output's dy, or +0: dy + 0 in fp32, as the
 * generic path's sum). */
static int pool_forced = TB_CPU_PATH_AUTO; /* set by tests only, before threads run */

static int pool_path_supported(int path)
{
    if (path == TB_CPU_PATH_GENERIC)
        return 1;
    return path == TB_CPU_PATH_AVX512 && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw");
}

int tb_cpu_pool_path(void)
{
    if (pool_forced != TB_CPU_PATH_AUTO)
        return pool_forced;
    return tb_cpu_path_best(TB_CPU_PATHS_GENERIC_AVX512, pool_path_supported);
}

int tb_cpu_pool_set_path(int path)
{
    return tb_cpu_path_force(&pool_forced, path, TB_CPU_PATHS_GENERIC_AVX512,
                             pool_path_supported, "pool");
}

static int max_2x2_bf16_nchw(const tb_pool_desc *d)
{
    return d->kind == TB_POOL_MAX && d->window == 2 && d->stride == 2 && d->pad == 0 &&
           d->layout == TB_NCHW && d->dtype == TB_BF16 &&
           tb_cpu_pool_path() == TB_CPU_PATH_AVX512;
}

#define AVX512BW __attribute__((target("avx512f,avx512bw")))

/* Lanes 0..15: 0, 2, ..., 30 (a window's first input, from q). */
AVX512BW static inline __m512i lanes_x2(void)
{
    return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}

AVX512BW static inline __mmask16 lanes_left(int n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* MAX_TAKE on 16 lanes */
AVX512BW static inline void max_take16(__m512 *best, __m512i *bi, __m512 v, __m512i i)
{
    __mmask16 t = _mm512_cmp_ps_mask(v, *best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    *best = _mm512_mask_mov_ps(*best, t, v);
    *bi = _mm512_mask_mov_epi32(*bi, t, i);
}

/* Output row p of plane pl (pool_max_plane_2x2's, 16 outputs a vector). */
AVX512BW static void max2x2_fwd_row_avx512(const tb_pool_desc *d, const pool_geom *g,
                                             size_t pl, int p, const uint16_t *x, uint16_t *y,
                                             int32_t *argmax)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u), one = _mm512_set1_epi32(1);
    int32_t r0 = (int32_t)(pl * d->h * d->w + (size_t)(2 * p) * d->w), r1 = r0 + d->w;
    size_t o = (pl * g->P + p) * g->Q;
    for (int q = 0; q < g->Q; q += 16) {
        __mmask16 m = lanes_left(g->Q - q);
        __m512i a = _mm512_maskz_loadu_epi32(m, x + r0 + 2 * q);
        __m512i b = _mm512_maskz_loadu_epi32(m, x + r1 + 2 * q);
        __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32(r0 + 2 * q), lanes_x2());
        __m512i i2 = _mm512_add_epi32(_mm512_set1_epi32(r1 + 2 * q), lanes_x2());
        __m512 best = _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
        __m512i bi = i0;
        max_take16(&best, &bi, _mm512_castsi512_ps(_mm512_and_si512(a, hi)),
                   _mm512_add_epi32(i0, one));
        max_take16(&best, &bi, _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)), i2);
        max_take16(&best, &bi, _mm512_castsi512_ps(_mm512_and_si512(b, hi)),
                   _mm512_add_epi32(i2, one));
        _mm512_mask_cvtepi32_storeu_epi16(y + o + q, m,
                                          _mm512_srli_epi32(_mm512_castps_si512(best), 16));
        _mm512_mask_storeu_epi32(argmax + o + q, m, bi);
    }
}

/* dx's rows 2p and 2p + 1 of plane pl from output row p. */
AVX512BW static void max2x2_bwd_row_avx512(const tb_pool_desc *d, const pool_geom *g,
                                             size_t pl, int p, const uint16_t *dy,
                                             const int32_t *argmax, uint16_t *dx)
{
    const __m512i one = _mm512_set1_epi32(1);
    int32_t r0 = (int32_t)(pl * d->h * d->w + (size_t)(2 * p) * d->w), r1 = r0 + d->w;
    size_t o = (pl * g->P + p) * g->Q;
    for (int q = 0; q < g->Q; q += 16) {
        __mmask16 m = lanes_left(g->Q - q);
        __m512i gw = _mm512_cvtepu16_epi32(
            _mm512_castsi512_si256(_mm512_maskz_loadu_epi16((__mmask32)m, dy + o + q)));
        __m512 gf = _mm512_add_ps(_mm512_castsi512_ps(_mm512_slli_epi32(gw, 16)),
                                  _mm512_setzero_ps());
        gw = _mm512_srli_epi32(_mm512_castps_si512(gf), 16);
        __m512i a = _mm512_maskz_loadu_epi32(m, argmax + o + q);
        __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32(r0 + 2 * q), lanes_x2());
        __m512i i2 = _mm512_add_epi32(_mm512_set1_epi32(r1 + 2 * q), lanes_x2());
        __m512i top = _mm512_or_si512(
            _mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(a, i0), gw),
            _mm512_slli_epi32(_mm512_maskz_mov_epi32(
                                  _mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(i0, one)), gw),
                              16));
        __m512i bottom = _mm512_or_si512(
            _mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(a, i2), gw),
            _mm512_slli_epi32(_mm512_maskz_mov_epi32(
                                  _mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(i2, one)), gw),
                              16));
        _mm512_mask_storeu_epi32(dx + r0 + 2 * q, m, top);
        _mm512_mask_storeu_epi32(dx + r1 + 2 * q, m, bottom);
    }
}

AVX512BW static void max2x2_plane_avx512(const tb_pool_desc *d, const pool_geom *g, size_t pl,
                                         const uint16_t *x, uint16_t *y, int32_t *argmax,
                                         const uint16_t *dy, uint16_t *dx)
{
    size_t plane = (size_t)d->h * d->w;
    if (dx && (d->h % 2 || d->w % 2)) /* inputs no window covers get +0 */
        memset(dx + pl * plane, 0, plane * sizeof *dx);
    for (int p = 0; p < g->P; p++)
        if (dx)
            max2x2_bwd_row_avx512(d, g, pl, p, dy, argmax, dx);
        else
            max2x2_fwd_row_avx512(d, g, pl, p, x, y, argmax);
    _mm256_zeroupper();
}

/* Forward (dx NULL) or backward (x and y NULL), planes split over threads. */
static void max2x2_bf16_run(tb_backend *be, const tb_pool_desc *d, const pool_geom *g,
                            const uint16_t *x, uint16_t *y, int32_t *argmax, const uint16_t *dy,
                            uint16_t *dx)
{
    size_t total = (size_t)d->n * d->c * d->h * d->w;
#pragma omp parallel for num_threads(threads_of(be)) schedule(static) if (total >= PAR_MIN)
    for (size_t pl = 0; pl < (size_t)d->n * d->c; pl++)
        max2x2_plane_avx512(d, g, pl, x, y, argmax, dy, dx);
}

/* The slots take float pointers; with dtype TB_BF16, x, y, dy and dx hold
 * bf16 bits (lib/backend/backend.h). */
static int cpu_pool_fwd(tb_backend *be, const tb_pool_desc *d, const float *x, float *y,
                        int32_t *argmax)
{
    pool_geom g;
    TB_TRY(pool_check(d, &g));
    if (d->kind == TB_POOL_MAX && !argmax)
        return TB_FAIL(TB_ERR_INVALID, "max pooling needs an argmax buffer");
    if (max_2x2_bf16_nchw(d)) {
        max2x2_bf16_run(be, d, &g, (const uint16_t *)x, (uint16_t *)y, argmax, NULL, NULL);
        return TB_OK;
    }
    if (d->dtype == TB_BF16)
        return pool_fwd_bf16(be, d, &g, (const uint16_t *)x, (uint16_t *)y, argmax);
    return pool_fwd_f32(be, d, &g, x, y, argmax);
}

static int cpu_pool_bwd(tb_backend *be, const tb_pool_desc *d, const float *dy,
                        const int32_t *argmax, float *dx)
{
    pool_geom g;
    TB_TRY(pool_check(d, &g));
    if (d->kind == TB_POOL_MAX && !argmax)
        return TB_FAIL(TB_ERR_INVALID, "max pooling backward needs the forward's argmax");
    if (max_2x2_bf16_nchw(d)) {
        max2x2_bf16_run(be, d, &g, NULL, NULL, (int32_t *)argmax, (const uint16_t *)dy,
                        (uint16_t *)dx);
        return TB_OK;
    }
    if (d->dtype == TB_BF16)
        return pool_bwd_bf16(be, d, &g, (const uint16_t *)dy, argmax, (uint16_t *)dx);
    return pool_bwd_f32(be, d, &g, dy, argmax, dx);
}

void tb_cpu_install_pool(tb_backend *be)
{
    be->pool_fwd = cpu_pool_fwd;
    be->pool_bwd = cpu_pool_bwd;
}
