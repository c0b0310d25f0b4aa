/*
 * backend.h - the seam: a backend is a table of functions.
 *
 * The core (layers, models, optimizers, loader, harness) never asks which
 * backend it runs on; it calls through tb_backend. Two backends exist:
 *   cpu  (lib/backend/cpu/backend.c): host memory, oneDNN for convolution and
 *        matmul, own vectorized kernels for the rest; always built.
 *   cuda (lib/backend/cuda/backend.c + kernels/ (.cu files)): cudart, cuBLAS, cuDNN, own
 *        kernels; built only where the toolkit was found (tools/local_config.bzl).
 * A backend file is compiled or not as a whole; there is no #ifdef in bodies.
 *
 * Pointers passed to ops are device pointers of that backend (host memory
 * on the CPU). Ops run in order on the backend's compute stream; host code
 * that reads results must call sync first. Every function returns a tb_err
 * status (lib/core/status.h).
 *
 * Slots may be NULL only where the op has no meaning on that backend; the
 * CUDA table test (lib/backend/cuda/table_test.c) checks that it fills
 * every one.
 */
#ifndef TB_BACKEND_H
#define TB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tb_backend tb_backend;
typedef struct tb_stream tb_stream; /* opaque, backend-specific */
typedef struct tb_event tb_event;   /* opaque, backend-specific */

/* As the stream of a copy or memset: be's compute stream, asynchronously:
 * in order with the ops, and the host does not wait (NULL there means
 * synchronous). What PyTorch's zero_grad(set_to_none=False) and a
 * device-to-device copy_ do: neither makes the host wait. */
#define TB_ON_COMPUTE ((tb_stream *)(uintptr_t)1)

/* TB_I32: int32 token ids (a token model's input tensor); never an
 * autocast dtype. */
typedef enum tb_dtype { TB_F32 = 0, TB_BF16 = 1, TB_F16 = 2, TB_I32 = 3 } tb_dtype;
typedef enum tb_layout { TB_NCHW = 0, TB_NHWC = 1 } tb_layout;

/* GEMM math: plain fp32, fp32 storage computed in TF32 (CUDA) or in bf16
 * (oneDNN's fpmath mode, the CPU's nearest analogue), or low-precision
 * inputs with fp32 accumulation. */
typedef enum tb_math { TB_MATH_F32 = 0, TB_MATH_TF32 = 1, TB_MATH_LOWP = 2 } tb_math;

/* Which GELU: the exact erf form (PyTorch's default, approximate='none') or
 * the tanh approximation GPT-2 trains with (approximate='tanh'):
 *   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
typedef enum tb_gelu_approx { TB_GELU_ERF = 0, TB_GELU_TANH = 1 } tb_gelu_approx;

typedef enum tb_gelu_variant {
    TB_GELU_UNFUSED = 0, /* five element-wise passes, as eager PyTorch runs it */
    TB_GELU_FUSED = 1,   /* one pass */
} tb_gelu_variant;

/* ---- device info, for the environment fingerprint ---- */
typedef struct tb_device_info {
    char backend[8];          /* "cpu" or "cuda" */
    int index;                /* device ordinal */
    char name[128];           /* GPU name or CPU model */
    size_t total_mem;         /* bytes; host RAM on the CPU */
    size_t avail_mem;         /* bytes an allocation may still take now (the CPU's
                                 MemAvailable or ulimit -v, less a margin:
                                 tb_cpu_mem_budget); 0 when not known (CUDA: its
                                 caching allocator holds what cudaMemGetInfo
                                 would not count as free) */
    int multiprocessors;      /* SMs, or cores on the CPU */
    int threads;              /* CPU threads used by kernels; 0 on CUDA */
    int clock_khz;            /* 0 when the platform does not expose it */
    int mem_clock_khz;
    int mem_bus_bits;
    int cc_major, cc_minor;   /* compute capability; 0 on the CPU */
    char pci_bus_id[32];      /* "0000:3B:00.0" for a GPU, "" on the CPU: how NVML
                                 finds this device (its index is not CUDA's
                                 ordinal under CUDA_VISIBLE_DEVICES) */
    char cpu_flags[160];      /* avx2 avx512f avx512bw avx512_bf16 ... */
    char runtime[48];         /* "CUDA runtime 13.0", "" on CPU */
    char driver[48];
    char libs[256];           /* "cuBLAS 13.0.0 cuDNN 9.x NCCL 2.28" or "oneDNN 2.6" */
} tb_device_info;

