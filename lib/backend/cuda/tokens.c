/*
 * tokens.c - the CUDA backend's token-model embedding slots, embedding_fwd
 * and embedding_bwd (kernels/tokens.cu, whose header gives the kernels and
 * what they cost). Arguments are checked on the host with the CPU
 * backend's rules (tb_check_embedding); the one check the GPU cannot make
 * on the host is the token ids' range (they live in device memory): see
 * kernels/tokens.h for what a bad id does.
 *
 * Nothing here synchronizes: results are ready once the compute stream is.
 */
#include <stdint.h>

#include "kernels/tokens.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

static int cuda_embedding_fwd(tb_backend *be, const int32_t *tokens, const float *wte,
                              const float *wpe, int rows, int seq, int d, int vocab, float *y)
{
    TB_TRY(tb_check_embedding("embedding_fwd", rows, seq, d, vocab));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_embedding_fwd(tokens, wte, wpe, rows, seq, d, vocab, y, stream_of(be));
}

static int cuda_embedding_bwd(tb_backend *be, const int32_t *tokens, const float *dy, int rows,
                              int seq, int d, int vocab, float *dwte, int accumulate_wte,
                              float *dwpe, int accumulate_wpe)
{
    TB_TRY(tb_check_embedding("embedding_bwd", rows, seq, d, vocab));
    TB_TRY(tb_cuda_bind(be));
    return tb_cuda_embedding_bwd(tokens, dy, rows, seq, d, vocab, dwte, accumulate_wte, dwpe,
                                 accumulate_wpe, stream_of(be));
}

void tb_cuda_install_tokens(tb_backend *be)
{
    be->embedding_fwd = cuda_embedding_fwd;
    be->embedding_bwd = cuda_embedding_bwd;
}
