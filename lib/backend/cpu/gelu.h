/*
 * gelu.h - fused and unfused GELU, forward and backward, on the CPU:
 * the CPU backend's gelu_fwd/gelu_bwd slots (exact erf) and
 * gelu_tanh_fwd/gelu_tanh_bwd (the tanh form), lib/backend/cpu/backend.c.
 *
 *   fused:   one pass over memory (read x, write y).
 *   unfused: the five element-wise passes of eager PyTorch's
 *            x * 0.5 * (1 + erf(x * M_SQRT1_2)) through two temporaries,
 *            and ten passes for the backward (see lib/backend/cpu/gelu.c).
 * Both compute the per-element math of kernels/gelu_math.h, the same math
 * the CUDA kernels run, and give bitwise the same results as each other.
 *
 * Work is split over OpenMP threads in one contiguous chunk per thread
 * (static). The instruction set is chosen at run time: AVX-512 when the CPU
 * has it, else AVX2+FMA, else generic C (correct, but its fmaf calls make it
 * slow); tests force each path with tb_cpu_gelu_set_isa.
 *
 * Test: bazel test //lib/backend/cpu:gelu_cpu_test
 */
#ifndef TB_GELU_CPU_H
#define TB_GELU_CPU_H

#include <stddef.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_cpu_isa {
    TB_ISA_AUTO = 0,    /* the best this CPU supports */
    TB_ISA_GENERIC = 1, /* baseline x86-64 (or any) C, compiler-vectorized */
    TB_ISA_AVX2 = 2,    /* the same C compiled for AVX2 + FMA */
    TB_ISA_AVX512 = 3,  /* AVX-512F intrinsics */
} tb_cpu_isa;

/* Selects the code path for all later calls, process-wide; call it before
 * starting work, not while other threads run GELU. TB_ISA_AUTO picks the
 * best. Fails with TB_ERR_UNSUPPORTED when the CPU lacks that ISA and
 * TB_ERR_INVALID for an unknown value; the selection is unchanged then. */
int tb_cpu_gelu_set_isa(tb_cpu_isa isa);
tb_cpu_isa tb_cpu_gelu_isa(void);          /* the path in use (never AUTO) */
int tb_cpu_isa_supported(tb_cpu_isa isa);  /* 1 if this CPU can run it */
const char *tb_cpu_isa_name(tb_cpu_isa isa); /* "generic", "avx2", "avx512" */

/* y = gelu(x), n elements. threads: OpenMP threads, 0 = all cores.
 * The unfused variant uses two n-float temporaries from a per-thread cache
 * that grows as needed (TB_ERR_NOMEM if it cannot); tb_cpu_gelu_ws_free
 * releases it. y may equal x. */
int tb_cpu_gelu_fwd(tb_gelu_variant v, const float *x, float *y, size_t n, int threads);

/* dx = dy * gelu'(x), written, not accumulated. dx may equal x or dy. */
int tb_cpu_gelu_bwd(tb_gelu_variant v, const float *x, const float *dy, float *dx, size_t n,
                    int threads);

/* The same with caller-owned temporaries (n floats each, distinct from the
 * other arguments), for callers that count memory through their own
 * allocator. tmp1 and tmp2 may be NULL for the fused variant. */
int tb_cpu_gelu_fwd_ws(tb_gelu_variant v, const float *x, float *y, size_t n, int threads,
                       float *tmp1, float *tmp2);
int tb_cpu_gelu_bwd_ws(tb_gelu_variant v, const float *x, const float *dy, float *dx, size_t n,
                       int threads, float *tmp1, float *tmp2);

/* The tanh GELU (TB_GELU_TANH; kernels/gelu_math.h's tb_gelu_tanh_*_f):
 * fused, one pass; unfused, nanoGPT's NewGELU as eager PyTorch runs it,
 * eight passes forward through two temporaries and seventeen backward
 * through three, from the same per-thread cache. Same arguments, aliasing
 * and statuses as tb_cpu_gelu_fwd / tb_cpu_gelu_bwd. */
int tb_cpu_gelu_tanh_fwd(tb_gelu_variant v, const float *x, float *y, size_t n, int threads);
int tb_cpu_gelu_tanh_bwd(tb_gelu_variant v, const float *x, const float *dy, float *dx, size_t n,
                         int threads);

/* Frees the calling thread's temporaries cache (a no-op when empty). */
void tb_cpu_gelu_ws_free(void);

#ifdef __cplusplus
}
#endif
#endif
