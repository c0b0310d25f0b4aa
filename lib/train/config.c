/* config.c - see config.h. */
#include "lib/train/config.h"

#include <stdio.h>

#include "lib/core/status.h"

const char *const tb_model_names[] = {"small_cnn", "wide_cnn", "transformer", NULL};
const char *const tb_dataset_names[] = {"fashion_mnist", "synthetic", NULL};
const char *const tb_optimizer_names[] = {"sgd", "adamw", "lars", "lamb", "novograd", NULL};
static const char *const worker_mode_names[] = {"threads", "processes", NULL};
/* in tb_amp_dtype order */
const char *const tb_amp_names[] = {"off", "bf16", "fp16", NULL};

void config_defaults(tb_config *cfg)
{
    *cfg = (tb_config){
        .device = "auto",
        .threads = 0,
        .flush_denormal = 0,
        .epochs = 1,
        .max_steps = 0,
        .seed = 0,
        .dataset = TB_DATA_FASHION_MNIST,
        .data_dir = NULL,
        .data_limit = 0,
        .test_limit = 0,
        .augment = 0,
        .batch_size = 256,
        .workers = 0,
        .prefetch_factor = 2,
        .persistent_workers = 0,
        .worker_mode = 0,
        .pin_memory = 0,
        .non_blocking = 0,
        .model = TB_MODEL_SMALL_CNN,
        .conv_bias = 1,
        .fused_gelu = 0,
        .conv_autotune = 0,
        .dropout = 0.1,
        .optimizer = TB_OPT_SGD,
        .lr = -1,
        .momentum = 0.9,
        .weight_decay = -1,
        .beta1 = 0.9,
        .beta2 = 0.999,
        .eps = 1e-8,
        .fused_optimizer = 0,
        .grads_to_none = 1,
        .accum_steps = 1,
        .warmup_steps = 0,
        .lr_base_batch = 0,
        .amp_dtype = TB_AMP_OFF,
        .channels_last = 0,
        .tf32 = 0,
        .checkpointing = 0,
        .detect_anomaly = 0,
        .loss_read_every = 1,
        .eval_no_grad = 0,
        .trust_coef = 0.001,
        .fused_attention = 0,
        .fused_layernorm = 0,
        .val_every = 1,
        .target_accuracy = 0,
        .max_time = 0,
        .trace = NULL,
        .tensors_on_device = 0,
        .augment_on_device = 0,
        .cuda_graphs = 0,
    };
}

#define FLAG(nm, kind, field, help) {nm, kind, &cfg->field, help, NULL}
#define CHOICE(nm, field, names, help) {nm, TB_FLAG_CHOICE, &cfg->field, help, names}

