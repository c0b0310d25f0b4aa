/*
 * layers.h - layers with forward and backward on top of the backend ops.
 *
 * A layer is a tb_layer (the common part) embedded first in a family struct,
 * plus a table of functions (tb_layer_vtbl). Families, one file each:
 *   lib/nn/layer_conv.c    conv2d (bias optional), with the conv autotuner
 *   lib/nn/layer_bn.c      batch norm (per channel, PyTorch's momentum rule)
 *   lib/nn/layer_act.c     ReLU, GELU (fused or unfused), dropout
 *   lib/nn/layer_pool.c    max / average pooling, global average pooling
 *   lib/nn/layer_linear.c  linear (gemm + bias_add / bias_grad)
 *   lib/nn/layer_seq.c     containers: a sequence, a residual block
 *   lib/nn/layer_loss.c    softmax cross-entropy, mean over the rows (samples,
 *                       or a token model's positions, in place over the logits)
 *   lib/nn/layer_tokens.c  token tensors: per-token linear, mean over tokens,
 *                       residual add (no activation)
 *   lib/nn/layer_ln.c      layer norm over each token's features
 *   lib/nn/layer_attn.c    multi-head self-attention with its projections,
 *                       causal or not
 *   lib/nn/layer_embed.c   GPT-2's token + position embedding (int32 ids in),
 *                       and the vocabulary head tied to its token table
 *
 * Life of a layer:
 *   create  (shape inference from the per-sample input shape; parameters
 *            declared but not allocated)
 *   bind    (tb_layer_params_bind: the model points each parameter at its slice
 *            of one flat weight buffer and one flat gradient buffer, so a
 *            fused optimizer makes one pass over all of them)
 *   alloc   (activations for the largest batch: output, input gradient,
 *            whatever backward needs)
 *   forward / backward, any batch n <= the allocated one
 *   destroy
 * forward returns a pointer to the layer's output (owned by the layer, valid
 * until its next forward); backward takes the gradient of that output and
 * returns the gradient of the input forward saw, which must still hold the
 * same data. Gradients of parameters are written or added as ctx says
 * (grad_accumulate), the contract of the backend's weight-gradient ops.
 *
 * Tests: bazel test //lib/nn:gradcheck_test //lib/nn:layers_test
 */
#ifndef TB_LAYERS_H
#define TB_LAYERS_H

#include <stdint.h>

#include "lib/backend/backend.h"
#include "lib/nn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- what every layer of a model shares ---- */

/* One cached convolution algorithm choice: the key is the whole descriptor
 * (batch size included, so a new batch size is tuned again) and the kind. */
typedef struct tb_conv_algo_entry {
    tb_conv_desc desc;
    tb_conv_kind kind;
    int algo;
    float ms;            /* the autotuner's time for it; -1 for the default */
    char name[64];
} tb_conv_algo_entry;

typedef struct tb_conv_algo_cache {
    tb_conv_algo_entry *entries;
    int count, cap;
    int tunings;         /* conv_find calls made (the autotuner's one-off cost) */
} tb_conv_algo_cache;

/* Activation memory beyond "every layer owns its buffers" (lib/nn/layers.c):
 * no_grad evaluation (--eval-no-grad) and activation checkpointing
 * (--checkpointing). Containers bind a layer's output tensors (those made
 * with tb_layer_out_tensor) to a scratch buffer just before its forward:
 *   no_grad:    every layer, one pair of buffers per container depth, the
 *               one the input is not in (ping-pong); buffers for backward
 *               (tb_layer_tensor: input gradients, saved sums) are freed;
 *   checkpoint: layers with l->checkpoint (BN, ReLU, GELU, pooling whose
 *               consumer is the next leaf of a sequence), one shared pair;
 *               a sequence runs their forward again before a backward
 *               needs their output; and attention's probabilities (the
 *               manual variant's (B, H, T, T) saved buffer), one buffer
 *               shared by every attention layer (attn_saved): each
 *               layer's backward runs its attention forward again into it
 *               (as torch.utils.checkpoint recomputes a block). */
