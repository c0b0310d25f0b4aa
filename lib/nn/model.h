/*
 * model.h - models: a tree of layers built from a description, with every
 * parameter in one flat buffer and every gradient in another.
 *
 * A description is an array of tb_layer_spec ending with TB_SPEC_END, e.g.
 * the small CNN for 1x28x28 images:
 *   conv3x3(16) BN ReLU, maxpool 2, residual block(16),
 *   conv3x3/2(32) BN ReLU, residual block(32),
 *   linear(64) on the flattened 32x7x7 GELU, linear(classes)
 * (a global average pool before the head trains too slowly to reach 85% in
 * one epoch: 81% measured, 88% with the flattened head)
 * A residual block is conv3x3-BN-ReLU-conv3x3-BN plus the identity, then
 * ReLU; ResNet-50's bottleneck (TB_SPEC_BOTTLENECK, lib/nn/model_resnet.c)
 * is 1x1-3x3-1x1 with a projection shortcut where the shape changes.
 * Convolutions followed by BN get a bias only when conv_bias is on
 * (the "no conv bias before BN" toggle). tb_model_build() turns a description
 * into layers, binds each parameter to its slice of the flat buffers (so a
 * fused optimizer makes one pass) and initializes them as PyTorch does
 * (uniform 1/sqrt(fan_in), BN gamma 1 beta 0), from the seed only.
 * GPT-2 (tb_model_build_gpt2, lib/nn/model_gpt2.c) builds its own tree and
 * init and shares the rest (lib/nn/model_build.h); it is a token model:
 * int32 ids in, a label per position, the loss's in-place lse path.
 *
 * Tests: bazel test //lib/nn:layers_test //lib/nn:resnet_test //lib/nn:gpt2_test
 *        //lib/train:train_test
 */
#ifndef TB_MODEL_H
#define TB_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "lib/backend/backend.h"
#include "lib/core/rng.h"
#include "lib/nn/layers.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tb_spec_kind {
    TB_SPEC_END = 0,
    TB_SPEC_CONV_BN_RELU, /* k, r, stride (pad r/2) */
    TB_SPEC_RESBLOCK,     /* k == input channels, stride 1 */
    TB_SPEC_MAXPOOL,      /* window r, stride, pad */
    TB_SPEC_AVGPOOL,      /* window r, stride */
    TB_SPEC_GLOBAL_AVGPOOL,
    TB_SPEC_LINEAR,       /* k outputs; k == 0: the number of classes */
    TB_SPEC_RELU,
    TB_SPEC_GELU,
    TB_SPEC_DROPOUT,      /* p from the model options */
    /* token tensors (1, T, d), lib/nn/layer_tokens.c: an 1 x H x W image is H tokens */
    TB_SPEC_TOKEN_LINEAR, /* k outputs per token */
    TB_SPEC_TBLOCK,       /* pre-norm transformer block: x + MHA(LN(x)) with k heads,
                             then x + MLP(LN(x)), MLP linear r, GELU, linear d */
    TB_SPEC_LAYERNORM,
    TB_SPEC_TOKEN_MEAN,   /* (1, T, d) -> (d, 1, 1) */
    TB_SPEC_BOTTLENECK,   /* ResNet v1.5 bottleneck of width k (4k channels out), the
                             stride in its 3x3 conv; r unused, 0
                             (tb_resnet_bottleneck_create) */
} tb_spec_kind;

/* Initializers are positional, {kind, k, r, stride}: pad, last, is 0 unless
 * given. */
typedef struct tb_layer_spec {
    tb_spec_kind kind;
    int k, r, stride;
    int pad;              /* TB_SPEC_MAXPOOL's padding (ResNet's 3x3/2 pool: 1) */
} tb_layer_spec;

typedef struct tb_model_opts {
    tb_shape in;          /* per-sample input */
    int classes;
    int max_batch;        /* activations are allocated for this batch */
    int conv_bias;        /* bias on convolutions followed by BN */
    float dropout;        /* p of TB_SPEC_DROPOUT layers */
    uint64_t seed;        /* parameter init and dropout masks */
    int checkpointing;    /* --checkpointing: BN/ReLU/GELU/pool outputs in shared
                             scratch, recomputed in backward (tb_act_mem) */
    int channels_last;    /* NHWC activations, KRSC conv weights, the first linear
                             layer's columns in (h, w, c) order: the same model
                             (same function, same initial values) as NCHW */
    tb_dtype amp;         /* autocast (lib/nn/amp.h): TB_F32 (0) off, TB_BF16, TB_F16;
                             conv and linear get their low-precision buffers */
    tb_gelu_approx gelu_approx; /* GELU layers' form: TB_GELU_ERF (0) or TB_GELU_TANH */
    int fp32_acts;        /* 1: the conv trunk's activations stay fp32 under bf16
                             autocast (anomaly detection counts fp32 values); 0: bf16
                             where the backend has them (layers.h, ctx->act) */
} tb_model_opts;

