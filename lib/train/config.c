/* config.c - see config.h. */
#include "lib/train/config.h"

#include <stdio.h>
#include <string.h>

#include "lib/core/status.h"

const char *const tb_model_names[] = {"small_cnn", "wide_cnn", "transformer", "resnet50",
                                      "gpt2", NULL};
const char *const tb_gelu_names[] = {"auto", "erf", "tanh", NULL};
const char *const tb_dataset_names[] = {"fashion_mnist", "synthetic", NULL};
const char *const tb_optimizer_names[] = {"sgd", "adamw", "lars", "lamb", "novograd", NULL};
static const char *const worker_mode_names[] = {"threads", "processes", NULL};
/* in tb_amp_dtype order */
const char *const tb_amp_names[] = {"off", "bf16", "fp16", NULL};

/* Default batches of the big models at their default sizes, sized for this
 * project's machine (24 GB, CPU backend; see tb_config_model_batch), from
 * peak RSS (/usr/bin/time -v) of bench:train with SGD, one step and its
 * evaluation:
 *   gpt2: 2.67 GB at context 256 x batch 2 and 3.97 GB at context 1024 x
 *     batch 1, i.e. ~1.7 GB of weights, gradients and momentum (124M floats
 *     each) plus ~2.3 GB per 1024-token sequence (activations, attention
 *     matrices, the 50,257-wide logits). Batch 4: ~11 GB (AdamW +0.5 GB);
 *     batch 8 would be ~20 GB, too close to 24 GB beside the system.
 *   resnet50: 1.70 GB at 224 x batch 4 and 0.70 GB at 64 x batch 8, i.e.
 *     ~0.5 GB of weights, gradients and momentum plus ~0.30 GB per 224 x 224
 *     sample (activations scale with the pixels: 24 MB at 64 x 64). Batch
 *     32: ~10 GB; 64 would be ~20 GB.
 * Checked at the defaults (bench:train --max-steps=1, one step and the
 * default evaluation): resnet50 10.0 GB, gpt2 10.6 GB peak RSS. */
#define RESNET50_BATCH 32
#define GPT2_BATCH 4
#define STR_(x) #x
#define STR(x) STR_(x)

/* The model's own sizes (--image-size, --context, --layers, --vocab = 0). */
#define RESNET50_IMAGE 224
#define GPT2_CONTEXT 1024
#define GPT2_LAYERS 12
#define GPT2_VOCAB 50257
#define GPT2_WIDTH 768
#define RESNET50_WIDTH 64

/* One row per field of tb_config: its flag, its default as the command line
 * would write it, and its help. tb_config_defaults, tb_config_flags and
 * tb_config_describe all read this table, so a toggle added here is parsed,
 * defaulted and described. A string field with default "" stays NULL. */
typedef struct config_field {
    tb_flag_kind kind;
    const char *name;              /* the flag, without "--" */
    size_t offset;                 /* of the field in tb_config */
    const char *def;
    const char *const *choices;    /* TB_FLAG_CHOICE only */
    const tb_flag_range *range;    /* numeric flags: the values that mean something */
    const char *help;
} config_field;

