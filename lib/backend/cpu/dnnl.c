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
#include <stdlib.h>

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
    if (st->stream)
        dnnl_stream_destroy(st->stream);
    if (st->engine)
        dnnl_engine_destroy(st->engine);
    pthread_mutex_destroy(&st->lock);
    free(st);
    ctx_of(be)->dnnl = NULL;
}
