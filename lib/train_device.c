/*
 * train_device.c - the trainer's device-side toggles (see train_device.h
 * for what each flag changes). Which tensors --tensors-on-device makes on
 * the device: the per-step int32 labels (B), widened from the dataset's
 * uint8 by labels_u8_to_i32; the other per-step buffers the trainer uses
 * were already device-made (the --loss-read-every accumulator is zeroed
 * with be->memset, gradients by model_zero_grad's memset), and the image
 * batch is data, not a made tensor (--augment-on-device moves its making).
 *
 * --cuda-graphs captures forward + loss + backward, not the optimizer: the
 * optimizer's learning rate (the schedule), Adam's bias-correction step and
 * AMP's grad_scale are kernel arguments that change every step and a graph
 * would freeze them (PyTorch needs capturable optimizers for that). Also
 * outside the graph: the batch copy into the fixed t->x / t->labels
 * buffers before each replay, zero_grad (memset with s == NULL waits), and
 * the loss read from its fixed device buffer (model->loss.loss_sum).
 * Temporaries the layers allocate during the captured step are in the
 * caching allocator's bins after the 3 warm-ups, so the capture allocates
 * nothing from the device; their addresses are baked in, which holds while
 * nothing else allocates between replays (the optimizer's scratch is
 * grow-only and exists after the warm-up step).
 *
 * Tests: bazel test //lib:device_toggles_test (the CPU refusals; the CUDA
 * paths compile and link here and are unverified without a GPU:
 * bench:selfcheck's graph_begin, augment_u8 and labels_u8_to_i32 cases are
 * the first check on one).
 */
#include "lib/train_device.h"

#include <stdlib.h>

#include "datasets/augment.h"
#include "kernels/augment_math.h"

int train_device_refuse(const tb_config *c, const tb_backend *be)
{
    if (c->tensors_on_device && !be->labels_u8_to_i32)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "--tensors-on-device: n/a on the CPU backend: host "
                       "and device memory are the same");
    if (c->augment_on_device && !be->augment_u8)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "--augment-on-device: n/a on the CPU backend: the "
                       "CPU is the device: augmentation already runs where the model runs");
    if (c->cuda_graphs && !be->graph_begin)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "--cuda-graphs: n/a on the CPU backend: no kernel "
                       "launches to capture");
    if (c->cuda_graphs && (c->detect_anomaly || c->dropout > 0))
        return TB_FAIL(TB_ERR_INVALID, "--cuda-graphs with --detect-anomaly or --dropout: a "
                       "replay cannot read the loss on the host mid-step or draw a new "
                       "dropout mask (its seed is a captured kernel argument)");
    return TB_OK;
}

static int alloc_host(void **p, size_t bytes, const char *what)
{
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for %s", what);
    return TB_OK;
}

int train_device_init(tb_trainer *t)
{
    const tb_config *c = &t->cfg;
    tb_backend *be = t->be;
    const tb_dataset *ds = t->train_ds;
    size_t B = (size_t)c->batch_size;
    if (c->tensors_on_device) {
        if (ds->num_classes > 256)
            return TB_FAIL(TB_ERR_DATA, "--tensors-on-device: %d classes do not fit the uint8 "
                           "labels", ds->num_classes);
        TB_TRY(be->dev_alloc(be, (void **)&t->labels_u8, B));
        TB_TRY(alloc_host((void **)&t->labels_u8_host, B, "the uint8 labels"));
    }
    if (c->augment_on_device) {
        if (ds->c > TB_AUGMENT_MAX_C)
            return TB_FAIL(TB_ERR_DATA, "--augment-on-device: %d channels, at most %d", ds->c,
                           TB_AUGMENT_MAX_C);
        TB_TRY(be->dev_alloc(be, (void **)&t->x_u8, B * ds->c * ds->h * ds->w));
        TB_TRY(be->dev_alloc(be, (void **)&t->aug_params, B * 3 * sizeof(int32_t)));
        TB_TRY(alloc_host((void **)&t->aug_params_host, B * 3 * sizeof(int32_t),
                          "the augmentation parameters"));
    }
    return TB_OK;
}