#define ROW(kind, nm, field, def, choices, help) \
    {TB_FLAG_##kind, nm, offsetof(tb_config, field), def, choices, NULL, help}
#define NUM(kind, nm, field, def, range, help) \
    {TB_FLAG_##kind, nm, offsetof(tb_config, field), def, NULL, range, help}

static const config_field fields[] = {
    ROW(STRING, "device", device, "auto", NULL, "auto, cpu, cuda or cuda:N"),
    NUM(INT, "threads", threads, "0", TB_RANGE(0, TB_THREADS_MAX), "CPU kernel threads, 0 = all cores"),
    ROW(BOOL, "flush-denormal", flush_denormal, "false", NULL, "flush denormal floats to zero on CPU threads (torch.set_flush_denormal)"),
    NUM(INT, "epochs", epochs, "1", TB_RANGE(1, 1000000), "training epochs"),
    NUM(INT, "max-steps", max_steps, "0", TB_RANGE_MIN(0), "stop each epoch after N optimizer steps, 0 = no limit"),
    ROW(LONG, "seed", seed, "0", NULL, "seed of initialization, shuffling, augmentation, dropout"),
    ROW(CHOICE, "dataset", dataset, "fashion_mnist", tb_dataset_names, "training data (synthetic is labeled so in results)"),
    ROW(STRING, "data-dir", data_dir, "", NULL, "Fashion-MNIST directory; empty = $TB_DATA_DIR or /usr/share/datasets/fashion-mnist"),
    NUM(LONG, "data-limit", data_limit, "0", TB_RANGE_MIN(0), "use the first N training samples, 0 = all"),
    NUM(LONG, "test-limit", test_limit, "0", TB_RANGE_MIN(0), "use the first N test samples, 0 = all"),
    ROW(BOOL, "augment", augment, "false", NULL, "random crop (padding 2/4) and horizontal flip for training"),
    NUM(INT, "batch-size", batch_size, "0", TB_RANGE(0, 1 << 20), "samples per micro-batch; 0 = the model's default (256; resnet50 " STR(RESNET50_BATCH) ", gpt2 " STR(GPT2_BATCH) ")"),
    NUM(INT, "workers", workers, "0", TB_RANGE(0, 1024), "loader workers (DataLoader num_workers)"),
    NUM(INT, "prefetch-factor", prefetch_factor, "2", TB_RANGE(1, 1024), "batches queued per worker (prefetch_factor)"),
    ROW(BOOL, "persistent-workers", persistent_workers, "false", NULL, "keep workers across epochs (persistent_workers)"),
    ROW(CHOICE, "worker-mode", worker_mode, "threads", worker_mode_names, "loader workers are threads or processes"),
    ROW(BOOL, "pin-memory", pin_memory, "false", NULL, "copy each batch to the device from page-locked host buffers (DataLoader pin_memory; CUDA only, n/a on the CPU)"),
    ROW(BOOL, "non-blocking", non_blocking, "false", NULL, "do not wait for the batch copy (.to(device, non_blocking=True)); with --pin-memory it runs on a side stream and overlaps compute (CUDA only, n/a on the CPU)"),
    ROW(CHOICE, "model", model, "small_cnn", tb_model_names, "small_cnn (1x28x28), wide_cnn (3x32x32), transformer (1x28x28 as 28 tokens), resnet50 (ResNet-50 v1.5, 3 x image-size^2, 1000 classes) or gpt2 (GPT-2 small, 124M); resnet50 and gpt2 need --dataset=synthetic"),
    NUM(INT, "image-size", image_size, "0", TB_RANGE(0, 1024), "resnet50: images are 3 x S x S, S in 32..1024; 0 = 224 (parameters do not depend on it)"),
    NUM(INT, "context", context, "0", TB_RANGE(0, 8192), "gpt2: tokens per sample, 1..8192 (the position table's rows); 0 = 1024"),
    NUM(INT, "layers", layers, "0", TB_RANGE(0, 96), "gpt2: transformer blocks, 1..96; 0 = 12"),
    NUM(INT, "vocab", vocab, "0", TB_RANGE(0, 1 << 20), "gpt2: vocabulary size, 2..1048576; 0 = 50257"),
    NUM(INT, "width", width, "0", TB_RANGE(0, 8192), "resnet50: stem channels and stage 1's bottleneck width, 1..256, later stages 2x/4x/8x (0 = 64, torchvision's); gpt2: model dimension d, a multiple of 64 up to 8192, heads d/64, MLP 4d (0 = 768)"),
    ROW(CHOICE, "gelu", gelu, "auto", tb_gelu_names, "GELU form: erf (exact, PyTorch's default), tanh (GPT-2's approximation) or auto = the model's own (tanh for gpt2, erf otherwise)"),
    ROW(BOOL_AUTO, "conv-bias", conv_bias, "auto", NULL, "bias on convolutions followed by batch norm: true (nn.Conv2d bias=True), false, or auto = the model's own (true for the small CNNs, false for resnet50 as torchvision)"),
    ROW(BOOL, "fused-gelu", fused_gelu, "false", NULL, "one-pass GELU instead of eager's five passes"),
    ROW(BOOL, "conv-autotune", conv_autotune, "false", NULL, "time every conv algorithm per shape, keep the fastest (cudnn.benchmark)"),
    ROW(BOOL, "cudnn-deterministic", cudnn_deterministic, "false", NULL, "only conv algorithms whose results repeat bitwise, none with atomics (cudnn.deterministic; the CPU's are all deterministic)"),
    NUM(DOUBLE, "dropout", dropout, "0.1", TB_RANGE_HALF_OPEN(0, 1), "dropout probability in the wide model's head"),
    ROW(CHOICE, "optimizer", optimizer, "sgd", tb_optimizer_names, "sgd (momentum), adamw, or the large-batch lars, lamb, novograd"),
    NUM(DOUBLE_AUTO, "lr", lr, "auto", TB_RANGE_ABOVE(0), "peak learning rate; auto = the recipe's (sgd 0.05, resnet50 sgd 0.1 x batch/256, adamw 0.002, lars 1, lamb 0.005, novograd 0.01)"),
    NUM(DOUBLE, "momentum", momentum, "0.9", TB_RANGE_HALF_OPEN(0, 1), "SGD and LARS momentum"),
    NUM(DOUBLE_AUTO, "weight-decay", weight_decay, "auto", TB_RANGE_MIN(0), "weight decay; auto = the recipe's (sgd 5e-4, adamw 0.01, lars 5e-4, lamb 0.01, novograd 1e-3)"),
    NUM(DOUBLE, "beta1", beta1, "0.9", TB_RANGE_HALF_OPEN(0, 1), "AdamW / LAMB / NovoGrad beta1"),
    NUM(DOUBLE, "beta2", beta2, "0.999", TB_RANGE_HALF_OPEN(0, 1), "AdamW / LAMB / NovoGrad beta2"),
    NUM(DOUBLE, "eps", eps, "1e-8", TB_RANGE_ABOVE(0), "AdamW / LAMB / NovoGrad / LARS epsilon"),
    ROW(BOOL, "fused-optimizer", fused_optimizer, "false", NULL, "one pass over all parameters (fused=True)"),
    ROW(BOOL, "grads-to-none", grads_to_none, "true", NULL, "zero_grad(set_to_none=True): first backward writes, no memset"),
    NUM(INT, "accum-steps", accum_steps, "1", TB_RANGE(1, 1 << 20), "micro-batches of gradient accumulation per optimizer step"),
    NUM(INT, "warmup-steps", warmup_steps, "0", TB_RANGE_MIN(0), "linear learning-rate warm-up steps"),
    NUM(INT, "lr-base-batch", lr_base_batch, "0", TB_RANGE_MIN(0), "> 0: scale lr by batch*accum/this (linear scaling rule)"),
    NUM(DOUBLE, "trust-coef", trust_coef, "0.001", TB_RANGE_ABOVE(0), "LARS trust coefficient (eta)"),
    ROW(CHOICE, "amp", amp_dtype, "off", tb_amp_names, "mixed precision (autocast, lib/nn/amp.h): conv and linear in bf16 or fp16 with fp32 accumulation, the rest fp32; fp16 adds dynamic loss scaling (GradScaler); CPU: bf16 only (oneDNN 2.6 has no CPU fp16)"),
    ROW(BOOL, "channels-last", channels_last, "false", NULL, "NHWC activations and KRSC conv weights (memory_format=torch.channels_last)"),
    ROW(BOOL, "tf32", tf32, "false", NULL, "GEMM in TF32 math (torch.backends.cuda.matmul.allow_tf32, off by default): cuBLAS tensor-core TF32 on CUDA; on the CPU oneDNN's bf16 fpmath mode, which computes in f32 anyway on CPUs without AVX512_BF16 (this VM), for convolutions too unless --cudnn-tf32 says otherwise"),
    ROW(BOOL_AUTO, "cudnn-tf32", cudnn_tf32, "auto", NULL, "convolution in TF32 math (torch.backends.cudnn.allow_tf32): auto = PyTorch's default, on for CUDA; on the CPU auto follows --tf32"),
    ROW(BOOL, "fused-attention", fused_attention, "false", NULL, "transformer: tiled attention with online softmax (scaled_dot_product_attention) instead of materialized scores"),
    ROW(BOOL, "fused-layernorm", fused_layernorm, "false", NULL, "transformer: one-pass layer norm (apex FusedLayerNorm)"),
    ROW(BOOL, "checkpointing", checkpointing, "false", NULL, "recompute cheap layers (BN+ReLU, GELU, pooling) and attention's probabilities in backward instead of storing them"),
    ROW(BOOL, "detect-anomaly", detect_anomaly, "false", NULL, "NaN/Inf check after every op, forward and backward (autograd.detect_anomaly)"),
    NUM(INT, "loss-read-every", loss_read_every, "1", TB_RANGE_MIN(1), "copy the loss to the host every N steps (1 = every step, .item())"),
    ROW(BOOL, "eval-no-grad", eval_no_grad, "false", NULL, "evaluate under no_grad: no activations kept for backward"),
    NUM(INT, "val-every", val_every, "1", TB_RANGE_MIN(0), "evaluate every N epochs (0 = only after the last); check_val_every_n_epoch"),
    NUM(DOUBLE, "target-accuracy", target_accuracy, "0", TB_RANGE(0, 1), "> 0: stop when an evaluation reaches this accuracy (e.g. 0.85)"),
    NUM(DOUBLE, "max-time", max_time, "0", TB_RANGE_MIN(0), "> 0: stop training after this many seconds"),
    ROW(STRING, "trace", trace, "", NULL, "write each step's phases as a Chrome trace JSON (Perfetto) to this path"),
    ROW(BOOL, "tensors-on-device", tensors_on_device, "false", NULL, "create tensors (one-hot labels, masks) with device ops instead of on the host + copy"),
    ROW(BOOL, "augment-on-device", augment_on_device, "false", NULL, "crop + flip + normalize on the device instead of in the loader"),
    ROW(BOOL, "cuda-graphs", cuda_graphs, "false", NULL, "capture one training step as a CUDA graph and replay it (CUDA only)"),
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static tb_flag flag_of(tb_config *cfg, const config_field *f)
{
    tb_flag flag = {f->name, f->kind, (char *)cfg + f->offset, f->help, f->choices, f->range};
    return flag;
}

void tb_config_defaults(tb_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < N_FIELDS; i++) {
        tb_flag flag = flag_of(cfg, &fields[i]);
        /* the table's own defaults parse (config_test checks the values) */
        if (fields[i].def[0])
            (void)tb_flag_set(&flag, fields[i].def);
    }
}

const tb_flag *tb_config_flags(tb_config *cfg, size_t *n)
{
    static tb_flag table[N_FIELDS];
    for (size_t i = 0; i < N_FIELDS; i++)
        table[i] = flag_of(cfg, &fields[i]);
    *n = N_FIELDS;
    return table;
}

/* One size flag: 0 becomes def on the model it applies to (applies), must
 * stay 0 on the others, and must be in [lo, hi]. */
static int check_size(const tb_config *c, const char *flag, int *v, int applies, int def, int lo,
                      int hi, const char *why)
{
    if (!applies) {
        if (*v != 0)
            return TB_FAIL(TB_ERR_INVALID, "--%s=%d: --model=%s has no %s (it applies to %s); "
                           "leave it out", flag, *v, tb_model_names[c->model], flag, why);
        return TB_OK;
    }
    if (*v == 0)
        *v = def;
    if (*v < lo || *v > hi)
        return TB_FAIL(TB_ERR_INVALID, "--%s=%d: %s takes %d..%d (0 = %d)", flag, *v,
                       tb_model_names[c->model], lo, hi, def);
    return TB_OK;
}

/* The big models' sizes, their data, and the toggles that mean nothing on
 * them. */
static int check_model(tb_config *c)
{
    int resnet = c->model == TB_MODEL_RESNET50, gpt2 = c->model == TB_MODEL_GPT2;
    if (c->model < TB_MODEL_SMALL_CNN || c->model > TB_MODEL_GPT2)
        return TB_FAIL(TB_ERR_INVALID, "--model: small_cnn, wide_cnn, transformer, resnet50 "
                       "or gpt2");
    TB_TRY(check_size(c, "image-size", &c->image_size, resnet, RESNET50_IMAGE, 32, 1024,
                      "resnet50, whose stride-32 network needs >= 32 pixels"));
    TB_TRY(check_size(c, "context", &c->context, gpt2, GPT2_CONTEXT, 1, 8192, "gpt2"));
    TB_TRY(check_size(c, "layers", &c->layers, gpt2, GPT2_LAYERS, 1, 96, "gpt2"));
    TB_TRY(check_size(c, "vocab", &c->vocab, gpt2, GPT2_VOCAB, 2, 1 << 20, "gpt2"));
    TB_TRY(check_size(c, "width", &c->width, resnet || gpt2, gpt2 ? GPT2_WIDTH : RESNET50_WIDTH,
                      gpt2 ? 64 : 1, gpt2 ? 8192 : 256, "resnet50 and gpt2"));
    if (gpt2 && c->width % 64 != 0)
        return TB_FAIL(TB_ERR_INVALID, "--width=%d: gpt2's d must be a multiple of 64 (heads "
                       "of 64 dimensions, as GPT-2's)", c->width);
    if ((resnet || gpt2) && c->dataset != TB_DATA_SYNTHETIC)
        return TB_FAIL(TB_ERR_INVALID, "--model=%s trains on --dataset=synthetic only "
                       "(Fashion-MNIST is 28x28 grey images in 10 classes, not %s): add "
                       "--dataset=synthetic", tb_model_names[c->model],
                       resnet ? "ImageNet-shaped 3-channel images in 1000 classes" : "token ids");
    if (c->gelu < TB_GELU_CHOICE_AUTO || c->gelu > TB_GELU_CHOICE_TANH)
        return TB_FAIL(TB_ERR_INVALID, "--gelu: auto, erf or tanh");
    if (resnet && c->gelu != TB_GELU_CHOICE_AUTO)
        return TB_FAIL(TB_ERR_INVALID, "--gelu=%s: resnet50 has no GELU (ReLU only); leave "
                       "--gelu at auto", tb_gelu_names[c->gelu]);
    if (c->conv_bias != TB_FLAG_AUTO && c->conv_bias != 0 && c->conv_bias != 1)
        return TB_FAIL(TB_ERR_INVALID, "--conv-bias: true, false or auto");
    if (c->cudnn_tf32 != TB_FLAG_AUTO && c->cudnn_tf32 != 0 && c->cudnn_tf32 != 1)
        return TB_FAIL(TB_ERR_INVALID, "--cudnn-tf32: true, false or auto");
    if (gpt2 && c->conv_bias != TB_FLAG_AUTO)
        return TB_FAIL(TB_ERR_INVALID, "--conv-bias: gpt2 has no convolutions; leave "
                       "--conv-bias at auto");
    if (!gpt2)
        return TB_OK;
    const char *image_flag = c->channels_last     ? "channels-last"
                             : c->augment           ? "augment"
                             : c->augment_on_device ? "augment-on-device"
                             : c->tensors_on_device ? "tensors-on-device"
                                                    : NULL;
    if (image_flag)
        return TB_FAIL(TB_ERR_INVALID, "--%s: n/a on gpt2: it is an image toggle (memory "
                       "format, crops and flips, uint8 labels) and gpt2 reads int32 token ids "
                       "with up to --vocab ids as labels", image_flag);
    return TB_OK;
}

int tb_config_model_batch(int model)
{
    return model == TB_MODEL_RESNET50 ? RESNET50_BATCH : model == TB_MODEL_GPT2 ? GPT2_BATCH : 256;
}

int tb_config_token_model(const tb_config *c) { return c->model == TB_MODEL_GPT2; }

tb_gelu_approx tb_config_gelu_approx(const tb_config *c)
{
    if (c->gelu == TB_GELU_CHOICE_TANH)
        return TB_GELU_TANH;
    if (c->gelu == TB_GELU_CHOICE_ERF)
        return TB_GELU_ERF;
    return c->model == TB_MODEL_GPT2 ? TB_GELU_TANH : TB_GELU_ERF;
}

int tb_config_conv_tf32(const tb_config *c, const char *backend)
{
    if (c->cudnn_tf32 != TB_FLAG_AUTO)
        return c->cudnn_tf32 != 0;
    return backend && !strcmp(backend, "cuda") ? 1 : c->tf32 != 0;
}

int tb_config_conv_bias(const tb_config *c)
{
    if (c->conv_bias != TB_FLAG_AUTO)
        return c->conv_bias;
    return c->model != TB_MODEL_RESNET50;
}

int tb_config_validate(tb_config *cfg)
{
    TB_TRY(check_model(cfg));
    if (cfg->batch_size == 0)
        cfg->batch_size = tb_config_model_batch(cfg->model);
    if (cfg->model != TB_MODEL_GPT2)
        cfg->conv_bias = tb_config_conv_bias(cfg);
    /* resnet50 keeps auto: it has no GELU, and validating twice must pass */
    if (cfg->model != TB_MODEL_RESNET50)
        cfg->gelu = tb_config_gelu_approx(cfg) == TB_GELU_TANH ? TB_GELU_CHOICE_TANH
                                                               : TB_GELU_CHOICE_ERF;
    /* every numeric field within its flag's range, also when code set it */
    for (size_t i = 0; i < N_FIELDS; i++) {
        tb_flag flag = flag_of(cfg, &fields[i]);
        TB_TRY(tb_flag_check(&flag));
    }
    if (cfg->optimizer < TB_OPT_SGD || cfg->optimizer > TB_OPT_NOVOGRAD)
        return TB_FAIL(TB_ERR_INVALID, "--optimizer: sgd, adamw, lars, lamb or novograd");
    if (cfg->amp_dtype < TB_AMP_OFF || cfg->amp_dtype > TB_AMP_FP16)
        return TB_FAIL(TB_ERR_INVALID, "--amp: off, bf16 or fp16");
    if (cfg->trace && !cfg->trace[0])
        cfg->trace = NULL;
    if (cfg->data_dir && !cfg->data_dir[0])
        cfg->data_dir = NULL;
    /* recipe lr and weight decay per optimizer, in tb_opt_kind order */
    static const double recipe_lr[] = {0.05, 0.002, 1.0, 0.005, 0.01};
    static const double recipe_wd[] = {5e-4, 0.01, 5e-4, 0.01, 1e-3};
    /* ResNet-50's SGD recipe (Goyal et al. 2017, torchvision's reference:
     * lr 0.1 per 256 samples); the small CNN's 0.05 at batch 8 diverges
     * (train loss 14.7 after 3 steps, evaluation loss 2e8) */
    if (tb_flag_unset(cfg->lr) && cfg->model == TB_MODEL_RESNET50 &&
        cfg->optimizer == TB_OPT_SGD)
        cfg->lr = 0.1 * cfg->batch_size / 256.0;
    if (tb_flag_unset(cfg->lr))
        cfg->lr = recipe_lr[cfg->optimizer];
    if (tb_flag_unset(cfg->weight_decay))
        cfg->weight_decay = recipe_wd[cfg->optimizer];
    return TB_OK;
}

double tb_config_peak_lr(const tb_config *cfg)
{
    if (cfg->lr_base_batch <= 0)
        return cfg->lr;
    return cfg->lr * (double)cfg->batch_size * cfg->accum_steps / cfg->lr_base_batch;
}

void tb_config_describe(const tb_config *cfg, char *out, size_t cap)
{
    /* not through tb_config_flags: its static table may be the caller's */
    tb_config copy = *cfg;
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_FIELDS && used < cap; i++) {
        tb_flag flag = flag_of(&copy, &fields[i]);
        char value[256];
        tb_flag_value_str(&flag, value, sizeof value);
        int w = snprintf(out + used, cap - used, "%s%s=%s", i ? " " : "", flag.name, value);
        used += w > 0 ? (size_t)w : 0;
    }
}