/* ---- convolution ---- */
typedef struct tb_conv_desc {
    int n, c, h, w;           /* input */
    int k, r, s;              /* filters: k outputs, r x s window */
    int stride, pad;
    tb_layout layout;         /* of x, y and w (KCRS or KRSC) */
    tb_dtype dtype;
    tb_math math;
    int deterministic;        /* 1: conv_algo_default and conv_find choose only
                                 algorithms whose results repeat bitwise (no
                                 atomics): cudnn.deterministic = True */
    int lowp_out;             /* 1 (dtype TB_BF16, on a backend with low-precision
                                 activations, see relu_fwd_lowp): conv_fwd's y and
                                 conv_bwd_data's dx are written in dtype too,
                                 rounded to nearest even; 0: fp32 */
} tb_conv_desc;

static inline int tb_conv_out_h(const tb_conv_desc *d) { return (d->h + 2 * d->pad - d->r) / d->stride + 1; }
static inline int tb_conv_out_w(const tb_conv_desc *d) { return (d->w + 2 * d->pad - d->s) / d->stride + 1; }

typedef enum tb_conv_kind { TB_CONV_FWD = 0, TB_CONV_BWD_DATA = 1, TB_CONV_BWD_FILTER = 2 } tb_conv_kind;

typedef struct tb_conv_algo_perf {
    int algo;                 /* backend's algorithm id, for conv_* */
    char name[64];            /* cuDNN enum name or oneDNN implementation name */
    float ms;                 /* measured time; < 0 when it failed */
    size_t workspace;
} tb_conv_algo_perf;

#define TB_MAX_CONV_ALGOS 16

/* ---- pooling, batch norm, optimizers ---- */
typedef enum tb_pool_kind { TB_POOL_MAX = 0, TB_POOL_AVG = 1 } tb_pool_kind;

typedef struct tb_pool_desc {
    tb_pool_kind kind;
    int n, c, h, w;
    int window, stride, pad;
    tb_layout layout;
    tb_dtype dtype;           /* of x, y, dy and dx: TB_F32, or TB_BF16 where the
                                 backend has low-precision activations (see
                                 relu_fwd_lowp); the float pointers of the pool
                                 slots then point at 2-byte elements */
} tb_pool_desc;

typedef enum tb_opt_kind {
    TB_OPT_SGD = 0,           /* momentum, nesterov off, coupled weight decay */
    TB_OPT_ADAMW = 1,
    TB_OPT_LARS = 2,
    TB_OPT_LAMB = 3,
    TB_OPT_NOVOGRAD = 4,
} tb_opt_kind;

typedef struct tb_opt_hparams {
    tb_opt_kind kind;
    float lr, momentum, weight_decay;
    float beta1, beta2, eps;
    float trust_coef;         /* LARS eta, > 0 (opt_step refuses 0: no tensor would move) */
    int step;                 /* 1-based, for bias correction */
    float grad_scale;         /* gradients are multiplied by 1/grad_scale first (AMP) */
} tb_opt_hparams;

/* One parameter tensor as the optimizer sees it: state buffers are n floats
 * each (NULL where the optimizer has none). tensor_state: ONE float of
 * per-tensor state (device memory), NovoGrad's second moment of the
 * tensor's gradient norm; NULL for the other optimizers.
 * Which buffers each kind needs: SGD state1 when momentum != 0; AdamW and
 * LAMB state1, state2; LARS state1 when momentum != 0; NovoGrad state1 and
 * tensor_state. */
typedef struct tb_param_view {
    float *param, *grad, *state1, *state2;
    size_t n;
    float *tensor_state;
    int no_adapt;             /* LARS, LAMB: no trust ratio (1) and no weight decay for
                                 this tensor: norms' gamma and beta, biases (MLPerf's
                                 LARS, BERT's LAMB; lib/nn/optim.c sets it) */
} tb_param_view;

typedef struct tb_bn_desc {
    int n, c, hw;             /* batch, channels, pixels per channel (H*W; 1 after linear) */
    tb_layout layout;         /* NCHW: x[(n*C + c)*hw + i]; NHWC: x[(n*hw + i)*C + c] */
    float eps, momentum;      /* PyTorch defaults 1e-5, 0.1 */
    tb_dtype dtype;           /* of x, y, dy and dx: TB_F32, or TB_BF16 where the
                                 backend has low-precision activations (see
                                 relu_fwd_lowp): the float pointers x, y, dy, dx
                                 then point at 2-byte elements; gamma, beta, the
                                 statistics and dgamma, dbeta stay fp32, and so
                                 does the arithmetic (PyTorch's bf16 batch norm) */
} tb_bn_desc;