#define TB_ACT_DEPTHS 4
typedef struct tb_act_mem {
    int no_grad;          /* 1: forward keeps nothing for backward */
    int depth;            /* sequences entered by the running forward */
    int recomputing;      /* a checkpointed layer's forward runs again in backward
                             (batch norm leaves its running statistics alone) */
    size_t ng_bytes;      /* each no_grad buffer: the largest output at max batch */
    float *ng[2 * TB_ACT_DEPTHS]; /* no_grad pairs, [2 * (depth - 1) + k] */
    size_t ckpt_bytes;
    float *ckpt[2];       /* the checkpointing pair */
    int ckpt_attn;        /* 1 under checkpointing: attention's probabilities recomputed */
    size_t attn_saved_bytes;
    float *attn_saved;    /* their shared buffer (the largest layer's, at max batch) */
} tb_act_mem;

typedef struct tb_layer_ctx {
    tb_backend *be;
    int training;        /* 1: batch statistics, dropout on, backward possible */
    int grad_accumulate; /* 0: the next backward writes parameter gradients
                            (after a set_to_none zero_grad); 1: adds to them */
    tb_gelu_variant gelu;
    tb_gelu_approx gelu_approx; /* the model's GELU: exact erf, or tanh (GPT-2) */
    int conv_autotune;   /* 0: conv_algo_default; 1: conv_find once per shape */
    int conv_deterministic; /* conv algorithms that repeat bitwise only
                               (tb_conv_desc.deterministic; cudnn.deterministic) */
    tb_math math;        /* GEMM math mode (--tf32 sets TB_MATH_TF32) */
    tb_math conv_math;   /* convolution's (cudnn.allow_tf32: tb_config_conv_tf32) */
    uint64_t dropout_seed;
    int dropout_layers;  /* dropout layers created so far (their mask regions) */
    tb_conv_algo_cache algos;
    /* anomaly detection (--detect-anomaly): count_nonfinite after every
     * layer's forward output and backward outputs (input and parameter
     * gradients), stopping at the first NaN/Inf with TB_ERR_NUMERIC naming
     * the layer (tb_layer_anomaly_check). */
    int detect_anomaly;
    float *anomaly_count; /* (1) device scalar the checks count into; the trainer's */
    const char *anomaly_inject; /* test hook: NaN written into this layer's output
                                   (forward, or backward with anomaly_inject_bwd) */
    int anomaly_inject_bwd;
    /* the transformer's variants (--fused-layernorm, --fused-attention),
     * read at each call: unfused / manual is eager PyTorch */
    tb_ln_variant layernorm;
    tb_attn_variant attention;
    tb_act_mem acts;     /* --eval-no-grad, --checkpointing */
    /* channels last (--channels-last): activations of conv, batch norm and
     * pooling in NHWC, conv weights in KRSC; the first linear layer after
     * them flattens (h, w, c) (model.c permutes its weight columns). */
    tb_layout layout;
    /* autocast (--amp): TB_F32 off, or TB_BF16 / TB_F16; see lib/nn/amp.h for
     * which layers run in it. */
    tb_dtype amp;
    /* The dtype of the conv trunk's activations (lib/nn/amp.h): TB_BF16
     * under bf16 autocast where the backend has low-precision activations
     * (be->relu_fwd_lowp), else TB_F32. Convolutions, batch norm, ReLU,
     * pooling and residual blocks then write bf16 outputs and input
     * gradients, and take bf16 inputs (a convolution and a linear layer
     * also fp32 ones: the images, the token path). Fixed when the model is
     * built (model.c). */
    tb_dtype act;
    /* the per-op timeline (--trace's op breakdown, lib/train/trace.h):
     * NULL when off, and then a layer call costs one branch more */
    const struct tb_layer_hook *hook;
} tb_layer_ctx;

/* Finds (or chooses and caches) the algorithm for d and kind: the backend's
 * default, or with ctx->conv_autotune the fastest conv_find result. */
