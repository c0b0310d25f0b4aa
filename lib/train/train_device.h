/*
 * train_device.h - private to the trainer (lib/train/train.c): the
 * device-side toggles, lib/train/train_device.c.
 *   --tensors-on-device  the labels cross the bus as the dataset's bytes
 *                        (B uint8) and are widened to int32 by a device op
 *                        (labels_u8_to_i32), instead of being built as int32
 *                        on the host and copied (4B bytes).
 *   --augment-on-device  the training loader hands out raw uint8 samples
 *                        (loader raw_u8); crop offsets and flips are drawn
 *                        on the host per sample (tb_augment_draw, the same
 *                        (seed, epoch, index) RNG) and uploaded, and the
 *                        backend's augment_u8 writes the float batch.
 *   --cuda-graphs        forward + loss + backward of a full-size
 *                        micro-batch is captured after 3 warm-up
 *                        micro-batches and replayed.
 *   --pin-memory,        every batch's host parts (images or raw samples,
 *   --non-blocking       augmentation parameters, labels) go to the device
 *                        through lib/backend/staging.h, which copies per the two
 *                        flags, and the model reads the staged copies
 *                        (PyTorch's x = x.to(device, non_blocking=...)).
 *                        On a backend with its own device memory (CUDA) the
 *                        staging is used whatever the flags, so the pageable
 *                        baseline runs the same code as the pinned settings.
 *                        With --cuda-graphs, whose replays read fixed
 *                        buffers, the staged images and labels are then
 *                        copied device to device into t->x / t->labels.
 * On a backend whose slots for these are NULL (the CPU; for the staging:
 * whose device memory is host memory) the trainer refuses each flag with
 * TB_ERR_UNSUPPORTED and the reason.
 */
#ifndef TB_TRAIN_DEVICE_H
#define TB_TRAIN_DEVICE_H

#include "lib/train/train.h"

/* TB_ERR_UNSUPPORTED "--<flag>: n/a on the CPU backend: <why>" when be
 * lacks a flag's slots; TB_ERR_INVALID for combinations a graph cannot
 * replay (--detect-anomaly, --dropout > 0 in a model with a dropout layer). */
int tb_train_device_refuse(const tb_config *c, const tb_backend *be);

/* The layers of c->model (lib/nn/model.h's tb_spec_*); NULL for gpt2,
 * which tb_model_build_gpt2 builds from its dimensions. */
const tb_layer_spec *tb_train_model_spec(const tb_config *c);

/* t->staging for a backend with its own device memory; none where device memory is host memory, and then
 * --pin-memory and --non-blocking are TB_ERR_UNSUPPORTED with the reason. */
int tb_train_staging_init(tb_trainer *t);

/* Device and host buffers of the flags that are on. REQUIRES: the batch
 * buffers exist (t->x, t->labels). */
int tb_train_device_init(tb_trainer *t);
void tb_train_device_free(tb_trainer *t);

/* Batch b to the device; sets t->x_in and t->labels_in to what the model
 * reads. images: b's images in t->x's layout (ignored for a raw batch), or
 * a token batch's int32 ids (b->tokens), copied as bytes.
 *   images       copied into t->x, or staged (t->x_in views the copy;
 *                with --cuda-graphs the copy goes on into t->x);
 *   raw batch    (--augment-on-device, b->raw != NULL) the samples and
 *                their (dy, dx, flip) uploaded, then augment_u8 writes t->x
 *                in its layout;
 *   labels       int32 into t->labels or staged; with --tensors-on-device
 *                B bytes up and labels_u8_to_i32 into t->labels
 *                (staged int32 labels go on into t->labels with
 *                --cuda-graphs).
 * REQUIRES: tb_tensor_set_batch(&t->x, b->size) done. */
int tb_train_device_batch(tb_trainer *t, const tb_batch *b, const void *images);

/* Forward, loss and backward of the batch already in t->x / t->labels:
 * directly for the 3 warm-up micro-batches and for a partial batch;
 * otherwise a replay of the graph captured for the model's current
 * grad_accumulate (one each for 0 and 1, captured on first need), both
 * captured again when loss_scale differs from the one they were captured
 * with. Leaves grad_accumulate = 1, as tb_model_backward does. */
int tb_train_graph_fwd_bwd(tb_trainer *t, int size, float loss_scale);

/* Destroys the trainer's graphs (captured again on the next step): before
 * the trainer frees or reallocates buffers a replay would write (the
 * activations --eval-no-grad frees for evaluation, everything at destroy),
 * since those addresses are baked into the graphs. */
int tb_train_graphs_drop(tb_trainer *t);

#define TB_GRAPH_WARMUP 3

#endif