/* ---- device memory policy (the caching allocator technique) ---- */
typedef enum tb_mem_mode {
    TB_MEM_CACHING = 0, /* freed blocks kept for reuse (PyTorch's default) */
    TB_MEM_PLAIN = 1,   /* one device malloc/free per dev_alloc/dev_free */
} tb_mem_mode;

/* ---- attention and layer norm (lib/backend/cpu/attention.c, lib/backend/cpu/layernorm.c,
 * lib/backend/cuda/attention.c) ---- */
typedef enum tb_ln_variant {
    TB_LN_UNFUSED = 0, /* several passes (mean, center, variance, normalize, scale, shift),
                        * as eager PyTorch's decomposition runs them */
    TB_LN_FUSED = 1,   /* one kernel per row (apex FusedLayerNorm) */
} tb_ln_variant;

typedef enum tb_attn_variant {
    TB_ATTN_MANUAL = 0, /* scores materialized: S = scale Q K^T, mask, softmax, P V */
    TB_ATTN_FUSED = 1,  /* tiled, online softmax, never stores the T x T matrix
                         * (scaled_dot_product_attention's flash kernel) */
} tb_attn_variant;

/* Multi-head attention. q, k, v, out and their gradients are contiguous
 * (B, H, T, D): element (b, h, t, d) at ((b*H + h)*T + t)*D + d. */
typedef struct tb_attn_desc {
    int batch, heads, seq, head_dim; /* B, H, T, D; all >= 1 */
    int causal;                      /* query i sees key j only when j <= i */
    float scale;                     /* scores = scale * q.k; usually 1/sqrt(D) */
    /* The manual variant's four products (torch.bmm's), as the model's
     * other GEMMs run: math TB_MATH_F32 or TB_MATH_TF32 (allow_tf32 reaches
     * bmm in PyTorch); lowp TB_BF16 or TB_F16 is autocast's bmm: each
     * product's operands (q, k, v, P; dO, dS) are rounded to it and
     * multiplied with fp32 accumulation into fp32, the softmax and its
     * backward stay fp32, as autocast runs softmax in fp32. Zero (TB_MATH_F32,
     * TB_F32): plain fp32. The fused variant takes neither (its kernels are
     * fp32: tb_check_attention refuses them, TB_ERR_UNSUPPORTED). */
    tb_math math;
    tb_dtype lowp;
} tb_attn_desc;

/* ---- whole-step capture and device-side augmentation ---- */
typedef struct tb_graph tb_graph; /* opaque: an instantiated capture (cudaGraphExec_t) */

#define TB_AUGMENT_MAX_C 4
/* One batch's augmentation on the device (augment_u8). */
typedef struct tb_augment_desc {
    int c, h, w;              /* sample shape; c <= TB_AUGMENT_MAX_C */
    int pad;                  /* crop padding; 0: no crop (params' dy, dx ignored) */
    float scale[TB_AUGMENT_MAX_C], bias[TB_AUGMENT_MAX_C]; /* per channel: x*scale + bias,
                                 tb_augment_norm (kernels/augment_math.h) */
    tb_layout layout;         /* of dst */
} tb_augment_desc;

/* ---- the table ---- */
struct tb_backend {
    const char *name;         /* "cpu" or "cuda" */
    int device;               /* ordinal */
    void *ctx;                /* backend-private state */

