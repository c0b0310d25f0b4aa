/* train.c - see train.h.
 * Tests: bazel test //lib/train:train_test (and the other training_test
 * targets of lib/train/BUILD). */
#include "lib/train/train.h"

#include "lib/core/atomic_file.h"

#include "lib/core/clock.h"
#include "lib/nn/amp.h"
#include "lib/train/train_device.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xmmintrin.h>

/* Sets or clears FTZ and DAZ (MXCSR bits 15 and 6) on the calling thread
 * and on every OpenMP thread the CPU kernels use: MXCSR is per thread.
 * Denormal operands cost ~100 cycles each; small CNN gradients produce
 * them after a few hundred steps, and the epoch runs 2x slower. */
static int denormals_set(tb_backend *be, int flush)
{
    tb_device_info info;
    TB_TRY(be->device_info(be, &info));
    int threads = info.threads > 0 ? info.threads : 1;
    const unsigned bits = 0x8040;
#pragma omp parallel num_threads(threads)
    _mm_setcsr(flush ? (_mm_getcsr() | bits) : (_mm_getcsr() & ~bits));
    return TB_OK;
}

/* ---- datasets ---- */

void tb_train_split_sizes(const tb_config *cfg, long *train, long *test)
{
    /* On-the-fly data costs nothing to hold, but evaluation runs the whole
     * test split: ResNet-50's forward at 224 took 0.8 s per sample on this
     * project's 2 cores (10,000 samples: over 2 hours), GPT-2's at context
     * 1024 ~30 s per sequence, so the big models evaluate on a few batches */
    long def_train = 50000, def_test = 10000;
    if (cfg->model == TB_MODEL_RESNET50)
        def_test = TB_RESNET50_TEST_SAMPLES;
    if (cfg->model == TB_MODEL_GPT2) {
        def_train = 10000;
        def_test = TB_GPT2_TEST_SAMPLES;
    }
    *train = cfg->data_limit > 0 ? (long)cfg->data_limit : def_train;
    *test = cfg->test_limit > 0 ? (long)cfg->test_limit : def_test;
}

static int open_synthetic(const tb_config *cfg, tb_split split, tb_dataset **out)
{
    long n_train, n_test;
    tb_train_split_sizes(cfg, &n_train, &n_test);
    long n = split == TB_SPLIT_TRAIN ? n_train : n_test;
    if (n > 0x7fffffffL)
        return TB_FAIL(TB_ERR_INVALID, "--%s=%ld: at most 2147483647 samples",
                       split == TB_SPLIT_TRAIN ? "data-limit" : "test-limit", n);
    if (cfg->model == TB_MODEL_GPT2) {
        tb_token_cfg tc = {.n = (int)n, .seq = cfg->context, .vocab = cfg->vocab,
                           .seed = (uint64_t)cfg->seed, .split = split};
        return tb_dataset_tokens_create(&tc, out);
    }
    int wide = cfg->model == TB_MODEL_WIDE_CNN, resnet = cfg->model == TB_MODEL_RESNET50;
    tb_synthetic_cfg sc = {
        .n = (int)n, .c = wide || resnet ? 3 : 1, .h = wide ? 32 : 28, .w = wide ? 32 : 28,
        .num_classes = 10, .seed = (uint64_t)cfg->seed, .noise = -1, .split = split,
    };
    if (resnet) { /* ImageNet-shaped, made per sample (50,000 of 3x224x224: 7.5 GB) */
        sc.h = sc.w = cfg->image_size;
        sc.num_classes = 1000;
        sc.on_the_fly = 1;
    }
    return tb_dataset_synthetic_create(&sc, out);
}

int tb_train_open_split(const tb_config *cfg, tb_split split, tb_dataset **out)
{
    if (cfg->dataset == TB_DATA_SYNTHETIC)
        return open_synthetic(cfg, split, out);
    long long limit = split == TB_SPLIT_TRAIN ? cfg->data_limit : cfg->test_limit;
    return tb_dataset_open_fashion_mnist(cfg->data_dir, split, (long)limit, out);
}

/* ---- building ---- */

static int make_loader(tb_trainer *t, const tb_dataset *ds, int train, tb_loader **out)
{
    const tb_config *c = &t->cfg;
    tb_loader_cfg lc = tb_loader_default_cfg();
    lc.batch_size = c->batch_size;
    lc.shuffle = train;
    lc.drop_last = 0;
    lc.seed = (uint64_t)c->seed;
    lc.num_workers = c->workers;
    lc.prefetch_factor = c->prefetch_factor;
    lc.persistent_workers = c->persistent_workers;
    lc.mode = (tb_worker_mode)c->worker_mode;
    lc.augment = train && c->augment ? tb_augment_train_defaults(ds) : tb_augment_eval_defaults();
    lc.raw_u8 = train && c->augment_on_device;
    lc.nhwc = c->channels_last;
    return tb_loader_create(&lc, ds, out);
}

/* --amp's autocast dtype (TB_F32: off). */
static tb_dtype amp_dtype_of(const tb_config *c)
{
    return c->amp_dtype == TB_AMP_BF16 ? TB_BF16 : c->amp_dtype == TB_AMP_FP16 ? TB_F16 : TB_F32;
}

