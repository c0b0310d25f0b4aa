/*
 * dnnl.c - the CPU backend's oneDNN 2.6 state: engine, stream, the lock,
 * the shared workspace and the primitive caches of gemm.c and conv.c
 * (lib/backend/cpu/backend.c calls tb_cpu_install_dnnl_ops). Test:
 *   bazel test //lib/backend/cpu:cpu_dnnl_test
 *
 * Primitives are cached by (desc, kind, algo, bias or not): creating one
 * costs far more than a small convolution, and a changed batch size is a new
 * desc, so it creates new ones (the autotuner benchmark shows that cost).
 * Reorder buffers and oneDNN scratchpads ("user" scratchpad mode, so the
 * size is known) live in one workspace shared by all primitives, grown to
 * the largest need with be->dev_alloc (so --mem-limit counts it), as
 * cuDNN's workspace is: cached entries for stale batch sizes then hold no
 * big buffers. conv_find reports that need (scratchpad + reorder buffers)
 * as each algorithm's workspace.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/backend/cpu/cpu.h"
#include "lib/backend/cpu/dnnl.h"
#include "lib/core/status.h"

int tb_cpu_install_dnnl_ops(tb_backend *be)
{
    tb_cpu_ctx *c = ctx_of(be);
    dnnl_state *st = calloc(1, sizeof *st);
    if (!st)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for oneDNN state");
    pthread_mutex_init(&st->lock, NULL);
    st->conv_ix = (cache_index){st->conv_head, st->conv_next, st->conv_hash, CONV_BUCKETS};
    st->gemm_ix = (cache_index){st->gemm_head, st->gemm_next, st->gemm_hash, GEMM_BUCKETS};
    c->dnnl = st;
    int prev = threads_enter(be);
    int rc = TB_OK;
    /* oneDNN 2.6's implementation iterator consults its primitive cache and,
     * after a hit, yields some implementations twice, so the list (and what
     * an algorithm id means) would change once primitives exist. This file
     * caches its own primitives; turn oneDNN's process-wide cache off. */
    TB_CHECK_DNNL_GOTO(rc, dnnl_set_primitive_cache_capacity(0), out_release);
    TB_CHECK_DNNL_GOTO(rc, dnnl_engine_create(&st->engine, dnnl_cpu, 0), out_release);
    TB_CHECK_DNNL_GOTO(rc, dnnl_stream_create(&st->stream, st->engine,
                                              dnnl_stream_default_flags), out_release);
    omp_set_num_threads(prev);
    tb_cpu_install_gemm(be);
    tb_cpu_install_conv(be);
    return TB_OK;

out_release:
    omp_set_num_threads(prev);
    tb_cpu_release_dnnl_ops(be);
    return rc;
}

void tb_cpu_release_dnnl_ops(tb_backend *be)
{
    if (!be || !be->ctx)
        return;
    dnnl_state *st = state_of(be);
    if (!st)
        return;
    tb_cpu_conv_cache_release(be);
    tb_cpu_gemm_cache_release(be);
    dev_free_ptr(be, &st->ws);
    dev_free_ptr(be, (void **)&st->widened);
    dev_free_ptr(be, (void **)&st->out_f32);
    dev_free_ptr(be, &st->dy_blocked);
    if (st->stream)
        dnnl_stream_destroy(st->stream);
    if (st->engine)
        dnnl_engine_destroy(st->engine);
    pthread_mutex_destroy(&st->lock);
    free(st);
    ctx_of(be)->dnnl = NULL;
}

const char *tb_cpu_dnnl_isa(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16"))
        return "its ISA: avx512_core_bf16";
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return "its ISA: avx512_core; oneDNN 2.6 emulates bf16 there";
    if (__builtin_cpu_supports("avx2"))
        return "its ISA: avx2, no AVX-512: oneDNN 2.6 has no bf16 kernels for it";
    return "its ISA is below avx2: oneDNN 2.6 has no bf16 kernels for it";
}

/* Whether oneDNN has a bf16 matmul on this CPU: one small primitive
 * descriptor, asked once. Caller holds the lock. */
int bf16_mode(dnnl_state *st)
{
    if (st->bf16 != BF16_UNKNOWN)
        return st->bf16;
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t dims = {16, 16};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_memory_desc_init_by_tag(&a, 2, dims, dnnl_bf16, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&b, 2, dims, dnnl_bf16, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&c, 2, dims, dnnl_f32, dnnl_ab) == dnnl_success &&
             dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &md, NULL, st->engine, NULL) == dnnl_success;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    st->bf16 = ok ? BF16_NATIVE : BF16_WIDENED;
    return st->bf16;
}

static void widen(const uint16_t *src, float *dst, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &bits, sizeof bits);
    }
}

int bf16_widen2(tb_backend *be, dnnl_state *st, const void *a, size_t na, const void *b,
                size_t nb, float **wa, float **wb)
{
    size_t at = ws_round(na * sizeof(float)) / sizeof(float);
    size_t bytes = (at + nb) * sizeof(float);
    TB_TRY(buffer_reserve(be, (void **)&st->widened, &st->widened_bytes, bytes));
    widen(a, st->widened, na);
    widen(b, st->widened + at, nb);
    *wa = st->widened;
    *wb = st->widened + at;
    return TB_OK;
}

int tb_cpu_bf16_widened(tb_backend *be)
{
    int prev;
    lock_enter(be, &prev);
    int widened = bf16_mode(state_of(be)) == BF16_WIDENED;
    lock_leave(be, prev);
    return widened;
}

void tb_cpu_bf16_force_widened(tb_backend *be, int on)
{
    int prev;
    lock_enter(be, &prev);
    state_of(be)->bf16 = on ? BF16_WIDENED : BF16_UNKNOWN;
    lock_leave(be, prev);
}