    /* memory. dev_alloc fails with TB_ERR_DEVICE_OOM, never crashes. */
    int (*dev_alloc)(tb_backend *be, void **p, size_t bytes);
    int (*dev_free)(tb_backend *be, void *p);
    int (*host_alloc)(tb_backend *be, void **p, size_t bytes, int pinned);
    int (*host_free)(tb_backend *be, void *p, int pinned);
    /* s == NULL: synchronous; otherwise asynchronous on s (TB_ON_COMPUTE:
     * on the compute stream). */
    int (*copy_h2d)(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s);
    int (*copy_d2h)(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s);
    int (*copy_d2d)(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s);
    /* bytes from src, device memory of src_be (another device of the same
     * kind, or be itself), to dst on be: DataParallel's device-to-device
     * copies (lib/dist/dp.h). Always asynchronous, on be's compute stream, and
     * ordered both ways: after all work issued so far on both backends,
     * before any work issued later on either (the host does not wait; sync
     * does). CUDA: cudaMemcpyPeerAsync between events on the two compute
     * streams, with peer access enabled where the GPUs allow it; CPU: a
     * memcpy. TB_ERR_INVALID when src_be is another kind of backend. */
    int (*copy_peer)(tb_backend *be, void *dst, tb_backend *src_be, const void *src,
                     size_t bytes);
    int (*memset)(tb_backend *be, void *p, int value, size_t bytes, tb_stream *s);
    /* bytes in use and the high-water mark, as counted by the backend's allocator */
    int (*mem_stats)(tb_backend *be, size_t *in_use, size_t *peak);
    int (*mem_reset_peak)(tb_backend *be);
    /* 0 = no limit; allocations beyond it fail with TB_ERR_DEVICE_OOM */
    int (*mem_set_limit)(tb_backend *be, size_t bytes);
    /* Returns cached, unused device memory to the device (PyTorch's
     * torch.cuda.empty_cache()); live allocations are untouched. NULL where
     * the backend keeps no cache. */
    int (*mem_empty_cache)(tb_backend *be);
    /* The allocator's policy (tb_mem_mode) and, for TB_MEM_CACHING, bytes
     * to reserve up front in one piece that the cache carves allocations
     * from (preallocation for the largest batch; 0 = none). NULL where the
     * backend has one policy only. */
    int (*mem_set_mode)(tb_backend *be, tb_mem_mode mode, size_t reserve_bytes);

    /* streams and events. stream NULL means the compute stream. */
    int (*stream_create)(tb_backend *be, tb_stream **s);
    int (*stream_destroy)(tb_backend *be, tb_stream *s);
    int (*stream_sync)(tb_backend *be, tb_stream *s);
    int (*event_create)(tb_backend *be, tb_event **e);
    int (*event_destroy)(tb_backend *be, tb_event *e);
    int (*event_record)(tb_backend *be, tb_event *e, tb_stream *s);
    int (*stream_wait_event)(tb_backend *be, tb_stream *s, tb_event *e);
    int (*event_sync)(tb_backend *be, tb_event *e);
    /* REQUIRES: both events recorded and complete */
    int (*event_elapsed_ms)(tb_backend *be, tb_event *start, tb_event *end, float *ms);
    int (*sync)(tb_backend *be);          /* wait for all work on the device */

    int (*device_info)(tb_backend *be, tb_device_info *info);
    int (*destroy)(tb_backend *be);

    /* ---- element-wise ops (n elements, fp32) ---- */
    int (*gelu_fwd)(tb_backend *be, tb_gelu_variant v, const float *x, float *y, size_t n);
    /* dx = dy * gelu'(x) (written, not accumulated) */
    int (*gelu_bwd)(tb_backend *be, tb_gelu_variant v, const float *x, const float *dy,
                    float *dx, size_t n);
    int (*relu_fwd)(tb_backend *be, const float *x, float *y, size_t n);
    /* dx = dy where y > 0 else 0; y is the forward output */
    int (*relu_bwd)(tb_backend *be, const float *y, const float *dy, float *dx, size_t n);
    /* y = a + b (residual connections) */
    int (*add)(tb_backend *be, const float *a, const float *b, float *y, size_t n);
    /* y = alpha * x + beta * y; beta == 0 writes y without reading it */
    int (*axpby)(tb_backend *be, float alpha, const float *x, float beta, float *y, size_t n);

    /* ---- low-precision activations (autocast's bf16 between layers, as
     * PyTorch keeps a bf16 convolution's output in bf16 through batch norm,
     * ReLU, pooling and the residual adds; lib/nn/amp.h). Optional: NULL
     * where the backend has none (CUDA today), and then layers keep fp32
     * activations under autocast. A backend that sets them also takes
     * dtype TB_BF16 in tb_bn_desc and tb_pool_desc. Elements are 2 bytes
     * (kernels/cast_math.h's bits), arithmetic fp32, results rounded to
     * nearest even; dtype is TB_BF16 (TB_ERR_UNSUPPORTED otherwise). */
    int (*relu_fwd_lowp)(tb_backend *be, tb_dtype dtype, const void *x, void *y, size_t n);
    int (*relu_bwd_lowp)(tb_backend *be, tb_dtype dtype, const void *y, const void *dy,
                         void *dx, size_t n);
    int (*add_lowp)(tb_backend *be, tb_dtype dtype, const void *a, const void *b, void *y,
                    size_t n);