const tb_layer_spec *tb_train_model_spec(const tb_config *c)
{
    return c->model == TB_MODEL_WIDE_CNN      ? tb_spec_wide_cnn
           : c->model == TB_MODEL_TRANSFORMER ? tb_spec_transformer
           : c->model == TB_MODEL_RESNET50    ? tb_spec_resnet50
           : c->model == TB_MODEL_GPT2        ? NULL
                                              : tb_spec_small_cnn;
}

tb_gpt2_dims tb_train_gpt2_dims(const tb_config *c)
{
    tb_gpt2_dims g = tb_gpt2_small();
    g.context = c->context > 0 ? c->context : g.context;
    g.layers = c->layers > 0 ? c->layers : g.layers;
    g.vocab = c->vocab > 0 ? c->vocab : g.vocab;
    if (c->width > 0) { /* heads of 64 dimensions and a 4d MLP, as GPT-2 small's */
        g.dim = c->width;
        g.heads = c->width / 64;
        g.mlp = 4 * c->width;
    }
    return g;
}

/* The data must be what the model reads: a token model its token sequences
 * (a test or a caller may hand the trainer its own datasets). */
static int check_data_fits(const tb_config *c, const tb_dataset *ds)
{
    int tokens = ds->kind == TB_SAMPLES_TOKENS;
    if (tb_config_token_model(c) && (!tokens || ds->seq != c->context || ds->vocab != c->vocab))
        return TB_FAIL(TB_ERR_DATA, "--model=%s reads token sequences of --context=%d ids "
                       "below --vocab=%d; the data (%s) is not that", tb_model_names[c->model],
                       c->context, c->vocab, ds->name);
    if (!tb_config_token_model(c) && tokens)
        return TB_FAIL(TB_ERR_DATA, "--model=%s reads images; the data (%s) is token ids",
                       tb_model_names[c->model], ds->name);
    return TB_OK;
}

static int make_model(tb_trainer *t)
{
    const tb_config *c = &t->cfg;
    const tb_dataset *ds = t->train_ds;
    tb_model_opts mo = {
        .in = {ds->c, ds->h, ds->w}, .classes = ds->num_classes, .max_batch = c->batch_size,
        .conv_bias = tb_config_conv_bias(c), .dropout = (float)c->dropout,
        .seed = (uint64_t)c->seed, .channels_last = c->channels_last, .amp = amp_dtype_of(c),
        .gelu_approx = tb_config_gelu_approx(c),
    };
    mo.checkpointing = c->checkpointing;
    mo.fp32_acts = c->detect_anomaly;
    if (tb_config_token_model(c)) {
        tb_gpt2_dims g = tb_train_gpt2_dims(c);
        TB_TRY(tb_model_build_gpt2(t->be, &g, &mo, &t->model));
    } else if (c->model == TB_MODEL_RESNET50 && c->width > 0) {
        tb_layer_spec spec[TB_SPEC_RESNET50_LEN];
        tb_spec_resnet50_width(c->width, spec);
        TB_TRY(tb_model_build(t->be, spec, &mo, &t->model));
    } else {
        TB_TRY(tb_model_build(t->be, tb_train_model_spec(c), &mo, &t->model));
    }
    t->model->ctx.gelu_approx = mo.gelu_approx;
    t->model->ctx.gelu = c->fused_gelu ? TB_GELU_FUSED : TB_GELU_UNFUSED;
    t->model->ctx.conv_autotune = c->conv_autotune;
    t->model->ctx.conv_deterministic = c->cudnn_deterministic;
    t->model->ctx.layernorm = c->fused_layernorm ? TB_LN_FUSED : TB_LN_UNFUSED;
    t->model->ctx.attention = c->fused_attention ? TB_ATTN_FUSED : TB_ATTN_MANUAL;
    t->model->ctx.math = c->tf32 ? TB_MATH_TF32 : TB_MATH_F32;
    t->model->ctx.conv_math = tb_config_conv_tf32(c, t->be->name) ? TB_MATH_TF32 : TB_MATH_F32;
    return TB_OK;
}

int tb_trainer_enable_loss_scaling(tb_trainer *t)
{
    if (t->loss_scaling)
        return TB_OK;
    TB_TRY(tb_loss_scaler_init(&t->scaler, t->be));
    t->loss_scaling = 1;
    return TB_OK;
}

/* Labels per sample: seq for a token dataset (the next token at every
 * position), else 1. */
static int labels_per_sample(const tb_dataset *ds)
{
    return ds->kind == TB_SAMPLES_TOKENS ? ds->seq : 1;
}

/* The device batch, and its host staging when channels last converts it.
 * A token model's batch is (B, 1, T, 1) int32 ids: the tensor's 4-byte
 * elements hold the ids' bits (x.dtype says so), never cast to float. */
