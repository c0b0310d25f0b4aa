/*
 * dnnl.h - private to the CPU backend's oneDNN files (dnnl.c: the engine,
 * stream and caches; gemm.c: gemm, gemm_lowp; conv.c: conv_*): the shared
 * state, the checking macros and the helpers every primitive needs.
 *
 * Threads: oneDNN here runs on OpenMP and uses omp_get_max_threads() of the
 * calling thread, so every entry point sets it to ctx->threads and restores
 * it on the way out. Calls on one backend are serialized by a mutex: the
 * cached buffers are shared, and oneDNN already uses every thread per call.
 *
 * Mixed precision: bf16 with TB_MATH_LOWP. gemm_lowp is a matmul
 * with bf16 A and B and an f32 C; a bf16 convolution takes its inputs in
 * bf16 (fwd x, w; bwd data dy, w; bwd filter x, dy) and writes f32 outputs
 * (y, dx, dw, dbias), which oneDNN's bf16 implementations do natively, so
 * no cast follows. On CPUs with AVX-512 but without AVX512_BF16 oneDNN 2.6
 * runs bf16 through its avx512_core emulation; on CPUs without AVX-512 it
 * has no bf16 kernels at all, and bf16 runs widened to fp32 (bf16_mode
 * below; lib/backend/cpu/cast_test.c checks both paths on every CPU, and
 * bench:selfcheck shows which implementations run). fp16 is
 * TB_ERR_UNSUPPORTED: oneDNN 2.6 has no CPU fp16 convolution or matmul for
 * training.
 */
#ifndef TB_BACKEND_CPU_DNNL_H
#define TB_BACKEND_CPU_DNNL_H

#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/core/status.h"

/* Checks a dnnl_status_t; on failure records the call, file, line and
 * oneDNN's status name, and returns TB_ERR_DNNL (or jumps to label).
 * dnnl_unimplemented is TB_ERR_UNSUPPORTED instead: oneDNN has no
 * implementation of that primitive on this CPU (bf16 on a CPU without
 * AVX-512, for one), which callers report as an n/a row, not a failure. */