const tb_flag *config_flags(tb_config *cfg, size_t *n)
{
    static tb_flag table[72];
    const tb_flag flags[] = {
        FLAG("device", TB_FLAG_STRING, device, "auto, cpu, cuda or cuda:N"),
        FLAG("threads", TB_FLAG_INT, threads, "CPU kernel threads, 0 = all cores"),
        FLAG("flush-denormal", TB_FLAG_BOOL, flush_denormal, "flush denormal floats to zero on CPU threads (torch.set_flush_denormal)"),
        FLAG("epochs", TB_FLAG_INT, epochs, "training epochs"),
        FLAG("max-steps", TB_FLAG_INT, max_steps, "stop each epoch after N optimizer steps, 0 = no limit"),
        FLAG("seed", TB_FLAG_LONG, seed, "seed of initialization, shuffling, augmentation, dropout"),
        CHOICE("dataset", dataset, tb_dataset_names, "training data (synthetic is labeled so in results)"),
        FLAG("data-dir", TB_FLAG_STRING, data_dir, "Fashion-MNIST directory; empty = $TB_DATA_DIR or /usr/share/datasets/fashion-mnist"),
        FLAG("data-limit", TB_FLAG_LONG, data_limit, "use the first N training samples, 0 = all"),
        FLAG("test-limit", TB_FLAG_LONG, test_limit, "use the first N test samples, 0 = all"),
        FLAG("augment", TB_FLAG_BOOL, augment, "random crop (padding 2/4) and horizontal flip for training"),
        FLAG("batch-size", TB_FLAG_INT, batch_size, "samples per micro-batch"),
        FLAG("workers", TB_FLAG_INT, workers, "loader workers (DataLoader num_workers)"),
        FLAG("prefetch-factor", TB_FLAG_INT, prefetch_factor, "batches queued per worker (prefetch_factor)"),
        FLAG("persistent-workers", TB_FLAG_BOOL, persistent_workers, "keep workers across epochs (persistent_workers)"),
        CHOICE("worker-mode", worker_mode, worker_mode_names, "loader workers are threads or processes"),
        FLAG("pin-memory", TB_FLAG_BOOL, pin_memory, "copy each batch to the device from page-locked host buffers (DataLoader pin_memory; CUDA only, n/a on the CPU)"),
        FLAG("non-blocking", TB_FLAG_BOOL, non_blocking, "do not wait for the batch copy (.to(device, non_blocking=True)); with --pin-memory it runs on a side stream and overlaps compute (CUDA only, n/a on the CPU)"),
        CHOICE("model", model, tb_model_names, "small_cnn (1x28x28), wide_cnn (3x32x32) or transformer (1x28x28 as 28 tokens)"),
        FLAG("conv-bias", TB_FLAG_BOOL, conv_bias, "bias on convolutions followed by batch norm (nn.Conv2d bias=True)"),
        FLAG("fused-gelu", TB_FLAG_BOOL, fused_gelu, "one-pass GELU instead of eager's five passes"),
        FLAG("conv-autotune", TB_FLAG_BOOL, conv_autotune, "time every conv algorithm per shape, keep the fastest (cudnn.benchmark)"),
        FLAG("dropout", TB_FLAG_DOUBLE, dropout, "dropout probability in the wide model's head"),
        CHOICE("optimizer", optimizer, tb_optimizer_names, "sgd (momentum), adamw, or the large-batch lars, lamb, novograd"),
        FLAG("lr", TB_FLAG_DOUBLE, lr, "peak learning rate; -1 = recipe value (sgd 0.05, adamw 0.002, lars 1, lamb 0.005, novograd 0.01)"),
        FLAG("momentum", TB_FLAG_DOUBLE, momentum, "SGD and LARS momentum"),
        FLAG("weight-decay", TB_FLAG_DOUBLE, weight_decay, "weight decay; -1 = recipe value (sgd 5e-4, adamw 0.01, lars 5e-4, lamb 0.01, novograd 1e-3)"),
        FLAG("beta1", TB_FLAG_DOUBLE, beta1, "AdamW / LAMB / NovoGrad beta1"),
        FLAG("beta2", TB_FLAG_DOUBLE, beta2, "AdamW / LAMB / NovoGrad beta2"),
        FLAG("eps", TB_FLAG_DOUBLE, eps, "AdamW / LAMB / NovoGrad / LARS epsilon"),
        FLAG("fused-optimizer", TB_FLAG_BOOL, fused_optimizer, "one pass over all parameters (fused=True)"),
        FLAG("grads-to-none", TB_FLAG_BOOL, grads_to_none, "zero_grad(set_to_none=True): first backward writes, no memset"),
        FLAG("accum-steps", TB_FLAG_INT, accum_steps, "micro-batches of gradient accumulation per optimizer step"),
        FLAG("warmup-steps", TB_FLAG_INT, warmup_steps, "linear learning-rate warm-up steps"),
        FLAG("lr-base-batch", TB_FLAG_INT, lr_base_batch, "> 0: scale lr by batch*accum/this (linear scaling rule)"),
        FLAG("trust-coef", TB_FLAG_DOUBLE, trust_coef, "LARS trust coefficient (eta)"),
        CHOICE("amp", amp_dtype, tb_amp_names, "mixed precision (autocast, lib/nn/amp.h): conv and linear in bf16 or fp16 with fp32 accumulation, the rest fp32; fp16 adds dynamic loss scaling (GradScaler); CPU: bf16 only (oneDNN 2.6 has no CPU fp16)"),
        FLAG("channels-last", TB_FLAG_BOOL, channels_last, "NHWC activations and KRSC conv weights (memory_format=torch.channels_last)"),
        FLAG("tf32", TB_FLAG_BOOL, tf32, "gemm and convolution in TF32 math (allow_tf32): cuBLAS/cuDNN tensor-core TF32 on CUDA; on the CPU oneDNN's bf16 fpmath mode, which computes in f32 anyway on CPUs without AVX512_BF16 (this VM)"),
        FLAG("fused-attention", TB_FLAG_BOOL, fused_attention, "transformer: tiled attention with online softmax (scaled_dot_product_attention) instead of materialized scores"),
        FLAG("fused-layernorm", TB_FLAG_BOOL, fused_layernorm, "transformer: one-pass layer norm (apex FusedLayerNorm)"),
        FLAG("checkpointing", TB_FLAG_BOOL, checkpointing, "recompute cheap layers (BN+ReLU, GELU, pooling) in backward instead of storing them"),
        FLAG("detect-anomaly", TB_FLAG_BOOL, detect_anomaly, "NaN/Inf check after every op, forward and backward (autograd.detect_anomaly)"),
        FLAG("loss-read-every", TB_FLAG_INT, loss_read_every, "copy the loss to the host every N steps (1 = every step, .item())"),
        FLAG("eval-no-grad", TB_FLAG_BOOL, eval_no_grad, "evaluate under no_grad: no activations kept for backward"),
        FLAG("val-every", TB_FLAG_INT, val_every, "evaluate every N epochs (0 = only after the last); check_val_every_n_epoch"),
        FLAG("target-accuracy", TB_FLAG_DOUBLE, target_accuracy, "> 0: stop when an evaluation reaches this accuracy (e.g. 0.85)"),
        FLAG("max-time", TB_FLAG_DOUBLE, max_time, "> 0: stop training after this many seconds"),
        FLAG("trace", TB_FLAG_STRING, trace, "write each step's phases as a Chrome trace JSON (Perfetto) to this path"),
        FLAG("tensors-on-device", TB_FLAG_BOOL, tensors_on_device, "create tensors (one-hot labels, masks) with device ops instead of on the host + copy"),
        FLAG("augment-on-device", TB_FLAG_BOOL, augment_on_device, "crop + flip + normalize on the device instead of in the loader"),
        FLAG("cuda-graphs", TB_FLAG_BOOL, cuda_graphs, "capture one training step as a CUDA graph and replay it (CUDA only)"),
    };
    size_t count = sizeof flags / sizeof flags[0];
    _Static_assert(sizeof flags / sizeof flags[0] <= sizeof table / sizeof table[0],
                   "grow table");
    for (size_t i = 0; i < count; i++)
        table[i] = flags[i];
    *n = count;
    return table;
}