static int make_batch_buffers(tb_trainer *t)
{
    const tb_config *c = &t->cfg;
    const tb_dataset *ds = t->train_ds;
    TB_TRY(tb_tensor_alloc(t->be, c->batch_size, ds->c, ds->h, ds->w, &t->x));
    if (ds->kind == TB_SAMPLES_TOKENS)
        t->x.dtype = TB_I32;
    if (c->channels_last)
        t->x.layout = TB_NHWC;
    TB_TRY(t->be->dev_alloc(t->be, (void **)&t->labels,
                            (size_t)c->batch_size * labels_per_sample(ds) * sizeof(int32_t)));
    t->x_in = &t->x;
    t->labels_in = t->labels;
    return TB_OK;
}

int tb_train_optim_init(const tb_config *c, tb_model *m, tb_optim *opt)
{
    tb_opt_hparams hp = {
        .kind = (tb_opt_kind)c->optimizer, .lr = (float)c->lr, .momentum = (float)c->momentum,
        .weight_decay = (float)c->weight_decay, .beta1 = (float)c->beta1,
        .beta2 = (float)c->beta2, .eps = (float)c->eps, .trust_coef = (float)c->trust_coef,
        .grad_scale = 1.0f,
    };
    tb_lr_schedule s = {.peak_lr = tb_config_peak_lr(c), .warmup_steps = c->warmup_steps};
    return tb_optim_init(opt, m, &hp, &s, c->fused_optimizer);
}

/* --trace's op breakdown: the layers' hook forwards to the trace. */
static void op_hook_begin(void *user, const char *name, const char *family, int backward)
{
    tb_trace_op_begin(user, name, family, backward);
}

static int op_hook_end(void *user, double flops, double bytes, int sub_op)
{
    return tb_trace_op_end(user, flops, bytes, sub_op);
}

/* Device buffers and state of the trainer's toggles (loss read interval,
 * anomaly detection, device-side data, CUDA graphs). */
static int make_toggles(tb_trainer *t)
{
    const tb_config *c = &t->cfg;
    tb_backend *be = t->be;
    if (c->loss_read_every > 1) {
        TB_TRY(be->dev_alloc(be, (void **)&t->loss_acc, sizeof(float)));
        TB_TRY(be->memset(be, t->loss_acc, 0, sizeof(float), NULL));
    }
    if (c->detect_anomaly) {
        TB_TRY(be->dev_alloc(be, (void **)&t->anomaly_count, sizeof(float)));
        t->model->ctx.detect_anomaly = 1;
        t->model->ctx.anomaly_count = t->anomaly_count;
    }
    if (c->trace) {
        t->trace = calloc(1, sizeof *t->trace);
        if (!t->trace)
            return TB_FAIL(TB_ERR_NOMEM, "out of host memory for the step trace");
        TB_TRY(tb_trace_init(t->trace, be));
        t->op_hook = (tb_layer_hook){op_hook_begin, op_hook_end, t->trace};
    }
    return TB_OK;
}

static int trainer_build(tb_trainer *t)
{
    const tb_config *c = &t->cfg;
    /* the trace is written when the run ends: a bad place fails first */
    if (c->trace)
        TB_TRY(tb_atomic_check_writable(c->trace, "--trace"));
    /* --amp=fp16 on the CPU stops here, with the backend's reason */
    TB_TRY(tb_amp_probe(t->be, amp_dtype_of(c)));
    TB_TRY(tb_train_device_refuse(c, t->be));
    TB_TRY(tb_train_staging_init(t));
    TB_TRY(check_data_fits(c, t->train_ds));
    TB_TRY(check_data_fits(c, t->test_ds));
    TB_TRY(make_loader(t, t->train_ds, 1, &t->train_ld));
    TB_TRY(make_loader(t, t->test_ds, 0, &t->test_ld));
    TB_TRY(make_model(t));
    TB_TRY(tb_train_optim_init(&t->cfg, t->model, &t->opt));
    TB_TRY(make_toggles(t));
    if (c->amp_dtype == TB_AMP_FP16)
        TB_TRY(tb_trainer_enable_loss_scaling(t));
    TB_TRY(make_batch_buffers(t));
    return tb_train_device_init(t);
}

static int check_splits(const tb_dataset *a, const tb_dataset *b)
{
    if (a->c != b->c || a->h != b->h || a->w != b->w || a->num_classes != b->num_classes ||
        a->kind != b->kind)
        return TB_FAIL(TB_ERR_DATA, "train (%s) and test (%s) sets differ in shape or classes",
                       a->name, b->name);
    return TB_OK;
}

int tb_trainer_create_with_data(const tb_config *cfg, tb_backend *be, const tb_dataset *train,
                             const tb_dataset *test, tb_trainer **out)
{
    *out = NULL;
    TB_TRY(check_splits(train, test));
    tb_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory creating a trainer");
    t->cfg = *cfg;
    t->be = be;
    t->step_epoch = -1;
    t->train_ds = train;
    t->test_ds = test;
    int rc;
    TB_TRY_GOTO(rc, denormals_set(be, cfg->flush_denormal), out_destroy);
    TB_TRY_GOTO(rc, trainer_build(t), out_destroy);
    *out = t;
    return TB_OK;

out_destroy:
    tb_trainer_destroy(t);
    return rc;
}

