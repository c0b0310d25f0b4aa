/*
 * syncbn.h - SyncBatchNorm (torch.nn.SyncBatchNorm): batch norm whose
 * statistics cover the global batch, all ranks' shards together.
 *
 * Forward (training): each rank sums x and x^2 per channel over its shard
 * and counts its samples; one all-reduce (in double) of (sum, sum of
 * squares, count) gives every rank the global mean and biased variance,
 * which normalize its shard and update the running statistics (PyTorch's
 * rule: momentum 0.1, unbiased variance over the global count).
 * Backward: each rank sums dy and dy * xhat per channel; one all-reduce
 * gives the global sums, and
 *     dx = gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
 * with M the global count. gamma's and beta's gradients stay local (the
 * shard's sums), as in PyTorch: DDP's all-reduce averages them with every
 * other gradient. Evaluation uses the running statistics, no collective.
 *
 * With the same weights and every rank's shard, N ranks compute what one
 * process computes with batch norm over the whole batch (test:
 * //lib/dist:syncbn_test, bench/cmd/ddp_worker.c --sync-bn --verify).
 *
 * tb_syncbn_convert swaps every batch-norm layer of a built model for a
 * SyncBatchNorm layer sharing its parameters (the same slices of the flat
 * buffers, so the optimizer and DDP's buckets are unchanged), as
 * SyncBatchNorm.convert_sync_batchnorm does. Call it before the first
 * training step: the running statistics start afresh (mean 0, var 1).
 *
 * The per-channel sums are plain C loops over the activations, so the
 * layer runs on the CPU backend (whose device memory is host memory);
 * tb_syncbn_convert refuses another backend with TB_ERR_UNSUPPORTED (CUDA
 * needs per-channel reduction kernels and NCCL buffers: not built). NCHW only.
 */
#ifndef TB_SYNCBN_H
#define TB_SYNCBN_H

#include "lib/dist/comm.h"
#include "lib/nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replaces every batch-norm layer of m (anywhere in its tree) with a
 * SyncBatchNorm layer reducing over comm; *converted gets how many (may be
 * NULL). REQUIRES: comm outlives m; the same model on every rank.
 * Errors: TB_ERR_UNSUPPORTED on a non-CPU backend, TB_ERR_NOMEM. */
int tb_syncbn_convert(tb_model *m, tb_comm *comm, int *converted);

/* One SyncBatchNorm layer over in (eps 1e-5, momentum 0.1). */
int tb_layer_syncbn_create(tb_layer_ctx *ctx, tb_shape in, tb_comm *comm, tb_layer **out);

#ifdef __cplusplus
}
#endif
#endif
