/*
 * dp.h - DataParallel (torch.nn.DataParallel): one process drives N devices.
 *
 * Each step, as PyTorch's DataParallel does: the batch goes to device 0 and
 * is scattered from there (replica i gets its share), the weights are
 * copied from device 0 to the others (replicate), the replicas' forwards
 * run, their outputs are gathered onto device 0, the loss is computed there
 * over the whole batch, each replica gets its slice of the output
 * gradient, the backwards run, and the gradients are reduced onto device 0,
 * where the caller's optimizer steps.
 *
 * The driver is written against the backend table only (lib/backend/backend.h):
 * device-to-device traffic is copy_peer, the reduction is axpby on device
 * 0. Replica i > 0 lives on a backend of the same kind as the main model's,
 * opened by tb_dp_create: a CPU backend of threads_per_replica threads, or
 * the next CUDA device (cuda:d0, then the other ordinals in ascending
 * order, as device_ids defaults to every GPU with output_device first).
 * Two ways to run the replicas:
 *   TB_DP_THREADS     one host thread per replica, each waiting for its
 *                     device at the end of its forward and backward: the
 *                     CPU DP, where the "devices" are threads (what
 *                     bench:ddp_sweep measures on the CPU).
 *   TB_DP_ONE_THREAD  the calling thread issues every replica's work in
 *                     turn. On CUDA each GPU's work is queued on its own
 *                     stream without waiting (copy_peer orders the streams
 *                     with events), so N GPUs run at once from one thread;
 *                     the host waits only where a DataParallel user's
 *                     program does: the batch's copy to device 0
 *                     (input.to(device) is synchronous from pageable
 *                     memory) and reading the loss (loss.item()), which
 *                     tb_dp_step skips when loss is NULL. On the CPU the
 *                     replicas run one after another: the same driver, so
 *                     tests on the CPU exercise what drives the GPUs.
 * Both give the same numbers (the same ops in the same order per device).
 *
 * Batch norm in each replica sees its share, as in DataParallel (and DDP
 * without SyncBatchNorm). Only replica 0's running statistics are kept,
 * as DataParallel keeps device 0's buffers.
 *
 * Test: bazel test //lib/dist:dp_test (both modes on 2 CPU backends);
 * //lib/dist:dp_sim_test (the one-thread mode's phase times on the
 * CUDA-semantics sim backend).
 */
#ifndef TB_DP_H
#define TB_DP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/nn/model.h"
#include "lib/nn/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_dp_mode {
    TB_DP_THREADS = 0,    /* one host thread per replica */
    TB_DP_ONE_THREAD = 1, /* the caller's thread issues every replica's work */
} tb_dp_mode;

typedef struct tb_dp_replica tb_dp_replica;

/* Time of each phase of the last step. TB_DP_THREADS: host wall time
 * (each thread waits for its device at the end of its phase).
 * TB_DP_ONE_THREAD: device time from events recorded on every replica's
 * stream at each phase boundary: a phase's time is the longest, over the
 * devices, between its two boundaries (the host only queued the work, so
 * its clock would measure the queueing); filled by tb_dp_read_times, which
 * tb_dp_step calls when it reads the loss. loss_read_s is host time in
 * both modes (the host's wait for the loss). */
typedef struct tb_dp_times {
    double replicate_s, scatter_s, forward_s, gather_loss_s, backward_s, reduce_s, loss_read_s;
} tb_dp_times;

/* Bytes copied between devices (copy_peer between different backends) in
 * the last step, by phase. reduce: the replicas' gradients sent to device
 * 0, (n - 1) * gradient bytes: gradients are what is reduced. */
typedef struct tb_dp_bytes {
    size_t scatter, replicate, gather, grad_scatter, reduce;
} tb_dp_bytes;

/* Phase boundaries the one-thread mode records events at: before the
 * scatter and after each of scatter, replicate, forward, gather_loss,
 * backward and reduce. */
#define TB_DP_MARKS 7

