/*
 * tokens.h - launchers for kernels/tokens.cu, callable from C without CUDA
 * headers (lib/backend/cuda/tokens.c: the CUDA backend's embedding_fwd and
 * embedding_bwd, lib/backend/backend.h).
 *
 * Token ids live in device memory, so they cannot be checked on the host
 * without a sync: a token outside [0, vocab) gives its row of y NaN in the
 * forward (never a read outside wte), and adds nothing to dwte in the
 * backward (its position still gets dy), which the loss read-out and
 * anomaly detection see. The CPU backend refuses such a call instead.
 *
 * Pointers are device memory; stream is a cudaStream_t; launches are
 * asynchronous. Returns TB_OK or TB_ERR_CUDA (file and line on the chain).
 * REQUIRES: the arguments passed tb_check_embedding (lib/backend/checks.h).
 */
#ifndef TB_KERNELS_TOKENS_H
#define TB_KERNELS_TOKENS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[r, :] = wte[tokens[r], :] + wpe[r % seq, :] for r < rows; d columns. */
int tb_cuda_embedding_fwd(const int32_t *tokens, const float *wte, const float *wpe, int rows,
                          int seq, int d, int vocab, float *y, void *stream);
/* dwte rows [0, vocab) and dwpe rows [0, seq), written (accumulate 0) or
 * added to, each element's sum over r in increasing order. */
int tb_cuda_embedding_bwd(const int32_t *tokens, const float *dy, int rows, int seq, int d,
                          int vocab, float *dwte, int accumulate_wte, float *dwpe,
                          int accumulate_wpe, void *stream);

#ifdef __cplusplus
}
#endif
#endif
