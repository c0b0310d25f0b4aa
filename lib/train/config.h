/*
 * config.h - THE training configuration: every toggle in one struct, and
 * the flag table that sets it from the command line.
 *
 * Performance toggles default to PyTorch's defaults (DataLoader num_workers
 * 0, prefetch_factor 2, persistent_workers False, pin_memory False;
 * .to(device, non_blocking=False); cudnn.benchmark False;
 * zero_grad(set_to_none=True) as in PyTorch 2; optimizer fused=False;
 * nn.Conv2d bias=True; eager (unfused) GELU), so a run with no flags is what
 * plain PyTorch code does. Training hyper-parameters default to the recipe
 * that gets the small CNN to 85% on Fashion-MNIST in one epoch (SGD,
 * momentum 0.9, lr 0.05, batch 256); PyTorch has no defaults to copy there
 * that would train. The baseline of a sweep is the technique off, whatever
 * the default.
 *
 * Use:
 *   tb_config cfg;  tb_config_defaults(&cfg);
 *   size_t n;  const tb_flag *flags = tb_config_flags(&cfg, &n);
 *   tb_flags_parse(flags, n, &argc, argv, NULL, &help);  tb_config_validate(&cfg);
 *
 * Tests: bazel test //lib/train:config_test
 */
#ifndef TB_CONFIG_H
#define TB_CONFIG_H

#include <stddef.h>

#include "lib/backend/backend.h"
#include "lib/core/flags.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_model_kind {
    TB_MODEL_SMALL_CNN = 0,
    TB_MODEL_WIDE_CNN = 1,
    TB_MODEL_TRANSFORMER = 2, /* rows of the image as tokens, one transformer block */
    TB_MODEL_RESNET50 = 3,    /* ResNet-50 v1.5 (torchvision's), 3 x image-size^2 */
    TB_MODEL_GPT2 = 4,        /* GPT-2 small (124M), token ids in, next token out */
} tb_model_kind;
typedef enum tb_dataset_kind { TB_DATA_FASHION_MNIST = 0, TB_DATA_SYNTHETIC = 1 } tb_dataset_kind;
typedef enum tb_zero_grad_mode { TB_ZERO_MEMSET = 0, TB_ZERO_TO_NONE = 1 } tb_zero_grad_mode;
typedef enum tb_amp_dtype { TB_AMP_OFF = 0, TB_AMP_BF16 = 1, TB_AMP_FP16 = 2 } tb_amp_dtype;

typedef struct tb_config {
    /* ---- run ---- */
    const char *device;       /* "auto", "cpu", "cuda", "cuda:N" */
    int threads;              /* CPU kernel threads, 0 = all cores */
    int flush_denormal;       /* torch.set_flush_denormal: FTZ/DAZ on the host
                                 threads that run CPU kernels */
    int epochs;
    int max_steps;            /* > 0: stop each epoch after this many optimizer steps */
    long long seed;

    /* ---- data ---- */
    int dataset;              /* tb_dataset_kind */
    const char *data_dir;     /* NULL: $TB_DATA_DIR or Debian's directory */
    long long data_limit;     /* > 0: first N training samples only */
    long long test_limit;     /* > 0: first N test samples only */
    int augment;              /* random crop + flip on the training set */

    /* ---- loader (DataLoader) ---- */
    int batch_size;
    int workers;              /* num_workers */
    int prefetch_factor;
    int persistent_workers;
    int worker_mode;          /* tb_worker_mode: threads or processes */
    int pin_memory;           /* pin_memory: batches through page-locked host buffers
                                 (lib/backend/staging.h; CUDA only) */
    int non_blocking;         /* .to(device, non_blocking=True): the batch copy is not
                                 waited for (on a side stream with pin_memory) */

    /* ---- model ---- */
    int model;                /* tb_model_kind */
    int conv_bias;            /* bias on convolutions followed by BN (PyTorch bias=True) */
    int fused_gelu;           /* tb_gelu_variant */
    int conv_autotune;        /* cudnn.benchmark */
    double dropout;           /* p of the wide model's dropout layer */

    /* ---- optimizer ---- */
    int optimizer;            /* tb_opt_kind: sgd, adamw, lars, lamb, novograd */
    double lr;                /* < 0: the optimizer's recipe value (sgd 0.05, adamw 0.002) */
    double momentum;
    double weight_decay;      /* < 0: recipe value (sgd 5e-4, adamw 0.01) */
    double beta1, beta2, eps;
    int fused_optimizer;      /* fused=True: one pass over the flat buffer */
    int grads_to_none;        /* zero_grad(set_to_none=...) */
    int accum_steps;          /* micro-batches per optimizer step */
    int warmup_steps;         /* linear LR warm-up over this many steps; 0 = none */
    int lr_base_batch;        /* > 0: lr scaled by batch * accum / lr_base_batch (linear rule) */
    double trust_coef;        /* LARS eta (0.001) */

    /* ---- precision, layout, memory and the step's debugging aids ---- */
    int amp_dtype;            /* tb_amp_dtype */
    int channels_last;        /* NHWC activations */
    int tf32;                 /* TB_MATH_TF32 for GEMM and convolution */
    int checkpointing;        /* recompute cheap layers in backward */
    int detect_anomaly;       /* NaN/Inf check after every op */
    int loss_read_every;      /* read the loss every N steps (1 = every step) */
    int eval_no_grad;         /* evaluation keeps no activations for backward */
    /* ---- the transformer's fused ops, validation, tracing, device-side data ---- */
    int fused_attention;      /* tb_attn_variant of the transformer's attention */
    int fused_layernorm;      /* tb_ln_variant of its layer norms */
    int val_every;            /* evaluate every N epochs (0 = never); the last epoch always */
    double target_accuracy;   /* > 0: stop when an evaluation reaches it */
    double max_time;          /* > 0: stop training after this many seconds */
    const char *trace;        /* Chrome trace JSON of each step's phases; NULL = off */
    int tensors_on_device;    /* labels one-hot / masks made with device ops, not copied */
    int augment_on_device;    /* crop + flip + normalize by the backend, not the loader */
    int cuda_graphs;          /* capture one training step, replay it */
} tb_config;

/* Fills cfg with the defaults described above. */
void tb_config_defaults(tb_config *cfg);

/* The flag table over cfg's fields (static storage, rebuilt per call; cfg
 * must outlive its use). Every field of tb_config has one entry. */
const tb_flag *tb_config_flags(tb_config *cfg, size_t *n);

/* Checks ranges and combinations; TB_ERR_INVALID naming the flag. Resolves
 * the recipe values (lr, weight_decay < 0) for the chosen optimizer. */
int tb_config_validate(tb_config *cfg);

/* The learning rate after warm-up, with the linear scaling rule applied. */
double tb_config_peak_lr(const tb_config *cfg);

extern const char *const tb_model_names[];   /* "small_cnn", "wide_cnn", "transformer" */
extern const char *const tb_dataset_names[]; /* "fashion_mnist", "synthetic" */
extern const char *const tb_optimizer_names[]; /* "sgd", "adamw", "lars", "lamb", "novograd" */
extern const char *const tb_amp_names[];       /* "off", "bf16", "fp16" */

/* One line naming every flag of tb_config_flags and its value, in the table's
 * order: "device=auto threads=0 ... cuda-graphs=false", for logs. Cut to
 * cap - 1 characters; TB_CONFIG_DESC_CAP holds any whole line (values of
 * string flags past 255 characters are cut). Leaves tb_config_flags' table
 * alone. REQUIRES: cap > 0. */
#define TB_CONFIG_DESC_CAP 4096
void tb_config_describe(const tb_config *cfg, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
