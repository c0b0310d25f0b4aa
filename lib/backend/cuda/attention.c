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
 *   attention_*         TB_ATTN_MANUAL: three cuBLAS strided-batched GEMMs
 *                       forward (S = scale Q K^T, then P V after the softmax
 *                       kernel), four backward, each one call for all B*H
 *                       heads as torch.bmm makes; called here directly with
 *                       cublasGemmStridedBatchedEx rather than through the
 *                       gemm slot, which has no batch. CUBLAS_COMPUTE_32F:
 *                       plain fp32 (the TF32 toggle does not reach it).
 *                       TB_ATTN_FUSED: kernels/attention.cu's flash kernels.
 *
 * Arguments are checked on the host with the CPU backend's rules
 * (lib/backend/cpu/attention.c), so both backends refuse the same calls. Nothing here
 * synchronizes.
 */
#include <cublas_v2.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/layernorm.h"
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

/* Row-major C = alpha op(A) op(B) + beta C for `batch` matrices at fixed
 * strides: column-major cuBLAS on the transposes (lib/backend/cuda/gemm.c's swap). */
static int gemm_batched(tb_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, long long sa, const float *b, int ldb,
                        long long sb, float beta, float *c, int ldc, long long sc, int batch)
{
    TB_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        tb_cuda_ctx(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
        n, m, k, &alpha, b, CUDA_R_32F, ldb, sb, a, CUDA_R_32F, lda, sa, &beta, c, CUDA_R_32F,
        ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return TB_OK;
}

static int attn_fwd_manual(tb_backend *be, const tb_attn_desc *d, const float *q,
                           const float *k, const float *v, float *out, float *p)
{
    int T = d->seq, D = d->head_dim, heads = d->batch * d->heads;
    long long hd = (long long)T * D, tt = (long long)T * T;
    TB_TRY(gemm_batched(be, 0, 1, T, T, D, d->scale, q, D, hd, k, D, hd, 0.0f, p, T, tt, heads));
    TB_TRY(tb_cuda_attn_softmax_fwd(p, (long)attn_rows(d), T, d->causal, stream_of(be)));
    return gemm_batched(be, 0, 0, T, D, T, 1.0f, p, T, tt, v, D, hd, 0.0f, out, D, hd, heads);
}

static int attn_bwd_manual_with(tb_backend *be, const tb_attn_desc *d, const float *q,
                                const float *k, const float *v, const float *dout,
                                const float *p, float *ds, float *dq, float *dk, float *dv)
{
    int T = d->seq, D = d->head_dim, heads = d->batch * d->heads;
    long long hd = (long long)T * D, tt = (long long)T * T;
    TB_TRY(gemm_batched(be, 1, 0, T, D, T, 1.0f, p, T, tt, dout, D, hd, 0.0f, dv, D, hd,
                        heads)); /* dV = P^T dO */
    TB_TRY(gemm_batched(be, 0, 1, T, T, D, 1.0f, dout, D, hd, v, D, hd, 0.0f, ds, T, tt,
                        heads)); /* dP = dO V^T */
    TB_TRY(tb_cuda_attn_softmax_bwd(p, ds, (long)attn_rows(d), T, stream_of(be)));
    TB_TRY(gemm_batched(be, 0, 0, T, D, T, d->scale, ds, T, tt, k, D, hd, 0.0f, dq, D, hd,
                        heads)); /* dQ = scale dS K */
    return gemm_batched(be, 1, 0, T, D, T, d->scale, ds, T, tt, q, D, hd, 0.0f, dk, D, hd,
                        heads); /* dK = scale dS^T Q */
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
    if (temp_bytes)
        *temp_bytes = sizeof(float) * attn_rows(d) * per_row; /* dP / dS, or rowsum(dO O) */
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
    size_t temp;
    TB_TRY(cuda_attention_workspace(be, variant, d, NULL, &temp));
    float *tmp;
    TB_TRY(be->dev_alloc(be, (void **)&tmp, temp));
    int rc = variant == TB_ATTN_MANUAL
                 ? attn_bwd_manual_with(be, d, q, k, v, dout, saved, tmp, dq, dk, dv)
                 : tb_cuda_attn_fused_bwd(d, q, k, v, out, dout, saved, tmp, dq, dk, dv,
                                          stream_of(be));
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