    /* ---- dense layers. Row-major: C(m x n) = alpha op(A) op(B) + beta C,
     * op(A) is m x k, op(B) is k x n; trans_* = 1 means the stored matrix is
     * the transpose. beta == 0 writes C without reading it. */
    int (*gemm)(tb_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c,
                int ldc, tb_math math);
    /* Mixed precision (autocast's linear): the same product with a and b
     * stored in dtype (TB_BF16 or TB_F16, 2 bytes an element, the bits of
     * kernels/cast_math.h), multiplied with fp32 accumulation (CUDA:
     * cublasGemmEx, CUDA_R_16BF / CUDA_R_16F inputs, CUBLAS_COMPUTE_32F);
     * alpha, beta and C stay fp32. TB_ERR_UNSUPPORTED where the backend
     * has no such kernel (the CPU backend: fp16, oneDNN 2.6 has no CPU
     * fp16 matmul). */
    int (*gemm_lowp)(tb_backend *be, tb_dtype dtype, int trans_a, int trans_b, int m, int n,
                     int k, float alpha, const void *a, int lda, const void *b, int ldb,
                     float beta, float *c, int ldc);
    /* y(rows x cols) += bias(cols) broadcast over rows */
    int (*bias_add)(tb_backend *be, float *y, const float *bias, int rows, int cols);
    /* dbias(cols) = (accumulate ? dbias : 0) + sum over rows of dy */
    int (*bias_grad)(tb_backend *be, const float *dy, float *dbias, int rows, int cols,
                     int accumulate);

    /* ---- convolution. algo: an id from conv_algo_default or conv_find.
     * x: (N,C,H,W) or (N,H,W,C); w: (K,C,R,S) or (K,R,S,C); y: (N,K,P,Q)
     * or (N,P,Q,K). bias / dbias may be NULL (no conv bias before batch norm).
     * d->dtype TB_F32: every tensor fp32 (math F32 or TF32). TB_BF16 / TB_F16
     * (math must be TB_MATH_LOWP), autocast's conv: the inputs of each
     * direction are stored in dtype (fwd x and w; bwd_data dy and w;
     * bwd_filter x and dy; 2 bytes an element, kernels/cast_math.h), the
     * outputs (y, dx, dw, dbias) and bias are fp32, accumulation is fp32;
     * with d->lowp_out, y and dx are in dtype as well (the bf16 activations).
     * TB_ERR_UNSUPPORTED where the backend lacks the dtype (CPU: fp16). */
    int (*conv_algo_default)(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind, int *algo);
    /* The autotuner: times every usable algorithm once (skipping reference
     * implementations), fastest first in perf[0..*returned). */
    int (*conv_find)(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                     tb_conv_algo_perf *perf, int max, int *returned);
    int (*conv_fwd)(tb_backend *be, const tb_conv_desc *d, int algo, const float *x,
                    const float *w, const float *bias, float *y);
    int (*conv_bwd_data)(tb_backend *be, const tb_conv_desc *d, int algo, const float *dy,
                         const float *w, float *dx);
    /* dw (and dbias) written, or added to when accumulate (gradient
     * accumulation; set_to_none writes on the first backward) */
    int (*conv_bwd_filter)(tb_backend *be, const tb_conv_desc *d, int algo, const float *x,
                           const float *dy, float *dw, float *dbias, int accumulate);
    /* Optional (NULL: the caller makes the two calls): both gradients from
     * one dy, the same bits as conv_bwd_filter(d, algo_filter, x, dy, dw,
     * dbias, accumulate) then conv_bwd_data(d, algo_data, dy, w, dx). A
     * backend may read dy once for both, as PyTorch's
     * mkldnn_convolution_backward does (the CPU: one reorder of dy into the
     * kernels' blocked layout where both want the same one). */
    int (*conv_bwd)(tb_backend *be, const tb_conv_desc *d, int algo_filter, int algo_data,
                    const float *x, const float *dy, const float *w, float *dw, float *dbias,
                    int accumulate, float *dx);

    /* ---- batch norm (per channel over N and pixels) ---- */
    /* Training: normalizes with batch statistics, updates running_mean/var
     * (unbiased variance, PyTorch's momentum rule), saves mean and 1/std. */
    int (*bn_fwd_train)(tb_backend *be, const tb_bn_desc *d, const float *x, const float *gamma,
                        const float *beta, float *y, float *running_mean, float *running_var,
                        float *save_mean, float *save_invstd);
    int (*bn_fwd_infer)(tb_backend *be, const tb_bn_desc *d, const float *x, const float *gamma,
                        const float *beta, const float *running_mean, const float *running_var,
                        float *y);
    /* dx written; dgamma/dbeta written or accumulated */
    int (*bn_bwd)(tb_backend *be, const tb_bn_desc *d, const float *x, const float *dy,
                  const float *gamma, const float *save_mean, const float *save_invstd,
                  float *dx, float *dgamma, float *dbeta, int accumulate);