int tb_conv_algo_lookup(tb_layer_ctx *ctx, const tb_conv_desc *d, tb_conv_kind kind, int *algo);
void tb_conv_algo_cache_free(tb_conv_algo_cache *c);

/* Per-sample shape: channels, height, width (features after linear: c, 1, 1). */
typedef struct tb_shape {
    int c, h, w;
} tb_shape;

static inline size_t tb_shape_numel(tb_shape s) { return (size_t)s.c * s.h * s.w; }

typedef enum tb_init_kind {
    TB_INIT_UNIFORM = 0, /* U(-bound, bound): PyTorch's conv/linear default */
    TB_INIT_ONES = 1,    /* BN gamma */
    TB_INIT_ZEROS = 2,   /* BN beta */
    TB_INIT_NORMAL = 3,  /* N(0, bound^2): GPT-2's weights and embeddings, std 0.02
                            (nn.init.normal_, no truncation) */
} tb_init_kind;

typedef struct tb_param {
    char name[32];       /* "weight", "bias", "gamma", "beta" */
    size_t n;            /* floats */
    float *w, *g;        /* views into the model's flat buffers; NULL until bound */
    tb_init_kind init;
    float bound;         /* TB_INIT_UNIFORM: 1/sqrt(fan_in); TB_INIT_NORMAL: the std */
} tb_param;

#define TB_LAYER_MAX_PARAMS 4 /* multi-head attention: in and out projections */
#define TB_LAYER_MAX_ACTS 6
#define TB_LAYER_NAME 48

typedef struct tb_layer tb_layer;

/* FLOPs by op family, counted once per layer family (lib/nn/flops.c sums a
 * model): a multiply-add is 2 FLOPs; fwd is the forward, bwd everything the
 * backward runs (input and parameter gradients; an input gradient the layer
 * skips, need_dx == 0, is not counted). Attention counts the whole T x T
 * score matrix, causal or not (PaLM's MFU convention). */
typedef enum tb_flop_family {
    TB_FLOPS_CONV = 0,      /* convolutions */
    TB_FLOPS_GEMM = 1,      /* linear layers, projections, the vocabulary head */
    TB_FLOPS_ATTENTION = 2, /* Q K^T and P V (and their gradients) */
    TB_FLOPS_NORM = 3,      /* batch norm, layer norm */
    TB_FLOPS_ELEMENTWISE = 4, /* activations, pooling, residual adds, embeddings, the loss */
    TB_FLOP_FAMILIES = 5,
} tb_flop_family;

typedef struct tb_flops {
    double fwd[TB_FLOP_FAMILIES], bwd[TB_FLOP_FAMILIES];
} tb_flops;

/* One pass's FLOPs over every family: the backward's, or the forward's. */
static inline double tb_flops_pass(const tb_flops *f, int backward)
{
    double s = 0;
    for (int k = 0; k < TB_FLOP_FAMILIES; k++)
        s += backward ? f->bwd[k] : f->fwd[k];
    return s;
}

typedef struct tb_layer_vtbl {
    const char *kind;    /* "conv2d", "batchnorm", ... */
    /* REQUIRES: x's per-sample shape is l->in, x->n <= the allocated batch */
    int (*forward)(tb_layer *l, const tb_tensor *x, const tb_tensor **y);
    /* REQUIRES: a training forward ran; dy has the shape of its output */
    int (*backward)(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx);
    int (*alloc)(tb_layer *l, int max_batch);
    void (*release)(tb_layer *l); /* frees activations and family state */
    /* Adds this layer's FLOPs for ONE sample to *f (containers: their own
     * work only, e.g. a residual add; lib/nn/flops.c walks the children).
     * NULL: the layer does no arithmetic worth counting. */
    void (*flops)(const tb_layer *l, tb_flops *f);
    /* The least bytes a call on a batch of n moves (the op timeline's GB/s);
     * NULL: its input and output once, its parameters whole (layers.c). */
    double (*bytes)(const tb_layer *l, int n, int backward);
} tb_layer_vtbl;

