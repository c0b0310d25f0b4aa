/*
 * cuda.h - private to the CUDA backend: its state (cuda_ctx) and the
 * functions its files share. Included only by files compiled where the CUDA
 * toolkit was found: the files of lib/backend/cuda/ and, for tb_cuda_bind,
 * tb_cuda_owns and the compute stream, lib/dist/comm_nccl.c.
 *
 * The backend is split by op family, one file each; a family that the CPU
 * backend also has lives in a file of the same name in lib/backend/cpu/:
 *   backend.c      creation, copies, streams, events, device info
 *   alloc.c        the caching device allocator (dev_alloc, mem_*)
 *   elementwise.c  relu_*, add, axpby, bias_add (kernels/elementwise.cu)
 *   gelu.c         gelu_*, gelu_tanh_* (kernels/gelu.cu)
 *   reduce.c       bias_grad, reduce_sum, count_nonfinite (kernels/reduce.cu)
 *   dropout.c      dropout_* (kernels/elementwise.cu)
 *   pool.c         pool_* (kernels/pool.cu)
 *   xent.c         softmax_xent_* (kernels/xent.cu)
 *   batchnorm.c    bn_* on cuDNN
 *   optim.c        opt_step, per tensor and fused (kernels/optim.cu)
 *   cast.c         cast_* (kernels/cast.cu)
 *   attention.c    layernorm_*, attention_* (kernels/attention.cu, layernorm.cu)
 *   tokens.c       embedding_* (kernels/tokens.cu)
 *   gemm.c         gemm on cuBLAS
 *   conv.c         conv_* on cuDNN (descriptor cache, autotuner)
 *   staging.c      host batches to the device (lib/backend/staging.h)
 *   graph.c        graph capture, augmentation and labels on the device
 * Each family file has a tb_cuda_install_<family>(be) that only stores
 * function pointers: filling the table touches no device, so the table
 * test (lib/backend/cuda/table_test.c) runs without a GPU.
 */
#ifndef TB_BACKEND_CUDA_H
#define TB_BACKEND_CUDA_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "lib/backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the caching allocator's state (lib/backend/cuda/alloc.c) ---- */
typedef struct cuda_block cuda_block;     /* a piece of a segment */
typedef struct cuda_segment cuda_segment; /* one cudaMalloc'd region */

#define TB_CUDA_NBINS 64 /* free lists by floor(log2(block size)) */

typedef struct cuda_pool {
    cuda_block *bins[TB_CUDA_NBINS];
} cuda_pool;

typedef struct cuda_allocator {
    tb_mem_mode mode;
    cuda_pool small, large;   /* requests <= 1 MiB, and the rest */
    cuda_segment *segments;   /* all of them, newest first */
    cuda_segment *reserve;    /* the preallocated segment, or NULL */
    cuda_block **live;        /* allocated blocks, sorted by address */
    size_t n_live, cap_live;
    size_t in_use, peak;      /* bytes callers asked for, live and high-water */
    size_t reserved;          /* bytes held from cudaMalloc */
    size_t limit;             /* on in_use; 0 = none */
    long device_mallocs, device_frees; /* cudaMalloc/cudaFree calls made */
    /* CUDA graphs (tb_cuda_alloc_capture_begin): a capture in progress, the
     * executable graphs alive, and the freed blocks they may still use */
    int capturing;
    int live_graphs;
    cuda_block *held;         /* on free_next; each still marked allocated */
    size_t held_bytes;        /* the held blocks' sizes */
    cuda_block *cap_free;     /* allocated and freed during the capture in progress: reused
                                 by its later allocations only (on free_next, marked
                                 allocated) */
    unsigned cap_gen;         /* captures begun so far: a block's cap_gen says which
                                 capture allocated it (0: none) */
} cuda_allocator;

/* ---- grow-only device scratch (workspaces, temporaries) ---- */
typedef struct cuda_scratch {
    void *p;
    size_t bytes;
} cuda_scratch;

/* Descriptor caches, defined and made on first use by their files. */
typedef struct cuda_conv_cache cuda_conv_cache; /* lib/backend/cuda/conv.c */
typedef struct cuda_bn_cache cuda_bn_cache;     /* lib/backend/cuda/batchnorm.c */

typedef struct cuda_ctx {
    cudaStream_t compute;      /* every op runs here; NULL tb_stream means this */
    cublasHandle_t cublas;     /* bound to compute */
    cudnnHandle_t cudnn;       /* bound to compute */
    cudaEvent_t peer_event;    /* copy_peer's ordering with another device's stream */
    unsigned long long peer_tried; /* bit d: peer access to cuda:d checked (and enabled
                                  where possible) from this device */

    cuda_allocator alloc;

    cuda_conv_cache *conv;     /* NULL until the first convolution */
    cuda_scratch conv_ws;      /* cuDNN workspace, grow-only */
    cuda_scratch conv_lowp;    /* lowp conv outputs before their cast to fp32 */
    cuda_bn_cache *bn;         /* NULL until the first batch norm */

    cuda_scratch reduce_part;  /* reduce_sum/count_nonfinite block partials */
    cuda_scratch col_part;     /* bias_grad, layernorm dgamma/dbeta chunk partials */
    cuda_scratch opt_tmp;      /* per-tensor optimizer temporaries */
    cuda_scratch opt_chunks;   /* fused optimizer: device chunk table */
    void *opt_built;           /* this step's chunk table, host */
    size_t opt_built_cap;
    void *opt_sent;            /* the table as on the device, to skip re-uploads */
    size_t opt_sent_bytes, opt_sent_cap;

    /* unfused GELU's intermediates: n floats each, kept and grown */
    float *gelu_tmp1, *gelu_tmp2;
    size_t gelu_tmp_n;
    float *gelu_tmp3;          /* the unfused tanh GELU backward's third */
    size_t gelu_tmp3_n;
} cuda_ctx;