typedef struct tb_model {
    tb_layer_ctx ctx;     /* shared by every layer; set its toggles here */
    tb_layer *net;        /* the root sequence */
    tb_xent loss;
    int classes, max_batch;
    tb_shape in;
    /* Token models (GPT-2): the input is int32 token ids, a (N, 1, T, 1)
     * tensor of dtype TB_I32, the logits are (N, 1, T, classes), and the
     * labels are N x T (the next token at every position): rows of the
     * loss = N x labels_per_sample. Image models: TB_F32 input, one label. */
    tb_dtype in_dtype;
    int labels_per_sample;
    tb_param **params;    /* every parameter, in flat-buffer order */
    int nparams;
    size_t numel;         /* floats in each flat buffer */
    float *flat_w;        /* (numel) parameters, device memory */
    float *flat_g;        /* (numel) gradients */
} tb_model;

/* Builds a model from spec on be. REQUIRES: spec ends with TB_SPEC_END.
 * Errors: TB_ERR_INVALID (a layer does not fit its input), TB_ERR_NOMEM,
 * TB_ERR_DEVICE_OOM. *out is freed with tb_model_destroy. */
int tb_model_build(tb_backend *be, const tb_layer_spec *spec, const tb_model_opts *o,
                tb_model **out);
void tb_model_destroy(tb_model *m);

/* The built-in descriptions. */
extern const tb_layer_spec tb_spec_small_cnn[]; /* 1x28x28 */
extern const tb_layer_spec tb_spec_wide_cnn[];  /* 3x32x32 */
/* 1x28x28 as 28 tokens of 28: token linear 64, one block (4 heads, MLP
 * 128), layer norm, mean over tokens, linear(classes) */
extern const tb_layer_spec tb_spec_transformer[];

/* ResNet-50 v1.5 as torchvision's resnet50 (lib/nn/model_resnet.c): 7x7/2
 * stem, 3x3/2 max pool, bottlenecks 3-4-6-3 with the stride in the 3x3
 * convolution and projection shortcuts, global average pool, linear to
 * o->classes. Build it with tb_model_build on (3, S, S) images (square:
 * the global pool needs h == w; S = 32 leaves stage 4 at 1x1, 224 at 7x7);
 * parameter shapes do not depend on S (25,557,032 parameters at 1000
 * classes with conv_bias 0, torchvision's bias=False). */
extern const tb_layer_spec tb_spec_resnet50[];

/* Entries of tb_spec_resnet50, its TB_SPEC_END included. */
#define TB_SPEC_RESNET50_LEN 21

/* tb_spec_resnet50 at another width, into out: the stem's channels and
 * stage 1's bottleneck width are `width` (torchvision's: 64), stages 2-4
 * 2x, 4x, 8x it; depth, strides and the head unchanged. The reduced
 * workloads (lib/train/workload.h) narrow it so a step on a CPU lasts tens
 * of milliseconds while the convolutions keep their share of the FLOPs.
 * REQUIRES: width >= 1. */
void tb_spec_resnet50_width(int width, tb_layer_spec out[TB_SPEC_RESNET50_LEN]);

/* One ResNet v1.5 bottleneck (torchvision's Bottleneck) on in: main path
 * conv1x1(width)-BN-ReLU, conv3x3(width, stride, pad 1)-BN-ReLU,
 * conv1x1(4 width)-BN; shortcut the identity, or conv1x1(4 width, stride)-BN
 * (a projection) when stride != 1 or in.c != 4 width; y = relu(main + shortcut).
 * bias: convolutions get a bias (conv_bias; all of them precede a BN).
 * Errors: TB_ERR_INVALID (width or stride < 1, an empty output), TB_ERR_NOMEM. */
int tb_resnet_bottleneck_create(tb_layer_ctx *ctx, tb_shape in, int width, int stride, int bias,
                                tb_layer **out);

/* GPT-2's dimensions (lib/nn/model_gpt2.c). */
typedef struct tb_gpt2_dims {
    int layers, heads, dim, mlp; /* blocks, heads, d_model, MLP width */
    int context, vocab;          /* position table rows, vocabulary */
} tb_gpt2_dims;

/* GPT-2 small: 12 layers, 12 heads, d 768, MLP 3072, context 1024,
 * vocabulary 50,257. */