    /* ---- pooling. argmax: for max pooling, the input index per output
     * (int32, same count as y); NULL for average pooling. Average pooling
     * counts padding as zeros (PyTorch's count_include_pad=True). */
    int (*pool_fwd)(tb_backend *be, const tb_pool_desc *d, const float *x, float *y,
                    int32_t *argmax);
    /* dx written (zeroed first) */
    int (*pool_bwd)(tb_backend *be, const tb_pool_desc *d, const float *dy,
                    const int32_t *argmax, float *dx);

    /* ---- loss ---- */
    /* probs(rows x classes) = softmax(logits); loss[row] = -log probs[label] */
    int (*softmax_xent_fwd)(tb_backend *be, const float *logits, const int32_t *labels,
                            int rows, int classes, float *probs, float *loss);
    /* dlogits = scale * (probs - onehot(labels)) */
    int (*softmax_xent_bwd)(tb_backend *be, const float *probs, const int32_t *labels,
                            int rows, int classes, float scale, float *dlogits);
    /* out[0] = sum of x (device memory; read it with copy_d2h) */
    int (*reduce_sum)(tb_backend *be, const float *x, size_t n, float *out);
    /* out[0] = number of NaN/Inf in x, as a float (anomaly detection, AMP) */
    int (*count_nonfinite)(tb_backend *be, const float *x, size_t n, float *out);

    /* ---- mixed precision casts (kernels/cast_math.h on both backends):
     * dtype TB_BF16 (round to nearest even) or TB_F16 (IEEE half, round to
     * nearest even, overflow to Inf); NaN and Inf kept. lowp is n elements
     * of 2 bytes. The lowp -> f32 direction is exact. */
    int (*cast_f32_to_lowp)(tb_backend *be, tb_dtype dtype, const float *x, void *lowp, size_t n);
    int (*cast_lowp_to_f32)(tb_backend *be, tb_dtype dtype, const void *lowp, float *y, size_t n);

    /* ---- dropout: keep with probability 1-p, scale kept by 1/(1-p). The
     * mask is a function of (seed, offset + i) only, so it is the same on
     * every backend and thread count. */
    int (*dropout_fwd)(tb_backend *be, float p, uint64_t seed, uint64_t offset, const float *x,
                       float *y, uint8_t *mask, size_t n);
    int (*dropout_bwd)(tb_backend *be, float p, const uint8_t *mask, const float *dy, float *dx,
                       size_t n);

    /* ---- optimizers. tensors[i] views one parameter tensor (usually
     * slices of one flat buffer). fused == 0: per tensor, several
     * element-wise passes each, as PyTorch's for-loop optimizers run;
     * fused == 1: one pass over all tensors (multi-tensor apply). Both give
     * the same result within float rounding. */
    int (*opt_step)(tb_backend *be, const tb_opt_hparams *hp, const tb_param_view *tensors,
                    int count, int fused);

    /* ---- attention and layer norm (lib/backend/cpu/attention.c, lib/backend/cpu/layernorm.c,
     * lib/backend/cuda/attention.c; plain
     * references in lib/backend/ref/attention.h). fp32 only. ---- */

    /* Layer norm over each row of x (rows x cols), as F.layer_norm with an
     * elementwise affine: mean and biased variance of the row,
     * rstd = 1 / sqrt(var + eps), y = (x - mean) * rstd * gamma + beta.
     * gamma, beta: (cols). save_mean, save_rstd: (rows), written for the
     * backward. TB_LN_UNFUSED allocates two rows x cols temporaries (and
     * 2 rows floats backward) through dev_alloc for the duration of the
     * call, eager PyTorch's intermediates; TB_LN_FUSED allocates nothing.
     * REQUIRES: rows >= 0, cols >= 1, eps > 0. */
    int (*layernorm_fwd)(tb_backend *be, tb_ln_variant variant, const float *x,
                         const float *gamma, const float *beta, float eps, int rows, int cols,
                         float *y, float *save_mean, float *save_rstd);
    /* dx (rows x cols) written; dgamma, dbeta (cols) written, or added to when
     * accumulate. save_mean, save_rstd: the forward's. */
    int (*layernorm_bwd)(tb_backend *be, tb_ln_variant variant, const float *x, const float *dy,
                         const float *gamma, const float *save_mean, const float *save_rstd,
                         int rows, int cols, float *dx, float *dgamma, float *dbeta,
                         int accumulate);

