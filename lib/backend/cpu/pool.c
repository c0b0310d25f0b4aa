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
 * 1.80); at the small CNN's 32x16x28x28 bf16 is 0.75-0.9x as fast (NCHW
 * fwd 0.061 / 0.080), and its backward, which sums in an fp32 tile and
 * rounds that out, 0.55-0.65x (0.039 / 0.069): per element it does the
 * fp32 work and more, and at this size the bytes saved do not count.
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
#include <stdint.h>
#include <string.h>

#include "kernels/cast_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/bf16_rows.h"
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

/* The slots take float pointers; with dtype TB_BF16, x, y, dy and dx hold
 * bf16 bits (lib/backend/backend.h). */
static int cpu_pool_fwd(tb_backend *be, const tb_pool_desc *d, const float *x, float *y,
                        int32_t *argmax)
{
    pool_geom g;
    TB_TRY(pool_check(d, &g));
    if (d->kind == TB_POOL_MAX && !argmax)
        return TB_FAIL(TB_ERR_INVALID, "max pooling needs an argmax buffer");
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
    if (d->dtype == TB_BF16)
        return pool_bwd_bf16(be, d, &g, (const uint16_t *)dy, argmax, (uint16_t *)dx);
    return pool_bwd_f32(be, d, &g, dy, argmax, dx);
}

void tb_cpu_install_pool(tb_backend *be)
{
    be->pool_fwd = cpu_pool_fwd;
    be->pool_bwd = cpu_pool_bwd;
}