typedef struct tb_dp {
    int n;                    /* replicas, >= 1 */
    tb_dp_mode mode;
    tb_model *main;           /* replica 0: the caller's model (borrowed) */
    tb_dp_replica *reps;      /* (n) */
    tb_xent loss;             /* on device 0, for the whole batch */
    tb_tensor logits;         /* (B, classes, 1, 1) gathered on device 0 */
    int32_t *labels;          /* (B) device 0 */
    float *grad_stage;        /* (numel) device 0: one replica's gradients before the add */
    tb_dp_times times;        /* of the last step (see tb_dp_times) */
    tb_event **marks;         /* (n * TB_DP_MARKS) TB_DP_ONE_THREAD: replica i's event at
                                 boundary k is marks[i * TB_DP_MARKS + k]; NULL otherwise */
    tb_dp_bytes bytes;        /* of the last step */
} tb_dp;

/* n replicas of main (built from spec and opts, the same it was built from;
 * opts->max_batch is the whole batch), run as mode says.
 * threads_per_replica: kernel threads of each CPU replica's backend (0 =
 * all cores; ignored on CUDA). Fails with TB_ERR_NO_DEVICE, naming the
 * device, when a replica's device cannot be opened (fewer GPUs than n).
 * REQUIRES: main outlives dp. */
int tb_dp_create(tb_model *main, const tb_layer_spec *spec, const tb_model_opts *opts, int n,
              tb_dp_mode mode, int threads_per_replica, tb_dp **out);
/* The same with the replicas on the caller's backends (borrowed; they
 * must outlive dp): backends[0] is main's, backends[1 .. n-1] of the same
 * kind (tests run DataParallel on the sim backend this way). */
int tb_dp_create_on(tb_model *main, const tb_layer_spec *spec, const tb_model_opts *opts, int n,
                    tb_dp_mode mode, tb_backend *const *backends, tb_dp **out);
void tb_dp_destroy(tb_dp *dp);

/* The last step's phase times into *out (and dp->times). TB_DP_ONE_THREAD:
 * waits for the step's last events on every device (a host wait: call it
 * outside a timed loop) and computes them from the events. */
int tb_dp_read_times(tb_dp *dp, tb_dp_times *out);

/* One forward/backward of a batch of `batch` samples (host memory,
 * normalized images (batch, C, H, W) and labels), with the loss scaled by
 * loss_scale (1 / accumulation steps); gradients end in main's flat
 * gradient buffer (written or accumulated per main's grad_accumulate).
 * *loss: the batch's mean loss; loss NULL reads nothing (no host wait at
 * the end of the step). REQUIRES: n <= batch <= opts->max_batch. */
int tb_dp_step(tb_dp *dp, const float *images, const int32_t *labels, int batch, float loss_scale,
            float *loss);

/* What n replicas compute, in one process: the gradients of the batch
 * (host images (batch, C, H, W) and labels) cut into n micro-batches as
 * tb_dp_step scatters it (replica k: rows batch k / n .. batch (k+1) / n),
 * each one's mean loss weighted by its rows / batch (the gathered loss's
 * mean), in m's flat gradient buffer (zeroed first); *loss: the batch's
 * mean. The reference DP and DDP are checked against; a batch n does not
 * divide gives uneven micro-batches, as it does DP's replicas.
 * REQUIRES: 1 <= n <= batch; m built with max_batch >= ceil(batch / n). */
int tb_dp_reference_grads(tb_model *m, const float *images, const int32_t *labels, int n, int batch,
                          float *loss);

/* The network DP is checked and measured with (dp_test, the self-check,
 * bench:ddp_sweep): the small CNN on 1x28x28 inputs, 10 classes, conv
 * bias, seed 7, trained by SGD (lr 0.05, momentum 0.9). */
typedef struct tb_dp_check_net {
    tb_model *m;
    tb_optim opt;
    tb_model_opts opts; /* what m was built with, for tb_dp_create */
} tb_dp_check_net;

/* Builds it on be (not owned: it must outlive the net) for batches up to
 * max_batch. On failure what was built is freed and *net is left safe for
 * tb_dp_check_net_free. REQUIRES: max_batch >= 1. */
int tb_dp_check_net_build(tb_backend *be, int max_batch, tb_dp_check_net *net);

/* Frees the model and the optimizer; a zeroed or failed net is a no-op. */
void tb_dp_check_net_free(tb_dp_check_net *net);

#ifdef __cplusplus
}
#endif
#endif