int tb_trainer_create(const tb_config *cfg, tb_backend *be, tb_trainer **out)
{
    *out = NULL;
    tb_dataset *train = NULL, *test = NULL;
    int rc;
    TB_TRY_GOTO(rc, tb_train_open_split(cfg, TB_SPLIT_TRAIN, &train), out_free_data);
    TB_TRY_GOTO(rc, tb_train_open_split(cfg, TB_SPLIT_TEST, &test), out_free_data);
    TB_TRY_GOTO(rc, tb_trainer_create_with_data(cfg, be, train, test, out), out_free_data);
    (*out)->owned_train = train;
    (*out)->owned_test = test;
    return TB_OK;

out_free_data:
    tb_dataset_free(train);
    tb_dataset_free(test);
    return rc;
}

void tb_trainer_destroy(tb_trainer *t)
{
    if (!t)
        return;
    (void)tb_train_graphs_drop(t); /* before the buffers they write go */
    /* waits for the staged copies before the buffers they read go; its
     * status is lost here, as dev_free's below: a failing device has
     * failed a step already */
    (void)tb_staging_destroy(t->staging);
    tb_loader_destroy(t->train_ld);
    tb_loader_destroy(t->test_ld);
    if (t->opt.be)
        tb_optim_free(&t->opt);
    tb_model_destroy(t->model);
    tb_tensor_free(&t->x);
    if (t->labels)
        t->be->dev_free(t->be, t->labels);
    if (t->loss_acc)
        t->be->dev_free(t->be, t->loss_acc);
    if (t->anomaly_count)
        t->be->dev_free(t->be, t->anomaly_count);
    if (t->trace)
        tb_trace_free(t->trace);
    free(t->trace);
    tb_loss_scaler_free(&t->scaler);
    tb_train_device_free(t);
    tb_dataset_free(t->owned_train);
    tb_dataset_free(t->owned_test);
    free(t);
}

/* ---- training ---- */

/* A loader batch to the device (lib/train/train_device.c): t->x_in and
 * t->labels_in are what the model then reads. With --channels-last the
 * loader already wrote the images NHWC (make_loader: tb_loader_cfg.nhwc). */
static int batch_to_device(tb_trainer *t, const tb_batch *b)
{
    TB_TRY(tb_tensor_set_batch(&t->x, b->size));
    if (b->tokens) /* the ids' bytes, as they are */
        return tb_train_device_batch(t, b, b->tokens);
    return tb_train_device_batch(t, b, b->images);
}

/* The op events of a traced step's forward and backward (not evaluation's;
 * not under --cuda-graphs, whose replay launches no layer). */
static void op_trace(tb_trainer *t, int on)
{
    if (t->trace && !t->cfg.cuda_graphs)
        t->model->ctx.hook = on ? &t->op_hook : NULL;
}

/* --trace phases; no-ops when tracing is off. */
static void phase_begin(tb_trainer *t, tb_phase p)
{
    if (t->trace)
        tb_trace_begin(t->trace, p);
}

static int phase_end(tb_trainer *t, tb_phase p)
{
    return t->trace ? tb_trace_end(t->trace, p) : TB_OK;
}

/* --detect-anomaly: the loss's per-row values (the layers check themselves). */
static int anomaly_check_loss(tb_trainer *t)
{
    tb_backend *be = t->be;
    float bad;
    TB_TRY(be->count_nonfinite(be, t->model->loss.row_loss, (size_t)t->model->loss.n,
                               t->anomaly_count));
    TB_TRY(be->copy_d2h(be, &bad, t->anomaly_count, sizeof bad, NULL));
    if (bad > 0)
        return TB_FAIL(TB_ERR_NUMERIC, "anomaly: forward of the loss (softmax cross-entropy) "
                       "produced %.0f NaN/Inf values", (double)bad);
    return TB_OK;
}

static int refuse_parked(const tb_trainer *t)
{
    if (t->parked)
        return TB_FAIL(TB_ERR_INVALID, "a step of a parked trainer: tb_trainer_unpark it first");
    return TB_OK;
}

/* The training activations allocated (a no-op where they are): after a
 * park or an --eval-no-grad evaluation. Out of memory, what it did
 * allocate goes back and the model stays under no_grad, whole. */
static int training_acts(tb_trainer *t)
{
    int rc = tb_model_set_no_grad(t->model, 0);
    if (rc != TB_OK)
        (void)tb_model_set_no_grad(t->model, 1);
    return rc;
}

/* Copy, forward, loss, backward. read: *loss is the batch's mean loss, read
 * from the device (a host sync); otherwise the batch's loss sum is added to
 * t->loss_acc on the device and *loss is 0. */
