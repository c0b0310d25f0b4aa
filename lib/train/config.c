/* config.c - see config.h. */
#include "lib/train/config.h"

#include <stdio.h>
#include <string.h>

#include "lib/core/status.h"

const char *const tb_model_names[] = {"small_cnn", "wide_cnn", "transformer", NULL};
const char *const tb_dataset_names[] = {"fashion_mnist", "synthetic", NULL};
const char *const tb_optimizer_names[] = {"sgd", "adamw", "lars", "lamb", "novograd", NULL};
static const char *const worker_mode_names[] = {"threads", "processes", NULL};
/* in tb_amp_dtype order */
const char *const tb_amp_names[] = {"off", "bf16", "fp16", NULL};

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
    const char *help;
} config_field;

#define ROW(kind, nm, field, def, choices, help) \
    {TB_FLAG_##kind, nm, offsetof(tb_config, field), def, choices, help}

static const config_field fields[] = {
    ROW(STRING, "device", device, "auto", NULL, "auto, cpu, cuda or cuda:N"),
    ROW(INT, "threads", threads, "0", NULL, "CPU kernel threads, 0 = all cores"),
    ROW(BOOL, "flush-denormal", flush_denormal, "false", NULL, "flush denormal floats to zero on CPU threads (torch.set_flush_denormal)"),
    ROW(INT, "epochs", epochs, "1", NULL, "training epochs"),
    ROW(INT, "max-steps", max_steps, "0", NULL, "stop each epoch after N optimizer steps, 0 = no limit"),
    ROW(LONG, "seed", seed, "0", NULL, "seed of initialization, shuffling, augmentation, dropout"),
    ROW(CHOICE, "dataset", dataset, "fashion_mnist", tb_dataset_names, "training data (synthetic is labeled so in results)"),
    ROW(STRING, "data-dir", data_dir, "", NULL, "Fashion-MNIST directory; empty = $TB_DATA_DIR or /usr/share/datasets/fashion-mnist"),
    ROW(LONG, "data-limit", data_limit, "0", NULL, "use the first N training samples, 0 = all"),
    ROW(LONG, "test-limit", test_limit, "0", NULL, "use the first N test samples, 0 = all"),
    ROW(BOOL, "augment", augment, "false", NULL, "random crop (padding 2/4) and horizontal flip for training"),
    ROW(INT, "batch-size", batch_size, "256", NULL, "samples per micro-batch"),
    ROW(INT, "workers", workers, "0", NULL, "loader workers (DataLoader num_workers)"),
    ROW(INT, "prefetch-factor", prefetch_factor, "2", NULL, "batches queued per worker (prefetch_factor)"),
    ROW(BOOL, "persistent-workers", persistent_workers, "false", NULL, "keep workers across epochs (persistent_workers)"),
    ROW(CHOICE, "worker-mode", worker_mode, "threads", worker_mode_names, "loader workers are threads or processes"),
    ROW(BOOL, "pin-memory", pin_memory, "false", NULL, "copy each batch to the device from page-locked host buffers (DataLoader pin_memory; CUDA only, n/a on the CPU)"),
    ROW(BOOL, "non-blocking", non_blocking, "false", NULL, "do not wait for the batch copy (.to(device, non_blocking=True)); with --pin-memory it runs on a side stream and overlaps compute (CUDA only, n/a on the CPU)"),
    ROW(CHOICE, "model", model, "small_cnn", tb_model_names, "small_cnn (1x28x28), wide_cnn (3x32x32) or transformer (1x28x28 as 28 tokens)"),
    ROW(BOOL, "conv-bias", conv_bias, "true", NULL, "bias on convolutions followed by batch norm (nn.Conv2d bias=True)"),
    ROW(BOOL, "fused-gelu", fused_gelu, "false", NULL, "one-pass GELU instead of eager's five passes"),
    ROW(BOOL, "conv-autotune", conv_autotune, "false", NULL, "time every conv algorithm per shape, keep the fastest (cudnn.benchmark)"),
    ROW(DOUBLE, "dropout", dropout, "0.1", NULL, "dropout probability in the wide model's head"),
    ROW(CHOICE, "optimizer", optimizer, "sgd", tb_optimizer_names, "sgd (momentum), adamw, or the large-batch lars, lamb, novograd"),
    ROW(DOUBLE, "lr", lr, "-1", NULL, "peak learning rate; -1 = recipe value (sgd 0.05, adamw 0.002, lars 1, lamb 0.005, novograd 0.01)"),
    ROW(DOUBLE, "momentum", momentum, "0.9", NULL, "SGD and LARS momentum"),
    ROW(DOUBLE, "weight-decay", weight_decay, "-1", NULL, "weight decay; -1 = recipe value (sgd 5e-4, adamw 0.01, lars 5e-4, lamb 0.01, novograd 1e-3)"),
    ROW(DOUBLE, "beta1", beta1, "0.9", NULL, "AdamW / LAMB / NovoGrad beta1"),
    ROW(DOUBLE, "beta2", beta2, "0.999", NULL, "AdamW / LAMB / NovoGrad beta2"),
    ROW(DOUBLE, "eps", eps, "1e-8", NULL, "AdamW / LAMB / NovoGrad / LARS epsilon"),
    ROW(BOOL, "fused-optimizer", fused_optimizer, "false", NULL, "one pass over all parameters (fused=True)"),
    ROW(BOOL, "grads-to-none", grads_to_none, "true", NULL, "zero_grad(set_to_none=True): first backward writes, no memset"),
    ROW(INT, "accum-steps", accum_steps, "1", NULL, "micro-batches of gradient accumulation per optimizer step"),
    ROW(INT, "warmup-steps", warmup_steps, "0", NULL, "linear learning-rate warm-up steps"),
    ROW(INT, "lr-base-batch", lr_base_batch, "0", NULL, "> 0: scale lr by batch*accum/this (linear scaling rule)"),
    ROW(DOUBLE, "trust-coef", trust_coef, "0.001", NULL, "LARS trust coefficient (eta)"),
    ROW(CHOICE, "amp", amp_dtype, "off", tb_amp_names, "mixed precision (autocast, lib/nn/amp.h): conv and linear in bf16 or fp16 with fp32 accumulation, the rest fp32; fp16 adds dynamic loss scaling (GradScaler); CPU: bf16 only (oneDNN 2.6 has no CPU fp16)"),
    ROW(BOOL, "channels-last", channels_last, "false", NULL, "NHWC activations and KRSC conv weights (memory_format=torch.channels_last)"),
    ROW(BOOL, "tf32", tf32, "false", NULL, "gemm and convolution in TF32 math (allow_tf32): cuBLAS/cuDNN tensor-core TF32 on CUDA; on the CPU oneDNN's bf16 fpmath mode, which computes in f32 anyway on CPUs without AVX512_BF16 (this VM)"),
    ROW(BOOL, "fused-attention", fused_attention, "false", NULL, "transformer: tiled attention with online softmax (scaled_dot_product_attention) instead of materialized scores"),
    ROW(BOOL, "fused-layernorm", fused_layernorm, "false", NULL, "transformer: one-pass layer norm (apex FusedLayerNorm)"),
    ROW(BOOL, "checkpointing", checkpointing, "false", NULL, "recompute cheap layers (BN+ReLU, GELU, pooling) in backward instead of storing them"),
    ROW(BOOL, "detect-anomaly", detect_anomaly, "false", NULL, "NaN/Inf check after every op, forward and backward (autograd.detect_anomaly)"),
    ROW(INT, "loss-read-every", loss_read_every, "1", NULL, "copy the loss to the host every N steps (1 = every step, .item())"),
    ROW(BOOL, "eval-no-grad", eval_no_grad, "false", NULL, "evaluate under no_grad: no activations kept for backward"),
    ROW(INT, "val-every", val_every, "1", NULL, "evaluate every N epochs (0 = only after the last); check_val_every_n_epoch"),
    ROW(DOUBLE, "target-accuracy", target_accuracy, "0", NULL, "> 0: stop when an evaluation reaches this accuracy (e.g. 0.85)"),
    ROW(DOUBLE, "max-time", max_time, "0", NULL, "> 0: stop training after this many seconds"),
    ROW(STRING, "trace", trace, "", NULL, "write each step's phases as a Chrome trace JSON (Perfetto) to this path"),
    ROW(BOOL, "tensors-on-device", tensors_on_device, "false", NULL, "create tensors (one-hot labels, masks) with device ops instead of on the host + copy"),
    ROW(BOOL, "augment-on-device", augment_on_device, "false", NULL, "crop + flip + normalize on the device instead of in the loader"),
    ROW(BOOL, "cuda-graphs", cuda_graphs, "false", NULL, "capture one training step as a CUDA graph and replay it (CUDA only)"),
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static tb_flag flag_of(tb_config *cfg, const config_field *f)
{
    tb_flag flag = {f->name, f->kind, (char *)cfg + f->offset, f->help, f->choices};
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

static int check_min(const char *flag, long long v, long long min)
{
    if (v < min)
        return TB_FAIL(TB_ERR_INVALID, "--%s=%lld: must be at least %lld", flag, v, min);
    return TB_OK;
}

int tb_config_validate(tb_config *cfg)
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
