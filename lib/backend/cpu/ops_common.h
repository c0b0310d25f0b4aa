/*
 * ops_common.h - private to the CPU backend's own-kernel op files
 * (elementwise.c, reduce.c, dropout.c, batchnorm.c, pool.c, xent.c, optim.c,
 * attention.c, tokens.c): their thread count, their static split of work, their
 * ordered double sums and their scratch memory.
 *
 * Speed: OpenMP with ctx->threads threads and a static schedule; the inner
 * loops are `omp simd` so GCC vectorizes them at -O2 for the baseline
 * x86-64 ISA (GCC 12's -O2 cost model would not). Work below PAR_MIN
 * elements runs on one thread: waking a second costs more. Built with
 * -fno-math-errno (else sqrtf does not vectorize) and
 * -fno-trapping-math (else GCC keeps a branch around a multiply instead of
 * a select); neither changes a result (CPU_OPS_COPTS in BUILD).
 *
 * Determinism: every reduction has a fixed split that depends on the sizes
 * only, never on the thread count, and sums the parts in a fixed order, so
 * results are the same run to run and for any number of threads (each
 * file's header says its split).
 *
 * The per-element math comes from kernels/ *_math.h, shared with the CUDA
 * kernels; lib/backend/ref/ops.c is the plain reference each op is tested
 * against (lib/backend/cpu/ops_test.c: bazel test //lib/backend/cpu:cpu_ops_test).
 */
#ifndef TB_BACKEND_CPU_OPS_COMMON_H
#define TB_BACKEND_CPU_OPS_COMMON_H

#include <omp.h>
#include <stddef.h>
#include <stdlib.h>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/core/status.h"

#define PAR_MIN ((size_t)16384)

/* Scratch memory of one backend; lives in ((tb_cpu_ctx *)be->ctx)->ops. */
typedef struct cpu_ops_ws {
    float *tmp;        /* per-tensor optimizer temporaries, bn_fwd_infer invstd */
    size_t tmp_cap;    /* floats */
    size_t *off;       /* fused optimizer: first element of each tensor */
    size_t off_cap;
    void *lb;          /* large-batch optimizers: chunks, partial sums, scalars */
    size_t lb_cap;     /* bytes */
} cpu_ops_ws;

static inline int threads_of(tb_backend *be) { return ((tb_cpu_ctx *)be->ctx)->threads; }

static inline cpu_ops_ws *ws_of(tb_backend *be) { return ((tb_cpu_ctx *)be->ctx)->ops; }

/* *out = at least n floats of scratch, valid until the next op. */
static inline int ws_floats(tb_backend *be, size_t n, float **out)
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

static inline int ws_offsets(tb_backend *be, size_t n, size_t **out)
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

/* dst[i] = expr for every i in [0, n); expr reads the index i. One omp simd
 * loop split statically over t threads (one thread below PAR_MIN elements).
 * A macro rather than a function taking the math as a pointer, so that each
 * loop inlines its per-element function and vectorizes as if written out. */
#define PAR_MAP(t, n, dst, expr)                                                                  \
    do {                                                                                          \
        const int nthr_ = (t);                                                                    \
        const size_t len_ = (n);                                                                  \
        _Pragma("omp parallel for simd num_threads(nthr_) schedule(static) if (len_ >= PAR_MIN)") \
        for (size_t i = 0; i < len_; i++)                                                         \
            (dst)[i] = (expr);                                                                    \
    } while (0)

/* This thread's static share [*lo, *hi) of n items, inside a parallel region. */
static inline void thread_range(size_t n, size_t *lo, size_t *hi)
{
    size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    *lo = n * id / nt;
    *hi = n * (id + 1) / nt;
}

/* Sum of x[0, n) in double (reduce_sum, batch norm, layer norm). */
static inline double sum_f64(const float *x, size_t n)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s;
}

/* Each family file fills its slots of the table (pointers only).
 * tb_cpu_install_ops (ops_common.c) calls them all. */
void tb_cpu_install_elementwise(tb_backend *be); /* relu_*, add, axpby, bias_add */
void tb_cpu_install_reduce(tb_backend *be);      /* bias_grad, reduce_sum, count_nonfinite */
void tb_cpu_install_dropout(tb_backend *be);     /* dropout_* */
void tb_cpu_install_batchnorm(tb_backend *be);   /* bn_* */
void tb_cpu_install_pool(tb_backend *be);        /* pool_* */
void tb_cpu_install_xent(tb_backend *be);        /* softmax_xent_* */
void tb_cpu_install_optim(tb_backend *be);       /* opt_step */

#endif
