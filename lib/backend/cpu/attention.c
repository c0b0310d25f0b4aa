/*
 * attention.c - the CPU backend's attention slots (lib/backend/backend.h,
 * "attention and layer norm"; layer norm is lib/backend/cpu/layernorm.c):
 *
 *   attention_*        TB_ATTN_MANUAL: as eager PyTorch's
 *                      softmax(q @ k.transpose * scale + mask) @ v: the
 *                      backend's gemm (oneDNN) per head into a materialized
 *                      (B, H, T, T) probability buffer, softmax in place;
 *                      backward dP = dO V^T into a (B, H, T, T) temporary.
 *                      In the desc's math; with its lowp (autocast's bmm)
 *                      each product runs gemm_lowp on 2-byte copies of its
 *                      operands, cast per call (P after the softmax, dS
 *                      after its backward), the softmax in fp32.
 *                      TB_ATTN_FUSED: flash-attention tiles of ATTN_BQ
 *                      queries x ATTN_BK keys with online softmax
 *                      (kernels/attn_math.h); saves only each row's
 *                      logsumexp. The backward recomputes P tile by tile.
 *                      Measure: bazel run //bench:fused_attention
 *
 * Fused attention (PyTorch's CPU flash attention is built the same way):
 *   packing   each call first packs, per head, in parallel over key blocks:
 *             K and V transposed into (D, 64) panels (the right operand of
 *             S = Q K^T and dP = dO V^T), and K, V, Q, dO as rows padded to
 *             DP (a multiple of 64) for the products that produce D
 *             columns. O(T D) work against the O(T^2 D) that follows; the
 *             old kernel re-transposed K per (query tile, key tile) pair.
 *             Heads go ATTN_HEAD_CHUNK at a time, which bounds the packed
 *             copies.
 *   forward   one OpenMP task per (b, h, 64-query block), dynamic schedule,
 *             the causal blocks with the most keys first. Per key block:
 *             S = Q_blk K_blk^T (tile product), online softmax over the
 *             tile's rows (kernels/attn_math.h; the causal mask is
 *             evaluated only on tiles that cross the diagonal, and fully
 *             masked tiles are never visited), O += P V_blk. Saves only
 *             each row's logsumexp.
 *   backward  after packing (which also computes rowdot = rowsum(dO * O)),
 *             one task per (b, h, group of key blocks): group g of G holds
 *             key blocks g, g + G, ... (early and late ones, balanced under
 *             the causal mask). Per key block and each query block that
 *             sees it: S and dP recomputed (two tile products), P = exp(S -
 *             lse), dS = scale P (dP - rowdot), then dV += P^T dO,
 *             dK += dS^T Q (P and dS read transposed in place) and
 *             dQ_g += dS K into the group's own (T, DP) partial. A last
 *             pass adds the G partials in group order into dq. G depends on
 *             the shape only (ATTN_BWD_TASKS tasks per head chunk, at most
 *             ATTN_BWD_GROUPS), never on the thread count: no atomics, and
 *             the same bits for any number of threads.
 *   kernels   the tile product c (+)= a b (a possibly read transposed), the
 *             softmax tile and the backward's probability tile are inlined
 *             into one function per code path, chosen at run time by
 *             __builtin_cpu_supports (tb_cpu_attn_set_path lets a test
 *             force one): AVX-512 keeps a 4 x 64 block of c in 16 zmm
 *             registers (each b vector loaded feeds four FMAs), AVX2 a 4 x
 *             16 block in 8 ymm; the baseline ISA (the portable fallback)
 *             uses an omp simd row update. The exp is kernels/gelu_math.h's
 *             polynomial, which the softmax loops vectorize. Paths agree within rounding.
 *   memory    temp = packed copies (5 T DP-ish floats per head, G T DP more
 *             for the dQ partials in the backward) for up to
 *             ATTN_HEAD_CHUNK heads, plus per thread two 64 x 64 tiles and
 *             two 64 x DP accumulators; attention_workspace declares it.
 *             Still far below manual's (B, H, T, T) at T >= 512.
 *
 * Determinism: every sum has a fixed order that depends on the sizes only;
 * results are the same for any thread count. Tested against the double
 * reference (lib/backend/ref/attention.c) by lib/backend/cpu/attention_test.c.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_math.h"
#include "lib/backend/attn_lowp.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/cpu/ops_common.h"
#include "lib/core/status.h"

#define ATTN_BQ 64              /* query rows per tile */
#define ATTN_BK 64              /* keys per tile */
#define ATTN_DC 64              /* head-dim columns per register block; D pads to it */
#define ATTN_HEAD_CHUNK 16      /* heads packed at once: bounds the workspace */
#define ATTN_BWD_TASKS 16       /* backward tasks a head chunk aims for */
#define ATTN_BWD_GROUPS 8       /* most dQ partials per head */

/* Under TSan (tools/sanitize.sh) one version: it instruments the resolver
 * that target_clones adds, which the loader runs before TSan's runtime is up
 * (SIGSEGV before main). */
#ifdef __SANITIZE_THREAD__
#define ATTN_CLONES
#else
#define ATTN_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

typedef float v16f __attribute__((vector_size(64)));
/* AVX2's register form: 8 floats, loads and stores that need no alignment. */
typedef float v8f __attribute__((vector_size(32), aligned(4)));

/* ================================================================ attention */

static size_t attn_heads(const tb_attn_desc *d) { return (size_t)d->batch * d->heads; }

/* ---- fused: packed operands, blocked tile products ---- */

_Static_assert(ATTN_BQ == ATTN_BK, "query and key blocks must match");

/* Geometry of one call. BQ == BK, so query block b and key block b cover
 * the same rows (the causal backward starts its query loop at the key
 * block's own index). */
typedef struct attn_geom {
    int T, D, DP, causal;
    int nb;         /* blocks of ATTN_BK rows: ceil(T / BK) */
    int hc;         /* heads per chunk: min(B H, ATTN_HEAD_CHUNK) */
    int groups;     /* backward: key-block groups per head, one dQ partial each */
    size_t tpad;    /* nb * BK */
    float scale;
} attn_geom;

static int attn_dp(int D) { return (D + ATTN_DC - 1) / ATTN_DC * ATTN_DC; }

/* Groups of key blocks per head in the backward: enough tasks per chunk
 * for ATTN_BWD_TASKS threads, at most ATTN_BWD_GROUPS partials. A function
 * of the shape only, never of the thread count: results stay the same. */
static int attn_groups(int hc, int nb)
{
    int g = (ATTN_BWD_TASKS + hc - 1) / hc;
    g = g > ATTN_BWD_GROUPS ? ATTN_BWD_GROUPS : g;
    return g > nb ? nb : g;
}