void train_device_free(tb_trainer *t)
{
    tb_backend *be = t->be;
    if (t->graph)
        be->graph_destroy(be, t->graph);
    if (t->labels_u8)
        be->dev_free(be, t->labels_u8);
    if (t->x_u8)
        be->dev_free(be, t->x_u8);
    if (t->aug_params)
        be->dev_free(be, t->aug_params);
    free(t->labels_u8_host);
    free(t->aug_params_host);
}

/* The loader's training augmentation, as make_loader would have set it. */
static tb_augment_cfg train_augment_cfg(const tb_trainer *t)
{
    return t->cfg.augment ? augment_train_defaults(t->train_ds) : augment_eval_defaults();
}

/* Raw samples up, each sample's (dy, dx, flip) up, then augment_u8. */
static int augment_to_device(tb_trainer *t, const tb_batch *b)
{
    tb_backend *be = t->be;
    const tb_dataset *ds = t->train_ds;
    tb_augment_cfg ac = train_augment_cfg(t);
    tb_augment_desc d = {.c = ds->c, .h = ds->h, .w = ds->w, .pad = ac.enabled ? ac.pad : 0,
                         .layout = t->x.layout};
    for (int ch = 0; ch < ds->c; ch++)
        tb_augment_norm(ac.normalize, ds->mean[ch], ds->std[ch], &d.scale[ch], &d.bias[ch]);
    for (int k = 0; k < b->size; k++) {
        tb_augment_params p = augment_params(&ac, (uint64_t)t->cfg.seed, b->epoch,
                                             b->sample_ids[k]);
        t->aug_params_host[3 * k] = p.dy;
        t->aug_params_host[3 * k + 1] = p.dx;
        t->aug_params_host[3 * k + 2] = p.flip;
    }
    size_t raw = (size_t)b->size * ds->c * ds->h * ds->w;
    TB_TRY(be->copy_h2d(be, t->x_u8, b->raw, raw, NULL));
    TB_TRY(be->copy_h2d(be, t->aug_params, t->aug_params_host,
                        (size_t)b->size * 3 * sizeof(int32_t), NULL));
    return be->augment_u8(be, &d, t->x_u8, t->aug_params, t->x.data, b->size);
}

static int labels_to_device(tb_trainer *t, const tb_batch *b)
{
    tb_backend *be = t->be;
    if (!t->cfg.tensors_on_device)
        return be->copy_h2d(be, t->labels, b->labels, (size_t)b->size * sizeof(int32_t), NULL);
    for (int k = 0; k < b->size; k++)
        t->labels_u8_host[k] = (uint8_t)b->labels[k];
    TB_TRY(be->copy_h2d(be, t->labels_u8, t->labels_u8_host, (size_t)b->size, NULL));
    return be->labels_u8_to_i32(be, t->labels_u8, t->labels, b->size);
}

int train_device_labels(tb_trainer *t, const tb_batch *b)
{
    return labels_to_device(t, b);
}

int train_device_batch(tb_trainer *t, const tb_batch *b)
{
    TB_TRY(tensor_set_batch(&t->x, b->size));
    TB_TRY(augment_to_device(t, b));
    return labels_to_device(t, b);
}

static int fwd_bwd_direct(tb_trainer *t, float loss_scale)
{
    TB_TRY(model_forward_loss(t->model, &t->x, t->labels, NULL));
    return model_backward(t->model, loss_scale);
}

static int graph_capture(tb_trainer *t, float loss_scale)
{
    tb_backend *be = t->be;
    TB_TRY(be->graph_begin(be));
    int rc = fwd_bwd_direct(t, loss_scale);
    tb_graph *g = NULL;
    int end_rc = be->graph_end(be, &g); /* ends the capture even after a failure */
    TB_TRY(rc);
    TB_TRY(end_rc);
    t->graph = g;
    t->graph_scale = loss_scale;
    return TB_OK;
}

int train_graph_fwd_bwd(tb_trainer *t, int size, float loss_scale)
{
    if (size != t->cfg.batch_size || (t->graph && loss_scale != t->graph_scale))
        return fwd_bwd_direct(t, loss_scale);
    if (!t->graph && t->graph_warm < TB_GRAPH_WARMUP) {
        t->graph_warm++;
        return fwd_bwd_direct(t, loss_scale);
    }
    if (!t->graph)
        TB_TRY(graph_capture(t, loss_scale)); /* recorded, not run: launch it below */
    return t->be->graph_launch(t->be, t->graph);
}