tb_gpt2_dims tb_gpt2_small(void);
/* Parameters of a GPT-2 of dims g, in closed form (124,439,808 for
 * tb_gpt2_small(): the output head is tied to the token embedding). */
size_t tb_gpt2_param_count(const tb_gpt2_dims *g);
/* Builds a GPT-2: token + position embedding, g->layers pre-norm blocks of
 * causal attention and an MLP with the GELU o->gelu_approx names (GPT-2
 * itself: TB_GELU_TANH), final layer norm, output head tied to the token
 * embedding. o->in is ignored (the input is (1, g->context, 1) token ids,
 * TB_I32) and o->classes must be g->vocab. */
int tb_model_build_gpt2(tb_backend *be, const tb_gpt2_dims *g, const tb_model_opts *o,
                        tb_model **out);

/* The initial values of p (p->n floats into host) from r, the parameter's
 * own stream (tb_model_build seeds one per parameter): U(-bound, bound),
 * ones, zeros, or N(0, bound^2) by Box-Muller on pairs of 53-bit uniforms.
 * The same r gives the same bits. */
void tb_param_init_host(const tb_param *p, tb_rng *r, float *host);

/* Copies the host parameter-shaped array src (m->numel floats, e.g. a copy
 * of flat_w or flat_g) to dst, converting the layout-dependent tensors:
 * conv weights KCRS <-> KRSC and the weight columns of a linear layer on an
 * image (c, h, w) <-> (h, w, c). to_nhwc = 1: src in NCHW order, dst in
 * NHWC order; 0: the reverse. REQUIRES: src and dst do not overlap. */
void tb_model_params_reorder(const tb_model *m, const float *src, float *dst, int to_nhwc);

/* A host copy of m's weights (m->numel floats, malloc'd into *w; free it),
 * read through the backend and synced. Errors: TB_ERR_NOMEM, the backend's
 * copy. */
int tb_model_weights_to_host(const tb_model *m, float **w);

/* Moves every weight by rel of itself, up or down by a draw from seed
 * (xorshift64): the correctness checks' rounding control (bench/harness/
 * step_harness.h, bench:ddp_sweep's DP check), a perturbation of the size
 * another summation order makes. Reads and writes flat_w through the
 * backend. Errors: TB_ERR_NOMEM, the backend's copies. */
int tb_model_nudge_weights(tb_model *m, double rel, uint64_t seed);

/* Forward through the network only: *logits is (N, classes, 1, 1), or for
 * a token model (N, 1, T, classes). REQUIRES: x->dtype is m->in_dtype
 * (TB_I32 token ids, each in [0, classes), for a token model); with
 * channels_last and more than one input channel, x is NHWC (x->layout;
 * tb_tensor_host_nchw_to_nhwc converts a host batch). */
int tb_model_forward(tb_model *m, const tb_tensor *x, const tb_tensor **logits);
/* Forward plus the loss (summed on the device, see tb_xent_read_loss).
 * labels: device int32 (N x m->labels_per_sample; a token model's row n
 * holds the next token of every position of sample n). logits may be NULL;
 * a token model's logits become their gradient in tb_model_backward (read
 * them before it). */
int tb_model_forward_loss(tb_model *m, const tb_tensor *x, const int32_t *labels,
                       const tb_tensor **logits);
/* Backward from the last tb_model_forward_loss, with the loss scaled by
 * loss_scale (1 / accumulation steps); then later backwards accumulate
 * until the next tb_model_zero_grad. REQUIRES: m->ctx.training. */
int tb_model_backward(tb_model *m, float loss_scale);
/* Gradients to zero (memset) or "to none": the next backward writes them. */
int tb_model_zero_grad(tb_model *m, int set_to_none);

/* Training or evaluation mode (batch statistics, dropout). */
void tb_model_train_mode(tb_model *m, int training);
/* torch.no_grad(): on = 1 frees every activation kept for backward and runs
 * forwards through two scratch buffers per container depth (tb_model_backward
 * refuses); on = 0 allocates the activations again. Same outputs, bit for
 * bit, either way. */
int tb_model_set_no_grad(tb_model *m, int on);
/* Under no_grad, its scratch buffers freed too (the next no_grad forward
 * allocates them again): all the activation memory a parked trainer gives
 * back. A no-op otherwise. */
void tb_model_no_grad_release(tb_model *m);

/* Prints one line per layer (name, output shape, parameters of the layer and
 * its children) and the total; a block repeating the one before it (GPT-2's
 * h1 .. h11) prints one line, without its children. */
void tb_model_print(const tb_model *m, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