static attn_geom attn_geom_of(const tb_attn_desc *d)
{
    attn_geom g = {.T = d->seq, .D = d->head_dim, .DP = attn_dp(d->head_dim),
                   .causal = !!d->causal, .scale = d->scale};
    size_t heads = attn_heads(d);
    g.nb = (d->seq + ATTN_BK - 1) / ATTN_BK;
    g.tpad = (size_t)g.nb * ATTN_BK;
    g.hc = heads < ATTN_HEAD_CHUNK ? (int)heads : ATTN_HEAD_CHUNK;
    g.groups = attn_groups(g.hc, g.nb);
    return g;
}

/* One head's packed operands (every size a multiple of 64 floats, so each
 * part stays 64-byte aligned):
 *   kt, vt  (nb, D, BK): block j's K (V) rows transposed, 0 beyond T
 *   kp, vp  (tpad, DP): K (V) rows, 0 padded
 *   qp, dop (tpad, DP): Q (dO) rows, 0 padded (backward)
 *   dqp     (groups, tpad, DP): the dQ partial of each key-block group
 *   rowdot  (tpad): rowsum(dO * O) (backward) */
typedef struct attn_head_ws {
    float *kt, *vt, *kp, *vp, *qp, *dop, *dqp, *rowdot;
} attn_head_ws;

/* One thread's tiles: s (BQ, BK) scores then P; dp (BQ, BK) dP then dS;
 * o (BQ, DP) the forward's output accumulator, or dk and dv (BK, DP) the
 * backward's; m, l (BQ) the running max and sum. */
typedef struct attn_thread_ws {
    float *s, *dp, *o, *dk, *dv, *m, *l;
} attn_thread_ws;

static size_t attn_head_floats(const attn_geom *g, int bwd)
{
    size_t t = g->tpad, D = (size_t)g->D, DP = (size_t)g->DP;
    if (!bwd)
        return t * D + t * DP; /* kt, vp */
    return 2 * t * D + 3 * t * DP + (size_t)g->groups * t * DP + t; /* kt vt kp qp dop dqp rowdot */
}

static size_t attn_thread_floats(const attn_geom *g)
{
    size_t DP = (size_t)g->DP;
    return 2 * ATTN_BQ * ATTN_BK + 2 * ATTN_BK * DP + 2 * ATTN_BQ;
}

static size_t attn_ws_floats(const attn_geom *g, int bwd, int threads)
{
    return attn_head_floats(g, bwd) * (size_t)g->hc + attn_thread_floats(g) * (size_t)threads;
}

static attn_head_ws attn_head_carve(const attn_geom *g, int bwd, float *base, int h)
{
    size_t t = g->tpad, D = (size_t)g->D, DP = (size_t)g->DP;
    float *p = base + attn_head_floats(g, bwd) * (size_t)h;
    attn_head_ws w = {0};
    w.kt = p, p += t * D;
    if (!bwd) {
        w.vp = p;
        return w;
    }
    w.vt = p, p += t * D;
    w.kp = p, p += t * DP;
    w.qp = p, p += t * DP;
    w.dop = p, p += t * DP;
    w.dqp = p, p += (size_t)g->groups * t * DP;
    w.rowdot = p;
    return w;
}

static attn_thread_ws attn_thread_carve(const attn_geom *g, float *base, int thread)
{
    size_t DP = (size_t)g->DP;
    float *p = base + attn_thread_floats(g) * (size_t)thread;
    attn_thread_ws w;
    w.s = p, p += ATTN_BQ * ATTN_BK;
    w.dp = p, p += ATTN_BQ * ATTN_BK;
    w.dk = p, p += ATTN_BK * DP;
    w.dv = p, p += ATTN_BK * DP;
    w.o = w.dk; /* the forward never uses dk: o (BQ == BK rows) takes its place */
    w.m = p, p += ATTN_BQ;
    w.l = p;
    return w;
}

/* dst(D, BK) = src(n, D) transposed, columns n..BK zero. */
static void load_transposed(const float *src, int n, int D, float *dst)
{
    for (int e = 0; e < D; e++) {
        float *de = dst + (size_t)e * ATTN_BK;
        for (int j = 0; j < n; j++)
            de[j] = src[(size_t)j * D + e];
        for (int j = n; j < ATTN_BK; j++)
            de[j] = 0.0f;
    }
}

/* dst(rows, DP) = src(n, D) with zero padding to rows x DP. */
static void load_padded(const float *src, int n, int rows, int D, int DP, float *dst)
{
    for (int j = 0; j < rows; j++) {
        float *dj = dst + (size_t)j * DP;
        int w = j < n ? D : 0;
        if (w)
            memcpy(dj, src + (size_t)j * D, sizeof(float) * D);
        memset(dj + w, 0, sizeof(float) * (DP - w));
    }
}

/* ---- the tile kernels, compiled once per ISA path ---- */

#define ATTN_INLINE static inline __attribute__((always_inline))

/* c(m, ncols) = (acc ? c : 0) + a(m, kk) b(kk, ncols). a's element (i, l)
 * is a[i ars + l acs]: a row-major matrix or a transposed one, read in
 * place. b's rows are ldb floats, c's ldc; both 64-byte aligned, ncols a
 * multiple of 64.
 * Two forms. regs (AVX-512): four rows of c by 64 columns in registers (16
 * accumulators of 16 floats; with b's four vectors, 20 of the 32), so each
 * b vector loaded serves four FMAs; AVX2 the same with four rows by 16
 * columns (tile_gemm_regs8). Otherwise (baseline ISA): one row of c at a
 * time updated in memory by an omp simd loop; GCC lowers the 64-byte
 * vectors of the register form badly without AVX-512 (through memory). */
ATTN_INLINE void tile_gemm_simd(int m, int kk, int ncols, const float *a, size_t ars,
                                size_t acs, const float *b, size_t ldb, float *c, size_t ldc,
                                int acc)
{
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        const float *ai = a + (size_t)i * ars;
        if (!acc)
            memset(ci, 0, sizeof(float) * ncols);
        for (int l = 0; l < kk; l++) {
            const float *bl = b + (size_t)l * ldb;
            float x = ai[(size_t)l * acs];
#pragma omp simd
            for (int n = 0; n < ncols; n++)
                ci[n] += x * bl[n];
        }
    }
}

/* AVX2's register form: four rows of c by 16 columns in registers (8
 * accumulators of 8 floats; with b's two vectors and a broadcast, 11 of
 * the 16 ymm), so each b vector loaded serves four FMAs and c is read and
 * written once per tile product instead of once per l. Each output element
 * still sums l in ascending order. Six rows (15 ymm) measured no faster on
 * a 2-core AVX2 EPYC: the tiles' softmax and packing weigh as much. */
