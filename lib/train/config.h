/*
 * config.h - THE training configuration: every toggle in one struct, and
 * the flag table that sets it from the command line.
 *
 * Performance toggles default to PyTorch's defaults (DataLoader num_workers
 * 0, prefetch_factor 2, persistent_workers False, pin_memory False;
 * .to(device, non_blocking=False); cudnn.benchmark False;
 * zero_grad(set_to_none=True) as in PyTorch 2; optimizer fused=False;
 * each model's own convolution bias (nn.Conv2d's bias=True for the small
 * CNNs, torchvision's bias=False for ResNet-50); eager (unfused) GELU), so a
 * run with no flags is what plain PyTorch code does. Training
 * hyper-parameters default to the recipe that gets the small CNN to 85% on
 * Fashion-MNIST in one epoch (SGD, momentum 0.9, lr 0.05, batch 256);
 * PyTorch has no defaults to copy there that would train. The baseline of a
 * sweep is the technique off, whatever the default.
 *
 * The big models (issue 13): --model=resnet50 (3 x S x S images, S =
 * --image-size, 1000 classes) and --model=gpt2 (--context tokens,
 * --layers blocks, --vocab ids; both narrowed by --width) train on --dataset=synthetic only, made on
 * the fly. Their size flags and --batch-size default to 0, "the model's
 * own", which tb_config_validate resolves (see tb_config_model_batch for the
 * batch sizes and how they were sized).
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
/* --gelu: in tb_gelu_names order */
typedef enum tb_gelu_choice {
    TB_GELU_CHOICE_AUTO = 0,
    TB_GELU_CHOICE_ERF = 1,
    TB_GELU_CHOICE_TANH = 2,
} tb_gelu_choice;

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
    int image_size;           /* resnet50: images are 3 x S x S; 0 = 224 (ImageNet's) */
    int context;              /* gpt2: tokens per sample (T, the position table's
                                 rows); 0 = 1024 */
    int layers;               /* gpt2: transformer blocks; 0 = 12 */
    int vocab;                /* gpt2: token ids in [0, vocab); 0 = 50257 */
    int width;                /* resnet50: the stem's channels and stage 1's bottleneck
                                 width, the later stages 2x, 4x, 8x it (64 =
                                 torchvision's); gpt2: the model dimension d, heads
                                 d/64, MLP 4d (768); 0 = the model's own. The
                                 reduced workloads (lib/train/workload.h) use it */
    int gelu;                 /* tb_gelu_choice: the GELU's form; auto = the model's
                                 own (tanh for gpt2, erf otherwise) */
    int conv_bias;            /* bias on convolutions followed by BN: 1 (nn.Conv2d's
                                 bias=True), 0, or TB_FLAG_AUTO = the model's own
                                 definition (1 for the small CNNs, 0 for resnet50,
                                 torchvision's bias=False); validate resolves auto */
    int fused_gelu;           /* tb_gelu_variant */
    int conv_autotune;        /* cudnn.benchmark */
    int cudnn_deterministic;  /* cudnn.deterministic: conv algorithms without atomics */
    double dropout;           /* p of the wide model's dropout layer */

    /* ---- optimizer ---- */
    int optimizer;            /* tb_opt_kind: sgd, adamw, lars, lamb, novograd */
    double lr;                /* TB_FLAG_UNSET: the optimizer's recipe value (sgd 0.05, adamw 0.002) */
    double momentum;
    double weight_decay;      /* TB_FLAG_UNSET: recipe value (sgd 5e-4, adamw 0.01) */
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
    int tf32;                 /* TB_MATH_TF32 for GEMM (matmul.allow_tf32), and
                                 convolution too when cudnn_tf32 is auto */
    int cudnn_tf32;           /* cudnn.allow_tf32: TB_MATH_TF32 for convolution; auto
                                 (TB_FLAG_AUTO): PyTorch's default on CUDA (on), and
                                 --tf32's value on the CPU (no cuDNN there) */
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
 * the recipe values (lr, weight_decay unset) for the chosen optimizer, and the
 * model's own values: batch size 0, image size / context / layers / vocab 0
 * (for the model they apply to), --conv-bias=auto and --gelu=auto. Refused
 * with the reason: a size flag on a model it does not apply to or out of
 * range, resnet50 or gpt2 on Fashion-MNIST, image toggles on gpt2
 * (--channels-last, --augment, --augment-on-device, --tensors-on-device),
 * --conv-bias on gpt2 (no convolutions), --gelu on resnet50 (no GELU). */
int tb_config_validate(tb_config *cfg);

/* The model's own batch size (--batch-size=0): 256 for the small models
 * (the Fashion-MNIST recipe); for resnet50 and gpt2 what fits this project's
 * 24 GB CPU machine at their default sizes (config.c says how it was sized). */
int tb_config_model_batch(int model);

/* The GELU form c asks for: --gelu, or with auto the model's own. */
tb_gelu_approx tb_config_gelu_approx(const tb_config *c);

/* The convolution bias c asks for: --conv-bias, or with auto the model's own. */
int tb_config_conv_bias(const tb_config *c);

/* Whether c's convolutions run in TF32 math on backend ("cpu", "cuda"):
 * --cudnn-tf32, or with auto PyTorch's default there: on for cuDNN
 * (torch.backends.cudnn.allow_tf32 is True), and --tf32's value on the
 * CPU, where PyTorch has no such switch and TF32 is oneDNN's bf16 fpmath
 * mode (off unless asked for). */
int tb_config_conv_tf32(const tb_config *c, const char *backend);

/* 1 for the models that read token ids (gpt2). */
int tb_config_token_model(const tb_config *c);

/* The learning rate after warm-up, with the linear scaling rule applied. */
double tb_config_peak_lr(const tb_config *cfg);

extern const char *const tb_model_names[];   /* "small_cnn", "wide_cnn", "transformer",
                                                "resnet50", "gpt2" */
extern const char *const tb_gelu_names[];    /* "auto", "erf", "tanh" */
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
