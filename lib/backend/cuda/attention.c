/*
 * attention.c - the CUDA backend's layer norm and attention slots
 * (lib/backend/backend.h, "attention and layer norm"); tb_cuda_install_attn_ops
 * (declared in kernels/attention.h) fills them.
 *
 *   layernorm_fwd/bwd   kernels/layernorm.cu; the unfused variant's
 *                       temporaries come from the backend's allocator
 *                       (dev_alloc) per call, as eager PyTorch's come from
 *                       its caching allocator, and go back to it before the
 *                       call returns (stream order makes reuse safe).
 *   attention_*         TB_ATTN_MANUAL: two cuBLAS strided-batched GEMMs
 *                       forward (S = scale Q K^T, then P V after the softmax
 *                       kernel), four backward, each one call for all B*H
 *                       heads as torch.bmm makes; called here directly with
 *                       cublasGemmStridedBatchedEx rather than through the
 *                       gemm slot, which has no batch. The desc's math:
 *                       CUBLAS_COMPUTE_32F, or _32F_FAST_TF32 under TF32 (as
 *                       allow_tf32 reaches torch.bmm); its lowp (autocast's
 *                       bmm): each product on 2-byte copies of its operands
 *                       (CUDA_R_16BF / CUDA_R_16F in, fp32 out and
 *                       accumulation), cast per call by the backend's cast
 *                       slot into temporaries from its allocator; the
 *                       softmax kernels stay fp32.
 *                       TB_ATTN_FUSED: kernels/attention.cu's flash kernels.
 *
 * Arguments are checked on the host with the CPU backend's rules
 * (lib/backend/cpu/attention.c), so both backends refuse the same calls. Nothing here
 * synchronizes.
 */
#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>

#include "kernels/attention.h"
#include "kernels/layernorm.h"
#include "lib/backend/attn_lowp.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

/* ---------------------------------------------------------------- layer norm */

/* Two rows x cols temporaries and, when rowtmp, 2 rows floats. */
typedef struct ln_temps {
    float *t1, *t2, *rows;
} ln_temps;

static int ln_temps_get(tb_backend *be, int rows, int cols, int want_rows, ln_temps *t)
{
    size_t n = (size_t)rows * cols * sizeof(float);
    *t = (ln_temps){0};
    TB_TRY(be->dev_alloc(be, (void **)&t->t1, n));
    int rc;
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&t->t2, n), out_free_t1);
    if (want_rows)
        TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&t->rows, 2 * (size_t)rows * sizeof(float)),
                    out_free_t2);
    return TB_OK;
out_free_t2:
    be->dev_free(be, t->t2);
out_free_t1:
    be->dev_free(be, t->t1);
    return rc;
}

/* Frees what ln_temps_get made; returns rc, or the first free's failure. */
static int ln_temps_put(tb_backend *be, ln_temps *t, int rc)
{
    float *p[3] = {t->rows, t->t2, t->t1};
    for (int i = 0; i < 3; i++) {
        int r = p[i] ? be->dev_free(be, p[i]) : TB_OK;
        rc = rc != TB_OK ? rc : r;
    }
    return rc;
}

static int cuda_layernorm_fwd(tb_backend *be, tb_ln_variant variant, const float *x,
                              const float *gamma, const float *beta, float eps, int rows,
                              int cols, float *y, float *save_mean, float *save_rstd)
{
    TB_TRY(tb_check_layernorm("layernorm_fwd", variant, x, gamma, rows, cols));
    if (!(eps > 0.0f))
        return TB_FAIL(TB_ERR_INVALID, "layernorm_fwd: eps %g", (double)eps);
    if (rows == 0)
        return TB_OK;
    TB_TRY(tb_cuda_bind(be));
    if (variant == TB_LN_FUSED)
        return tb_cuda_layernorm_fwd(1, x, gamma, beta, eps, rows, cols, y, save_mean,
                                     save_rstd, NULL, NULL, stream_of(be));
    ln_temps t;
    TB_TRY(ln_temps_get(be, rows, cols, 0, &t));
    int rc = tb_cuda_layernorm_fwd(0, x, gamma, beta, eps, rows, cols, y, save_mean, save_rstd,
                                   t.t1, t.t2, stream_of(be));
    return ln_temps_put(be, &t, rc);
}