ATTN_INLINE void tile_gemm_regs8(int m, int kk, int ncols, const float *a, size_t ars,
                                 size_t acs, const float *b, size_t ldb, float *c, size_t ldc,
                                 int acc)
{
    for (int n0 = 0; n0 < ncols; n0 += 16) {
        int i = 0;
        for (; i + 4 <= m; i += 4) {
            const float *a0 = a + (size_t)i * ars, *a1 = a0 + ars, *a2 = a1 + ars,
                        *a3 = a2 + ars;
            v8f *c0 = (v8f *)(c + (size_t)i * ldc + n0), *c1 = (v8f *)((float *)c0 + ldc),
                *c2 = (v8f *)((float *)c1 + ldc), *c3 = (v8f *)((float *)c2 + ldc);
            v8f z = {0};
            v8f x00 = acc ? c0[0] : z, x01 = acc ? c0[1] : z, x10 = acc ? c1[0] : z,
                x11 = acc ? c1[1] : z, x20 = acc ? c2[0] : z, x21 = acc ? c2[1] : z,
                x30 = acc ? c3[0] : z, x31 = acc ? c3[1] : z;
            for (int l = 0; l < kk; l++) {
                const v8f *bl = (const v8f *)(b + (size_t)l * ldb + n0);
                v8f b0 = bl[0], b1 = bl[1];
                size_t o = (size_t)l * acs;
                float s0 = a0[o], s1 = a1[o], s2 = a2[o], s3 = a3[o];
                x00 += s0 * b0, x01 += s0 * b1, x10 += s1 * b0, x11 += s1 * b1;
                x20 += s2 * b0, x21 += s2 * b1, x30 += s3 * b0, x31 += s3 * b1;
            }
            c0[0] = x00, c0[1] = x01, c1[0] = x10, c1[1] = x11;
            c2[0] = x20, c2[1] = x21, c3[0] = x30, c3[1] = x31;
        }
        for (; i < m; i++) {
            const float *ai = a + (size_t)i * ars;
            v8f *ci = (v8f *)(c + (size_t)i * ldc + n0);
            v8f z = {0};
            v8f x0 = acc ? ci[0] : z, x1 = acc ? ci[1] : z;
            for (int l = 0; l < kk; l++) {
                const v8f *bl = (const v8f *)(b + (size_t)l * ldb + n0);
                float s = ai[(size_t)l * acs];
                x0 += s * bl[0], x1 += s * bl[1];
            }
            ci[0] = x0, ci[1] = x1;
        }
    }
}

/* regs: 0 the omp simd row form, 1 AVX-512's registers, 2 AVX2's. */
ATTN_INLINE void tile_gemm_body(int m, int kk, int ncols, const float *a, size_t ars,
                                size_t acs, const float *b, size_t ldb, float *c, size_t ldc,
                                int acc, int regs)
{
    if (!regs) {
        tile_gemm_simd(m, kk, ncols, a, ars, acs, b, ldb, c, ldc, acc);
        return;
    }
    if (regs == 2) {
        tile_gemm_regs8(m, kk, ncols, a, ars, acs, b, ldb, c, ldc, acc);
        return;
    }
    for (int n0 = 0; n0 < ncols; n0 += ATTN_DC) {
        int i = 0;
        for (; i + 4 <= m; i += 4) {
            const float *a0 = a + (size_t)i * ars, *a1 = a0 + ars, *a2 = a1 + ars,
                        *a3 = a2 + ars;
            v16f *c0 = (v16f *)(c + (size_t)i * ldc + n0), *c1 = (v16f *)((float *)c0 + ldc),
                 *c2 = (v16f *)((float *)c1 + ldc), *c3 = (v16f *)((float *)c2 + ldc);
            v16f z = {0};
            v16f x00 = acc ? c0[0] : z, x01 = acc ? c0[1] : z, x02 = acc ? c0[2] : z,
                 x03 = acc ? c0[3] : z, x10 = acc ? c1[0] : z, x11 = acc ? c1[1] : z,
                 x12 = acc ? c1[2] : z, x13 = acc ? c1[3] : z, x20 = acc ? c2[0] : z,
                 x21 = acc ? c2[1] : z, x22 = acc ? c2[2] : z, x23 = acc ? c2[3] : z,
                 x30 = acc ? c3[0] : z, x31 = acc ? c3[1] : z, x32 = acc ? c3[2] : z,
                 x33 = acc ? c3[3] : z;
            for (int l = 0; l < kk; l++) {
                const v16f *bl = (const v16f *)(b + (size_t)l * ldb + n0);
                v16f b0 = bl[0], b1 = bl[1], b2 = bl[2], b3 = bl[3];
                size_t o = (size_t)l * acs;
                float s0 = a0[o], s1 = a1[o], s2 = a2[o], s3 = a3[o];
                x00 += s0 * b0, x01 += s0 * b1, x02 += s0 * b2, x03 += s0 * b3;
                x10 += s1 * b0, x11 += s1 * b1, x12 += s1 * b2, x13 += s1 * b3;
                x20 += s2 * b0, x21 += s2 * b1, x22 += s2 * b2, x23 += s2 * b3;
                x30 += s3 * b0, x31 += s3 * b1, x32 += s3 * b2, x33 += s3 * b3;
            }
            c0[0] = x00, c0[1] = x01, c0[2] = x02, c0[3] = x03;
            c1[0] = x10, c1[1] = x11, c1[2] = x12, c1[3] = x13;
            c2[0] = x20, c2[1] = x21, c2[2] = x22, c2[3] = x23;
            c3[0] = x30, c3[1] = x31, c3[2] = x32, c3[3] = x33;
        }
        for (; i < m; i++) {
            const float *ai = a + (size_t)i * ars;
            v16f *ci = (v16f *)(c + (size_t)i * ldc + n0);
            v16f z = {0};
            v16f x0 = acc ? ci[0] : z, x1 = acc ? ci[1] : z, x2 = acc ? ci[2] : z,
                 x3 = acc ? ci[3] : z;
            for (int l = 0; l < kk; l++) {
                const v16f *bl = (const v16f *)(b + (size_t)l * ldb + n0);
                float s = ai[(size_t)l * acs];
                x0 += s * bl[0], x1 += s * bl[1], x2 += s * bl[2], x3 += s * bl[3];
            }
            ci[0] = x0, ci[1] = x1, ci[2] = x2, ci[3] = x3;
        }
    }
}

/* Online-softmax update of the tile's query rows [i0, i0 + nq) with the
 * raw dots s (BQ, BK) of keys [j0, j0 + nk): s becomes the weights, and
 * each row's accumulator in o (BQ, DP) is rescaled. Only a tile that
 * crosses the diagonal evaluates the causal mask. */