struct tb_layer {
    const tb_layer_vtbl *vt;
    tb_layer_ctx *ctx;   /* borrowed from the model */
    char name[TB_LAYER_NAME];
    tb_shape in, out;
    int need_dx;         /* 0: backward skips the input gradient (first layer) */
    tb_param params[TB_LAYER_MAX_PARAMS];
    int nparams;
    tb_layer **children; /* containers only: sub-layers, in order */
    int nchildren;
    int checkpoint;      /* output in ctx->acts.ckpt, recomputed in backward */
    struct {
        tb_tensor *t;    /* a tensor of the layer's family struct */
        int output;      /* 1: tb_layer_out_tensor (bound to scratch); 0: for backward */
    } acts[TB_LAYER_MAX_ACTS];
    int nacts;
};

/* ---- constructors. On success *out is a new layer; destroy it with
 * tb_layer_destroy. Errors: TB_ERR_INVALID (shape), TB_ERR_NOMEM. ---- */

/* k filters of r x r, stride, pad; bias 0 when batch norm follows and the
 * "no conv bias before BN" toggle is on. REQUIRES: output at least 1x1. */
int tb_layer_conv2d_create(tb_layer_ctx *ctx, tb_shape in, int k, int r, int stride, int pad,
                        int bias, tb_layer **out);
/* eps 1e-5, momentum 0.1 (PyTorch's defaults). */
int tb_layer_batchnorm_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out);
int tb_layer_relu_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out);
/* The variant (fused or unfused) comes from ctx->gelu at each call. */
int tb_layer_gelu_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out);
/* Drops with probability p in training, identity in evaluation. The mask
 * depends on (ctx->dropout_seed, a per-layer counter), not on threads. */
int tb_layer_dropout_create(tb_layer_ctx *ctx, tb_shape in, float p, tb_layer **out);
/* kind TB_POOL_MAX or TB_POOL_AVG (padding counted as zeros). */
int tb_layer_pool_create(tb_layer_ctx *ctx, tb_shape in, tb_pool_kind kind, int window, int stride,
                      int pad, tb_layer **out);
/* Average over all pixels: (c, h, w) -> (c, 1, 1). REQUIRES: h == w. */
int tb_layer_global_avgpool_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out);
/* Flattens (c, h, w) to c*h*w features; y = x W^T + b, W is (out, in). */
int tb_layer_linear_create(tb_layer_ctx *ctx, tb_shape in, int out_features, tb_layer **out);

/* Token tensors (the transformer, lib/nn/layer_tokens.c): per-sample shape
 * (1, T, d), T tokens of d features, token-major; a 1 x H x W image is H
 * tokens of W features. REQUIRES for these: in.c == 1. */
/* y = x W^T + b on every token; W is (out, d). */
int tb_layer_token_linear_create(tb_layer_ctx *ctx, tb_shape in, int out_features, tb_layer **out);
/* Mean over the tokens: (1, T, d) -> (d, 1, 1). */
int tb_layer_token_mean_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out);
/* nn.LayerNorm over the last axis (w) of any shape, eps 1e-5; the variant
 * comes from ctx->layernorm at each call. */
int tb_layer_layernorm_create(tb_layer_ctx *ctx, tb_shape in, tb_layer **out);
/* Non-causal multi-head self-attention with input (3d x d) and output
 * (d x d) projections; ctx->attention picks the variant at each call.
 * REQUIRES: d % heads == 0. */
int tb_layer_mha_create(tb_layer_ctx *ctx, tb_shape in, int heads, tb_layer **out);
/* The same layer, causal when causal != 0 (token t attends to tokens <= t:
 * GPT-2); tb_layer_mha_create is causal = 0. */
int tb_layer_mha_causal_create(tb_layer_ctx *ctx, tb_shape in, int heads, int causal,
                               tb_layer **out);