static int check_min(const char *flag, long long v, long long min)
{
    if (v < min)
        return TB_FAIL(TB_ERR_INVALID, "--%s=%lld: must be at least %lld", flag, v, min);
    return TB_OK;
}

int config_validate(tb_config *cfg)
{
    TB_TRY(check_min("threads", cfg->threads, 0));
    TB_TRY(check_min("epochs", cfg->epochs, 1));
    TB_TRY(check_min("max-steps", cfg->max_steps, 0));
    TB_TRY(check_min("data-limit", cfg->data_limit, 0));
    TB_TRY(check_min("test-limit", cfg->test_limit, 0));
    TB_TRY(check_min("batch-size", cfg->batch_size, 1));
    TB_TRY(check_min("workers", cfg->workers, 0));
    TB_TRY(check_min("prefetch-factor", cfg->prefetch_factor, 1));
    TB_TRY(check_min("accum-steps", cfg->accum_steps, 1));
    TB_TRY(check_min("warmup-steps", cfg->warmup_steps, 0));
    TB_TRY(check_min("lr-base-batch", cfg->lr_base_batch, 0));
    if (cfg->optimizer < TB_OPT_SGD || cfg->optimizer > TB_OPT_NOVOGRAD)
        return TB_FAIL(TB_ERR_INVALID, "--optimizer: sgd, adamw, lars, lamb or novograd");
    TB_TRY(check_min("loss-read-every", cfg->loss_read_every, 1));
    if (cfg->amp_dtype < TB_AMP_OFF || cfg->amp_dtype > TB_AMP_FP16)
        return TB_FAIL(TB_ERR_INVALID, "--amp: off, bf16 or fp16");
    TB_TRY(check_min("val-every", cfg->val_every, 0));
    if (!(cfg->trust_coef > 0) || cfg->target_accuracy < 0 || cfg->target_accuracy > 1 ||
        cfg->max_time < 0)
        return TB_FAIL(TB_ERR_INVALID, "--trust-coef must be > 0, --target-accuracy in [0, 1], "
                       "--max-time >= 0");
    if (cfg->trace && !cfg->trace[0])
        cfg->trace = NULL;
    if (!(cfg->dropout >= 0 && cfg->dropout < 1))
        return TB_FAIL(TB_ERR_INVALID, "--dropout=%g: must be in [0, 1)", cfg->dropout);
    if (cfg->data_dir && !cfg->data_dir[0])
        cfg->data_dir = NULL;
    /* recipe lr and weight decay per optimizer, in tb_opt_kind order */
    static const double recipe_lr[] = {0.05, 0.002, 1.0, 0.005, 0.01};
    static const double recipe_wd[] = {5e-4, 0.01, 5e-4, 0.01, 1e-3};
    if (cfg->lr < 0)
        cfg->lr = recipe_lr[cfg->optimizer];
    if (cfg->weight_decay < 0)
        cfg->weight_decay = recipe_wd[cfg->optimizer];
    if (cfg->lr == 0 || cfg->momentum < 0 || cfg->momentum >= 1)
        return TB_FAIL(TB_ERR_INVALID, "--lr must be > 0 and --momentum in [0, 1)");
    return TB_OK;
}

