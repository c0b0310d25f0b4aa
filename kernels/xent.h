/*
 * xent.h - launchers for kernels/xent.cu, callable from C without CUDA
 * headers (lib/backend/cuda/xent.c: the CUDA backend's softmax_xent_fwd/bwd
 * and xent_lse_fwd/bwd).
 *
 * Labels live in device memory, so they cannot be checked on the host
 * without a sync: a label outside [0, classes) gives that row a NaN loss
 * in the forward (and no one-hot term in the backward), which the loss
 * read-out and anomaly detection see.
 *
 * Pointers are device memory; stream is a cudaStream_t; launches are
 * asynchronous. Returns TB_OK or TB_ERR_CUDA (file and line on the chain).
 */
#ifndef TB_KERNELS_XENT_H
#define TB_KERNELS_XENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* probs(rows x classes) = softmax(logits); loss[r] = -log probs[r][label]. */
int tb_cuda_softmax_xent_fwd(const float *logits, const int32_t *labels, int rows, int classes,
                             float *probs, float *loss, void *stream);
/* dlogits = scale * (probs - onehot(labels)) */
int tb_cuda_softmax_xent_bwd(const float *probs, const int32_t *labels, int rows, int classes,
                             float scale, float *dlogits, void *stream);

/* lse[r] = logsumexp(logits[r, :]); loss[r] = lse[r] - logits[r][label]
 * (NaN for a label outside [0, classes)). One block per row. */
int tb_cuda_xent_lse_fwd(const float *logits, const int32_t *labels, int rows, int classes,
                         float *loss, float *lse, void *stream);
/* dlogits = scale * (exp(logits - lse) - onehot(labels)); dlogits may be
 * logits (in place). */
int tb_cuda_xent_lse_bwd(const float *logits, const float *lse, const int32_t *labels, int rows,
                         int classes, float scale, float *dlogits, void *stream);

#ifdef __cplusplus
}
#endif
#endif