ATTN_INLINE void softmax_tile_body(const attn_geom *g, float *s, int i0, int nq, int j0, int nk,
                                   float *m, float *l, float *o)
{
    int causal = g->causal && j0 + nk - 1 > i0;
    float scale = g->scale;
    for (int ii = 0; ii < nq; ii++) {
        float *srow = s + (size_t)ii * ATTN_BK, *orow = o + (size_t)ii * g->DP;
        int i = i0 + ii;
        float mt = -INFINITY;
#pragma omp simd reduction(max : mt)
        for (int j = 0; j < ATTN_BK; j++) {
            float sc = j < nk ? tb_attn_mask_f(srow[j], scale, causal, i, j0 + j) : -INFINITY;
            srow[j] = sc;
            mt = tb_attn_max_f(mt, sc);
        }
        float mn = tb_attn_max_f(m[ii], mt), r = tb_attn_rescale_f(m[ii], mn), sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < ATTN_BK; j++) {
            srow[j] = tb_attn_weight_f(srow[j], mn);
            sum += srow[j];
        }
        l[ii] = tb_attn_sum_update_f(l[ii], r, sum);
        m[ii] = mn;
        if (r != 1.0f) {
#pragma omp simd
            for (int d = 0; d < g->DP; d++)
                orow[d] *= r;
        }
    }
}

/* P and scale dS of query rows [i0, i0 + nq) against keys [j0, j0 + nk):
 * s holds the raw dots, dp the raw dO.V products; both are overwritten,
 * with 0 beyond nk. The scale is folded into dS, so dQ = dS K and
 * dK = dS^T Q need none. */
ATTN_INLINE void probs_tile_body(const attn_geom *g, const float *lse, const float *rowdot,
                                 int i0, int nq, int j0, int nk, float *s, float *dp)
{
    int causal = g->causal && j0 + nk - 1 > i0;
    float scale = g->scale;
    for (int ii = 0; ii < nq; ii++) {
        int i = i0 + ii;
        float *srow = s + (size_t)ii * ATTN_BK, *dprow = dp + (size_t)ii * ATTN_BK;
        float li = lse[i], di = rowdot[i];
#pragma omp simd
        for (int j = 0; j < ATTN_BK; j++) {
            float sc = j < nk ? tb_attn_mask_f(srow[j], scale, causal, i, j0 + j) : -INFINITY;
            float p = tb_attn_prob_f(sc, li);
            srow[j] = p;
            dprow[j] = tb_attn_dscore_f(p, dprow[j], di) * scale;
        }
    }
}

typedef struct attn_kernels {
    void (*gemm)(int m, int kk, int ncols, const float *a, size_t ars, size_t acs,
                 const float *b, size_t ldb, float *c, size_t ldc, int acc);
    void (*softmax)(const attn_geom *g, float *s, int i0, int nq, int j0, int nk, float *m,
                    float *l, float *o);
    void (*probs)(const attn_geom *g, const float *lse, const float *rowdot, int i0, int nq,
                  int j0, int nk, float *s, float *dp);
} attn_kernels;

/* The bodies above inlined into functions compiled for one ISA each. */
#define ATTN_DEFINE_KERNELS(isa, attr, regs)                                                  \
    attr static void gemm_##isa(int m, int kk, int ncols, const float *a, size_t ars,       \
                                size_t acs, const float *b, size_t ldb, float *c,           \
                                size_t ldc, int acc)                                        \
    {                                                                                       \
        tile_gemm_body(m, kk, ncols, a, ars, acs, b, ldb, c, ldc, acc, regs);               \
    }                                                                                       \
    attr static void softmax_##isa(const attn_geom *g, float *s, int i0, int nq, int j0,    \
                                   int nk, float *m, float *l, float *o)                    \
    {                                                                                       \
        softmax_tile_body(g, s, i0, nq, j0, nk, m, l, o);                                   \
    }                                                                                       \
    attr static void probs_##isa(const attn_geom *g, const float *lse, const float *rowdot, \
                                 int i0, int nq, int j0, int nk, float *s, float *dp)       \
    {                                                                                       \
        probs_tile_body(g, lse, rowdot, i0, nq, j0, nk, s, dp);                             \
    }

ATTN_DEFINE_KERNELS(generic, , 0)
ATTN_DEFINE_KERNELS(avx2, __attribute__((target("avx2,fma"))), 2)
ATTN_DEFINE_KERNELS(avx512,
                    __attribute__((target("avx512f,avx2,fma,prefer-vector-width=512"))), 1)

/* ---- AVX-512 forms of the two element-wise tiles, for full tiles ----
 * A tile with 64 valid keys that the causal mask does not cross has no
 * -inf to guard: its rows go straight through exp_neg_512, the steps of
 * kernels/gelu_math.h's tb_exp_neg_f on 16 lanes (the same polynomial;
 * FMA contractions may round differently than the omp simd loops). The
 * other tiles (the diagonal, the last partial block) take the bodies above. */
#define ATTN_AVX512 __attribute__((target("avx512f,avx2,fma")))

ATTN_AVX512 static inline __m512 exp_neg_512(__m512 s)
{
    __m512 flush = _mm512_set1_ps(TB_EXP_FLUSH), round = _mm512_set1_ps(TB_EXP_ROUND);
    /* min(flush, s): x86's min returns its second operand when one is NaN,
     * so a NaN score stays NaN (as tb_exp_neg_f's s > 86 ? 86 : s) */
    __m512 z = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_min_ps(flush, s));
    __m512 t = _mm512_fmadd_ps(z, _mm512_set1_ps(TB_EXP_LOG2E), round);
    __m512 kf = _mm512_sub_ps(t, round);
    __m512 r = _mm512_fmadd_ps(kf, _mm512_set1_ps(-TB_EXP_LN2_HI), z);
    r = _mm512_fmadd_ps(kf, _mm512_set1_ps(-TB_EXP_LN2_LO), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(TB_EXP_C5), r, _mm512_set1_ps(TB_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TB_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TB_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TB_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TB_EXP_C0));
    __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    __m512i bits = _mm512_add_epi32(_mm512_castps_si512(t),
                                    _mm512_set1_epi32((int)(127u - TB_EXP_ROUND_BITS)));
    e = _mm512_mul_ps(e, _mm512_castsi512_ps(_mm512_slli_epi32(bits, 23)));
    __mmask16 over = _mm512_cmp_ps_mask(s, flush, _CMP_GT_OQ);
    return _mm512_mask_mov_ps(e, over, _mm512_setzero_ps());
}

static int attn_tile_full(const attn_geom *g, int i0, int nq, int j0, int nk)
{
    (void)nq;
    return nk == ATTN_BK && !(g->causal && j0 + nk - 1 > i0);
}