/* y = main(x) + x (a pre-norm transformer's residual). Takes ownership of
 * main_path (also on failure). REQUIRES: main_path keeps the shape. */
int tb_layer_add_residual_create(tb_layer_ctx *ctx, tb_layer *main_path, tb_layer **out);

/* Token + position embedding (lib/nn/layer_embed.c): in (1, T, 1) int32
 * token ids (the input tensor has dtype TB_I32), out (1, T, dim),
 * y = wte[token] + wpe[t]. Parameters "weight" wte (vocab, dim) and
 * "weight" wpe (context, dim), both TB_INIT_NORMAL with std 0.02. No input
 * gradient (need_dx 0, backward returns dx NULL).
 * REQUIRES: in.c == in.w == 1, 1 <= T = in.h <= context; vocab, dim >= 1;
 * every token id in [0, vocab) (the loader checks its batches). */
int tb_layer_embedding_create(tb_layer_ctx *ctx, tb_shape in, int vocab, int dim, int context,
                              tb_layer **out);
/* Output head tied to embedding's token table: (1, T, dim) -> (1, T, vocab)
 * logits = x wte^T, no bias, no parameters of its own (it reads wte's
 * weights and gradient once bound; its backward writes or adds dwte first,
 * and the embedding's then adds). Borrows embedding, which must outlive it
 * and run earlier in the forward (the head's backward runs before the
 * embedding's). REQUIRES: embedding made by tb_layer_embedding_create,
 * in == (1, T, dim). */
int tb_layer_tied_head_create(tb_layer_ctx *ctx, tb_shape in, tb_layer *embedding,
                              tb_layer **out);

/* Containers take ownership of their children (also on failure). */
int tb_layer_seq_create(tb_layer_ctx *ctx, tb_layer **children, int n, tb_layer **out);
/* y = relu(main(x) + shortcut(x)); shortcut NULL is the identity.
 * REQUIRES: main's output shape equals the shortcut's (or x's); for no_grad
 * and checkpointing, both paths are sequences (containers bind their
 * children's outputs to scratch; the block binds none). */
int tb_layer_residual_create(tb_layer_ctx *ctx, tb_layer *main_path, tb_layer *shortcut,
                          tb_layer **out);

/* ---- working with any layer ---- */
/* With ctx->detect_anomaly: counts NaN/Inf in t (a forward output, or with
 * backward the input gradient t, may be NULL, and l's parameter gradients);
 * TB_ERR_NUMERIC naming l when there are any. Costs a device sync. */
int tb_layer_anomaly_check(tb_layer *l, const tb_tensor *t, int backward);

/* ---- the per-op timeline (ctx->hook) ----
 * begin is called before a layer's forward or backward (or an op inside
 * one: tb_layer_op_begin), end after it; calls nest as the layers do.
 * family is the layer's kind ("layernorm", "mha") or the op's ("qkv_gemm",
 * "attention", "xent"); flops and bytes are what the call did for its
 * whole batch (bytes: the least memory traffic it needs, 0 when not
 * estimated); sub_op marks an op inside a layer, whose FLOPs and bytes the
 * enclosing layer's include. end's status is the sync's (a device's
 * asynchronous work is synchronized so that the call's time includes it). */
typedef struct tb_layer_hook {
    void (*begin)(void *user, const char *name, const char *family, int backward);
    int (*end)(void *user, double flops, double bytes, int sub_op);
    void *user;
} tb_layer_hook;

/* A layer's call under ctx->hook (lib/nn/layers.c): FLOPs from its vtbl. */
int tb_layer_hooked_call(tb_layer *l, const tb_tensor *in, int backward,
                         const tb_tensor **out);

/* An op inside a layer (or the loss) as its own event; no-ops without a hook. */
static inline void tb_layer_op_begin(const tb_layer_ctx *ctx, const char *name,
                                     const char *family, int backward)
{
    if (ctx->hook)
        ctx->hook->begin(ctx->hook->user, name, family, backward);
}
static inline int tb_layer_op_end(const tb_layer_ctx *ctx, double flops, double bytes)
{
    return ctx->hook ? ctx->hook->end(ctx->hook->user, flops, bytes, 1) : TB_OK;
}