static int micro_batch(tb_trainer *t, const tb_batch *b, float loss_scale, int read, float *loss)
{
    TB_TRY(refuse_parked(t));
    TB_TRY(training_acts(t)); /* what an --eval-no-grad evaluation freed (tb_trainer_evaluate) */
    phase_begin(t, TB_PHASE_COPY);
    TB_TRY(batch_to_device(t, b));
    TB_TRY(phase_end(t, TB_PHASE_COPY));
    op_trace(t, 1);
    phase_begin(t, TB_PHASE_FORWARD);
    if (t->cfg.cuda_graphs) /* forward and backward: one replay (lib/train/train_device.c) */
        TB_TRY(tb_train_graph_fwd_bwd(t, b->size, loss_scale));
    else
        TB_TRY(tb_model_forward_loss(t->model, t->x_in, t->labels_in, NULL));
    if (t->cfg.detect_anomaly)
        TB_TRY(anomaly_check_loss(t));
    TB_TRY(phase_end(t, TB_PHASE_FORWARD));
    phase_begin(t, TB_PHASE_BACKWARD);
    if (!t->cfg.cuda_graphs)
        TB_TRY(tb_model_backward(t->model, loss_scale));
    TB_TRY(phase_end(t, TB_PHASE_BACKWARD));
    op_trace(t, 0);
    *loss = 0;
    if (read)
        return tb_xent_read_loss(&t->model->loss, loss);
    return t->be->axpby(t->be, 1.0f, t->model->loss.loss_sum, 1.0f, t->loss_acc, 1);
}

int tb_train_micro_batch(tb_trainer *t, const tb_batch *b, float loss_scale, float *loss)
{
    return micro_batch(t, b, loss_scale, 1, loss);
}

/* --loss-read-every=N: the one host read of the loss sums accumulated on
 * the device since the last one. The device sums loss rows: a token
 * model's T per sample, so the per-sample sum *loss_sum keeps (mean loss x
 * samples, as the read path adds) is the row sum / T. */
static int loss_flush(tb_trainer *t, tb_epoch_stats *st, double *loss_sum)
{
    if (!t->loss_acc || t->loss_unread_steps == 0)
        return TB_OK;
    float sum, per = (float)labels_per_sample(t->train_ds);
    TB_TRY(t->be->copy_d2h(t->be, &sum, t->loss_acc, sizeof sum, NULL));
    TB_TRY(t->be->memset(t->be, t->loss_acc, 0, sizeof(float), NULL));
    *loss_sum += sum / per;
    st->last_loss = t->loss_unread_images ? sum / ((float)t->loss_unread_images * per) : 0;
    t->loss_unread_steps = 0;
    t->loss_unread_images = 0;
    return TB_OK;
}

/* What backward multiplies the loss by: the loss scale when scaling. */
static float loss_scale_of(const tb_trainer *t)
{
    return t->loss_scaling ? t->scaler.scale : 1.0f;
}

/* The optimizer step; with loss scaling, it unscales the gradients
 * (grad_scale) and is skipped when they hold Inf/NaN (GradScaler.step). */
static int optimizer_step(tb_trainer *t)
{
    if (!t->loss_scaling)
        return tb_optim_step(&t->opt);
    int skip;
    t->opt.hp.grad_scale = t->scaler.scale;
    TB_TRY(tb_loss_scaler_update(&t->scaler, t->model->flat_g, t->model->numel, &skip));
    return skip ? TB_OK : tb_optim_step(&t->opt);
}

/* Next batch: 1 got one, 0 end of epoch, else a tb_err. */
static int next_batch(tb_loader *ld, tb_batch *b, int *got)
{
    int rc = tb_loader_next_batch(ld, b);
    if (rc < 0)
        return -rc;
    *got = rc;
    return TB_OK;
}

/* The next training batch. roll_over: when the loader's epoch has run out
 * (or none has begun), the next one begins, so *got is always 1; else *got
 * is 0 at the end of the epoch the caller began. */
static int fetch_train_batch(tb_trainer *t, int roll_over, tb_batch *b, int *got)
{
    *got = 0;
    if (!roll_over || t->step_epoch >= 0)
        TB_TRY(next_batch(t->train_ld, b, got));
    if (*got || !roll_over)
        return TB_OK;
    if (t->step_epoch >= 0)
        TB_TRY(tb_loader_epoch_end(t->train_ld));
    TB_TRY(tb_loader_epoch_begin(t->train_ld, ++t->step_epoch));
    TB_TRY(next_batch(t->train_ld, b, got));
    if (!*got)
        return TB_FAIL(TB_ERR_DATA, "the training loader has no batches (empty dataset?)");
    return TB_OK;
}

int tb_trainer_next_batch(tb_trainer *t, tb_batch *b)
{
    int got;
    return fetch_train_batch(t, 1, b, &got);
}

/* One optimizer step over up to accum_steps micro-batches (fewer only at
 * the end of the epoch when !roll_over); *micro says how many the loader
 * still had (0: the epoch was already over, no step). read: every
 * micro-batch's loss is read from the device (st->last_loss is the step's
 * mean); otherwise the sums accumulate on the device until
 * --loss-read-every steps have passed. The step's images and its loss
 * (mean loss x batch size, read ones only) add to st->images and *loss_sum. */