static int cuda_layernorm_bwd(tb_backend *be, tb_ln_variant variant, const float *x,
                              const float *dy, const float *gamma, const float *save_mean,
                              const float *save_rstd, int rows, int cols, float *dx,
                              float *dgamma, float *dbeta, int accumulate)
{
    TB_TRY(tb_check_layernorm("layernorm_bwd", variant, x, gamma, rows, cols));
    TB_TRY(tb_cuda_bind(be));
    void *part;
    TB_TRY(tb_cuda_scratch_get(be, &tb_cuda_ctx(be)->col_part,
                               tb_cuda_layernorm_bwd_partials(rows, cols) * sizeof(double),
                               &part));
    if (variant == TB_LN_FUSED || rows == 0)
        return tb_cuda_layernorm_bwd((int)variant, x, dy, gamma, save_mean, save_rstd, rows,
                                     cols, dx, dgamma, dbeta, accumulate, NULL, NULL, NULL, part,
                                     stream_of(be));
    ln_temps t;
    TB_TRY(ln_temps_get(be, rows, cols, 1, &t));
    int rc = tb_cuda_layernorm_bwd(0, x, dy, gamma, save_mean, save_rstd, rows, cols, dx, dgamma,
                                   dbeta, accumulate, t.t1, t.t2, t.rows, part, stream_of(be));
    return ln_temps_put(be, &t, rc);
}

/* ---------------------------------------------------------------- attention */

static int attn_check(const char *op, tb_attn_variant variant, const tb_attn_desc *d)
{
    TB_TRY(tb_check_attention(op, variant, d));
    if ((long long)d->batch * d->heads > 0x7fffffffLL)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "%s: B*H = %lld heads exceed cuBLAS's batch count",
                       op, (long long)d->batch * d->heads);
    return TB_OK;
}

static size_t attn_rows(const tb_attn_desc *d) { return (size_t)d->batch * d->heads * d->seq; }

/* Row-major C = alpha op(A) op(B) for `batch` matrices at fixed strides:
 * column-major cuBLAS on the transposes (lib/backend/cuda/gemm.c's swap).
 * A and B are fp32 (a, b), or their copies in d->lowp (al, bl) when given. */
static int gemm_batched(tb_backend *be, const tb_attn_desc *d, int ta, int tb, int m, int n,
                        int k, float alpha, const float *a, const uint16_t *al, int lda,
                        long long sa, const float *b, const uint16_t *bl, int ldb, long long sb,
                        float *c, int ldc, long long sc, int batch)
{
    const float beta = 0.0f;
    cudaDataType_t in = CUDA_R_32F;
    cublasComputeType_t compute =
        d->math == TB_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const void *pa = a, *pb = b;
    if (al) {
        in = d->lowp == TB_F16 ? CUDA_R_16F : CUDA_R_16BF;
        compute = CUBLAS_COMPUTE_32F;
        pa = al;
        pb = bl;
    }
    TB_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        tb_cuda_ctx(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
        n, m, k, &alpha, pb, in, ldb, sb, pa, in, lda, sa, &beta, c, CUDA_R_32F, ldc, sc, batch,
        compute, CUBLAS_GEMM_DEFAULT));
    return TB_OK;
}

static int attn_fwd_manual_with(tb_backend *be, const tb_attn_desc *d, const float *q,
                                const float *k, const float *v, float *out, float *p,
                                const tb_attn_lowp *lp)
{
    int T = d->seq, D = d->head_dim, heads = d->batch * d->heads;
    long long hd = (long long)T * D, tt = (long long)T * T;
    size_t n_hd = (size_t)heads * hd, n_tt = (size_t)heads * tt;
    TB_TRY(tb_attn_lowp_cast(be, d, q, lp->q, n_hd));
    TB_TRY(tb_attn_lowp_cast(be, d, k, lp->k, n_hd));
    TB_TRY(tb_attn_lowp_cast(be, d, v, lp->v, n_hd));
    TB_TRY(gemm_batched(be, d, 0, 1, T, T, D, d->scale, q, lp->q, D, hd, k, lp->k, D, hd, p, T,
                        tt, heads));
    TB_TRY(tb_cuda_attn_softmax_fwd(p, (long)attn_rows(d), T, d->causal, stream_of(be)));
    TB_TRY(tb_attn_lowp_cast(be, d, p, lp->p, n_tt));
    return gemm_batched(be, d, 0, 0, T, D, T, 1.0f, p, lp->p, T, tt, v, lp->v, D, hd, out, D, hd,
                        heads);
}

static int attn_fwd_manual(tb_backend *be, const tb_attn_desc *d, const float *q,
                           const float *k, const float *v, float *out, float *p)
{
    tb_attn_lowp lp;
    TB_TRY(tb_attn_lowp_get(be, d, 3, 1, &lp));
    return tb_attn_lowp_put(be, &lp, attn_fwd_manual_with(be, d, q, k, v, out, p, &lp));
}

