/*
 * conv.c - the CUDA backend's convolution slots (lib/backend/backend.h) on
 * cuDNN's legacy convolution API (deprecated in cuDNN 9, still there). Its
 * deprecation warnings appear only when CUDNN_WARN_DEPRECATED is defined;
 * the pragma below silences them for this file alone, should it be.
 *
 *   conv_algo_default  cudnnGetConvolution{Forward,BackwardData,
 *                      BackwardFilter}Algorithm_v7: cuDNN's heuristic, the
 *                      first result that says SUCCESS (what PyTorch runs
 *                      with cudnn.benchmark = False); with
 *                      d->deterministic, the first that is also
 *                      CUDNN_DETERMINISTIC (cudnn.deterministic = True),
 *                      and conv_find leaves the others out.
 *   conv_find          cudnnFind*AlgorithmEx on scratch buffers of the
 *                      problem's shape: the autotuner (cudnn.benchmark =
 *                      True). Every algorithm is timed; the results carry
 *                      the cuDNN enum name, time and workspace, fastest
 *                      first, failed ones last with ms = -1. The workspace
 *                      offered is the largest any algorithm asks for, capped
 *                      at half the free device memory; it and the operands
 *                      are transient (cudaMalloc/cudaFree, outside the
 *                      cache and the memory counts).
 *   conv_fwd           cudnnConvolutionForward, then the bias with
 *                      cudnnAddTensor.
 *   conv_bwd_data      cudnnConvolutionBackwardData (dx written).
 *   conv_bwd_filter    cudnnConvolutionBackwardFilter with beta = 1 to
 *                      accumulate (0 to write), and the bias gradient with
 *                      cudnnConvolutionBackwardBias, same beta.
 * An algorithm id is the cuDNN enum value of its kind.
 *
 * Descriptors (x, w, y, bias, convolution) are cached per tb_conv_desc,
 * least recently used out after TB_CONV_CACHE shapes; each entry also
 * remembers the workspace size of every (kind, algorithm) it was asked
 * for. The workspace itself is one grow-only buffer of the backend's
 * allocator (counted in the memory statistics, as PyTorch's is).
 *
 * Layouts: NCHW, or NHWC with KRSC filters (channels_last), as cuDNN's
 * CUDNN_TENSOR_NHWC formats. Math: TB_MATH_F32 is CUDNN_FMA_MATH (no
 * tensor cores, allow_tf32 = False); TB_MATH_TF32 is CUDNN_DEFAULT_MATH,
 * which lets cuDNN use TF32 tensor cores on fp32 data (PyTorch's
 * cudnn.allow_tf32 = True, its default; in cuDNN 9 this is how TF32 is
 * allowed, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION being about fp32 -> fp16).
 *
 * Mixed precision (dtype TB_BF16 / TB_F16 with TB_MATH_LOWP, autocast's
 * conv): x, w and y descriptors in CUDNN_DATA_BFLOAT16 / CUDNN_DATA_HALF,
 * compute type float, CUDNN_TENSOR_OP_MATH. cuDNN writes the output in the
 * inputs' dtype; the slot contract wants it fp32, so each direction writes
 * into a lowp scratch (ctx->conv_lowp) and kernels/cast.cu widens it into
 * the caller's buffer (bias added and dbias reduced in fp32 afterwards,
 * through an fp32 twin of the y descriptor). That is PyTorch's arithmetic
 * too: autocast's conv output and weight gradient are half, then cast.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "lib/backend/backend.h"
#include "lib/backend/conv_pick.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

#define TB_CONV_CACHE 32
#define MAX_ALGOS 8 /* the largest of the three *_ALGO_COUNTs */

typedef struct conv_entry {
    tb_conv_desc d;
    int used;
    unsigned long last_use;
    cudnnTensorDescriptor_t x, y, bias;
    cudnnTensorDescriptor_t yf;        /* y's shape in fp32: bias and dbias of lowp convs */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    size_t ws[3][MAX_ALGOS];           /* workspace bytes by kind and algorithm */
    unsigned char ws_known[3][MAX_ALGOS];
} conv_entry;

