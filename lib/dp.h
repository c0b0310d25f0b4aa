/*
 * dp.h - DataParallel (torch.nn.DataParallel): one process drives N devices.
 *
 * Each step, as PyTorch's DataParallel does: copy the weights from replica 0
 * to the others (replicate), scatter the batch (replica i gets its share),
 * run the replicas' forward in parallel, gather their outputs onto device 0,
 * compute the loss there over the whole batch, send each replica its slice
 * of the output gradient, run the backwards in parallel, and reduce the
 * gradients onto device 0, where the caller's optimizer steps.
 *
 * CPU backend: the "devices" are N host threads, each with its own CPU
 * backend (threads_per_replica kernel threads) and model replica; replica 0
 * is the caller's model on the caller's backend. Device-to-device copies
 * go through each backend's copy_d2h/copy_h2d, which on the CPU are
 * memcpys. A CUDA DP (N GPUs from one thread, peer copies) is not built:
 * dp_create refuses a non-CPU backend with TB_ERR_UNSUPPORTED.
 *
 * Batch norm in each replica sees its share, as in DataParallel (and DDP
 * without SyncBatchNorm).
 *
 * Test: bazel test //lib:dp_test
 */
#ifndef TB_DP_H
#define TB_DP_H

#include <stdint.h>

#include "lib/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_dp_replica tb_dp_replica;

typedef struct tb_dp_times {
    double replicate_s, scatter_s, forward_s, gather_loss_s, backward_s, reduce_s;
} tb_dp_times;

typedef struct tb_dp {
    int n;                    /* replicas, >= 1 */
    tb_model *main;           /* replica 0: the caller's model (borrowed) */
    tb_dp_replica *reps;      /* (n) */
    tb_xent loss;             /* on device 0, for the whole batch */
    tb_tensor logits;         /* (B, classes, 1, 1) gathered on device 0 */
    int32_t *labels;          /* (B) device 0 */
    float *host_tmp;          /* staging for copies between backends */
    size_t host_tmp_n;
    tb_dp_times times;        /* of the last step */
} tb_dp;

/* n replicas of main (built from spec and opts, the same it was built from;
 * opts->max_batch is the whole batch). REQUIRES: main lives on a CPU
 * backend and outlives dp. */
int dp_create(tb_model *main, const tb_layer_spec *spec, const tb_model_opts *opts, int n,
              int threads_per_replica, tb_dp **out);
void dp_destroy(tb_dp *dp);

/* One forward/backward of a batch of `batch` samples (host memory,
 * normalized images (batch, C, H, W) and labels), with the loss scaled by
 * loss_scale (1 / accumulation steps); gradients end in main's flat
 * gradient buffer (written or accumulated per main's grad_accumulate).
 * *loss: the batch's mean loss. REQUIRES: batch >= n. */
int dp_step(tb_dp *dp, const float *images, const int32_t *labels, int batch, float loss_scale,
            float *loss);

#ifdef __cplusplus
}
#endif
#endif
