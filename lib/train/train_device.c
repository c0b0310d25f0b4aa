/*
 * train_device.c - the trainer's device-side toggles (see train_device.h
 * for what each flag changes). Which tensors --tensors-on-device makes on
 * the device: the per-step int32 labels (B), widened from the dataset's
 * uint8 by labels_u8_to_i32; the other per-step buffers the trainer uses
 * were already device-made (the --loss-read-every accumulator is zeroed
 * with be->memset, gradients by tb_model_zero_grad's memset), and the image
 * batch is data, not a made tensor (--augment-on-device moves its making).
 *
 * --cuda-graphs captures forward + loss + backward, not the optimizer: the
 * optimizer's learning rate (the schedule), Adam's bias-correction step and
 * AMP's grad_scale are kernel arguments that change every step and a graph
 * would freeze them (PyTorch needs capturable optimizers for that). Also
 * outside the graph: the batch copy into the fixed t->x / t->labels
 * buffers before each replay, zero_grad (its memset queued on the compute
 * stream, TB_ON_COMPUTE), and the loss read from its fixed device buffer
 * (model->loss.loss_sum). Temporaries the layers allocate and free during
 * the captured step (GPT-2's per-layer attention and layer-norm
 * temporaries, autocast's low-precision copies) come from the caching
 * allocator, which hands a block the capture freed to its later
 * allocations, as eager execution reuses them, and holds them all while
 * the graph lives (lib/backend/cuda/cuda.h: tb_cuda_alloc_capture_begin);
 * their addresses are baked in, which holds since no one else gets them
 * between replays.
 *
 * --pin-memory / --non-blocking: a batch's parts (images or raw samples and
 * their augmentation parameters, labels) go to the device in one
 * tb_staging_put, so the pageable path waits once per batch, not per part.
 * With --cuda-graphs too, the parts the graph reads are then copied device
 * to device into the fixed t->x / t->labels on the compute stream
 * (tb_staging_to_fixed; PyTorch's CUDA-graphs recipe copies each batch into
 * the graph's static inputs the same way), so pinned memory and graphs
 * compose; the copy costs one device-to-device pass over the batch.
 *
 * Two captures, one per value of the model's grad_accumulate (written or
 * added gradients, a kernel argument the graph freezes), both re-captured
 * when the loss scale changes (tb_train_graph_fwd_bwd).
 *
 * Tests: bazel test //lib/train:device_toggles_test (the CPU refusals) and
 * //lib/train:graph_sim_test (--cuda-graphs on the CUDA-semantics sim
 * backend: accumulation and loss-scale changes train what launches train);
 * on a GPU, bench:selfcheck's graph_begin, augment_u8 and labels_u8_to_i32
 * cases are the first check.
 */
#include "lib/train/train_device.h"

#include <stdlib.h>

#include "lib/backend/staging.h"

#include "datasets/augment.h"
#include "kernels/augment_math.h"

/* --dropout only draws masks where the model has a dropout layer (the
 * default 0.1 is the wide CNN's head; the small CNN has none). */
static int model_drops_out(const tb_config *c)
{
    const tb_layer_spec *spec = tb_train_model_spec(c);
    if (!(c->dropout > 0) || !spec) /* gpt2 is built without a spec, and has no dropout */
        return 0;
    for (const tb_layer_spec *s = spec; s->kind != TB_SPEC_END; s++)
        if (s->kind == TB_SPEC_DROPOUT)
            return 1;
    return 0;
}

int tb_train_device_refuse(const tb_config *c, const tb_backend *be)
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
    if (c->cuda_graphs && (c->detect_anomaly || model_drops_out(c)))
        return TB_FAIL(TB_ERR_INVALID, "--cuda-graphs with --detect-anomaly or --dropout: a "
                       "replay cannot read the loss on the host mid-step or draw a new "
                       "dropout mask (its seed is a captured kernel argument)");
    return TB_OK;
}

int tb_train_staging_init(tb_trainer *t)
{
    const tb_config *c = &t->cfg;
    tb_staging_cfg sc = {.pin_memory = c->pin_memory, .non_blocking = c->non_blocking};
    TB_TRY(tb_staging_create(t->be, &sc, &t->staging));
    if (tb_staging_copies(t->staging))
        return TB_OK;
    int rc = tb_staging_destroy(t->staging);
    t->staging = NULL;
    TB_TRY(rc);
    if (c->pin_memory || c->non_blocking)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "--%s: n/a on the CPU backend: no copy to a "
                       "device: batches are already where the kernels read them",
                       c->pin_memory ? "pin-memory" : "non-blocking");
    return TB_OK;
}

static int alloc_host(void **p, size_t bytes, const char *what)
{
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for %s", what);
    return TB_OK;
}