struct cuda_conv_cache {
    conv_entry e[TB_CONV_CACHE];
    unsigned long clock;
};

/* One result of a heuristic or a find, whatever the kind. */
typedef struct conv_perf {
    int algo;
    cudnnStatus_t status;
    float ms;
    size_t memory;
    cudnnDeterminism_t determinism;
} conv_perf;

static const char *const FWD_NAMES[] = {
    "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM", "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM",
    "CUDNN_CONVOLUTION_FWD_ALGO_GEMM",          "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT",
    "CUDNN_CONVOLUTION_FWD_ALGO_FFT",           "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING",
    "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD",      "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED",
};
static const char *const BWD_DATA_NAMES[] = {
    "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0",          "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1",
    "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT",        "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING",
    "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD",   "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED",
};
static const char *const BWD_FILTER_NAMES[] = {
    "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0",        "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1",
    "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT",      "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3",
    "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED",
    "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING",
};

static int algo_count(tb_conv_kind kind)
{
    return kind == TB_CONV_FWD ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
         : kind == TB_CONV_BWD_DATA ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                    : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

static const char *algo_name(tb_conv_kind kind, int algo)
{
    if (algo < 0 || algo >= algo_count(kind))
        return "unknown";
    return kind == TB_CONV_FWD ? FWD_NAMES[algo]
         : kind == TB_CONV_BWD_DATA ? BWD_DATA_NAMES[algo] : BWD_FILTER_NAMES[algo];
}

static const char *kind_name(tb_conv_kind kind)
{
    return kind == TB_CONV_FWD ? "forward" : kind == TB_CONV_BWD_DATA ? "backward data"
                                                                       : "backward filter";
}

/* ---------------------------------------------------------------------
 * Checks and the descriptor cache
 * ------------------------------------------------------------------- */

static int conv_check(const tb_conv_desc *d, const char *op)
{
    if (d->dtype != TB_F32 && d->dtype != TB_BF16 && d->dtype != TB_F16)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown dtype %d", op, (int)d->dtype);
    if ((d->dtype != TB_F32) != (d->math == TB_MATH_LOWP))
        return TB_FAIL(TB_ERR_INVALID, "%s: dtype %d with math %d (bf16/fp16 go with "
                       "TB_MATH_LOWP, fp32 with F32 or TF32)", op, (int)d->dtype, (int)d->math);
    if (d->math != TB_MATH_F32 && d->math != TB_MATH_TF32 && d->math != TB_MATH_LOWP)
        return TB_FAIL(TB_ERR_INVALID, "%s: unknown math mode %d", op, (int)d->math);
    if (d->lowp_out) /* no low-precision activations here (relu_fwd_lowp NULL) */
        return TB_FAIL(TB_ERR_UNSUPPORTED, "%s: the CUDA backend writes fp32 outputs", op);
    if (d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->k < 1 || d->r < 1 || d->s < 1 ||
        d->stride < 1 || d->pad < 0 || (d->layout != TB_NCHW && d->layout != TB_NHWC) ||
        tb_conv_out_h(d) < 1 || tb_conv_out_w(d) < 1)
        return TB_FAIL(TB_ERR_INVALID, "%s: bad shape n=%d c=%d h=%d w=%d k=%d r=%d s=%d stride=%d "
                       "pad=%d layout=%d", op, d->n, d->c, d->h, d->w, d->k, d->r, d->s,
                       d->stride, d->pad, (int)d->layout);
    return TB_OK;
}

static int kind_check(tb_conv_kind kind)
{
    if (kind != TB_CONV_FWD && kind != TB_CONV_BWD_DATA && kind != TB_CONV_BWD_FILTER)
        return TB_FAIL(TB_ERR_INVALID, "convolution: unknown kind %d", (int)kind);
    return TB_OK;
}

static int same_desc(const tb_conv_desc *a, const tb_conv_desc *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
           a->r == b->r && a->s == b->s && a->stride == b->stride && a->pad == b->pad &&
           a->layout == b->layout && a->dtype == b->dtype && a->math == b->math;
}

/* Destroys whatever descriptors exist; keeps going, returns the first error. */
static int entry_destroy(conv_entry *e)
{
    int rc = TB_OK;
    cudnnStatus_t st[6] = {
        e->x ? cudnnDestroyTensorDescriptor(e->x) : CUDNN_STATUS_SUCCESS,
        e->y ? cudnnDestroyTensorDescriptor(e->y) : CUDNN_STATUS_SUCCESS,
        e->yf ? cudnnDestroyTensorDescriptor(e->yf) : CUDNN_STATUS_SUCCESS,
        e->bias ? cudnnDestroyTensorDescriptor(e->bias) : CUDNN_STATUS_SUCCESS,
        e->w ? cudnnDestroyFilterDescriptor(e->w) : CUDNN_STATUS_SUCCESS,
        e->conv ? cudnnDestroyConvolutionDescriptor(e->conv) : CUDNN_STATUS_SUCCESS,
    };
    for (int i = 0; i < 6; i++)
        if (st[i] != CUDNN_STATUS_SUCCESS && rc == TB_OK)
            rc = TB_FAIL(TB_ERR_CUDNN, "destroying a convolution descriptor: %s",
                         cudnnGetErrorString(st[i]));
    memset(e, 0, sizeof *e);
    return rc;
}

/* Creates and sets e's descriptors for d; on failure the caller destroys e. */
static int entry_init(conv_entry *e, const tb_conv_desc *d)
{
    cudnnTensorFormat_t fmt = d->layout == TB_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    cudnnMathType_t math = d->math == TB_MATH_TF32 ? CUDNN_DEFAULT_MATH
                         : d->math == TB_MATH_LOWP ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    cudnnDataType_t dt = d->dtype == TB_BF16 ? CUDNN_DATA_BFLOAT16
                       : d->dtype == TB_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;

    e->d = *d;
    TB_CHECK_CUDNN(cudnnCreateTensorDescriptor(&e->x));
    TB_CHECK_CUDNN(cudnnCreateTensorDescriptor(&e->y));
    TB_CHECK_CUDNN(cudnnCreateTensorDescriptor(&e->yf));
    TB_CHECK_CUDNN(cudnnCreateTensorDescriptor(&e->bias));
    TB_CHECK_CUDNN(cudnnCreateFilterDescriptor(&e->w));
    TB_CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&e->conv));
    TB_CHECK_CUDNN(cudnnSetTensor4dDescriptor(e->x, fmt, dt, d->n, d->c, d->h, d->w));
    TB_CHECK_CUDNN(cudnnSetTensor4dDescriptor(e->y, fmt, dt, d->n, d->k, tb_conv_out_h(d),
                                              tb_conv_out_w(d)));
    TB_CHECK_CUDNN(cudnnSetTensor4dDescriptor(e->yf, fmt, CUDNN_DATA_FLOAT, d->n, d->k,
                                              tb_conv_out_h(d), tb_conv_out_w(d)));
    TB_CHECK_CUDNN(cudnnSetTensor4dDescriptor(e->bias, fmt, CUDNN_DATA_FLOAT, 1, d->k, 1, 1));
    TB_CHECK_CUDNN(cudnnSetFilter4dDescriptor(e->w, dt, fmt, d->k, d->c, d->r, d->s));
    TB_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(e->conv, d->pad, d->pad, d->stride, d->stride,
                                                   1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    TB_CHECK_CUDNN(cudnnSetConvolutionMathType(e->conv, math));
    e->used = 1;
    return TB_OK;
}