/* The raw call, without the hook. */
static inline int tb_layer_call(tb_layer *l, const tb_tensor *in, int backward,
                                const tb_tensor **out)
{
    return backward ? l->vt->backward(l, in, out) : l->vt->forward(l, in, out);
}

static inline int tb_layer_forward(tb_layer *l, const tb_tensor *x, const tb_tensor **y)
{
    int rc = l->ctx->hook ? tb_layer_hooked_call(l, x, 0, y) : l->vt->forward(l, x, y);
    if (rc != TB_OK || !l->ctx->detect_anomaly)
        return rc;
    return tb_layer_anomaly_check(l, *y, 0);
}
static inline int tb_layer_backward(tb_layer *l, const tb_tensor *dy, const tb_tensor **dx)
{
    int rc = l->ctx->hook ? tb_layer_hooked_call(l, dy, 1, dx) : l->vt->backward(l, dy, dx);
    if (rc != TB_OK || !l->ctx->detect_anomaly)
        return rc;
    return tb_layer_anomaly_check(l, *dx, 1);
}
/* Allocates activations for batches up to max_batch (recursively). */
int tb_layer_alloc(tb_layer *l, int max_batch);
/* Frees a layer, its activations and its children; NULL is a no-op. */
void tb_layer_destroy(tb_layer *l);

/* Calls fn on every parameter of l and its children, in a fixed order. */
typedef void (*tb_param_fn)(tb_param *p, void *user);
void tb_layer_for_each_param(tb_layer *l, tb_param_fn fn, void *user);
/* Floats over all parameters of l (recursively). */
size_t tb_layer_param_count(tb_layer *l);
/* Points the parameters at consecutive slices of w and g (device memory,
 * tb_layer_param_count floats each), in tb_layer_for_each_param order. */
void tb_layer_params_bind(tb_layer *l, float *w, float *g);

/* Shared helpers of the family files. */
int tb_layer_new(tb_layer_ctx *ctx, const tb_layer_vtbl *vt, size_t size, tb_shape in,
              tb_shape out, tb_layer **l);
void tb_layer_add_param(tb_layer *l, const char *name, size_t n, tb_init_kind init, float bound);
/* Allocates a tensor of max_batch x shape that backward needs (an input
 * gradient, a saved intermediate): freed under no_grad. */
int tb_layer_tensor(tb_layer *l, int max_batch, tb_shape s, tb_tensor *t);
/* The layer's output (max_batch x l->out): its own memory, or with
 * l->checkpoint a view a container binds to scratch before each forward. */
int tb_layer_out_tensor(tb_layer *l, int max_batch, tb_tensor *t);
/* The same two in dtype (the conv trunk's ctx->act). */
int tb_layer_tensor_as(tb_layer *l, int max_batch, tb_shape s, tb_dtype dtype, tb_tensor *t);
int tb_layer_out_tensor_as(tb_layer *l, int max_batch, tb_dtype dtype, tb_tensor *t);
/* TB_OK when x holds the trunk's activation dtype (ctx->act), for the
 * layers that take nothing else (batch norm, ReLU, pooling, residual);
 * TB_ERR_INTERNAL naming the layer otherwise. */
int tb_layer_act_check(const tb_layer *l, const tb_tensor *x);
/* ReLU and the residual add on the trunk's activations (ctx->act): the
 * backend's fp32 slot, or its low-precision one (relu_fwd_lowp, ...). */
int tb_act_relu_fwd(const tb_layer_ctx *ctx, const void *x, void *y, size_t n);
int tb_act_relu_bwd(const tb_layer_ctx *ctx, const void *y, const void *dy, void *dx, size_t n);
int tb_act_add(const tb_layer_ctx *ctx, const void *a, const void *b, void *y, size_t n);