ATTN_AVX512 static void softmax_avx512_tiles(const attn_geom *g, float *s, int i0, int nq,
                                             int j0, int nk, float *m, float *l, float *o)
{
    if (!attn_tile_full(g, i0, nq, j0, nk)) {
        softmax_avx512(g, s, i0, nq, j0, nk, m, l, o);
        return;
    }
    __m512 scale = _mm512_set1_ps(g->scale);
    for (int ii = 0; ii < nq; ii++) {
        float *srow = s + (size_t)ii * ATTN_BK, *orow = o + (size_t)ii * g->DP;
        __m512 x0 = _mm512_mul_ps(_mm512_load_ps(srow), scale);
        __m512 x1 = _mm512_mul_ps(_mm512_load_ps(srow + 16), scale);
        __m512 x2 = _mm512_mul_ps(_mm512_load_ps(srow + 32), scale);
        __m512 x3 = _mm512_mul_ps(_mm512_load_ps(srow + 48), scale);
        __m512 x01 = _mm512_max_ps(x0, x1), x23 = _mm512_max_ps(x2, x3);
        float mt = _mm512_reduce_max_ps(_mm512_max_ps(x01, x23));
        float mn = tb_attn_max_f(m[ii], mt), r = tb_attn_rescale_f(m[ii], mn);
        __m512 vm = _mm512_set1_ps(mn);
        __m512 p0 = exp_neg_512(_mm512_sub_ps(vm, x0)), p1 = exp_neg_512(_mm512_sub_ps(vm, x1));
        __m512 p2 = exp_neg_512(_mm512_sub_ps(vm, x2)), p3 = exp_neg_512(_mm512_sub_ps(vm, x3));
        _mm512_store_ps(srow, p0), _mm512_store_ps(srow + 16, p1);
        _mm512_store_ps(srow + 32, p2), _mm512_store_ps(srow + 48, p3);
        __m512 p01 = _mm512_add_ps(p0, p1), p23 = _mm512_add_ps(p2, p3);
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(p01, p23));
        l[ii] = tb_attn_sum_update_f(l[ii], r, sum);
        m[ii] = mn;
        if (r != 1.0f) {
            __m512 vr = _mm512_set1_ps(r);
            for (int d = 0; d < g->DP; d += 16)
                _mm512_store_ps(orow + d, _mm512_mul_ps(_mm512_load_ps(orow + d), vr));
        }
    }
}

ATTN_AVX512 static void probs_avx512_tiles(const attn_geom *g, const float *lse,
                                           const float *rowdot, int i0, int nq, int j0, int nk,
                                           float *s, float *dp)
{
    if (!attn_tile_full(g, i0, nq, j0, nk)) {
        probs_avx512(g, lse, rowdot, i0, nq, j0, nk, s, dp);
        return;
    }
    __m512 scale = _mm512_set1_ps(g->scale);
    for (int ii = 0; ii < nq; ii++) {
        float *srow = s + (size_t)ii * ATTN_BK, *dprow = dp + (size_t)ii * ATTN_BK;
        __m512 li = _mm512_set1_ps(lse[i0 + ii]), di = _mm512_set1_ps(rowdot[i0 + ii]);
        for (int j = 0; j < ATTN_BK; j += 16) {
            __m512 sc = _mm512_mul_ps(_mm512_load_ps(srow + j), scale);
            __m512 p = exp_neg_512(_mm512_sub_ps(li, sc));
            _mm512_store_ps(srow + j, p);
            __m512 ds = _mm512_mul_ps(p, _mm512_sub_ps(_mm512_load_ps(dprow + j), di));
            _mm512_store_ps(dprow + j, _mm512_mul_ps(ds, scale));
        }
    }
}

static const attn_kernels attn_paths[] = {
    [TB_CPU_PATH_GENERIC] = {gemm_generic, softmax_generic, probs_generic},
    [TB_CPU_PATH_AVX2] = {gemm_avx2, softmax_avx2, probs_avx2},
    [TB_CPU_PATH_AVX512] = {gemm_avx512, softmax_avx512_tiles, probs_avx512_tiles},
};

static int attn_path = TB_CPU_PATH_AUTO; /* resolved on first use */

static int attn_path_supported(int path)
{
    __builtin_cpu_init();
    switch (path) {
    case TB_CPU_PATH_GENERIC: return 1;
    case TB_CPU_PATH_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TB_CPU_PATH_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
    default: return 0;
    }
}

static const attn_kernels *attn_kernels_in_use(void)
{
    /* atomic: DataParallel's replicas may make their first call at once */
    int path = __atomic_load_n(&attn_path, __ATOMIC_RELAXED);
    if (path == TB_CPU_PATH_AUTO) {
        path = tb_cpu_path_best(TB_CPU_PATHS_ALL, attn_path_supported);
        __atomic_store_n(&attn_path, path, __ATOMIC_RELAXED);
    }
    return &attn_paths[path];
}

int tb_cpu_attn_set_path(int path)
{
    TB_TRY(tb_cpu_path_force(&attn_path, path, TB_CPU_PATHS_ALL, attn_path_supported,
                             "attention"));
    attn_kernels_in_use(); /* AUTO: the best again */
    return TB_OK;
}

int tb_cpu_attn_path(void)
{
    attn_kernels_in_use();
    return attn_path;
}

/* ---- fused forward ---- */

/* Packs block j of one head: kt's panel and vp's rows. */
static void attn_pack_fwd(const attn_geom *g, const float *k, const float *v, int j,
                          attn_head_ws *hw)
{
    int j0 = j * ATTN_BK, nk = g->T - j0 < ATTN_BK ? g->T - j0 : ATTN_BK;
    load_transposed(k + (size_t)j0 * g->D, nk, g->D, hw->kt + (size_t)j0 * g->D);
    load_padded(v + (size_t)j0 * g->D, nk, ATTN_BK, g->D, g->DP, hw->vp + (size_t)j0 * g->DP);
}

/* Query rows [i0, i0 + nq) of one head: out and lse. */
static void attn_fwd_tile(const attn_kernels *kn, const attn_geom *g, const float *q,
                          const attn_head_ws *hw, float *out, float *lse, int i0, int nq,
                          attn_thread_ws *w)
{
    int T = g->T, D = g->D, DP = g->DP;
    memset(w->o, 0, sizeof(float) * (size_t)nq * DP);
    for (int ii = 0; ii < nq; ii++)
        w->m[ii] = -INFINITY, w->l[ii] = 0.0f;
    int kend = g->causal && i0 + nq < T ? i0 + nq : T;
    for (int j0 = 0; j0 < kend; j0 += ATTN_BK) {
        int nk = kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK;
        kn->gemm(nq, D, ATTN_BK, q + (size_t)i0 * D, D, 1, hw->kt + (size_t)j0 * D, ATTN_BK,
                 w->s, ATTN_BK, 0);
        kn->softmax(g, w->s, i0, nq, j0, nk, w->m, w->l, w->o);
        kn->gemm(nq, nk, DP, w->s, ATTN_BK, 1, hw->vp + (size_t)j0 * DP, DP, w->o, DP, 1);
    }
    for (int ii = 0; ii < nq; ii++) {
        float *orow = out + (size_t)(i0 + ii) * D;
        const float *acc = w->o + (size_t)ii * DP;
        float l = w->l[ii];
#pragma omp simd
        for (int d = 0; d < D; d++)
            orow[d] = acc[d] / l;
        lse[i0 + ii] = tb_attn_lse_f(w->m[ii], l);
    }
}