int tb_train_device_init(tb_trainer *t)
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

/* Both captures gone (at the end, when the loss scale changed, or before
 * buffers they read are freed: tb_train_graphs_drop). */
static int drop_graphs(tb_trainer *t)
{
    int rc = TB_OK;
    for (int k = 0; k < 2; k++) {
        int k_rc = t->graph[k] ? t->be->graph_destroy(t->be, t->graph[k]) : TB_OK;
        rc = rc == TB_OK ? k_rc : rc;
        t->graph[k] = NULL;
    }
    return rc;
}

int tb_train_graphs_drop(tb_trainer *t)
{
    return drop_graphs(t);
}

void tb_train_device_free(tb_trainer *t)
{
    tb_backend *be = t->be;
    (void)drop_graphs(t);
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
    return t->cfg.augment ? tb_augment_train_defaults(t->train_ds) : tb_augment_eval_defaults();
}

/* One batch's host parts on their way to the device. */
typedef struct upload {
    int n;
    const void *host[TB_STAGING_MAX_PARTS];
    size_t bytes[TB_STAGING_MAX_PARTS];
    void *fixed[TB_STAGING_MAX_PARTS]; /* the part's own device buffer */
    void *dev[TB_STAGING_MAX_PARTS];   /* after upload_run: the part on the device */
} upload;

static int upload_add(upload *u, const void *host, size_t bytes, void *fixed)
{
    u->host[u->n] = host;
    u->bytes[u->n] = bytes;
    u->fixed[u->n] = fixed;
    return u->n++;
}

/* Through the staging (one put: one wait, or none), else each part copied
 * into its own buffer. */
static int upload_run(tb_trainer *t, upload *u)
{
    if (t->staging)
        return tb_staging_put(t->staging, u->n, u->host, u->bytes, u->dev);
    for (int i = 0; i < u->n; i++) {
        TB_TRY(t->be->copy_h2d(t->be, u->fixed[i], u->host[i], u->bytes[i], NULL));
        u->dev[i] = u->fixed[i];
    }
    return TB_OK;
}

/* --cuda-graphs with a staging: the parts the graph reads (the images
 * unless raw, the int32 labels unless made on the device) copied from the
 * staging's alternating buffers into t->x / t->labels, whose addresses the
 * capture baked in. */
static int graph_inputs_fixed(tb_trainer *t, const tb_batch *b, upload *u, int lab)
{
    void *fixed[TB_STAGING_MAX_PARTS] = {0};
    if (!t->cfg.cuda_graphs || !t->staging)
        return TB_OK;
    if (!b->raw)
        fixed[0] = u->fixed[0];
    if (!t->cfg.tensors_on_device)
        fixed[lab] = u->fixed[lab];
    return tb_staging_to_fixed(t->staging, u->n, u->dev, fixed, u->bytes);
}

/* --augment-on-device: the raw samples and each sample's (dy, dx, flip). */
static void add_raw_parts(tb_trainer *t, const tb_batch *b, upload *u)
{
    const tb_dataset *ds = t->train_ds;
    tb_augment_cfg ac = train_augment_cfg(t);
    for (int k = 0; k < b->size; k++) {
        tb_augment_params p = tb_augment_draw(&ac, (uint64_t)t->cfg.seed, b->epoch,
                                             b->sample_ids[k]);
        t->aug_params_host[3 * k] = p.dy;
        t->aug_params_host[3 * k + 1] = p.dx;
        t->aug_params_host[3 * k + 2] = p.flip;
    }
    upload_add(u, b->raw, (size_t)b->size * ds->c * ds->h * ds->w, t->x_u8);
    upload_add(u, t->aug_params_host, (size_t)b->size * 3 * sizeof(int32_t), t->aug_params);
}

/* augment_u8 from the uploaded raw samples and parameters into t->x. */
static int augment_on_device(tb_trainer *t, const tb_batch *b, const uint8_t *raw,
                             const int32_t *params)
{
    const tb_dataset *ds = t->train_ds;
    tb_augment_cfg ac = train_augment_cfg(t);
    tb_augment_desc d = {.c = ds->c, .h = ds->h, .w = ds->w, .pad = ac.enabled ? ac.pad : 0,
                         .layout = t->x.layout};
    for (int ch = 0; ch < ds->c; ch++)
        tb_augment_norm(ac.normalize, ds->mean[ch], ds->std[ch], &d.scale[ch], &d.bias[ch]);
    return t->be->augment_u8(t->be, &d, raw, params, t->x.data, b->size);
}

/* The labels part: int32 ((size) or a token batch's (size, seq)), or with
 * --tensors-on-device the dataset's bytes (never for tokens: validate
 * refuses it). */