/* ---- activation memory (tb_act_mem) ---- */
/* Points l's outputs at the scratch buffer its next forward on x writes:
 * no-op unless no_grad or l->checkpoint. Containers call it. */
int tb_layer_acts_bind(tb_layer *l, const tb_tensor *x);
/* Marks the layers --checkpointing recomputes (see tb_act_mem). Call before
 * tb_layer_alloc; tb_layer_acts_ckpt_alloc after it. */
void tb_layer_acts_mark_checkpoints(tb_layer *root);
int tb_layer_acts_ckpt_alloc(tb_layer *root);
/* on = 1: frees every layer's backward buffers and outputs and allocates the
 * no_grad scratch; on = 0: the reverse. */
int tb_layer_acts_no_grad(tb_layer *root, int on);
/* Under no_grad: frees the no_grad scratch, which the next no_grad forward
 * allocates again (a parked trainer's); otherwise a no-op. */
void tb_layer_acts_no_grad_release(tb_layer *root);
/* Frees the scratch buffers of ctx (model teardown). */
void tb_layer_acts_free(tb_layer_ctx *ctx);

/* ---- softmax cross-entropy, the loss (not a tb_layer: it ends the graph).
 * Two paths (lib/nn/layer_loss.c):
 *   image models (tb_xent_init): softmax_xent_fwd/bwd, one row per sample,
 *     probs and dlogits buffers of (N, classes);
 *   token models (tb_xent_init_lse): xent_lse_fwd/bwd over N*T rows, one
 *     float (the logsumexp) kept per row, and the gradient written IN PLACE
 *     over the logits: no (rows, classes) buffer besides the head's output
 *     (GPT-2's at batch 16, context 1024: 3.3 GB each). ---- */
typedef struct tb_xent {
    tb_layer_ctx *ctx;
    int classes, cap_n, n; /* cap_n, n: rows (samples, or tokens with lse) */
    int lse_path;         /* 1: tb_xent_init_lse's token path */
    float *probs;         /* (N, classes); NULL on the lse path */
    float *lse;           /* (rows) logsumexp per row; lse path only */
    float *row_loss;      /* (N) */
    float *loss_sum;      /* (1) device scalar: sum of row_loss */
    int32_t *labels;      /* (N) borrowed from the last forward */
    tb_tensor dlogits;    /* (N, classes, 1, 1); on the lse path a view of the
                             last forward's logits (same shape) */
    const tb_tensor *logits; /* lse path: the last forward's logits, until backward */
} tb_xent;

int tb_xent_init(tb_layer_ctx *ctx, int classes, int max_batch, tb_xent *x);
/* The token path: up to max_rows rows of classes logits (a token model:
 * max_batch x T). REQUIRES: classes > 1, max_rows > 0. */
int tb_xent_init_lse(tb_layer_ctx *ctx, int classes, int max_rows, tb_xent *x);
void tb_xent_free(tb_xent *x);
/* loss_sum = sum over rows of -log softmax(logits)[label]; stays on the
 * device (read it with tb_xent_read_loss; reading costs a sync on a GPU).
 * labels: device int32, one per row. REQUIRES: logits (N, classes, 1, 1);
 * on the lse path any (N, c, h, w) whose c*h*w is a multiple of classes,
 * rows = N * c*h*w / classes (a token model's (N, 1, T, classes): N*T rows),
 * and logits left alone until tb_xent_backward. */
int tb_xent_forward(tb_xent *x, const tb_tensor *logits, const int32_t *labels);
/* Mean over the rows: dlogits = scale * (softmax - onehot), scale is
 * 1 / (rows * accumulation steps). On the lse path *dlogits is the
 * forward's logits tensor, overwritten by its gradient; one backward per
 * forward (a second fails). */
int tb_xent_backward(tb_xent *x, float scale, const tb_tensor **dlogits);
/* Host copy of loss_sum / n: the mean loss of the last forward. */
int tb_xent_read_loss(tb_xent *x, float *mean_loss);

#ifdef __cplusplus
}
#endif
#endif