/* The cached entry for d, made (evicting the least recently used) if new. */
static int entry_get(tb_backend *be, const tb_conv_desc *d, conv_entry **out)
{
    cuda_ctx *c = tb_cuda_ctx(be);
    conv_entry *victim = NULL;

    if (!c->conv) {
        c->conv = calloc(1, sizeof *c->conv);
        if (!c->conv)
            return TB_FAIL(TB_ERR_NOMEM, "cannot allocate the convolution descriptor cache");
    }
    cuda_conv_cache *cache = c->conv;
    cache->clock++;
    for (int i = 0; i < TB_CONV_CACHE; i++) {
        conv_entry *e = &cache->e[i];
        if (e->used && same_desc(&e->d, d)) {
            e->last_use = cache->clock;
            *out = e;
            return TB_OK;
        }
        if (!victim || (victim->used && (!e->used || e->last_use < victim->last_use)))
            victim = e; /* the first free entry, else the least recently used */
    }
    TB_TRY(entry_destroy(victim));
    int rc = entry_init(victim, d);
    if (rc != TB_OK) {
        entry_destroy(victim);
        return rc;
    }
    victim->last_use = cache->clock;
    *out = victim;
    return TB_OK;
}

int tb_cuda_conv_release(tb_backend *be)
{
    cuda_ctx *c = tb_cuda_ctx(be);
    int rc = TB_OK;
    if (!c->conv)
        return TB_OK;
    for (int i = 0; i < TB_CONV_CACHE; i++) {
        int r = entry_destroy(&c->conv->e[i]);
        if (r != TB_OK && rc == TB_OK)
            rc = r;
    }
    free(c->conv);
    c->conv = NULL;
    return rc;
}

