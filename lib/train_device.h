/*
 * train_device.h - private to the trainer (lib/train.c): issue 5's
 * device-side toggles, lib/train_device.c.
 *   --tensors-on-device  the labels cross the bus as the dataset's bytes
 *                        (B uint8) and are widened to int32 by a device op
 *                        (labels_u8_to_i32), instead of being built as int32
 *                        on the host and copied (4B bytes).
 *   --augment-on-device  the training loader hands out raw uint8 samples
 *                        (loader raw_u8); crop offsets and flips are drawn
 *                        on the host per sample (augment_params, the same
 *                        (seed, epoch, index) RNG) and uploaded, and the
 *                        backend's augment_u8 writes the float batch.
 *   --cuda-graphs        forward + loss + backward of a full-size
 *                        micro-batch is captured after 3 warm-up
 *                        micro-batches and replayed.
 * On a backend whose slots for these are NULL (the CPU) the trainer
 * refuses each flag with TB_ERR_UNSUPPORTED and the reason.
 */
#ifndef TB_TRAIN_DEVICE_H
#define TB_TRAIN_DEVICE_H

#include "lib/train.h"

/* TB_ERR_UNSUPPORTED "--<flag>: n/a on the CPU backend: <why>" when be
 * lacks a flag's slots; TB_ERR_INVALID for combinations a graph cannot
 * replay (--detect-anomaly, --dropout > 0). */
int train_device_refuse(const tb_config *c, const tb_backend *be);

/* Device and host buffers of the flags that are on. REQUIRES: the batch
 * buffers exist (t->x, t->labels). */
int train_device_init(tb_trainer *t);
void train_device_free(tb_trainer *t);

/* --augment-on-device: b (raw uint8, b->raw != NULL) into t->x and
 * t->labels: the samples and their (dy, dx, flip) uploaded, then
 * augment_u8 in t->x's layout. */
int train_device_batch(tb_trainer *t, const tb_batch *b);

/* b's labels into t->labels: with --tensors-on-device B bytes up and
 * labels_u8_to_i32; otherwise the int32 copy. */
int train_device_labels(tb_trainer *t, const tb_batch *b);

/* Forward, loss and backward of the batch already in t->x / t->labels:
 * directly for the 3 warm-up micro-batches, for a partial batch and for a
 * loss scale other than the captured one; otherwise a replay of the graph,
 * captured on the first call after the warm-up. */
int train_graph_fwd_bwd(tb_trainer *t, int size, float loss_scale);

#define TB_GRAPH_WARMUP 3

#endif