static int add_labels_part(tb_trainer *t, const tb_batch *b, upload *u)
{
    size_t per = b->seq > 0 ? (size_t)b->seq : 1;
    if (!t->cfg.tensors_on_device)
        return upload_add(u, b->labels, (size_t)b->size * per * sizeof(int32_t), t->labels);
    for (int k = 0; k < b->size; k++)
        t->labels_u8_host[k] = (uint8_t)b->labels[k];
    return upload_add(u, t->labels_u8_host, (size_t)b->size, t->labels_u8);
}

/* The images the model reads: t->x, or a view of their staged copy. */
static const tb_tensor *images_in(tb_trainer *t, void *dev)
{
    if (dev == t->x.data)
        return &t->x;
    t->x_staged = tb_tensor_view(t->be, dev, t->x.n, t->x.c, t->x.h, t->x.w);
    t->x_staged.layout = t->x.layout;
    t->x_staged.dtype = t->x.dtype;
    return &t->x_staged;
}

int tb_train_device_batch(tb_trainer *t, const tb_batch *b, const void *images)
{
    tb_backend *be = t->be;
    upload u = {0};
    /* 4-byte elements either way: floats, or a token batch's int32 ids */
    _Static_assert(sizeof(float) == sizeof(int32_t), "a tensor element holds an int32 id");
    if (b->raw)
        add_raw_parts(t, b, &u);
    else
        upload_add(&u, images, tb_tensor_numel(&t->x) * sizeof(float), t->x.data);
    int lab = add_labels_part(t, b, &u);
    TB_TRY(upload_run(t, &u));
    TB_TRY(graph_inputs_fixed(t, b, &u, lab));
    if (b->raw) {
        TB_TRY(augment_on_device(t, b, u.dev[0], u.dev[1]));
        t->x_in = &t->x;
    } else {
        t->x_in = images_in(t, u.dev[0]);
    }
    t->labels_in = u.dev[lab];
    if (!t->cfg.tensors_on_device)
        return TB_OK;
    t->labels_in = t->labels;
    return be->labels_u8_to_i32(be, u.dev[lab], t->labels, b->size);
}

static int fwd_bwd_direct(tb_trainer *t, float loss_scale)
{
    TB_TRY(tb_model_forward_loss(t->model, &t->x, t->labels, NULL));
    return tb_model_backward(t->model, loss_scale);
}

/* Captures forward + loss + backward as the model's grad_accumulate now
 * says (the layers pass it to the weight-gradient kernels as an argument,
 * which the graph freezes). */
static int graph_capture(tb_trainer *t, int acc, float loss_scale)
{
    tb_backend *be = t->be;
    TB_TRY(be->graph_begin(be));
    int rc = fwd_bwd_direct(t, loss_scale);
    tb_graph *g = NULL;
    int end_rc = be->graph_end(be, &g); /* ends the capture even after a failure */
    if (rc == TB_OK)
        rc = end_rc;
    if (rc != TB_OK) {
        /* The graph of a step that failed is never launched: free it now.
         * A failure to free only adds to the chain; the step's is returned. */
        if (g)
            (void)be->graph_destroy(be, g);
        return rc;
    }
    t->graph[acc] = g;
    t->graph_scale = loss_scale;
    return TB_OK;
}

/* Two graphs, one per value of grad_accumulate: with gradient accumulation
 * and grads set to none, the first micro-batch of a step writes the
 * gradients and the others add to them, and one capture would freeze
 * whichever the capture's micro-batch did. The loss scale is a frozen
 * argument too: when dynamic loss scaling changes it (a rare event: an
 * overflow, or 2000 good steps), both graphs are captured again at the new
 * scale, not dropped for launches. */
int tb_train_graph_fwd_bwd(tb_trainer *t, int size, float loss_scale)
{
    tb_model *m = t->model;
    int acc = m->ctx.grad_accumulate ? 1 : 0;
    if (size != t->cfg.batch_size)
        return fwd_bwd_direct(t, loss_scale);
    if (t->graph_warm < TB_GRAPH_WARMUP) {
        t->graph_warm++;
        return fwd_bwd_direct(t, loss_scale);
    }
    if ((t->graph[0] || t->graph[1]) && loss_scale != t->graph_scale)
        TB_TRY(drop_graphs(t));
    if (!t->graph[acc])
        TB_TRY(graph_capture(t, acc, loss_scale)); /* recorded, not run: launch it below */
    TB_TRY(t->be->graph_launch(t->be, t->graph[acc]));
    m->ctx.grad_accumulate = 1; /* what the replayed backward leaves, as tb_model_backward does */
    return TB_OK;
}