/* Heads [h0, h0 + g->hc) of the forward. */
static void attn_fwd_chunk(const attn_kernels *kn, const attn_geom *g, int t, float *ws,
                           size_t h0, int hc, const float *q, const float *k, const float *v,
                           float *out, float *lse)
{
    size_t hd = (size_t)g->T * g->D;
    int nb = g->nb;
    float *tws = ws + attn_head_floats(g, 0) * (size_t)g->hc;
#pragma omp parallel num_threads(t)
    {
        attn_thread_ws w = attn_thread_carve(g, tws, omp_get_thread_num());
#pragma omp for schedule(static)
        for (long task = 0; task < (long)hc * nb; task++) {
            int h = (int)(task / nb);
            attn_head_ws hw = attn_head_carve(g, 0, ws, h);
            attn_pack_fwd(g, k + (h0 + h) * hd, v + (h0 + h) * hd, (int)(task % nb), &hw);
        }
        /* Causal: the last query blocks see the most keys; they go first. */
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < (long)hc * nb; task++) {
            int h = (int)(task / nb), qb = nb - 1 - (int)(task % nb);
            attn_head_ws hw = attn_head_carve(g, 0, ws, h);
            int i0 = qb * ATTN_BQ, nq = g->T - i0 < ATTN_BQ ? g->T - i0 : ATTN_BQ;
            size_t bh = h0 + h;
            attn_fwd_tile(kn, g, q + bh * hd, &hw, out + bh * hd, lse + bh * g->T, i0, nq, &w);
        }
    }
}

static int attn_fwd_fused(tb_backend *be, const tb_attn_desc *d, const float *q,
                          const float *k, const float *v, float *out, float *lse)
{
    attn_geom g = attn_geom_of(d);
    int t = threads_of(be);
    float *ws;
    TB_TRY(be->dev_alloc(be, (void **)&ws, sizeof(float) * attn_ws_floats(&g, 0, t)));
    const attn_kernels *kn = attn_kernels_in_use();
    size_t heads = attn_heads(d);
    for (size_t h0 = 0; h0 < heads; h0 += (size_t)g.hc) {
        int hc = heads - h0 < (size_t)g.hc ? (int)(heads - h0) : g.hc;
        attn_fwd_chunk(kn, &g, t, ws, h0, hc, q, k, v, out, lse);
    }
    return be->dev_free(be, ws);
}

/* ---- fused backward ---- */

/* Packs block j of one head: kt, vt panels; kp, qp, dop rows; rowdot. */
static void attn_pack_bwd(const attn_geom *g, const float *q, const float *k, const float *v,
                          const float *o, const float *dout, int j, attn_head_ws *hw)
{
    int D = g->D, DP = g->DP, j0 = j * ATTN_BK;
    int n = g->T - j0 < ATTN_BK ? g->T - j0 : ATTN_BK;
    size_t r = (size_t)j0 * D, rp = (size_t)j0 * DP;
    load_transposed(k + r, n, D, hw->kt + r);
    load_transposed(v + r, n, D, hw->vt + r);
    load_padded(k + r, n, ATTN_BK, D, DP, hw->kp + rp);
    load_padded(q + r, n, ATTN_BK, D, DP, hw->qp + rp);
    load_padded(dout + r, n, ATTN_BK, D, DP, hw->dop + rp);
    for (int ii = 0; ii < ATTN_BK; ii++) {
        double s = 0.0;
        const float *dorow = dout + r + (size_t)ii * D, *orow = o + r + (size_t)ii * D;
        if (ii < n)
            for (int e = 0; e < D; e++)
                s += (double)dorow[e] * orow[e];
        hw->rowdot[j0 + ii] = (float)s;
    }
}

/* Key block kb of one head against every query block that sees it: dK and
 * dV of the block (written to dk, dv), dS K added to the group's dQ
 * partial dqp, or written to it when first (the group's first key block,
 * which sees every query block the group's later ones see: no memset). */
static void attn_bwd_keys(const attn_kernels *kn, const attn_geom *g, const float *q,
                          const float *dout, const float *lse, const attn_head_ws *hw,
                          float *dqp, float *dk, float *dv, int kb, int first,
                          attn_thread_ws *w)
{
    int T = g->T, D = g->D, DP = g->DP, j0 = kb * ATTN_BK;
    int nk = T - j0 < ATTN_BK ? T - j0 : ATTN_BK;
    memset(w->dk, 0, sizeof(float) * ATTN_BK * DP);
    memset(w->dv, 0, sizeof(float) * ATTN_BK * DP);
    const float *kt = hw->kt + (size_t)j0 * D, *vt = hw->vt + (size_t)j0 * D;
    const float *kp = hw->kp + (size_t)j0 * DP;
    for (int qb = g->causal ? kb : 0; qb < g->nb; qb++) {
        int i0 = qb * ATTN_BQ, nq = T - i0 < ATTN_BQ ? T - i0 : ATTN_BQ;
        kn->gemm(nq, D, ATTN_BK, q + (size_t)i0 * D, D, 1, kt, ATTN_BK, w->s, ATTN_BK, 0);
        kn->gemm(nq, D, ATTN_BK, dout + (size_t)i0 * D, D, 1, vt, ATTN_BK, w->dp, ATTN_BK, 0);
        kn->probs(g, lse, hw->rowdot, i0, nq, j0, nk, w->s, w->dp);
        /* dV += P^T dO, dK += dS^T Q: the tiles read transposed in place */
        kn->gemm(nk, nq, DP, w->s, 1, ATTN_BK, hw->dop + (size_t)i0 * DP, DP, w->dv, DP, 1);
        kn->gemm(nk, nq, DP, w->dp, 1, ATTN_BK, hw->qp + (size_t)i0 * DP, DP, w->dk, DP, 1);
        /* dQ += dS K */
        kn->gemm(nq, nk, DP, w->dp, ATTN_BK, 1, kp, DP, dqp + (size_t)i0 * DP, DP, !first);
    }
    for (int j = 0; j < nk; j++) {
        memcpy(dk + (size_t)(j0 + j) * D, w->dk + (size_t)j * DP, sizeof(float) * D);
        memcpy(dv + (size_t)(j0 + j) * D, w->dv + (size_t)j * DP, sizeof(float) * D);
    }
}