static int step(tb_trainer *t, int roll_over, int read, tb_epoch_stats *st, double *loss_sum,
                int *micro)
{
    int accum = t->cfg.accum_steps;
    float step_loss = 0;
    TB_TRY(refuse_parked(t));
    if (t->trace)
        t->trace->step = t->steps;
    TB_TRY(tb_model_zero_grad(t->model, t->cfg.grads_to_none));
    for (*micro = 0; *micro < accum; (*micro)++) {
        tb_batch b;
        int got;
        phase_begin(t, TB_PHASE_DATA);
        TB_TRY(fetch_train_batch(t, roll_over, &b, &got));
        TB_TRY(phase_end(t, TB_PHASE_DATA));
        if (!got)
            break;
        float loss;
        TB_TRY(micro_batch(t, &b, loss_scale_of(t) / (float)accum, read, &loss));
        step_loss += loss;
        *loss_sum += (double)loss * b.size;
        st->images += b.size;
        t->loss_unread_images += read ? 0 : b.size;
    }
    if (*micro == 0)
        return TB_OK;
    phase_begin(t, TB_PHASE_OPTIMIZER);
    TB_TRY(optimizer_step(t));
    TB_TRY(phase_end(t, TB_PHASE_OPTIMIZER));
    if (read)
        st->last_loss = step_loss / (float)*micro;
    st->steps++;
    t->steps++;
    if (!read && ++t->loss_unread_steps >= t->cfg.loss_read_every)
        TB_TRY(loss_flush(t, st, loss_sum));
    return TB_OK;
}

int tb_train_epoch(tb_trainer *t, int epoch, tb_epoch_stats *st)
{
    memset(st, 0, sizeof *st);
    st->epoch = epoch;
    tb_model_train_mode(t->model, 1);
    tb_loader_reset_stats(t->train_ld);
    double t0 = tb_clock_s(), loss_sum = 0;
    int read = t->loss_acc == NULL;
    TB_TRY(tb_loader_epoch_begin(t->train_ld, epoch));
    for (;;) {
        int micro;
        TB_TRY(step(t, 0, read, st, &loss_sum, &micro));
        if (micro < t->cfg.accum_steps)
            break;
        if (t->cfg.max_steps > 0 && st->steps >= t->cfg.max_steps)
            break;
        if (t->deadline > 0 && tb_clock_s() >= t->deadline) {
            /* cut short only where batches remain: an epoch whose last
             * step met the deadline is whole, and its scheduled
             * evaluation counts (tb_trainer_fit) */
            tb_loader_stats now;
            tb_loader_get_stats(t->train_ld, &now);
            t->timed_out = now.batches < tb_loader_num_batches(t->train_ld);
            break;
        }
    }
    TB_TRY(loss_flush(t, st, &loss_sum));
    TB_TRY(tb_loader_epoch_end(t->train_ld));
    TB_TRY(t->be->sync(t->be));
    st->seconds = tb_clock_s() - t0;
    st->mean_loss = st->images ? loss_sum / (double)st->images : 0;
    st->images_per_s = st->seconds > 0 ? (double)st->images / st->seconds : 0;
    st->tokens_per_s = st->images_per_s * t->train_ds->seq;
    tb_loader_stats ls;
    tb_loader_get_stats(t->train_ld, &ls);
    st->loader_wait_s = ls.wait_s;
    return TB_OK;
}

int tb_trainer_step(tb_trainer *t, float *loss)
{
    tb_epoch_stats st = {0};
    double loss_sum = 0;
    int micro;
    tb_model_train_mode(t->model, 1);
    TB_TRY(step(t, 1, 1, &st, &loss_sum, &micro));
    *loss = st.last_loss;
    return TB_OK;
}

int tb_trainer_sync(tb_trainer *t)
{
    return t->be->sync(t->be);
}

int tb_trainer_park(tb_trainer *t)
{
    if (t->parked)
        return TB_OK;
    TB_TRY(tb_trainer_sync(t));
    TB_TRY(tb_train_graphs_drop(t)); /* before the buffers they write go */
    TB_TRY(tb_model_set_no_grad(t->model, 1));
    tb_model_no_grad_release(t->model); /* what an --eval-no-grad evaluation left */
    t->parked = 1;
    return TB_OK;
}

int tb_trainer_unpark(tb_trainer *t)
{
    if (!t->parked)
        return TB_OK;
    TB_TRY(training_acts(t)); /* parked as before, whole, where it fails */
    t->parked = 0;
    return TB_OK;
}

int tb_trainer_graph_settle_steps(const tb_config *c)
{
    if (!c->cuda_graphs)
        return 0;
    int k = c->accum_steps > 1 ? c->accum_steps : 1;
    /* the warm-up's micro-batches, then the step that captures the first
     * graph; with accumulation the other graph is captured by the next
     * step at the latest */
    return (TB_GRAPH_WARMUP + k - 1) / k + 1 + (k > 1);
}

/* ---- fitting: validation every N epochs, target accuracy, time limit ---- */

/* scheduled: 0 for an evaluation the time limit forced (after an epoch cut
 * short, or off the every-N schedule): it gives the fit's accuracy but does
 * not count as reaching the target, which the schedule would not have seen
 * then (validation_frequency's "every 5" reached it at a deadline's
 * evaluation, as if on schedule). */