double config_peak_lr(const tb_config *cfg)
{
    if (cfg->lr_base_batch <= 0)
        return cfg->lr;
    return cfg->lr * (double)cfg->batch_size * cfg->accum_steps / cfg->lr_base_batch;
}

void config_describe(const tb_config *cfg, char *out, size_t cap)
{
    snprintf(out, cap,
             "model=%s dataset=%s batch=%d workers=%d prefetch=%d persistent=%d mode=%s "
             "pin_memory=%d non_blocking=%d "
             "flush_denormal=%d conv_autotune=%d grads_to_none=%d fused_gelu=%d fused_optimizer=%d conv_bias=%d "
             "optimizer=%s lr=%g accum=%d amp=%s channels_last=%d seed=%lld",
             tb_model_names[cfg->model], tb_dataset_names[cfg->dataset], cfg->batch_size,
             cfg->workers, cfg->prefetch_factor, cfg->persistent_workers,
             worker_mode_names[cfg->worker_mode], cfg->pin_memory, cfg->non_blocking,
             cfg->flush_denormal, cfg->conv_autotune, cfg->grads_to_none,
             cfg->fused_gelu, cfg->fused_optimizer, cfg->conv_bias,
             tb_optimizer_names[cfg->optimizer], config_peak_lr(cfg), cfg->accum_steps,
             tb_amp_names[cfg->amp_dtype], cfg->channels_last, cfg->seed);
}