/* dq rows of block qb = the groups' partials added in group order. */
static void attn_bwd_reduce(const attn_geom *g, const attn_head_ws *hw, float *dq, int qb)
{
    int D = g->D, DP = g->DP, i0 = qb * ATTN_BQ;
    int nq = g->T - i0 < ATTN_BQ ? g->T - i0 : ATTN_BQ;
    size_t part = g->tpad * (size_t)DP;
    for (int ii = 0; ii < nq; ii++) {
        float *row = dq + (size_t)(i0 + ii) * D;
        const float *p = hw->dqp + (size_t)(i0 + ii) * DP;
        memcpy(row, p, sizeof(float) * D);
        for (int gi = 1; gi < g->groups; gi++) {
            const float *pg = p + part * (size_t)gi;
#pragma omp simd
            for (int e = 0; e < D; e++)
                row[e] += pg[e];
        }
    }
}

typedef struct attn_bwd_args {
    const float *q, *k, *v, *o, *dout, *lse;
    float *dq, *dk, *dv;
} attn_bwd_args;

/* Heads [h0, h0 + hc) of the backward: pack, then one task per (head, key
 * block group), then the dQ reduction; no two tasks write the same memory. */
static void attn_bwd_chunk(const attn_kernels *kn, const attn_geom *g, int t, float *ws,
                           size_t h0, int hc, const attn_bwd_args *a)
{
    size_t hd = (size_t)g->T * g->D;
    int nb = g->nb, G = g->groups;
    float *tws = ws + attn_head_floats(g, 1) * (size_t)g->hc;
#pragma omp parallel num_threads(t)
    {
        attn_thread_ws w = attn_thread_carve(g, tws, omp_get_thread_num());
#pragma omp for schedule(static)
        for (long task = 0; task < (long)hc * nb; task++) {
            int h = (int)(task / nb);
            size_t off = (h0 + h) * hd;
            attn_head_ws hw = attn_head_carve(g, 1, ws, h);
            attn_pack_bwd(g, a->q + off, a->k + off, a->v + off, a->o + off, a->dout + off,
                          (int)(task % nb), &hw);
        }
        /* Group gi holds key blocks gi, gi + G, ...: under a causal mask
         * every group gets early (long) and late (short) blocks. */
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < (long)hc * G; task++) {
            int h = (int)(task / G), gi = (int)(task % G);
            size_t off = (h0 + h) * hd;
            attn_head_ws hw = attn_head_carve(g, 1, ws, h);
            float *dqp = hw.dqp + g->tpad * (size_t)g->DP * gi;
            /* Key block gi writes every row its query blocks reach; under
             * the causal mask rows before block gi stay 0. */
            if (g->causal)
                memset(dqp, 0, sizeof(float) * (size_t)gi * ATTN_BQ * g->DP);
            for (int kb = gi; kb < nb; kb += G)
                attn_bwd_keys(kn, g, a->q + off, a->dout + off, a->lse + (h0 + h) * g->T, &hw,
                              dqp, a->dk + off, a->dv + off, kb, kb == gi, &w);
        }
#pragma omp for schedule(static)
        for (long task = 0; task < (long)hc * nb; task++) {
            int h = (int)(task / nb);
            attn_head_ws hw = attn_head_carve(g, 1, ws, h);
            attn_bwd_reduce(g, &hw, a->dq + (h0 + h) * hd, (int)(task % nb));
        }
    }
}

static int attn_bwd_fused(tb_backend *be, const tb_attn_desc *d, const float *q,
                          const float *k, const float *v, const float *o, const float *dout,
                          const float *lse, float *dq, float *dk, float *dv)
{
    attn_geom g = attn_geom_of(d);
    int t = threads_of(be);
    float *ws;
    TB_TRY(be->dev_alloc(be, (void **)&ws, sizeof(float) * attn_ws_floats(&g, 1, t)));
    const attn_kernels *kn = attn_kernels_in_use();
    attn_bwd_args a = {q, k, v, o, dout, lse, dq, dk, dv};
    size_t heads = attn_heads(d);
    for (size_t h0 = 0; h0 < heads; h0 += (size_t)g.hc) {
        int hc = heads - h0 < (size_t)g.hc ? (int)(heads - h0) : g.hc;
        attn_bwd_chunk(kn, &g, t, ws, h0, hc, &a);
    }
    return be->dev_free(be, ws);
}

/* ---- manual: materialized scores through the backend's gemm ---- */

/* Row r of the (B*H*T, T) probability matrix: mask, then softmax in place
 * (scores already scaled by the gemm's alpha). */
ATTN_CLONES static void manual_softmax_row(float *p, int T, int causal, int i)
{
    float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < T; j++) {
        p[j] = tb_attn_mask_f(p[j], 1.0f, causal, i, j);
        mx = tb_attn_max_f(mx, p[j]);
    }
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < T; j++) {
        p[j] = tb_attn_weight_f(p[j], mx);
        sum += p[j];
    }
#pragma omp simd
    for (int j = 0; j < T; j++)
        p[j] = p[j] / sum;
}

/* dP becomes dS = P (dP - rowsum(P dP)): PyTorch's softmax backward. */
ATTN_CLONES static void manual_softmax_bwd_row(const float *p, float *dp, int T)
{
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < T; j++)
        dot += p[j] * dp[j];
#pragma omp simd
    for (int j = 0; j < T; j++)
        dp[j] = tb_attn_dscore_f(p[j], dp[j], dot);
}

static const uint16_t *lowp_at(const uint16_t *base, size_t off)
{
    return base ? base + off : NULL;
}

/* One head's product C = alpha op(A) op(B), in the desc's math, or on the
 * operands' copies in d->lowp (al, bl) when it has them. */
static int manual_gemm(tb_backend *be, const tb_attn_desc *d, int ta, int tb, int m, int n,
                       int k, float alpha, const float *a, const uint16_t *al, int lda,
                       const float *b, const uint16_t *bl, int ldb, float *c, int ldc)
{
    if (al)
        return be->gemm_lowp(be, d->lowp, ta, tb, m, n, k, alpha, al, lda, bl, ldb, 0.0f, c,
                             ldc);
    return be->gemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc, d->math);
}

static int attn_fwd_manual_with(tb_backend *be, const tb_attn_desc *d, const float *q,
                                const float *k, const float *v, float *out, float *p,
                                const tb_attn_lowp *lp)
{
    int T = d->seq, D = d->head_dim, t = threads_of(be);
    size_t heads = attn_heads(d), hd = (size_t)T * D, tt = (size_t)T * T;
    TB_TRY(tb_attn_lowp_cast(be, d, q, lp->q, heads * hd));
    TB_TRY(tb_attn_lowp_cast(be, d, k, lp->k, heads * hd));
    TB_TRY(tb_attn_lowp_cast(be, d, v, lp->v, heads * hd));
    for (size_t bh = 0; bh < heads; bh++) /* S = scale Q K^T */
        TB_TRY(manual_gemm(be, d, 0, 1, T, T, D, d->scale, q + bh * hd, lowp_at(lp->q, bh * hd),
                           D, k + bh * hd, lowp_at(lp->k, bh * hd), D, p + bh * tt, T));
    long rows = (long)(heads * T);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * T >= PAR_MIN)
    for (long r = 0; r < rows; r++)
        manual_softmax_row(p + (size_t)r * T, T, d->causal, (int)(r % T));
    TB_TRY(tb_attn_lowp_cast(be, d, p, lp->p, heads * tt));
    for (size_t bh = 0; bh < heads; bh++) /* out = P V */
        TB_TRY(manual_gemm(be, d, 0, 0, T, D, T, 1.0f, p + bh * tt, lowp_at(lp->p, bh * tt), T,
                           v + bh * hd, lowp_at(lp->v, bh * hd), D, out + bh * hd, D));
    return TB_OK;
}