/* ---------------------------------------------------------------------
 * The three kinds behind one interface
 * ------------------------------------------------------------------- */

/* Raw status: NOT_SUPPORTED just means the algorithm does not apply. */
static cudnnStatus_t ws_query(cudnnHandle_t h, const conv_entry *e, tb_conv_kind kind, int algo,
                              size_t *bytes)
{
    if (kind == TB_CONV_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(h, e->x, e->w, e->conv, e->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    if (kind == TB_CONV_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            h, e->w, e->y, e->conv, e->x, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, e->x, e->y, e->conv, e->w, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
}

/* Workspace bytes of (kind, algo), asked once per entry; an algorithm that
 * does not support the problem fails here, naming itself. */
static int ws_bytes(tb_backend *be, conv_entry *e, tb_conv_kind kind, int algo, size_t *bytes)
{
    if (!e->ws_known[kind][algo]) {
        cudnnStatus_t st = ws_query(tb_cuda_ctx(be)->cudnn, e, kind, algo, &e->ws[kind][algo]);
        if (st != CUDNN_STATUS_SUCCESS)
            return TB_FAIL(TB_ERR_CUDNN, "convolution %s: algorithm %d (%s) cannot run this "
                           "problem: %s (cuDNN status %d)", kind_name(kind), algo,
                           algo_name(kind, algo), cudnnGetErrorString(st), (int)st);
        e->ws_known[kind][algo] = 1;
    }
    *bytes = e->ws[kind][algo];
    return TB_OK;
}

/* out[0..n) from the results of the kind's cuDNN query (f, bd or bf). */
static void perfs_of(tb_conv_kind kind, int n, const cudnnConvolutionFwdAlgoPerf_t *f,
                     const cudnnConvolutionBwdDataAlgoPerf_t *bd,
                     const cudnnConvolutionBwdFilterAlgoPerf_t *bf, conv_perf *out)
{
    for (int i = 0; i < n; i++)
        out[i] = kind == TB_CONV_FWD
                     ? (conv_perf){f[i].algo, f[i].status, f[i].time, f[i].memory,
                                   f[i].determinism}
                 : kind == TB_CONV_BWD_DATA
                     ? (conv_perf){bd[i].algo, bd[i].status, bd[i].time, bd[i].memory,
                                   bd[i].determinism}
                     : (conv_perf){bf[i].algo, bf[i].status, bf[i].time, bf[i].memory,
                                   bf[i].determinism};
}

static int heuristic(cudnnHandle_t h, const conv_entry *e, tb_conv_kind kind, conv_perf *out,
                     int *n)
{
    cudnnConvolutionFwdAlgoPerf_t f[MAX_ALGOS];
    cudnnConvolutionBwdDataAlgoPerf_t bd[MAX_ALGOS];
    cudnnConvolutionBwdFilterAlgoPerf_t bf[MAX_ALGOS];
    int want = algo_count(kind);

    *n = 0;
    if (kind == TB_CONV_FWD)
        TB_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, e->w, e->conv, e->y, want,
                                                              n, f));
    else if (kind == TB_CONV_BWD_DATA)
        TB_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e->w, e->y, e->conv, e->x,
                                                                   want, n, bd));
    else
        TB_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->x, e->y, e->conv,
                                                                     e->w, want, n, bf));
    perfs_of(kind, *n, f, bd, bf, out);
    return TB_OK;
}

