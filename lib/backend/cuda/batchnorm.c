/*
 * batchnorm.c - the CUDA backend's batch-norm slots (lib/backend/backend.h) on cuDNN's
 * batch-norm API in its spatial modes (per channel over N and
 * pixels), what PyTorch's BatchNorm2d runs on a GPU:
 *   bn_fwd_train  cudnnBatchNormalizationForwardTraining
 *   bn_fwd_infer  cudnnBatchNormalizationForwardInference
 *   bn_bwd        cudnnBatchNormalizationBackward (alphaParamDiff 1,
 *                 betaParamDiff 1 to accumulate dgamma/dbeta, 0 to write)
 *
 * Conventions, the same as the slots' (and PyTorch's, which passes its
 * momentum to cuDNN as exponentialAverageFactor):
 *   running = (1 - momentum) running + momentum batch, with the UNBIASED
 *   batch variance in running_var; save_invstd = 1 / sqrt(var + eps) with
 *   the biased variance (cuDNN's resultSaveInvVariance). The CPU backend
 *   computes the same (kernels/bn_math.h); bench:selfcheck compares them
 *   on the first GPU.
 *
 * Layouts: tb_bn_desc's hw pixels are the height of a (n, c, hw, 1) tensor,
 * NCHW or NHWC, so both of its layouts map to cuDNN formats directly.
 * Training on NHWC runs CUDNN_BATCHNORM_SPATIAL_PERSISTENT, as PyTorch's
 * cudnn_batch_norm does for a channels-last input (getCudnnBatchNormMode):
 * cuDNN's optimized NHWC batch norm is that mode's (its documented range
 * caveat, a scaled integer reduction, is for NCHW only); plain SPATIAL on
 * NHWC is the slow path, and the first GPU run measured channels-last
 * ResNet-50 at 0.415x NCHW with it (results/gpu-h200-2026-11-28, finding
 * 1). NCHW and inference keep SPATIAL (PyTorch's choice too). A cuDNN that
 * declines the persistent mode for a shape (CUDNN_STATUS_NOT_SUPPORTED or,
 * in cuDNN 9, any status of its family: BN_DECLINED)
 * gets SPATIAL for that call: the same math, the forward's saved
 * statistics mean the same to either mode's backward.
 * cuDNN 9 deprecates this API (it keeps it); the pragma below silences the
 * deprecation warnings for this file alone when CUDNN_WARN_DEPRECATED is on.
 *
 * Descriptors are cached, one shape per layout (a network's BN layers
 * differ in channels, so the cache is rebuilt at most per layer call; the
 * calls are cheap host work).
 */
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

typedef struct bn_entry {
    int valid;
    int n, c, hw;
    cudnnTensorDescriptor_t x, param; /* (n, c, hw, 1), and its (1, c, 1, 1) derived */
} bn_entry;

struct cuda_bn_cache {
    bn_entry e[2]; /* by layout */
};

/* lib/backend/checks.h's rules, and cuDNN's minimum eps. */
static int bn_check(const tb_bn_desc *d, int training)
{
    TB_TRY(tb_check_bn(d, training));
    if (d->dtype != TB_F32) /* no low-precision activations here (relu_fwd_lowp NULL) */
        return TB_FAIL(TB_ERR_UNSUPPORTED, "batch norm: the CUDA backend keeps activations fp32");
    if (!(d->eps >= CUDNN_BN_MIN_EPSILON))
        return TB_FAIL(TB_ERR_INVALID, "batch norm: eps %g is below cuDNN's minimum %g",
                       (double)d->eps, (double)CUDNN_BN_MIN_EPSILON);
    return TB_OK;
}

static int entry_destroy(bn_entry *e)
{
    cudnnStatus_t a = e->x ? cudnnDestroyTensorDescriptor(e->x) : CUDNN_STATUS_SUCCESS;
    cudnnStatus_t b = e->param ? cudnnDestroyTensorDescriptor(e->param) : CUDNN_STATUS_SUCCESS;
    memset(e, 0, sizeof *e);
    TB_CHECK_CUDNN(a);
    TB_CHECK_CUDNN(b);
    return TB_OK;
}

static int entry_init(bn_entry *e, const tb_bn_desc *d)
{
    cudnnTensorFormat_t fmt = d->layout == TB_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    TB_CHECK_CUDNN(cudnnCreateTensorDescriptor(&e->x));
    TB_CHECK_CUDNN(cudnnCreateTensorDescriptor(&e->param));
    TB_CHECK_CUDNN(cudnnSetTensor4dDescriptor(e->x, fmt, CUDNN_DATA_FLOAT, d->n, d->c, d->hw, 1));
    TB_CHECK_CUDNN(cudnnDeriveBNTensorDescriptor(e->param, e->x, CUDNN_BATCHNORM_SPATIAL));
    e->n = d->n;
    e->c = d->c;
    e->hw = d->hw;
    e->valid = 1;
    return TB_OK;
}

