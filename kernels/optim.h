/*
 * optim.h - launchers for kernels/optim.cu, callable from C without CUDA
 * headers (lib/backend/cuda/optim.c: the CUDA backend's opt_step).
 *
 * Per tensor: tb_cuda_opt_pass runs one element-wise pass, one PyTorch
 * in-place op (kernels/optim_math.h's tb_opt_step_*), over n elements; the
 * caller strings them together as PyTorch's for-loop optimizers do.
 * Fused: tb_cuda_opt_fused runs ONE kernel over a device table of chunks
 * covering every tensor (multi-tensor apply), each element updated once in
 * registers by tb_sgd_elem / tb_adamw_elem.
 *
 * Pointers are device memory (the chunk table too); stream is a
 * cudaStream_t; launches are asynchronous. Returns TB_OK, TB_ERR_INVALID,
 * or TB_ERR_CUDA (file and line on the error chain).
 */
#ifndef TB_KERNELS_OPTIM_H
#define TB_KERNELS_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/optim_math.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_opt_pass {
    TB_PASS_MUL = 0,        /* dst = a * k                 a.mul(k)                  */
    TB_PASS_ADD = 1,        /* dst = a + k b               a.add(b, alpha=k)         */
    TB_PASS_COPY = 2,       /* dst = a                     buf = clone(d_p)          */
    TB_PASS_ADDCMUL = 3,    /* dst = dst + k a b           dst.addcmul_(a, b, k)     */
    TB_PASS_SQRT = 4,       /* dst = sqrt(a)               a.sqrt()                  */
    TB_PASS_DIV = 5,        /* dst = dst / k               dst.div_(k)               */
    TB_PASS_ADD_SCALAR = 6, /* dst = dst + k               dst.add_(k)               */
    TB_PASS_ADDCDIV = 7,    /* dst = dst + k a / b         dst.addcdiv_(a, b, k)     */
} tb_opt_pass;

int tb_cuda_opt_pass(tb_opt_pass pass, float *dst, const float *a, const float *b, float k,
                     size_t n, void *stream);

/* One chunk of at most TB_OPT_CHUNK elements of one tensor; state pointers
 * NULL where the optimizer keeps none. */
typedef struct tb_opt_chunk {
    float *param;
    const float *grad;
    float *state1, *state2;
    uint64_t n;
    float *tensor_state;      /* the tensor's tb_param_view.tensor_state (NovoGrad) */
    int tensor;               /* index of the tensor the chunk belongs to */
    int no_adapt;             /* the tensor's tb_param_view.no_adapt */
} tb_opt_chunk;

#define TB_OPT_CHUNK 65536

typedef enum tb_opt_fused_kind { TB_FUSED_SGD = 0, TB_FUSED_ADAMW = 1 } tb_opt_fused_kind;

/* One launch, one block per chunk. sgd / adamw: the coefficients of the
 * kind given (the other may be NULL). */
int tb_cuda_opt_fused(tb_opt_fused_kind kind, const tb_sgd_coef *sgd, const tb_adamw_coef *adamw,
                      const tb_opt_chunk *chunks, int nchunks, void *stream);

/* ---- large-batch optimizers (LARS, LAMB, NovoGrad): three launches over
 * a chunk table whose chunks of one tensor are consecutive:
 *   partial  one block per chunk: phase 1 (LAMB's moments) and the chunk's
 *            two sums of squares, float, into partial[2 * chunk]
 *   scalar   one thread per chunk; the first chunk of each tensor adds its
 *            tensor's partials in order (double), computes the per-tensor
 *            scalar into scalars[tensor] and advances NovoGrad's state
 *   apply    one block per chunk: phase 2 with scalars[chunk.tensor]
 * Per tensor: the caller launches the three for one tensor's chunks at a
 * time (chunks and partial offset alike); fused: once over all. No atomics:
 * the result does not depend on scheduling. */
/* partial: 2 * nchunks floats; scalars: one float per tensor index. */
int tb_cuda_opt_lb(const tb_lb_coefs *k, const tb_opt_chunk *chunks, int nchunks, float *partial,
                   float *scalars, void *stream);

#ifdef __cplusplus
}
#endif
#endif
