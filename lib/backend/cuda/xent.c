/*
 * xent.c - the CUDA backend's softmax_xent_fwd/bwd and xent_lse_fwd/bwd
 * (kernels/xent.cu). The one
 * check the GPU cannot make on the host is the labels' range (they live in
 * device memory): see kernels/xent.h.
 *
 * Nothing here synchronizes: results are ready once the compute stream is.
 */
#include <stdint.h>

#include "kernels/xent.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

static int cuda_softmax_xent_fwd(tb_backend *be, const float *logits, const int32_t *labels,
                                 int rows, int classes, float *probs, float *loss)
{
    TB_TRY(tb_check_xent(rows, classes));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_softmax_xent_fwd(logits, labels, rows, classes, probs, loss, stream_of(be));
}

static int cuda_softmax_xent_bwd(tb_backend *be, const float *probs, const int32_t *labels,
                                 int rows, int classes, float scale, float *dlogits)
{
    TB_TRY(tb_check_xent(rows, classes));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_softmax_xent_bwd(probs, labels, rows, classes, scale, dlogits, stream_of(be));
}

static int cuda_xent_lse_fwd(tb_backend *be, const float *logits, const int32_t *labels, int rows,
                             int classes, float *loss, float *lse)
{
    TB_TRY(tb_check_xent(rows, classes));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_xent_lse_fwd(logits, labels, rows, classes, loss, lse, stream_of(be));
}

static int cuda_xent_lse_bwd(tb_backend *be, const float *logits, const float *lse,
                             const int32_t *labels, int rows, int classes, float scale,
                             float *dlogits)
{
    TB_TRY(tb_check_xent(rows, classes));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_xent_lse_bwd(logits, lse, labels, rows, classes, scale, dlogits,
                                stream_of(be));
}

void tb_cuda_install_xent(tb_backend *be)
{
    be->softmax_xent_fwd = cuda_softmax_xent_fwd;
    be->softmax_xent_bwd = cuda_softmax_xent_bwd;
    be->xent_lse_fwd = cuda_xent_lse_fwd;
    be->xent_lse_bwd = cuda_xent_lse_bwd;
}