    /* Memory attention needs besides q, k, v, out and the gradients:
     *   *saved_bytes: the `saved` buffer the caller keeps from attention_fwd
     *     to attention_bwd: MANUAL the probabilities P (B, H, T, T),
     *     4 B H T^2 bytes; FUSED the row logsumexp (B, H, T), 4 B H T bytes.
     *   *temp_bytes: the most the op itself allocates through dev_alloc
     *     during one call and frees before returning (so mem_stats' peak
     *     sees it); the gemm slot's own cached workspace is not counted.
     *     MANUAL: the backward's dP / dS (B, H, T, T). FUSED: CPU, each
     *     thread's tiles (about 12 * 64 * DP + T floats, DP = D rounded up to 64,
     *     lib/backend/cpu/attention.c); CUDA, the backward's row sums rowsum(dO * O)
     *     (B, H, T).
     * Either pointer may be NULL. */
    int (*attention_workspace)(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                               size_t *saved_bytes, size_t *temp_bytes);
    /* out = softmax(scale q k^T + mask) v per (b, h); masked scores are -inf
     * (causal). saved: as attention_workspace says, written here. Both
     * variants give the same out within float rounding. */
    int (*attention_fwd)(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                         const float *q, const float *k, const float *v, float *out,
                         float *saved);
    /* dq, dk, dv written (not accumulated) from dout, given the forward's
     * q, k, v, out and saved (same variant). FUSED recomputes P tile by tile
     * from the saved logsumexp. */
    int (*attention_bwd)(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                         const float *q, const float *k, const float *v, const float *out,
                         const float *dout, const float *saved, float *dq, float *dk,
                         float *dv);

    /* ---- token models (GPT-2): embeddings, the tanh GELU, and a
     * cross-entropy over a wide vocabulary that keeps one float per row.
     * Plain references in lib/backend/ref/ (tokens.h). ---- */

    /* Token plus position embedding: for r < rows (rows = batch x seq,
     * token-major), y[r, :] = wte[tokens[r], :] + wpe[r % seq, :]; d columns.
     * wte (vocab, d), wpe (at least seq, d). REQUIRES: every token in
     * [0, vocab) (the loader checks its batches on the host). */
    int (*embedding_fwd)(tb_backend *be, const int32_t *tokens, const float *wte,
                         const float *wpe, int rows, int seq, int d, int vocab, float *y);
    /* The embedding's parameter gradients from dy (rows, d):
     *   dwte[v, :] = (accumulate_wte ? dwte[v, :] : 0) + sum of dy[r, :] over r with tokens[r] == v
     *   dwpe[t, :] = (accumulate_wpe ? dwpe[t, :] : 0) + sum of dy[r, :] over r with r % seq == t
     * (a tied output head has written dwte already: the embedding adds).
     * Deterministic: each sum runs over r in increasing order, whatever the
     * threads, so two runs give the same bits. */
    int (*embedding_bwd)(tb_backend *be, const int32_t *tokens, const float *dy, int rows,
                         int seq, int d, int vocab, float *dwte, int accumulate_wte, float *dwpe,
                         int accumulate_wpe);
    /* The tanh GELU (TB_GELU_TANH above), n elements: TB_GELU_UNFUSED runs
     * the formula as separate element-wise passes, as a model written with
     * torch.tanh and powers runs it in eager mode (nanoGPT's NewGELU);
     * TB_GELU_FUSED one pass (F.gelu(x, approximate='tanh')). Both give the
     * same bits on one device (kernels/gelu_math.h's shared steps). */
    int (*gelu_tanh_fwd)(tb_backend *be, tb_gelu_variant v, const float *x, float *y, size_t n);
    /* dx = dy * gelu_tanh'(x), written */
    int (*gelu_tanh_bwd)(tb_backend *be, tb_gelu_variant v, const float *x, const float *dy,
                         float *dx, size_t n);
    /* Cross-entropy that never writes a rows x classes buffer forward:
     * lse[r] = logsumexp(logits[r, :]), loss[r] = lse[r] - logits[r, labels[r]]. */
    int (*xent_lse_fwd)(tb_backend *be, const float *logits, const int32_t *labels, int rows,
                        int classes, float *loss, float *lse);
    /* dlogits = scale * (exp(logits - lse) - onehot(labels)), from the
     * forward's lse. dlogits may be logits itself (in place: GPT-2's 50,257
     * wide logits are overwritten by their gradient, no second copy). */
    int (*xent_lse_bwd)(tb_backend *be, const float *logits, const float *lse,
                        const int32_t *labels, int rows, int classes, float scale,
                        float *dlogits);