/* A result as lib/backend/conv_pick.h sees it. */
static tb_conv_candidate candidate_of(const conv_perf *p)
{
    return (tb_conv_candidate){p->algo, p->status == CUDNN_STATUS_SUCCESS,
                               p->determinism == CUDNN_DETERMINISTIC};
}

/* Operand buffers of a find: x, w, y in the kind's roles. */
typedef struct find_bufs {
    void *x, *w, *y, *ws;
    size_t ws_bytes;
} find_bufs;

static int find_ex(cudnnHandle_t h, const conv_entry *e, tb_conv_kind kind, const find_bufs *b,
                   conv_perf *out, int *n)
{
    cudnnConvolutionFwdAlgoPerf_t f[MAX_ALGOS];
    cudnnConvolutionBwdDataAlgoPerf_t bd[MAX_ALGOS];
    cudnnConvolutionBwdFilterAlgoPerf_t bf[MAX_ALGOS];
    int want = algo_count(kind);

    *n = 0;
    if (kind == TB_CONV_FWD)
        TB_CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(h, e->x, b->x, e->w, b->w, e->conv,
                                                              e->y, b->y, want, n, f, b->ws,
                                                              b->ws_bytes));
    else if (kind == TB_CONV_BWD_DATA)
        TB_CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(h, e->w, b->w, e->y, b->y,
                                                                   e->conv, e->x, b->x, want, n,
                                                                   bd, b->ws, b->ws_bytes));
    else
        TB_CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, e->x, b->x, e->y, b->y,
                                                                     e->conv, e->w, b->w, want,
                                                                     n, bf, b->ws, b->ws_bytes));
    perfs_of(kind, *n, f, bd, bf, out);
    return TB_OK;
}

/* ---------------------------------------------------------------------
 * conv_algo_default and conv_find
 * ------------------------------------------------------------------- */

static int cuda_conv_algo_default(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                                  int *algo)
{
    conv_entry *e;
    conv_perf perf[MAX_ALGOS];
    int n;

    TB_TRY(kind_check(kind));
    TB_TRY(conv_check(d, "conv_algo_default"));
    TB_TRY(tb_cuda_bind(be));
    TB_TRY(entry_get(be, d, &e));
    TB_TRY(heuristic(tb_cuda_ctx(be)->cudnn, e, kind, perf, &n));
    tb_conv_candidate cand[MAX_ALGOS];
    for (int i = 0; i < n; i++)
        cand[i] = candidate_of(&perf[i]);
    int pick = tb_conv_pick(cand, n, d->deterministic);
    if (pick >= 0) {
        *algo = perf[pick].algo;
        return TB_OK;
    }
    return TB_FAIL(TB_ERR_CUDNN, "convolution %s: cuDNN's heuristic found no %salgorithm for "
                   "n=%d c=%d h=%d w=%d k=%d r=%d s=%d", kind_name(kind),
                   d->deterministic ? "deterministic " : "", d->n, d->c, d->h, d->w, d->k, d->r,
                   d->s);
}

/* The find's workspace: what the hungriest algorithm asks, at most half
 * the free device memory (an algorithm that needs more reports failure). */
static int find_ws_size(tb_backend *be, conv_entry *e, tb_conv_kind kind, size_t *bytes)
{
    size_t free_b = 0, total_b = 0, most = 0;
    for (int a = 0; a < algo_count(kind); a++) {
        size_t s;
        if (ws_query(tb_cuda_ctx(be)->cudnn, e, kind, a, &s) != CUDNN_STATUS_SUCCESS)
            continue; /* does not apply to this problem: the find will say so */
        e->ws[kind][a] = s;
        e->ws_known[kind][a] = 1;
        most = s > most ? s : most;
    }
    TB_CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    *bytes = most < free_b / 2 ? most : free_b / 2;
    return TB_OK;
}