static int fit_evaluate(tb_trainer *t, tb_fit_stats *st, double t0, tb_eval_stats *ev,
                        int scheduled)
{
    TB_TRY(tb_trainer_evaluate(t, ev));
    st->evaluations++;
    st->eval_s += ev->seconds;
    st->last_accuracy = ev->accuracy;
    if (ev->accuracy > st->best_accuracy)
        st->best_accuracy = ev->accuracy;
    double target = t->cfg.target_accuracy;
    if (target > 0 && ev->accuracy >= target && !st->reached_target && !scheduled)
        st->target_at_deadline = 1;
    if (target > 0 && ev->accuracy >= target && !st->reached_target && scheduled) {
        st->reached_target = 1;
        st->time_to_target_s = tb_clock_s() - t0;
    }
    return TB_OK;
}

int tb_trainer_fit(tb_trainer *t, tb_fit_stats *st, tb_fit_epoch_fn on_epoch, void *user)
{
    const tb_config *c = &t->cfg;
    memset(st, 0, sizeof *st);
    st->time_to_target_s = -1;
    st->stopped_by = "epochs";
    double t0 = tb_clock_s();
    t->deadline = c->max_time > 0 ? t0 + c->max_time : 0;
    t->timed_out = 0;
    for (int e = 0; e < c->epochs; e++) {
        tb_epoch_stats es;
        tb_eval_stats ev;
        TB_TRY(tb_train_epoch(t, e, &es));
        st->epochs++;
        st->train_s += es.seconds;
        int last = e + 1 == c->epochs || t->timed_out;
        int due = (c->val_every > 0 && (e + 1) % c->val_every == 0) || last;
        /* on the schedule: every N epochs or the last, the epoch whole */
        int scheduled = !t->timed_out &&
                        ((c->val_every > 0 && (e + 1) % c->val_every == 0) || e + 1 == c->epochs);
        if (due)
            TB_TRY(fit_evaluate(t, st, t0, &ev, scheduled));
        if (on_epoch)
            on_epoch(&es, due ? &ev : NULL, user);
        if (st->reached_target) {
            st->stopped_by = "target";
            break;
        }
        if (t->timed_out || (t->deadline > 0 && tb_clock_s() >= t->deadline)) {
            st->stopped_by = "time";
            if (!due) /* end with an accuracy (not on the schedule: no target) */
                TB_TRY(fit_evaluate(t, st, t0, &ev, 0));
            break;
        }
    }
    st->total_s = tb_clock_s() - t0;
    t->deadline = 0;
    return TB_OK;
}

/* The least traffic of one optimizer step: weights and gradients, and the
 * state it keeps (SGD's momentum; AdamW's, LAMB's two moments), 4 bytes
 * each, read and written (gradients read only). */
static double optimizer_bytes(const tb_trainer *t)
{
    double n = (double)t->model->numel;
    int adam_like = t->cfg.optimizer != TB_OPT_SGD && t->cfg.optimizer != TB_OPT_LARS;
    return 4.0 * n * (adam_like ? 7.0 : 5.0);
}

/* PATH.ops.txt beside the trace: the op breakdown (also to stderr). */
static int write_summary(tb_trainer *t)
{
    char path[4096];
    int len = snprintf(path, sizeof path, "%s.ops.txt", t->cfg.trace);
    if (len < 0 || (size_t)len >= sizeof path)
        return TB_FAIL(TB_ERR_INVALID, "trace path too long: %s", t->cfg.trace);
    t->trace->optimizer_bytes = optimizer_bytes(t);
    tb_trace_summary(t->trace, 1, stderr);
    tb_atomic_file af;
    TB_TRY(tb_atomic_open(&af, path));
    tb_trace_summary(t->trace, 1, af.fp);
    return tb_atomic_commit(&af);
}

int tb_trainer_write_trace(tb_trainer *t)
{
    if (!t->trace)
        return TB_OK;
    TB_TRY(tb_trace_flush(t->trace));
    TB_TRY(tb_trace_write(t->trace, t->cfg.trace));
    return write_summary(t);
}

/* ---- evaluation ---- */

static long count_correct(const float *logits, const int32_t *labels, int n, int classes)
{
    long correct = 0;
    for (int i = 0; i < n; i++) {
        const float *row = logits + (size_t)i * classes;
        int best = 0;
        for (int k = 1; k < classes; k++)
            if (row[k] > row[best])
                best = k;
        correct += best == labels[i];
    }
    return correct;
}

/* Host room for the logits evaluation reads at a time: at most
 * EVAL_CHUNK_FLOATS, whole rows (GPT-2's batch of 4 x 1024 rows of 50,257
 * logits would be 823 MB in one piece). */
#define EVAL_CHUNK_FLOATS (4u << 20)
static int eval_chunk_rows(const tb_trainer *t)
{
    size_t rows = EVAL_CHUNK_FLOATS / (size_t)t->model->classes;
    size_t all = (size_t)t->cfg.batch_size * labels_per_sample(t->train_ds);
    rows = rows < 1 ? 1 : rows > all ? all : rows;
    return (int)rows;
}

