/*
 * graph.c - the CUDA backend's whole-step capture and device-side data
 * slots (lib/backend/backend.h): graph_begin/end/launch/destroy
 * (--cuda-graphs), augment_u8 (--augment-on-device) and labels_u8_to_i32
 * (--tensors-on-device).
 *
 * A tb_graph * is the cudaGraphExec_t itself. Capture is on the compute
 * stream in cudaStreamCaptureModeThreadLocal: another thread's unsafe calls
 * (a loader worker's cudaMalloc of pinned memory) do not invalidate it,
 * while this thread's do, which is what catches an op that allocates or
 * synchronizes inside the captured step.
 *
 * Unverified here (no GPU): it compiles and links; bench:selfcheck's
 * graph_begin case (capture a small op sequence, compare its replay with
 * direct execution) is what a GPU run checks first.
 */
#include <stdint.h>

#include "kernels/augment.h"
#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

static int cuda_graph_begin(tb_backend *be)
{
    TB_TRY(tb_cuda_bind(be));
    TB_CHECK_CUDA(cudaStreamBeginCapture(tb_cuda_ctx(be)->compute,
                                         cudaStreamCaptureModeThreadLocal));
    /* what the captured work frees or allocates is held while the graph
     * lives (tb_cuda_alloc_capture_begin) */
    tb_cuda_alloc_capture_begin(be);
    return TB_OK;
}

static int cuda_graph_end(tb_backend *be, tb_graph **g)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int rc = TB_OK;
    *g = NULL;
    /* Freed below also when ending fails: CUDA returns NULL for an
     * invalidated capture, but a graph it does return is ours. */
    TB_CHECK_CUDA_GOTO(rc, cudaStreamEndCapture(tb_cuda_ctx(be)->compute, &graph),
                       out_free_graph);
    TB_CHECK_CUDA_GOTO(rc, cudaGraphInstantiate(&exec, graph, 0), out_free_graph);
    *g = (tb_graph *)exec;
out_free_graph:
    if (graph) {
        cudaError_t e = cudaGraphDestroy(graph);
        if (e != cudaSuccess && rc == TB_OK)
            rc = TB_FAIL(TB_ERR_CUDA, "cudaGraphDestroy failed: %s", cudaGetErrorString(e));
    }
    /* with no executable graph nothing will replay: what it held goes back */
    int a_rc = tb_cuda_alloc_capture_end(be, *g != NULL);
    return rc != TB_OK ? rc : a_rc;
}

static int cuda_graph_launch(tb_backend *be, tb_graph *g)
{
    if (!g)
        return TB_FAIL(TB_ERR_INVALID, "graph_launch: NULL graph");
    TB_TRY(tb_cuda_bind(be));
    TB_CHECK_CUDA(cudaGraphLaunch((cudaGraphExec_t)g, tb_cuda_ctx(be)->compute));
    return TB_OK;
}

static int cuda_graph_destroy(tb_backend *be, tb_graph *g)
{
    if (!g)
        return TB_OK;
    int rc = tb_cuda_bind(be);
    if (rc != TB_OK) {
        /* the caller forgets g either way: so must the allocator's count */
        (void)tb_cuda_alloc_graph_destroyed(be);
        return rc;
    }
    cudaError_t e = cudaGraphExecDestroy((cudaGraphExec_t)g);
    /* gone either way: the last graph's held blocks go back */
    int a_rc = tb_cuda_alloc_graph_destroyed(be);
    if (e != cudaSuccess)
        return TB_FAIL(TB_ERR_CUDA, "cudaGraphExecDestroy failed: %s", cudaGetErrorString(e));
    return a_rc;
}

static int cuda_augment_u8(tb_backend *be, const tb_augment_desc *d, const uint8_t *src,
                           const int32_t *params, float *dst, int n)
{
    if (d->c < 1 || d->c > TB_AUGMENT_MAX_C || d->h < 1 || d->w < 1 || d->pad < 0 || n < 0)
        return TB_FAIL(TB_ERR_INVALID, "augment_u8: shape %dx%dx%d pad %d n %d (C <= %d)",
                       d->c, d->h, d->w, d->pad, n, TB_AUGMENT_MAX_C);
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_augment_u8(d, src, params, dst, n, (void *)tb_cuda_ctx(be)->compute);
}

static int cuda_labels_u8_to_i32(tb_backend *be, const uint8_t *src, int32_t *dst, int n)
{
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_labels_u8_to_i32(src, dst, n, (void *)tb_cuda_ctx(be)->compute);
}

void tb_cuda_install_graph(tb_backend *be)
{
    be->graph_begin = cuda_graph_begin;
    be->graph_end = cuda_graph_end;
    be->graph_launch = cuda_graph_launch;
    be->graph_destroy = cuda_graph_destroy;
    be->augment_u8 = cuda_augment_u8;
    be->labels_u8_to_i32 = cuda_labels_u8_to_i32;
}