static int find_bufs_alloc(tb_backend *be, const tb_conv_desc *d, conv_entry *e,
                           tb_conv_kind kind, find_bufs *b)
{
    size_t x = (size_t)d->n * d->c * d->h * d->w * sizeof(float);
    size_t w = (size_t)d->k * d->c * d->r * d->s * sizeof(float);
    size_t y = (size_t)d->n * d->k * tb_conv_out_h(d) * tb_conv_out_w(d) * sizeof(float);
    cudaStream_t s = tb_cuda_ctx(be)->compute;

    /* Transient, not from the cache: the workspace may be half the free
     * memory, which the cache would keep reserved and count as the peak. */
    TB_TRY(find_ws_size(be, e, kind, &b->ws_bytes));
    TB_TRY(tb_cuda_transient_alloc(be, &b->x, x));
    TB_TRY(tb_cuda_transient_alloc(be, &b->w, w));
    TB_TRY(tb_cuda_transient_alloc(be, &b->y, y));
    TB_TRY(tb_cuda_transient_alloc(be, &b->ws, b->ws_bytes));
    /* Zeros, not garbage: NaN or denormal patterns must not time differently. */
    TB_CHECK_CUDA(cudaMemsetAsync(b->x, 0, x, s));
    TB_CHECK_CUDA(cudaMemsetAsync(b->w, 0, w, s));
    TB_CHECK_CUDA(cudaMemsetAsync(b->y, 0, y, s));
    return TB_OK;
}

static int find_bufs_free(tb_backend *be, find_bufs *b)
{
    int rc = TB_OK, r;
    void *p[4] = {b->x, b->w, b->y, b->ws};
    for (int i = 0; i < 4; i++)
        if ((r = tb_cuda_transient_free(be, p[i])) != TB_OK && rc == TB_OK)
            rc = r;
    return rc;
}

/* a goes before b: successes (ms >= 0) by time, then failures. */
static int perf_before(const tb_conv_algo_perf *a, const tb_conv_algo_perf *b)
{
    if (a->ms < 0)
        return 0;
    return b->ms < 0 || a->ms < b->ms;
}

/* Stable insertion sort: equal times keep cuDNN's order. */
static void perf_sort(tb_conv_algo_perf *p, int n)
{
    for (int i = 1; i < n; i++) {
        tb_conv_algo_perf t = p[i];
        int j = i;
        for (; j > 0 && perf_before(&t, &p[j - 1]); j--)
            p[j] = p[j - 1];
        p[j] = t;
    }
}

static int cuda_conv_find(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind,
                          tb_conv_algo_perf *perf, int max, int *returned)
{
    conv_entry *e;
    conv_perf raw[MAX_ALGOS];
    find_bufs b = {0};
    int n = 0, rc;

    *returned = 0;
    TB_TRY(kind_check(kind));
    TB_TRY(conv_check(d, "conv_find"));
    if (max < 1 || !perf)
        return TB_FAIL(TB_ERR_INVALID, "conv_find: room for %d results", max);
    TB_TRY(tb_cuda_bind(be));
    TB_TRY(entry_get(be, d, &e));
    TB_TRY_GOTO(rc, find_bufs_alloc(be, d, e, kind, &b), out_free_bufs);
    TB_TRY_GOTO(rc, find_ex(tb_cuda_ctx(be)->cudnn, e, kind, &b, raw, &n), out_free_bufs);
    for (int i = 0; i < n && *returned < max; i++) {
        tb_conv_candidate cand = candidate_of(&raw[i]);
        if (cand.ok && !tb_conv_allowed(&cand, d->deterministic))
            continue; /* runs, but not bitwise the same twice: not offered */
        tb_conv_algo_perf *p = &perf[(*returned)++];
        int ok = cand.ok;
        p->algo = raw[i].algo;
        snprintf(p->name, sizeof p->name, "%s", algo_name(kind, raw[i].algo));
        p->ms = ok ? raw[i].ms : -1.0f;
        p->workspace = ok ? raw[i].memory : 0;
    }
    perf_sort(perf, *returned);
out_free_bufs:
    {
        int r = find_bufs_free(be, &b);
        return rc != TB_OK ? rc : r;
    }
}

/* ---------------------------------------------------------------------
 * Running a convolution
 * ------------------------------------------------------------------- */

