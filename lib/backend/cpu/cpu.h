/*
 * cpu.h - private to the CPU backend (lib/backend/cpu/, visible to
 * //lib/backend/... only): its state (for the op family files), the
 * installers of those families and small CPU facts. The rest of the tree
 * reaches the backend through lib/backend/backend.h.
 */
#ifndef TB_BACKEND_CPU_H
#define TB_BACKEND_CPU_H

#include <stddef.h>

#include "lib/core/status.h"

typedef struct tb_cpu_ctx {
    int threads;     /* OpenMP threads every CPU kernel uses */
    size_t in_use;   /* bytes held through dev_alloc */
    size_t peak;     /* high-water mark of in_use */
    size_t limit;    /* 0 = none; see mem_set_limit */
    size_t budget;   /* 0 = unknown; what the machine had to spare at creation */
    const char *budget_source; /* where budget comes from, for messages */
    void *dnnl;      /* lib/backend/cpu/dnnl.c: engine, stream, primitive cache */
    void *ops;       /* lib/backend/cpu/ops_common.h: workspaces */
} tb_cpu_ctx;

/* Bytes the allocator may count out before the machine runs short: 15/16
 * of MemAvailable (/proc/meminfo, or the file $TB_TEST_MEMINFO names), or
 * 3/4 of the address-space limit when that is lower; 0 when neither is
 * known. *source says which, for messages. lib/backend/cpu/memavail.c. */
size_t tb_cpu_mem_budget(const char **source);

/* CLOCK_MONOTONIC in seconds. */
double tb_cpu_now_seconds(void);
/* "model name" from /proc/cpuinfo, or "unknown CPU". */
void tb_cpu_model_name(char *out, size_t cap);
/* Space-separated SIMD features this CPU has, among those tunebench uses. */
void tb_cpu_flags(char *out, size_t cap);
int tb_cpu_has_avx512_fp16(void);

/* Op families fill their slots of the CPU backend's table; each lives in its
 * own file. REQUIRES: be->ctx is a tb_cpu_ctx. */
struct tb_backend;
int tb_cpu_install_dnnl_ops(struct tb_backend *be);  /* gemm.c, conv.c: lib/backend/cpu/dnnl.c */
int tb_cpu_install_ops(struct tb_backend *be);       /* the rest: lib/backend/cpu/ops_common.c */
int tb_cpu_install_attn_ops(struct tb_backend *be);  /* attention_*: lib/backend/cpu/attention.c */
int tb_cpu_install_ln_ops(struct tb_backend *be);    /* layernorm_*: lib/backend/cpu/layernorm.c */
int tb_cpu_install_cast_ops(struct tb_backend *be);  /* cast_*: lib/backend/cpu/cast.c */
int tb_cpu_install_token_ops(struct tb_backend *be); /* embedding_*: lib/backend/cpu/tokens.c */
void tb_cpu_release_dnnl_ops(struct tb_backend *be); /* primitive caches */

/* xent_lse's code paths (lib/backend/cpu/xent.c), the same bits on each;
 * the best this CPU runs unless a test forces one (process-wide, not while
 * other threads run it). TB_ERR_UNSUPPORTED where the CPU lacks it. */
enum { TB_CPU_PATH_AUTO = 0, TB_CPU_PATH_GENERIC = 1, TB_CPU_PATH_AVX2 = 2, TB_CPU_PATH_AVX512 = 3 };

/* The code paths a kernel family has (a mask of 1 << TB_CPU_PATH_*), and
 * for each family's path switch (tb_cpu_*_set_path and the path in use):
 * the best of them that supported(path) says this CPU runs, GENERIC at
 * least; and a test's forcing of one into *forced: AUTO (the best again),
 * or a known path this CPU runs, else TB_ERR_INVALID (unknown) or
 * TB_ERR_UNSUPPORTED, `what` naming the family in the message. */
#define TB_CPU_PATHS_GENERIC_AVX512 ((1u << TB_CPU_PATH_GENERIC) | (1u << TB_CPU_PATH_AVX512))
#define TB_CPU_PATHS_ALL (TB_CPU_PATHS_GENERIC_AVX512 | (1u << TB_CPU_PATH_AVX2))

static inline int tb_cpu_path_best(unsigned known, int (*supported)(int))
{
    for (int p = TB_CPU_PATH_AVX512; p > TB_CPU_PATH_GENERIC; p--)
        if ((known >> p & 1u) && supported(p))
            return p;
    return TB_CPU_PATH_GENERIC;
}

static inline int tb_cpu_path_force(int *forced, int path, unsigned known,
                                    int (*supported)(int), const char *what)
{
    if (path != TB_CPU_PATH_AUTO && (path < 0 || path > TB_CPU_PATH_AVX512 || !(known >> path & 1u)))
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown code path %d", what, path);
    if (path != TB_CPU_PATH_AUTO && !supported(path))
        return TB_FAIL(TB_ERR_UNSUPPORTED, "%s: this CPU cannot run code path %d", what, path);
    *forced = path;
    return TB_OK;
}
int tb_cpu_xent_lse_set_path(int path);
int tb_cpu_xent_lse_path(void); /* the path in use (never AUTO) */
void tb_cpu_release_ops(struct tb_backend *be);
/* gemm and gemm_lowp pack a strided B or C dense around oneDNN's call
 * (lib/backend/cpu/gemm.c); 0 turns that off (tests; process-wide, not
 * while other threads call gemm). */
void tb_cpu_gemm_set_pack(int on);

/* Fused attention's tile kernels (lib/backend/cpu/attention.c), the same
 * way: TB_CPU_PATH_*; the paths agree within rounding (FMA or not), not
 * bitwise. */
int tb_cpu_attn_set_path(int path);
int tb_cpu_attn_path(void); /* the path in use (never AUTO) */

/* pool_fwd/bwd's bf16 NCHW 2x2 stride-2 max pooling (lib/backend/cpu/
 * pool.c): GENERIC (pool_body.h's loops) or AVX512, the same bits (NaN
 * payloads aside); forced as cast's are (tests only). */
int tb_cpu_pool_set_path(int path);
int tb_cpu_pool_path(void); /* the path in use (never AUTO) */

/* How many conv_bwd calls reordered dy once for both gradients
 * (lib/backend/cpu/conv.c: conv_bwd_both), for tests. */
long tb_cpu_conv_bwd_shared_calls(void);

/* cast_f32_to_lowp's bf16 code paths (lib/backend/cpu/cast.c): GENERIC or
 * AVX512, the same bits; forced as xent_lse's are (tests only). */
int tb_cpu_cast_set_path(int path);
int tb_cpu_cast_path(void); /* the path in use (never AUTO) */

/* bf16 GEMM and convolution (lib/backend/cpu/dnnl.h: bf16_mode): 1 when
 * they run widened to fp32 (a CPU without AVX-512, where oneDNN 2.6 has no
 * bf16 kernels), 0 on oneDNN's bf16 kernels. tb_cpu_bf16_force_widened(be,
 * 1) makes a CPU that has them widen too, so that path is tested on every
 * machine; 0 goes back to what the CPU has. Not while other threads call. */
int tb_cpu_bf16_widened(struct tb_backend *be);
void tb_cpu_bf16_force_widened(struct tb_backend *be, int on);

#endif