static int attn_bwd_manual_with(tb_backend *be, const tb_attn_desc *d, const float *q,
                                const float *k, const float *v, const float *dout,
                                const float *p, float *ds, float *dq, float *dk, float *dv,
                                const tb_attn_lowp *lp)
{
    int T = d->seq, D = d->head_dim, heads = d->batch * d->heads;
    long long hd = (long long)T * D, tt = (long long)T * T;
    size_t n_hd = (size_t)heads * hd, n_tt = (size_t)heads * tt;
    TB_TRY(tb_attn_lowp_cast(be, d, p, lp->p, n_tt));
    TB_TRY(tb_attn_lowp_cast(be, d, dout, lp->dout, n_hd));
    TB_TRY(tb_attn_lowp_cast(be, d, v, lp->v, n_hd));
    TB_TRY(gemm_batched(be, d, 1, 0, T, D, T, 1.0f, p, lp->p, T, tt, dout, lp->dout, D, hd, dv,
                        D, hd, heads)); /* dV = P^T dO */
    TB_TRY(gemm_batched(be, d, 0, 1, T, T, D, 1.0f, dout, lp->dout, D, hd, v, lp->v, D, hd, ds,
                        T, tt, heads)); /* dP = dO V^T */
    TB_TRY(tb_cuda_attn_softmax_bwd(p, ds, (long)attn_rows(d), T, stream_of(be)));
    TB_TRY(tb_attn_lowp_cast(be, d, ds, lp->ds, n_tt));
    TB_TRY(tb_attn_lowp_cast(be, d, q, lp->q, n_hd));
    TB_TRY(tb_attn_lowp_cast(be, d, k, lp->k, n_hd));
    TB_TRY(gemm_batched(be, d, 0, 0, T, D, T, d->scale, ds, lp->ds, T, tt, k, lp->k, D, hd, dq,
                        D, hd, heads)); /* dQ = scale dS K */
    return gemm_batched(be, d, 1, 0, T, D, T, d->scale, ds, lp->ds, T, tt, q, lp->q, D, hd, dk,
                        D, hd, heads); /* dK = scale dS^T Q */
}

/* The backward's fp32 temporary: dP / dS (manual), or rowsum(dO O) (fused). */
static size_t attn_temp_f32(tb_attn_variant variant, const tb_attn_desc *d)
{
    return sizeof(float) * attn_rows(d) * (variant == TB_ATTN_MANUAL ? (size_t)d->seq : 1);
}

static int cuda_attention_workspace(tb_backend *be, tb_attn_variant variant,
                                    const tb_attn_desc *d, size_t *saved_bytes,
                                    size_t *temp_bytes)
{
    (void)be;
    TB_TRY(attn_check("attention_workspace", variant, d));
    size_t per_row = variant == TB_ATTN_MANUAL ? (size_t)d->seq : 1;
    if (saved_bytes)
        *saved_bytes = sizeof(float) * attn_rows(d) * per_row; /* P, or the logsumexp */
    /* dP / dS, or rowsum(dO O); manual under lowp also the backward's copies */
    if (temp_bytes)
        *temp_bytes = attn_temp_f32(variant, d) +
                      (variant == TB_ATTN_MANUAL ? tb_attn_lowp_bytes(d) : 0);
    return TB_OK;
}

static int cuda_attention_fwd(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                              const float *q, const float *k, const float *v, float *out,
                              float *saved)
{
    TB_TRY(attn_check("attention_fwd", variant, d));
    TB_TRY(tb_cuda_bind(be));
    if (variant == TB_ATTN_MANUAL)
        return attn_fwd_manual(be, d, q, k, v, out, saved);
    return tb_cuda_attn_fused_fwd(d, q, k, v, out, saved, stream_of(be));
}

static int cuda_attention_bwd(tb_backend *be, tb_attn_variant variant, const tb_attn_desc *d,
                              const float *q, const float *k, const float *v, const float *out,
                              const float *dout, const float *saved, float *dq, float *dk,
                              float *dv)
{
    TB_TRY(attn_check("attention_bwd", variant, d));
    TB_TRY(tb_cuda_bind(be));
    float *tmp;
    TB_TRY(be->dev_alloc(be, (void **)&tmp, attn_temp_f32(variant, d)));
    int rc;
    if (variant == TB_ATTN_MANUAL) {
        tb_attn_lowp lp;
        rc = tb_attn_lowp_get(be, d, 4, 2, &lp);
        if (rc == TB_OK)
            rc = tb_attn_lowp_put(be, &lp, attn_bwd_manual_with(be, d, q, k, v, dout, saved,
                                                               tmp, dq, dk, dv, &lp));
    } else {
        rc = tb_cuda_attn_fused_bwd(d, q, k, v, out, dout, saved, tmp, dq, dk, dv, stream_of(be));
    }
    int rc2 = be->dev_free(be, tmp);
    return rc != TB_OK ? rc : rc2;
}

int tb_cuda_install_attn_ops(tb_backend *be)
{
    be->layernorm_fwd = cuda_layernorm_fwd;
    be->layernorm_bwd = cuda_layernorm_bwd;
    be->attention_workspace = cuda_attention_workspace;
    be->attention_fwd = cuda_attention_fwd;
    be->attention_bwd = cuda_attention_bwd;
    return TB_OK;
}
