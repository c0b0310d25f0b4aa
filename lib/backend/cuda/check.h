/*
 * check.h - one checking macro per CUDA API, each recording file and
 * line on the error chain (lib/core/status.h) and returning the tb_err code.
 * Included only by files compiled when the CUDA toolkit is present
 * (lib/backend/cuda/backend.c, kernels/ (.cu files)).
 *
 *   TB_CHECK_CUDA(cudaMalloc(&p, n));
 *   TB_CHECK_LAUNCH();            after every kernel launch
 *   TB_CHECK_CUBLAS(cublasSgemm(...));
 *   TB_CHECK_CUDNN(cudnnConvolutionForward(...));
 *   TB_CHECK_NCCL(ncclAllReduce(...));
 * The _GOTO forms set rc and jump to a cleanup label instead of returning.
 *
 * A failed runtime call also clears the runtime's last error
 * (TB_CUDA_CLEAR): a recoverable failure the caller turns into an n/a row
 * (cudaHostAlloc or cudaGraphInstantiate out of memory) must not reappear
 * as the next setting's TB_CHECK_LAUNCH failure. A sticky error (an
 * illegal address) stays: the context itself is lost. Out of device
 * memory in cuBLAS or cuDNN (their ALLOC_FAILED statuses) is
 * TB_ERR_DEVICE_OOM, as the runtime's, so that the batch-size search
 * halves the batch instead of failing.
 */
#ifndef TB_CUDA_CHECK_H
#define TB_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "lib/core/status.h"

#define TB_CHECK_CUDA(call)                                                    \
    do {                                                                       \
        cudaError_t tb_e_ = (call);                                            \
        if (tb_e_ != cudaSuccess) {                                            \
            (void)cudaGetLastError(); /* TB_CUDA_CLEAR */                      \
            return tb_error_push(tb_e_ == cudaErrorMemoryAllocation            \
                                     ? TB_ERR_DEVICE_OOM : TB_ERR_CUDA,        \
                                 __FILE__, __LINE__, "%s failed: %s (%s, %d)", \
                                 #call, cudaGetErrorString(tb_e_),             \
                                 cudaGetErrorName(tb_e_), (int)tb_e_);         \
        }                                                                      \
    } while (0)

#define TB_CHECK_CUDA_GOTO(rc, call, label)                                    \
    do {                                                                       \
        cudaError_t tb_e_ = (call);                                            \
        if (tb_e_ != cudaSuccess) {                                            \
            (void)cudaGetLastError(); /* TB_CUDA_CLEAR */                      \
            (rc) = tb_error_push(tb_e_ == cudaErrorMemoryAllocation            \
                                     ? TB_ERR_DEVICE_OOM : TB_ERR_CUDA,        \
                                 __FILE__, __LINE__, "%s failed: %s (%s, %d)", \
                                 #call, cudaGetErrorString(tb_e_),             \
                                 cudaGetErrorName(tb_e_), (int)tb_e_);         \
            goto label;                                                        \
        }                                                                      \
    } while (0)

/* After every <<<...>>> launch: catches bad configurations at once. */
#define TB_CHECK_LAUNCH() TB_CHECK_CUDA(cudaGetLastError())

#define TB_CHECK_CUBLAS(call)                                                  \
    do {                                                                       \
        int tb_s_ = (int)(call);                                               \
        if (tb_s_ != 0)                                                        \
            return tb_error_push(tb_s_ == 3 /* CUBLAS_STATUS_ALLOC_FAILED */   \
                                     ? TB_ERR_DEVICE_OOM : TB_ERR_CUBLAS,      \
                                 __FILE__, __LINE__,                           \
                                 "%s failed: cuBLAS status %d", #call, tb_s_); \
    } while (0)

#define TB_CHECK_CUDNN(call)                                                   \
    do {                                                                       \
        int tb_s_ = (int)(call);                                               \
        if (tb_s_ != 0)                                                        \
            return tb_error_push(tb_s_ == 4004 /* ..._DEVICE_ALLOCATION_FAILED */ \
                                     ? TB_ERR_DEVICE_OOM : TB_ERR_CUDNN,       \
                                 __FILE__, __LINE__,                           \
                                 "%s failed: cuDNN status %d", #call, tb_s_);  \
    } while (0)

/* NCCL's own words for its result (ncclGetErrorString), where the file
 * includes nccl.h first; its number alone otherwise. */
#ifdef NCCL_H_
#define TB_NCCL_WORDS(s) ncclGetErrorString((ncclResult_t)(s))
#else
#define TB_NCCL_WORDS(s) "see nccl.h"
#endif
#define TB_CHECK_NCCL(call)                                                    \
    do {                                                                       \
        int tb_s_ = (int)(call);                                               \
        if (tb_s_ != 0)                                                        \
            return tb_error_push(TB_ERR_NCCL, __FILE__, __LINE__,              \
                                 "%s failed: NCCL result %d (%s); NCCL_DEBUG=WARN " \
                                 "says more", #call, tb_s_, TB_NCCL_WORDS(tb_s_)); \
    } while (0)

#endif