    /* ---- whole-step capture and device-side data (--cuda-graphs,
     * --augment-on-device, --tensors-on-device). Every slot of this section
     * is NULL on the CPU backend, where each technique is n/a: there are no
     * kernel launches to capture; the CPU is the device, so augmentation
     * already runs where the model runs; host and device memory are the
     * same, so nothing is copied. The trainer refuses the flags there. ---- */

    /* Starts capturing the work issued on the compute stream
     * (cudaStreamBeginCapture, cudaStreamCaptureModeThreadLocal). Until
     * graph_end, work is recorded, not run. REQUIRES: nothing between begin
     * and end allocates device memory from the device (warm the caching
     * allocator first), synchronizes, or copies with s == NULL. */
    int (*graph_begin)(tb_backend *be);
    /* Ends the capture and instantiates it: *g replays it. On failure the
     * capture is ended and discarded, *g is NULL. */
    int (*graph_end)(tb_backend *be, tb_graph **g);
    /* Replays g on the compute stream (asynchronous, like the ops). */
    int (*graph_launch)(tb_backend *be, tb_graph *g);
    int (*graph_destroy)(tb_backend *be, tb_graph *g);

    /* Random crop + flip + normalize of n raw samples on the device
     * (datasets/augment.h's math, kernels/augment_math.h): src uint8
     * (n, C, H, W) as the dataset stores them; params n (dy, dx, flip)
     * triples of int32, drawn on the host from (seed, epoch, index);
     * dst float (n, C, H, W) or (n, H, W, C) as d->layout says. */
    int (*augment_u8)(tb_backend *be, const tb_augment_desc *d, const uint8_t *src,
                      const int32_t *params, float *dst, int n);
    /* dst[i] = src[i] for i < n: uint8 labels widened to int32 on the device. */
    int (*labels_u8_to_i32)(tb_backend *be, const uint8_t *src, int32_t *dst, int n);
};

/* ---- choosing a backend ---- */

/* Parses "auto", "cpu", "cuda" or "cuda:N" into kind and ordinal. */
typedef enum tb_device_kind { TB_DEVICE_AUTO = 0, TB_DEVICE_CPU = 1, TB_DEVICE_CUDA = 2 } tb_device_kind;
int tb_device_parse(const char *spec, tb_device_kind *kind, int *ordinal);

/* The most CPU threads any --threads flag accepts; the CPU backend also
 * refuses more than TB_THREADS_PER_CORE threads per core of the machine it
 * runs on (tens of thousands of OpenMP threads crash libgomp, and past a few
 * per core they only contend). */
#define TB_THREADS_MAX 4096
#define TB_THREADS_PER_CORE 8

/* Opens a backend. AUTO: CUDA device 0 when one is usable, otherwise the CPU
 * with one line on stderr saying why. CUDA: fails with TB_ERR_NO_DEVICE when
 * no usable device (no driver, no GPU, bad ordinal, or built without CUDA).
 * threads: CPU kernel threads (0 = all cores); TB_ERR_INVALID, naming
 * --threads, when negative or past TB_THREADS_PER_CORE per core. */
int tb_backend_open(tb_device_kind kind, int ordinal, int threads, tb_backend **out);
void tb_backend_close(tb_backend *be);

/* Backend constructors; tb_backend_open picks one. The CUDA one is defined in
 * lib/backend/cuda/backend.c, or in lib/backend/cuda/absent.c when built without CUDA. */
int tb_backend_cpu_create(int threads, tb_backend **out);
/* The most threads tb_backend_cpu_create accepts on this machine. */
int tb_cpu_threads_limit(void);
int tb_backend_cuda_create(int ordinal, tb_backend **out);
/* 1 if this binary was built with the CUDA backend. */
int tb_cuda_built(void);
/* Number of usable CUDA devices; 0 with *why set when none. Never fails. */
int tb_cuda_device_count(const char **why);

/* "cpu-<model-slug>" or "cuda-<name-slug>": the results folder name. */
void tb_device_slug(const tb_device_info *info, char *out, size_t cap);
/* For headers and plot titles: "AMD EPYC 7B12, 2 threads" on the CPU,
 * "NVIDIA H200, 139.8 GiB" on a GPU (whose kernels use no CPU threads). */
void tb_device_describe(const tb_device_info *info, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