/* Entry and workspace for (d, kind, algo), ready to run. */
static int conv_prepare(tb_backend *be, const tb_conv_desc *d, tb_conv_kind kind, int algo,
                        const char *op, conv_entry **e, void **ws, size_t *ws_len)
{
    TB_TRY(conv_check(d, op));
    if (algo < 0 || algo >= algo_count(kind))
        return TB_FAIL(TB_ERR_INVALID, "%s: algorithm %d is not a cuDNN %s algorithm (0..%d)", op,
                       algo, kind_name(kind), algo_count(kind) - 1);
    TB_TRY(tb_cuda_bind(be));
    TB_TRY(entry_get(be, d, e));
    TB_TRY(ws_bytes(be, *e, kind, algo, ws_len));
    *ws = NULL;
    if (*ws_len)
        TB_TRY(tb_cuda_scratch_get(be, &tb_cuda_ctx(be)->conv_ws, *ws_len, ws));
    return TB_OK;
}

/* Elements of x, w and y. */
static size_t conv_nx(const tb_conv_desc *d) { return (size_t)d->n * d->c * d->h * d->w; }
static size_t conv_nw(const tb_conv_desc *d) { return (size_t)d->k * d->c * d->r * d->s; }
static size_t conv_ny(const tb_conv_desc *d)
{
    return (size_t)d->n * d->k * tb_conv_out_h(d) * tb_conv_out_w(d);
}

/* Lowp convolutions: `lowp` elements of 2 bytes, then `f32` floats, in
 * ctx->conv_lowp (grow-only, stream-ordered like conv_ws). */
static int lowp_scratch(tb_backend *be, size_t lowp, size_t f32, uint16_t **lp, float **fp)
{
    size_t lp_bytes = (lowp * 2 + 255) / 256 * 256;
    void *p;
    TB_TRY(tb_cuda_scratch_get(be, &tb_cuda_ctx(be)->conv_lowp, lp_bytes + f32 * sizeof(float),
                               &p));
    *lp = p;
    *fp = (float *)((char *)p + lp_bytes);
    return TB_OK;
}