/* The argmax of every row of logits (rows of classes floats, device
 * memory: a token model's rows are its (sample, position) pairs) against
 * labels, a chunk of rows at a time through host. */
static int correct_rows(tb_trainer *t, const float *logits, const int32_t *labels, int rows,
                        float *host, long *correct)
{
    int classes = t->model->classes, chunk = eval_chunk_rows(t);
    for (int r = 0; r < rows; r += chunk) {
        int n = rows - r < chunk ? rows - r : chunk;
        size_t at = (size_t)r * classes;
        TB_TRY(t->be->copy_d2h(t->be, host, logits + at, (size_t)n * classes * sizeof(float),
                               NULL));
        *correct += count_correct(host, labels + r, n, classes);
    }
    return TB_OK;
}

static int eval_batch(tb_trainer *t, const tb_batch *b, float *host_logits, tb_eval_stats *st)
{
    const tb_tensor *logits;
    float loss;
    int rows = b->size * labels_per_sample(t->test_ds);
    TB_TRY(batch_to_device(t, b));
    TB_TRY(tb_model_forward_loss(t->model, t->x_in, t->labels_in, &logits));
    TB_TRY(tb_xent_read_loss(&t->model->loss, &loss));
    if (tb_tensor_numel(logits) != (size_t)rows * t->model->classes)
        return TB_FAIL(TB_ERR_INTERNAL, "evaluation: %zu logits for %d rows of %d classes",
                       tb_tensor_numel(logits), rows, t->model->classes);
    TB_TRY(correct_rows(t, logits->data, b->labels, rows, host_logits, &st->correct));
    st->images += b->size;
    st->predictions += rows;
    st->mean_loss += (double)loss * b->size;
    return TB_OK;
}

int tb_trainer_evaluate(tb_trainer *t, tb_eval_stats *st)
{
    memset(st, 0, sizeof *st);
    if (t->parked)
        return TB_FAIL(TB_ERR_INVALID, "evaluating a parked trainer: tb_trainer_unpark it first");
    double t0 = tb_clock_s();
    size_t bytes = (size_t)eval_chunk_rows(t) * t->model->classes * sizeof(float);
    float *host_logits = malloc(bytes);
    if (!host_logits)
        return TB_FAIL(TB_ERR_NOMEM, "out of host memory for evaluation logits");
    int rc, got;
    tb_model_train_mode(t->model, 0);
    /* --eval-no-grad: the training activations are freed for the loop and
     * stay freed after it, as PyTorch's evaluation under no_grad holds no
     * training memory: the evaluations after it reuse the no_grad scratch,
     * and the next training forward allocates the activations again
     * (micro_batch), at other addresses: graphs that baked them in go
     * first. (Freed and allocated again in every evaluation, each timed
     * evaluation of bench:no_grad_eval held that work, which PyTorch's
     * does not do.) */
    if (t->cfg.eval_no_grad)
        TB_TRY_GOTO(rc, tb_train_graphs_drop(t), out_free_logits);
    TB_TRY_GOTO(rc, tb_model_set_no_grad(t->model, t->cfg.eval_no_grad), out_free_logits);
    TB_TRY_GOTO(rc, t->be->mem_reset_peak(t->be), out_free_logits);
    TB_TRY_GOTO(rc, tb_loader_epoch_begin(t->test_ld, 0), out_free_logits);
    for (;;) {
        tb_batch b;
        TB_TRY_GOTO(rc, next_batch(t->test_ld, &b, &got), out_free_logits);
        if (!got)
            break;
        TB_TRY_GOTO(rc, eval_batch(t, &b, host_logits, st), out_free_logits);
    }
    TB_TRY_GOTO(rc, tb_loader_epoch_end(t->test_ld), out_free_logits);
    TB_TRY_GOTO(rc, t->be->mem_stats(t->be, NULL, &st->mem_peak), out_free_logits);
    st->accuracy = st->predictions ? (double)st->correct / (double)st->predictions : 0;
    st->mean_loss = st->images ? st->mean_loss / (double)st->images : 0;
    st->seconds = tb_clock_s() - t0;

out_free_logits:
    tb_model_train_mode(t->model, 1);
    free(host_logits);
    return rc;
}

int tb_trainer_one_epoch(tb_config *cfg, tb_backend *be, const tb_dataset *train,
                         const tb_dataset *test, tb_epoch_stats *es, tb_eval_stats *ev)
{
    TB_TRY(tb_config_validate(cfg));
    tb_trainer *t;
    if (train)
        TB_TRY(tb_trainer_create_with_data(cfg, be, train, test, &t));
    else
        TB_TRY(tb_trainer_create(cfg, be, &t));
    int rc;
    TB_TRY_GOTO(rc, tb_train_epoch(t, 0, es), out_destroy);
    if (ev)
        TB_TRY_GOTO(rc, tb_trainer_evaluate(t, ev), out_destroy);

out_destroy:
    tb_trainer_destroy(t);
    return rc;
}