static int entry_get(tb_backend *be, const tb_bn_desc *d, bn_entry **out)
{
    cuda_ctx *c = tb_cuda_ctx(be);
    if (!c->bn) {
        c->bn = calloc(1, sizeof *c->bn);
        if (!c->bn)
            return TB_FAIL(TB_ERR_NOMEM, "cannot allocate the batch-norm descriptor cache");
    }
    bn_entry *e = &c->bn->e[d->layout == TB_NHWC];
    if (e->valid && e->n == d->n && e->c == d->c && e->hw == d->hw) {
        *out = e;
        return TB_OK;
    }
    TB_TRY(entry_destroy(e));
    int rc = entry_init(e, d);
    if (rc != TB_OK) {
        entry_destroy(e);
        return rc;
    }
    *out = e;
    return TB_OK;
}

int tb_cuda_bn_release(tb_backend *be)
{
    cuda_ctx *c = tb_cuda_ctx(be);
    int rc = TB_OK;
    if (!c->bn)
        return TB_OK;
    for (int i = 0; i < 2; i++) {
        int r = entry_destroy(&c->bn->e[i]);
        if (r != TB_OK && rc == TB_OK)
            rc = r;
    }
    free(c->bn);
    c->bn = NULL;
    return rc;
}

/* The checks, the device, and the descriptors of d's shape: what every
 * slot does first. */
static int bn_prepare(tb_backend *be, const tb_bn_desc *d, int training, bn_entry **e)
{
    TB_TRY(bn_check(d, training));
    TB_TRY(tb_cuda_bind(be));
    return entry_get(be, d, e);
}

/* The training mode of a layout (above). */
static cudnnBatchNormMode_t train_mode(const tb_bn_desc *d)
{
    return d->layout == TB_NHWC ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
}

/* cuDNN 9 refines "not supported" into a family (3000-3999: _SHAPE,
 * _LAYOUT, _SHARED_MEMORY_INSUFFICIENT, ...); any of them is a refusal. */
#define BN_DECLINED(st) (CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED)

/* 1 when a call in *mode was declined and should run again in SPATIAL
 * (set in *mode); 0 when st is its answer. */
static int retry_spatial(cudnnStatus_t st, cudnnBatchNormMode_t *mode)
{
    if (!BN_DECLINED(st) || *mode == CUDNN_BATCHNORM_SPATIAL)
        return 0;
    *mode = CUDNN_BATCHNORM_SPATIAL;
    return 1;
}

static int cuda_bn_fwd_train(tb_backend *be, const tb_bn_desc *d, const float *x,
                             const float *gamma, const float *beta, float *y, float *running_mean,
                             float *running_var, float *save_mean, float *save_invstd)
{
    const float one = 1.0f, zero = 0.0f;
    bn_entry *e;

    TB_TRY(bn_prepare(be, d, 1, &e));
    cudnnBatchNormMode_t mode = train_mode(d);
    cudnnStatus_t st;
    do {
        st = cudnnBatchNormalizationForwardTraining(
            tb_cuda_ctx(be)->cudnn, mode, &one, &zero, e->x, x, e->x, y, e->param, gamma, beta,
            (double)d->momentum, running_mean, running_var, (double)d->eps, save_mean,
            save_invstd);
    } while (retry_spatial(st, &mode));
    TB_CHECK_CUDNN(st);
    return TB_OK;
}

static int cuda_bn_fwd_infer(tb_backend *be, const tb_bn_desc *d, const float *x,
                             const float *gamma, const float *beta, const float *running_mean,
                             const float *running_var, float *y)
{
    const float one = 1.0f, zero = 0.0f;
    bn_entry *e;

    TB_TRY(bn_prepare(be, d, 0, &e));
    TB_CHECK_CUDNN(cudnnBatchNormalizationForwardInference(
        tb_cuda_ctx(be)->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, e->x, x, e->x, y, e->param,
        gamma, beta, running_mean, running_var, (double)d->eps));
    return TB_OK;
}

static int cuda_bn_bwd(tb_backend *be, const tb_bn_desc *d, const float *x, const float *dy,
                       const float *gamma, const float *save_mean, const float *save_invstd,
                       float *dx, float *dgamma, float *dbeta, int accumulate)
{
    const float one = 1.0f, zero = 0.0f, param_beta = accumulate ? 1.0f : 0.0f;
    bn_entry *e;

    TB_TRY(bn_prepare(be, d, 1, &e));
    /* cuDNN writes dgamma and dbeta through separate pointers of one
     * descriptor: the slot's two buffers. */
    cudnnBatchNormMode_t mode = train_mode(d);
    cudnnStatus_t st;
    do {
        st = cudnnBatchNormalizationBackward(
            tb_cuda_ctx(be)->cudnn, mode, &one, &zero, &one, &param_beta, e->x, x, e->x, dy,
            e->x, dx, e->param, gamma, dgamma, dbeta, (double)d->eps, save_mean, save_invstd);
    } while (retry_spatial(st, &mode));
    TB_CHECK_CUDNN(st);
    return TB_OK;
}

void tb_cuda_install_batchnorm(tb_backend *be)
{
    be->bn_fwd_train = cuda_bn_fwd_train;
    be->bn_fwd_infer = cuda_bn_fwd_infer;
    be->bn_bwd = cuda_bn_bwd;
}