static void *compute_stream(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

static int cuda_conv_fwd(tb_backend *be, const tb_conv_desc *d, int algo, const float *x,
                         const float *w, const float *bias, float *y)
{
    const float one = 1.0f, zero = 0.0f;
    conv_entry *e;
    void *ws;
    size_t ws_len;

    TB_TRY(conv_prepare(be, d, TB_CONV_FWD, algo, "conv_fwd", &e, &ws, &ws_len));
    cudnnHandle_t h = tb_cuda_ctx(be)->cudnn;
    int lowp = d->dtype != TB_F32;
    uint16_t *y_lp = NULL;
    float *unused;
    if (lowp)
        TB_TRY(lowp_scratch(be, conv_ny(d), 0, &y_lp, &unused));
    TB_CHECK_CUDNN(cudnnConvolutionForward(h, &one, e->x, x, e->w, w, e->conv,
                                           (cudnnConvolutionFwdAlgo_t)algo, ws, ws_len, &zero,
                                           e->y, lowp ? (void *)y_lp : (void *)y));
    if (lowp)
        TB_TRY(tb_cuda_cast_lowp_to_f32(d->dtype == TB_BF16, y_lp, y, conv_ny(d),
                                        compute_stream(be)));
    if (bias)
        TB_CHECK_CUDNN(cudnnAddTensor(h, &one, e->bias, bias, &one, e->yf, y));
    return TB_OK;
}

static int cuda_conv_bwd_data(tb_backend *be, const tb_conv_desc *d, int algo, const float *dy,
                              const float *w, float *dx)
{
    const float one = 1.0f, zero = 0.0f;
    conv_entry *e;
    void *ws;
    size_t ws_len;

    TB_TRY(conv_prepare(be, d, TB_CONV_BWD_DATA, algo, "conv_bwd_data", &e, &ws, &ws_len));
    int lowp = d->dtype != TB_F32;
    uint16_t *dx_lp = NULL;
    float *unused;
    if (lowp)
        TB_TRY(lowp_scratch(be, conv_nx(d), 0, &dx_lp, &unused));
    TB_CHECK_CUDNN(cudnnConvolutionBackwardData(tb_cuda_ctx(be)->cudnn, &one, e->w, w, e->y, dy,
                                                e->conv, (cudnnConvolutionBwdDataAlgo_t)algo, ws,
                                                ws_len, &zero, e->x,
                                                lowp ? (void *)dx_lp : (void *)dx));
    if (lowp)
        TB_TRY(tb_cuda_cast_lowp_to_f32(d->dtype == TB_BF16, dx_lp, dx, conv_nx(d),
                                        compute_stream(be)));
    return TB_OK;
}

/* dw in lowp (cuDNN's filter dtype is x's), widened to fp32 and written or
 * added; dbias reduced in fp32 from dy widened. */
static int conv_bwd_filter_lowp(tb_backend *be, const tb_conv_desc *d, conv_entry *e, int algo,
                                void *ws, size_t ws_len, const float *x, const float *dy,
                                float *dw, float *dbias, int accumulate)
{
    const float one = 1.0f, zero = 0.0f, beta = accumulate ? 1.0f : 0.0f;
    cudnnHandle_t h = tb_cuda_ctx(be)->cudnn;
    int bf16 = d->dtype == TB_BF16;
    size_t nw = conv_nw(d), ny = conv_ny(d);
    size_t f32 = (accumulate ? nw : 0) > (dbias ? ny : 0) ? nw : (dbias ? ny : 0);
    uint16_t *dw_lp;
    float *tmp;
    TB_TRY(lowp_scratch(be, nw, f32, &dw_lp, &tmp));
    TB_CHECK_CUDNN(cudnnConvolutionBackwardFilter(h, &one, e->x, x, e->y, dy, e->conv,
                                                  (cudnnConvolutionBwdFilterAlgo_t)algo, ws,
                                                  ws_len, &zero, e->w, dw_lp));
    if (accumulate) {
        TB_TRY(tb_cuda_cast_lowp_to_f32(bf16, dw_lp, tmp, nw, compute_stream(be)));
        TB_TRY(tb_cuda_add(dw, tmp, dw, nw, compute_stream(be)));
    } else {
        TB_TRY(tb_cuda_cast_lowp_to_f32(bf16, dw_lp, dw, nw, compute_stream(be)));
    }
    if (!dbias)
        return TB_OK;
    TB_TRY(tb_cuda_cast_lowp_to_f32(bf16, (const uint16_t *)dy, tmp, ny, compute_stream(be)));
    TB_CHECK_CUDNN(cudnnConvolutionBackwardBias(h, &one, e->yf, tmp, &beta, e->bias, dbias));
    return TB_OK;
}

static int cuda_conv_bwd_filter(tb_backend *be, const tb_conv_desc *d, int algo, const float *x,
                                const float *dy, float *dw, float *dbias, int accumulate)
{
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    conv_entry *e;
    void *ws;
    size_t ws_len;

    TB_TRY(conv_prepare(be, d, TB_CONV_BWD_FILTER, algo, "conv_bwd_filter", &e, &ws, &ws_len));
    cudnnHandle_t h = tb_cuda_ctx(be)->cudnn;
    if (d->dtype != TB_F32)
        return conv_bwd_filter_lowp(be, d, e, algo, ws, ws_len, x, dy, dw, dbias, accumulate);
    TB_CHECK_CUDNN(cudnnConvolutionBackwardFilter(h, &one, e->x, x, e->y, dy, e->conv,
                                                  (cudnnConvolutionBwdFilterAlgo_t)algo, ws,
                                                  ws_len, &beta, e->w, dw));
    if (dbias)
        TB_CHECK_CUDNN(cudnnConvolutionBackwardBias(h, &one, e->y, dy, &beta, e->bias, dbias));
    return TB_OK;
}

void tb_cuda_install_conv(tb_backend *be)
{
    be->conv_algo_default = cuda_conv_algo_default;
    be->conv_find = cuda_conv_find;
    be->conv_fwd = cuda_conv_fwd;
    be->conv_bwd_data = cuda_conv_bwd_data;
    be->conv_bwd_filter = cuda_conv_bwd_filter;
}