static int attn_fwd_manual(tb_backend *be, const tb_attn_desc *d, const float *q,
                           const float *k, const float *v, float *out, float *p)
{
    tb_attn_lowp lp;
    TB_TRY(tb_attn_lowp_get(be, d, 3, 1, &lp));
    return tb_attn_lowp_put(be, &lp, attn_fwd_manual_with(be, d, q, k, v, out, p, &lp));
}

static int attn_bwd_manual_with(tb_backend *be, const tb_attn_desc *d, const float *q,
                                const float *k, const float *v, const float *dout,
                                const float *p, float *ds, float *dq, float *dk, float *dv,
                                const tb_attn_lowp *lp)
{
    int T = d->seq, D = d->head_dim, t = threads_of(be);
    size_t heads = attn_heads(d), hd = (size_t)T * D, tt = (size_t)T * T;
    TB_TRY(tb_attn_lowp_cast(be, d, p, lp->p, heads * tt));
    TB_TRY(tb_attn_lowp_cast(be, d, dout, lp->dout, heads * hd));
    TB_TRY(tb_attn_lowp_cast(be, d, v, lp->v, heads * hd));
    for (size_t bh = 0; bh < heads; bh++) {
        /* dV = P^T dO; dP = dO V^T */
        TB_TRY(manual_gemm(be, d, 1, 0, T, D, T, 1.0f, p + bh * tt, lowp_at(lp->p, bh * tt), T,
                           dout + bh * hd, lowp_at(lp->dout, bh * hd), D, dv + bh * hd, D));
        TB_TRY(manual_gemm(be, d, 0, 1, T, T, D, 1.0f, dout + bh * hd,
                           lowp_at(lp->dout, bh * hd), D, v + bh * hd, lowp_at(lp->v, bh * hd),
                           D, ds + bh * tt, T));
    }
    long rows = (long)(heads * T);
#pragma omp parallel for num_threads(t) schedule(static) if ((size_t)rows * T >= PAR_MIN)
    for (long r = 0; r < rows; r++)
        manual_softmax_bwd_row(p + (size_t)r * T, ds + (size_t)r * T, T);
    TB_TRY(tb_attn_lowp_cast(be, d, ds, lp->ds, heads * tt));
    TB_TRY(tb_attn_lowp_cast(be, d, q, lp->q, heads * hd));
    TB_TRY(tb_attn_lowp_cast(be, d, k, lp->k, heads * hd));
    for (size_t bh = 0; bh < heads; bh++) {
        /* dQ = scale dS K; dK = scale dS^T Q */
        TB_TRY(manual_gemm(be, d, 0, 0, T, D, T, d->scale, ds + bh * tt,
                           lowp_at(lp->ds, bh * tt), T, k + bh * hd, lowp_at(lp->k, bh * hd), D,
                           dq + bh * hd, D));
        TB_TRY(manual_gemm(be, d, 1, 0, T, D, T, d->scale, ds + bh * tt,
                           lowp_at(lp->ds, bh * tt), T, q + bh * hd, lowp_at(lp->q, bh * hd), D,
                           dk + bh * hd, D));
    }
    return TB_OK;
}

static int attn_bwd_manual(tb_backend *be, const tb_attn_desc *d, const float *q,
                           const float *k, const float *v, const float *dout, const float *p,
                           float *dq, float *dk, float *dv)
{
    float *ds;
    TB_TRY(be->dev_alloc(be, (void **)&ds, sizeof(float) * attn_heads(d) * d->seq * d->seq));
    tb_attn_lowp lp;
    int rc = tb_attn_lowp_get(be, d, 4, 2, &lp);
    if (rc == TB_OK)
        rc = tb_attn_lowp_put(be, &lp,
                             attn_bwd_manual_with(be, d, q, k, v, dout, p, ds, dq, dk, dv, &lp));
    int rc2 = be->dev_free(be, ds);
    return rc != TB_OK ? rc : rc2;
}

/* ---- the slots ---- */

static int cpu_attention_workspace(tb_backend *be, tb_attn_variant variant,
                                   const tb_attn_desc *d, size_t *saved_bytes,
                                   size_t *temp_bytes)
{
    TB_TRY(tb_check_attention("attention_workspace", variant, d));
    size_t rows = attn_heads(d) * d->seq;
    size_t saved = sizeof(float) * rows * (variant == TB_ATTN_MANUAL ? (size_t)d->seq : 1);
    attn_geom g = attn_geom_of(d);
    int t = threads_of(be);
    size_t fwd = attn_ws_floats(&g, 0, t), bwd = attn_ws_floats(&g, 1, t);
    /* manual: dS, and under lowp the backward's copies */
    size_t temp = variant == TB_ATTN_MANUAL
                      ? sizeof(float) * rows * d->seq + tb_attn_lowp_bytes(d)
                      : sizeof(float) * (fwd > bwd ? fwd : bwd);
    if (saved_bytes)
        *saved_bytes = saved;
    if (temp_bytes)
        *temp_bytes = temp;
    return TB_OK;
}

static int cpu_attention_fwd(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                             const float *q, const float *k, const float *v, float *out,
                             float *saved)
{
    TB_TRY(tb_check_attention("attention_fwd", variant, d));
    if (variant == TB_ATTN_MANUAL)
        return attn_fwd_manual(be, d, q, k, v, out, saved);
    return attn_fwd_fused(be, d, q, k, v, out, saved);
}

static int cpu_attention_bwd(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                             const float *q, const float *k, const float *v, const float *out,
                             const float *dout, const float *saved, float *dq, float *dk,
                             float *dv)
{
    TB_TRY(tb_check_attention("attention_bwd", variant, d));
    if (variant == TB_ATTN_MANUAL)
        return attn_bwd_manual(be, d, q, k, v, dout, saved, dq, dk, dv);
    return attn_bwd_fused(be, d, q, k, v, out, dout, saved, dq, dk, dv);
}

int tb_cpu_install_attn_ops(tb_backend *be)
{
    be->attention_workspace = cpu_attention_workspace;
    be->attention_fwd = cpu_attention_fwd;
    be->attention_bwd = cpu_attention_bwd;
    return TB_OK;
}