static inline cuda_ctx *tb_cuda_ctx(tb_backend *be) { return (cuda_ctx *)be->ctx; }

/* Makes be's device current on the calling thread (lib/backend/cuda/backend.c). */
int tb_cuda_bind(tb_backend *be);

/* 1 if be was made by tb_backend_cuda_create (or filled by the test hook). */
int tb_cuda_owns(const tb_backend *be);

/* Fills every slot of the table without touching the device: the test
 * hook of lib/backend/cuda/table_test.c; tb_backend_cuda_create calls it too. */
void tb_backend_cuda_fill_table(tb_backend *be);

/* *p = at least `bytes` of device memory from be's allocator, kept in *s and
 * grown (never shrunk) across calls. Growing frees the old buffer first:
 * stream order makes that safe for work on the compute stream. */
int tb_cuda_scratch_get(tb_backend *be, cuda_scratch *s, size_t bytes, void **p);

/* ---- per-family installers (pointers only) and releasers ---- */
void tb_cuda_install_alloc(tb_backend *be);
void tb_cuda_install_gemm(tb_backend *be);
void tb_cuda_install_conv(tb_backend *be);
void tb_cuda_install_batchnorm(tb_backend *be);
void tb_cuda_install_elementwise(tb_backend *be);
void tb_cuda_install_gelu(tb_backend *be);
void tb_cuda_install_reduce(tb_backend *be);
void tb_cuda_install_dropout(tb_backend *be);
void tb_cuda_install_pool(tb_backend *be);
void tb_cuda_install_xent(tb_backend *be);
void tb_cuda_install_optim(tb_backend *be);
void tb_cuda_install_cast(tb_backend *be);  /* lib/backend/cuda/cast.c */
void tb_cuda_install_graph(tb_backend *be); /* lib/backend/cuda/graph.c */
void tb_cuda_install_tokens(tb_backend *be); /* lib/backend/cuda/tokens.c */
/* layernorm_fwd/bwd and attention_workspace/fwd/bwd (lib/backend/cuda/attention.c).
 * TB_OK. */
int tb_cuda_install_attn_ops(tb_backend *be);

/* Called by destroy, in this order, each keeping going after a failure and
 * returning the first: descriptors, then every device segment. */
int tb_cuda_conv_release(tb_backend *be);
int tb_cuda_bn_release(tb_backend *be);
void tb_cuda_optim_release(tb_backend *be);
int tb_cuda_alloc_release(tb_backend *be);

/* The allocator's table functions, also used inside the backend. */
int tb_cuda_dev_alloc(tb_backend *be, void **p, size_t bytes);
int tb_cuda_dev_free(tb_backend *be, void *p);

/* The allocator and CUDA graphs (lib/backend/cuda/graph.c), as PyTorch's
 * private graph pools: a replay writes the addresses its capture baked in,
 * so memory the capture used must not go back to the free lists while the
 * graph lives. Blocks freed during a capture (the captured step's
 * temporaries), blocks allocated during one, and blocks marked with
 * tb_cuda_alloc_mark_graph (grow-only scratch the captured work used) are
 * HELD when freed while a graph is alive: counted out of in_use, kept out
 * of the free lists, merged and reused only once the last graph is
 * destroyed (tb_cuda_alloc_graph_destroyed) or its capture failed.
 * Within a capture, what it freed serves its later allocations, as eager
 * execution's temporaries reuse each other (the graph replays them in the
 * same stream order): a GPT-2 step frees and allocates gigabytes of
 * per-layer temporaries, which a capture that never reused them would
 * have to find anew. A cudaMalloc the capture still needs is made in
 * relaxed capture mode (PyTorch's cudaMallocMaybeCapturing); an out of
 * memory during a capture empties no cache (cudaFree may not run there).
 * Buffers allocated before a capture stay their owner's to keep: the
 * trainer drops its graphs before it frees or reallocates them. */
void tb_cuda_alloc_capture_begin(tb_backend *be);
/* The capture ended: made is 1 when it gave an executable graph. */
int tb_cuda_alloc_capture_end(tb_backend *be, int made);
int tb_cuda_alloc_graph_destroyed(tb_backend *be);
/* Marks the live block at p as used by the capture in progress (no-op
 * outside one, or for a NULL p). */
void tb_cuda_alloc_mark_graph(tb_backend *be, const void *p);
/* Scratch that lives only inside one backend call (the autotuner's
 * operands and its workspace, up to half the free device memory): one
 * cudaMalloc and one cudaFree on be's device, outside the cache and the
 * counts, so it neither stays reserved afterwards nor shows as the run's
 * peak. Fails with TB_ERR_DEVICE_OOM; bytes == 0 gives NULL. */
int tb_cuda_transient_alloc(tb_backend *be, void **p, size_t bytes);
int tb_cuda_transient_free(tb_backend *be, void *p);

#ifdef __cplusplus
}
#endif
#endif