#define TB_DNNL_FAIL(st, expr)                                                    \
    ((st) == dnnl_unimplemented                                                   \
         ? tb_error_push(TB_ERR_UNSUPPORTED, __FILE__, __LINE__,                  \
                         "oneDNN has no implementation of %s on this CPU (%s)",   \
                         #expr, tb_cpu_dnnl_isa())                                \
         : tb_error_push(TB_ERR_DNNL, __FILE__, __LINE__, "%s: %s", #expr,        \
                         dnnl_status2str(st)))

#define TB_CHECK_DNNL(expr)                                                     \
    do {                                                                        \
        dnnl_status_t tb_dnnl_st_ = (expr);                                     \
        if (tb_dnnl_st_ != dnnl_success)                                        \
            return TB_DNNL_FAIL(tb_dnnl_st_, expr);                             \
    } while (0)

#define TB_CHECK_DNNL_GOTO(rc, expr, label)                                     \
    do {                                                                        \
        dnnl_status_t tb_dnnl_st_ = (expr);                                     \
        if (tb_dnnl_st_ != dnnl_success) {                                      \
            (rc) = TB_DNNL_FAIL(tb_dnnl_st_, expr);                             \
            goto label;                                                         \
        }                                                                       \
    } while (0)

/* What oneDNN can use for bf16 on this CPU, for messages: "its ISA:
 * avx512_core_bf16", "... avx512_core; ... emulates bf16", "... avx2, no
 * AVX-512: ... no bf16 kernels" or "... below avx2 ..." (dnnl.c). */
const char *tb_cpu_dnnl_isa(void);

/* ResNet-50 alone needs 74 convolution entries (25 shapes, 3 directions,
 * no data gradient for the stem) plus the evaluation batch's forwards: with
 * 64, LRU eviction on that cyclic order missed on every call, and each step
 * re-created (and re-JITted) every primitive. Every configuration a process
 * keeps alive needs its own entries (layout, precision, math mode, bias,
 * algorithm are in the key): the waterfall's 19 ResNet-50 trainers need
 * about 900 and its GPT-2 ones about 50 GEMMs; at 256 and 32 the trainers
 * that ran least recently found theirs evicted, re-created them inside
 * their timed steps, and a setting's step time swung between 21 and 31 ms
 * from one round to the next. So: 2048 and 512, found through a hash index
 * (cache_index below), not a scan of every slot per call. */
#define CONV_CACHE_SIZE 2048
#define CONV_BUCKETS 4096
#define GEMM_CACHE_SIZE 512
#define GEMM_BUCKETS 1024
#define FIND_TIMED_RUNS 3
#define FIND_CUTOFF 4.0f /* warm-ups this many times the best so far are not timed again */

/* One operand of a convolution as the caller passes it (user, in the
 * caller's layout) and as the implementation wants it (impl). When the two
 * differ, reorder converts user -> impl before the call (inputs) or
 * impl -> user after it (outputs), through the workspace at offset. */
typedef struct conv_operand {
    int arg;                  /* DNNL_ARG_SRC, ... */
    int is_output;
    dnnl_memory_t user;       /* data handle set on every call */
    dnnl_memory_t impl;       /* == user when no reorder */
    dnnl_primitive_t reorder; /* NULL when no reorder */
    size_t offset;            /* impl's storage in the workspace when reordered */
} conv_operand;

typedef struct conv_entry {
    int used;
    unsigned long last_use;   /* for eviction: least recently used goes */
    tb_conv_desc d;
    tb_conv_kind kind;
    int algo, has_bias;
    char name[64];
    dnnl_primitive_desc_t hint; /* forward pd a backward pd was made from */
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    conv_operand op[3];       /* fwd: x w y; bwd data: dy w dx; bwd filter: x dy dw */
    dnnl_memory_t bias;       /* bias or diff bias, in the caller's layout */
    dnnl_memory_t scratch;    /* oneDNN scratchpad, at workspace offset 0 */
    size_t ws_bytes;          /* scratchpad + reorder buffers */
    float *acc_w, *acc_b;     /* bwd filter with accumulate: computed here, then added */
    int matmul;               /* the matmul entry (conv.c): no primitive of its own,
                                 matrix products through the gemm cache */
    void *col;                /* matmul: x's patch matrix (NULL until needed) */
    float *dcol;              /* matmul: fp32 scratch: the patches' gradient (data
                                 gradient), or a bf16 dy widened (a filter gradient's
                                 bias gradient) */
    void *rows;               /* matmul on NCHW: y (fp32) or dy as (N*P*Q) x K rows */
} conv_entry;

typedef struct gemm_entry {
    int used;
    unsigned long last_use;
    int ta, tb, m, n, k, lda, ldb, ldc;
    uint32_t alpha_bits, beta_bits;
    tb_math math;
    tb_dtype dtype;           /* of A and B; C is f32 */
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, scratch;
    size_t ws_bytes;          /* scratchpad, at workspace offset 0 */
} gemm_entry;

/* A hash index over a cache's slots: each bucket chains the slots whose
 * key hashes to it. Links hold slot + 1 (0: none), so a calloc'd state
 * starts empty. */
typedef struct cache_index {
    int *head;                /* (buckets) first slot + 1 of each bucket */
    int *next;                /* (slots) next slot + 1 in the same bucket */
    uint32_t *hash;           /* (slots) the key hash of each indexed slot */
    int buckets;              /* a power of two */
} cache_index;

/* FNV-1a of n bytes, continuing from h (2166136261u to start). */
static inline uint32_t cache_hash(uint32_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static inline void cache_index_add(cache_index *ix, int slot, uint32_t h)
{
    int b = (int)(h & (uint32_t)(ix->buckets - 1));
    ix->hash[slot] = h;
    ix->next[slot] = ix->head[b];
    ix->head[b] = slot + 1;
}

/* Unlinks slot (which must be indexed) from its bucket. */
static inline void cache_index_remove(cache_index *ix, int slot)
{
    int *link = &ix->head[ix->hash[slot] & (uint32_t)(ix->buckets - 1)];
    while (*link && *link != slot + 1)
        link = &ix->next[*link - 1];
    if (*link)
        *link = ix->next[slot];
    ix->next[slot] = 0;
}

/* The slot a miss fills: the first unused one, else the least recently
 * used. used and last_use point at slot 0's fields of an array of entries
 * stride bytes apart (conv_entry, gemm_entry). A scan, on a miss only:
 * creating the primitive costs far more. */
static inline int cache_victim(const int *used, const unsigned long *last_use, size_t stride,
                               int slots)
{
    const char *u = (const char *)used, *l = (const char *)last_use;
    int v = 0;
    for (int i = 0; i < slots; i++) {
        if (!*(const int *)(u + i * stride))
            return i;
        if (*(const unsigned long *)(l + i * stride) < *(const unsigned long *)(l + v * stride))
            v = i;
    }
    return v;
}

/* The first slot + 1 of the bucket of hash h; walk on with ix->next[s - 1]. */
static inline int cache_index_first(const cache_index *ix, uint32_t h)
{
    return ix->head[h & (uint32_t)(ix->buckets - 1)];
}

typedef struct dnnl_state {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    pthread_mutex_t lock;
    unsigned long clock;
    void *ws;                 /* the shared workspace (see the file header) */
    size_t ws_bytes;
    conv_entry conv[CONV_CACHE_SIZE];
    gemm_entry gemm[GEMM_CACHE_SIZE];
    cache_index conv_ix, gemm_ix; /* over conv[] and gemm[]: their storage follows */
    int conv_head[CONV_BUCKETS], conv_next[CONV_CACHE_SIZE];
    uint32_t conv_hash[CONV_CACHE_SIZE];
    int gemm_head[GEMM_BUCKETS], gemm_next[GEMM_CACHE_SIZE];
    uint32_t gemm_hash[GEMM_CACHE_SIZE];
    int bf16;                 /* BF16_UNKNOWN, BF16_NATIVE or BF16_WIDENED */
    float *widened;           /* bf16 operands widened to fp32 (BF16_WIDENED) */
    size_t widened_bytes;
    float *out_f32;           /* a convolution's fp32 output before it is narrowed to
                                 bf16 (lowp_out where the primitive writes fp32) */
    size_t out_f32_bytes;
    void *dy_blocked;         /* conv_bwd's dy, reordered once for both gradients */
    size_t dy_blocked_bytes;
} dnnl_state;

/* How bf16 operands run. oneDNN 2.6 has bf16 kernels only from avx512_core
 * up (native bf16 with AVX512_BF16, emulated below it); on a CPU without
 * AVX-512 it has none, and bf16 runs WIDENED: each bf16 operand is
 * widened to fp32 (exactly: bf16 is fp32's upper half) and the fp32
 * primitive runs, accumulating in fp32 as the bf16 kernels do. The result
 * is a bf16 computation; its time is the cast plus fp32 work (what a bf16
 * autocast costs on such a CPU). Probed once per backend (bf16_mode). */
enum { BF16_UNKNOWN = 0, BF16_NATIVE = 1, BF16_WIDENED = 2 };
int bf16_mode(dnnl_state *st);
/* Widens the two bf16 operands a (na values) and b (nb) into st->widened
 * (grown with be->dev_alloc, so --mem-limit counts it); *wa and *wb point
 * at their fp32 copies. Caller holds the lock. */
int bf16_widen2(tb_backend *be, dnnl_state *st, const void *a, size_t na, const void *b,
                size_t nb, float **wa, float **wb);

static inline tb_cpu_ctx *ctx_of(tb_backend *be) { return (tb_cpu_ctx *)be->ctx; }
static inline dnnl_state *state_of(tb_backend *be) { return (dnnl_state *)ctx_of(be)->dnnl; }

/* ---- small helpers ---- */

/* Sets the OpenMP thread count oneDNN will use; returns the old one. */
static inline int threads_enter(tb_backend *be)
{
    int prev = omp_get_max_threads();
    omp_set_num_threads(ctx_of(be)->threads);
    return prev;
}

static inline void lock_enter(tb_backend *be, int *prev_threads)
{
    pthread_mutex_lock(&state_of(be)->lock);
    *prev_threads = threads_enter(be);
}

static inline void lock_leave(tb_backend *be, int prev_threads)
{
    omp_set_num_threads(prev_threads);
    pthread_mutex_unlock(&state_of(be)->lock);
}

static inline int check_math(tb_dtype dtype, tb_math math, const char *op)
{
    if (dtype == TB_F16)
        return TB_FAIL(TB_ERR_UNSUPPORTED,
                       "%s on the CPU backend: fp16 is n/a (oneDNN 2.6 has no CPU fp16 "
                       "training kernels; use bf16)", op);
    if (dtype != TB_F32 && dtype != TB_BF16)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown dtype %d", op, (int)dtype);
    if (math != TB_MATH_F32 && math != TB_MATH_TF32 && math != TB_MATH_LOWP)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown math mode %d", op, (int)math);
    if ((dtype == TB_BF16) != (math == TB_MATH_LOWP))
        return TB_FAIL(TB_ERR_INVALID, "%s: dtype %d with math %d (bf16 goes with TB_MATH_LOWP, "
                       "fp32 with F32 or TF32)", op, (int)dtype, (int)math);
    return TB_OK;
}

static inline dnnl_data_type_t dnnl_dt(tb_dtype dtype) { return dtype == TB_BF16 ? dnnl_bf16 : dnnl_f32; }

/* Attributes every primitive here gets: user scratchpad (its size is known
 * and its memory counted) and bf16 fpmath for TB_MATH_TF32. */
static inline int attr_create(dnnl_primitive_attr_t *attr, tb_math math)
{
    TB_CHECK_DNNL(dnnl_primitive_attr_create(attr));
    int rc = TB_OK;
    TB_CHECK_DNNL_GOTO(rc, dnnl_primitive_attr_set_scratchpad_mode(*attr,
                                                                   dnnl_scratchpad_mode_user),
                       out_destroy_attr);
    if (math == TB_MATH_TF32)
        TB_CHECK_DNNL_GOTO(rc, dnnl_primitive_attr_set_fpmath_mode(*attr, dnnl_fpmath_mode_bf16),
                           out_destroy_attr);
    return TB_OK;

out_destroy_attr:
    dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
    return rc;
}

#define WS_ALIGN 64

static inline size_t ws_round(size_t bytes) { return (bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

/* Grows the grow-only buffer *p of *have bytes to at least bytes, with
 * be->dev_alloc (so --mem-limit counts it); old contents are lost. */
static inline int buffer_reserve(tb_backend *be, void **p, size_t *have, size_t bytes)
{
    if (bytes <= *have)
        return TB_OK;
    if (*p)
        be->dev_free(be, *p);
    *p = NULL;
    *have = 0;
    TB_TRY(be->dev_alloc(be, p, bytes));
    *have = bytes;
    return TB_OK;
}

/* Grows the shared workspace to at least bytes; old contents are lost. */
static inline int workspace_reserve(tb_backend *be, dnnl_state *st, size_t bytes)
{
    return buffer_reserve(be, &st->ws, &st->ws_bytes, bytes);
}

/* A memory object whose storage is set on every call (workspace or user's). */
static inline int memory_unbound(dnnl_state *st, const dnnl_memory_desc_t *md, dnnl_memory_t *mem)
{
    TB_CHECK_DNNL(dnnl_memory_create(mem, md, st->engine, DNNL_MEMORY_NONE));
    return TB_OK;
}

static inline void memory_destroy(dnnl_memory_t *m)
{
    if (*m)
        dnnl_memory_destroy(*m);
    *m = NULL;
}

static inline void primitive_destroy(dnnl_primitive_t *p)
{
    if (*p)
        dnnl_primitive_destroy(*p);
    *p = NULL;
}

static inline void pd_destroy(dnnl_primitive_desc_t *pd)
{
    if (*pd)
        dnnl_primitive_desc_destroy(*pd);
    *pd = NULL;
}

static inline void dev_free_ptr(tb_backend *be, void **p)
{
    if (*p)
        be->dev_free(be, *p);
    *p = NULL;
}

/* c(m x n, ld ldc) = alpha op(a) op(b) + beta c, a and b in dtype (TB_F32;
 * TB_BF16, widened to fp32 where bf16_mode says so), math as the gemm slot's
 * (TB_MATH_LOWP for bf16): the gemm and gemm_lowp slots' product, for a
 * caller that holds the lock (those slots; conv.c's matmul entry). */
int tb_cpu_gemm_locked(tb_backend *be, tb_dtype dtype, tb_math math, int trans_a, int trans_b,
                       int m, int n, int k, float alpha, const void *a, int lda, const void *b,
                       int ldb, float beta, float *c, int ldc);

/* Each family fills its slots (pointers only) and frees its cached
 * primitives; dnnl.c's install and release call them. */
void tb_cpu_install_gemm(tb_backend *be);
void tb_cpu_install_conv(tb_backend *be);
void tb_cpu_gemm_cache_release(tb_backend *be);
void tb_cpu_conv_cache_release(tb_backend *be);

#endif
