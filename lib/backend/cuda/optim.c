/*
 * optim.c - the CUDA backend's opt_step (lib/backend/backend.h): SGD with
 * momentum and AdamW, per tensor or fused, on kernels/optim.cu.
 *
 *   fused == 0  PyTorch's for-loop optimizers (foreach=False): per tensor,
 *               one kernel per in-place op, the same passes in the same
 *               order as the CPU backend's (lib/backend/cpu/optim.c sgd_tensor,
 *               adamw_tensor). Temporaries (unscaled gradient, AdamW's
 *               denominator) live in a grow-only scratch buffer.
 *   fused == 1  ONE kernel for all tensors: the tensors are cut into chunks
 *               of TB_OPT_CHUNK elements, the chunk table goes to the device
 *               (only when it changed since the last step: the parameters
 *               of a model stay put, so a training loop uploads it once),
 *               and one block updates each chunk.
 * LARS, LAMB, NovoGrad: the same chunk table, then three launches
 *   (kernels/optim.h tb_cuda_opt_lb: partial sums, per-tensor scalar,
 *   apply); fused == 0 launches them once per tensor over its chunks,
 *   fused == 1 once over all. Partial sums and the per-tensor scalars live
 *   in the opt_tmp scratch.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/optim.h"
#include "kernels/optim_math.h"
#include "lib/backend/backend.h"
#include "lib/backend/checks.h"
#include "lib/backend/cuda/cuda.h"
#include "lib/backend/cuda/check.h"
#include "lib/core/status.h"

static void *stream_of(tb_backend *be) { return (void *)tb_cuda_ctx(be)->compute; }

/* ---------------------------------------------------------------- per tensor */

static int pass(tb_backend *be, tb_opt_pass p, float *dst, const float *a, const float *b,
                float k, size_t n)
{
    return tb_cuda_opt_pass(p, dst, a, b, k, n, stream_of(be));
}

/* PyTorch's _single_tensor_sgd for one tensor; d lives in tmp. */
static int sgd_tensor(tb_backend *be, const tb_sgd_coef *k, const tb_param_view *tv, float *tmp)
{
    size_t n = tv->n;
    const float *d = tv->grad;
    if (k->b.inv_scale != 1.0f) { /* GradScaler's unscale */
        TB_TRY(pass(be, TB_PASS_MUL, tmp, d, NULL, k->b.inv_scale, n));
        d = tmp;
    }
    if (k->b.weight_decay != 0.0f) { /* d_p = d_p.add(param, alpha=wd) */
        TB_TRY(pass(be, TB_PASS_ADD, tmp, d, tv->param, k->b.weight_decay, n));
        d = tmp;
    }
    if (k->momentum != 0.0f) {
        if (k->b.first) {
            TB_TRY(pass(be, TB_PASS_COPY, tv->state1, d, NULL, 0.0f, n)); /* buf = clone(d_p) */
        } else {
            TB_TRY(pass(be, TB_PASS_MUL, tv->state1, tv->state1, NULL, k->momentum, n));
            TB_TRY(pass(be, TB_PASS_ADD, tv->state1, tv->state1, d, 1.0f, n));
        }
        d = tv->state1;
    }
    return pass(be, TB_PASS_ADD, tv->param, tv->param, d, k->b.neg_lr, n); /* p.add_(d_p, -lr) */
}

/* PyTorch's _single_tensor_adamw for one tensor: nine passes (ten with
 * grad scaling); tmp holds 2n floats: unscaled grads, then denom. */
static int adamw_tensor(tb_backend *be, const tb_adamw_coef *k, const tb_param_view *tv,
                        float *tmp)
{
    size_t n = tv->n;
    float *denom = tmp + n, *p = tv->param, *m = tv->state1, *v = tv->state2;
    const float *g = tv->grad;
    if (k->inv_scale != 1.0f) {
        TB_TRY(pass(be, TB_PASS_MUL, tmp, g, NULL, k->inv_scale, n));
        g = tmp;
    }
    TB_TRY(pass(be, TB_PASS_MUL, p, p, NULL, k->decay, n));
    TB_TRY(pass(be, TB_PASS_MUL, m, m, NULL, k->beta1, n));
    TB_TRY(pass(be, TB_PASS_ADD, m, m, g, k->one_minus_beta1, n));
    TB_TRY(pass(be, TB_PASS_MUL, v, v, NULL, k->beta2, n));
    TB_TRY(pass(be, TB_PASS_ADDCMUL, v, g, g, k->one_minus_beta2, n));
    TB_TRY(pass(be, TB_PASS_SQRT, denom, v, NULL, 0.0f, n));
    TB_TRY(pass(be, TB_PASS_DIV, denom, NULL, NULL, k->bc2_sqrt, n));
    TB_TRY(pass(be, TB_PASS_ADD_SCALAR, denom, NULL, NULL, k->eps, n));
    return pass(be, TB_PASS_ADDCDIV, p, m, denom, k->neg_step_size, n);
}

static int opt_per_tensor(tb_backend *be, const tb_opt_hparams *hp, const tb_param_view *tensors,
                          int count, const tb_sgd_coef *sgd, const tb_adamw_coef *adamw)
{
    size_t max_n = 0;
    void *tmp;
    for (int i = 0; i < count; i++)
        max_n = tensors[i].n > max_n ? tensors[i].n : max_n;
    if (max_n == 0)
        return TB_OK;
    size_t floats = hp->kind == TB_OPT_ADAMW ? 2 * max_n : max_n;
    TB_TRY(tb_cuda_scratch_get(be, &tb_cuda_ctx(be)->opt_tmp, floats * sizeof(float), &tmp));
    for (int i = 0; i < count; i++) {
        if (tensors[i].n == 0)
            continue;
        if (hp->kind == TB_OPT_SGD)
            TB_TRY(sgd_tensor(be, sgd, &tensors[i], tmp));
        else
            TB_TRY(adamw_tensor(be, adamw, &tensors[i], tmp));
    }
    return TB_OK;
}

/* ---------------------------------------------------------------- fused */

static size_t chunk_count(const tb_param_view *tensors, int count)
{
    size_t c = 0;
    for (int i = 0; i < count; i++)
        c += (tensors[i].n + TB_OPT_CHUNK - 1) / TB_OPT_CHUNK;
    return c;
}

/* Grows a host buffer to at least bytes. */
static int host_grow(void **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return TB_OK;
    void *p = realloc(*buf, bytes);
    if (!p)
        return TB_FAIL(TB_ERR_NOMEM, "cannot allocate the fused optimizer's chunk table "
                       "(%zu bytes)", bytes);
    *buf = p;
    *cap = bytes;
    return TB_OK;
}

/* This step's chunk table, on the host (ctx->opt_built). */
static int chunks_build(tb_backend *be, const tb_param_view *tensors, int count, size_t nchunks)
{
    cuda_ctx *c = tb_cuda_ctx(be);
    TB_TRY(host_grow(&c->opt_built, &c->opt_built_cap, nchunks * sizeof(tb_opt_chunk)));
    tb_opt_chunk *ch = c->opt_built;
    size_t j = 0;
    for (int i = 0; i < count; i++) {
        const tb_param_view *tv = &tensors[i];
        for (size_t off = 0; off < tv->n; off += TB_OPT_CHUNK, j++) {
            ch[j] = (tb_opt_chunk){
                .param = tv->param + off,
                .grad = tv->grad + off,
                .state1 = tv->state1 ? tv->state1 + off : NULL,
                .state2 = tv->state2 ? tv->state2 + off : NULL,
                .n = tv->n - off < TB_OPT_CHUNK ? tv->n - off : TB_OPT_CHUNK,
                .tensor_state = tv->tensor_state,
                .tensor = i,
                .no_adapt = tv->no_adapt,
            };
        }
    }
    return TB_OK;
}

/* The device copy of the table, uploaded only when it differs from what
 * the device holds. The source is pageable memory, so cudaMemcpyAsync has
 * consumed it when it returns; stream order puts the copy after the
 * previous step's kernel. Afterwards built and sent swap. */
static int chunks_upload(tb_backend *be, size_t nchunks, tb_opt_chunk **dev)
{
    cuda_ctx *c = tb_cuda_ctx(be);
    size_t bytes = nchunks * sizeof(tb_opt_chunk);
    void *d, *old = c->opt_chunks.p;
    TB_TRY(tb_cuda_scratch_get(be, &c->opt_chunks, bytes, &d));
    *dev = d;
    if (d == old && c->opt_sent_bytes == bytes && memcmp(c->opt_sent, c->opt_built, bytes) == 0)
        return TB_OK;
    c->opt_sent_bytes = 0; /* until the copy is issued */
    TB_CHECK_CUDA(cudaMemcpyAsync(d, c->opt_built, bytes, cudaMemcpyHostToDevice, c->compute));
    void *t = c->opt_sent;
    size_t tcap = c->opt_sent_cap;
    c->opt_sent = c->opt_built;
    c->opt_sent_cap = c->opt_built_cap;
    c->opt_built = t;
    c->opt_built_cap = tcap;
    c->opt_sent_bytes = bytes;
    return TB_OK;
}

static int opt_fused(tb_backend *be, const tb_opt_hparams *hp, const tb_param_view *tensors,
                     int count, const tb_sgd_coef *sgd, const tb_adamw_coef *adamw)
{
    size_t nchunks = chunk_count(tensors, count);
    tb_opt_chunk *dev;
    if (nchunks == 0)
        return TB_OK;
    if (nchunks > (size_t)INT32_MAX)
        return TB_FAIL(TB_ERR_INVALID, "opt_step: %zu chunks are more than one launch takes",
                       nchunks);
    TB_TRY(chunks_build(be, tensors, count, nchunks));
    TB_TRY(chunks_upload(be, nchunks, &dev));
    return tb_cuda_opt_fused(hp->kind == TB_OPT_SGD ? TB_FUSED_SGD : TB_FUSED_ADAMW, sgd, adamw,
                             dev, (int)nchunks, stream_of(be));
}

/* ---------------------------------------------------------------- large batch */

static int opt_large_batch(tb_backend *be, const tb_opt_hparams *hp,
                           const tb_param_view *tensors, int count, int fused)
{
    size_t nchunks = chunk_count(tensors, count);
    tb_opt_chunk *dev;
    void *tmp;
    if (nchunks == 0)
        return TB_OK;
    if (nchunks > (size_t)INT32_MAX / 2)
        return TB_FAIL(TB_ERR_INVALID, "opt_step: %zu chunks are more than one launch takes",
                       nchunks);
    tb_lb_coefs k = tb_lb_coefs_make(hp);
    TB_TRY(chunks_build(be, tensors, count, nchunks));
    TB_TRY(chunks_upload(be, nchunks, &dev));
    TB_TRY(tb_cuda_scratch_get(be, &tb_cuda_ctx(be)->opt_tmp,
                               (2 * nchunks + (size_t)count) * sizeof(float), &tmp));
    float *partial = tmp, *scalars = partial + 2 * nchunks;
    if (fused)
        return tb_cuda_opt_lb(&k, dev, (int)nchunks, partial, scalars, stream_of(be));
    size_t first = 0;
    for (int i = 0; i < count; i++) {
        size_t nc = (tensors[i].n + TB_OPT_CHUNK - 1) / TB_OPT_CHUNK;
        TB_TRY(tb_cuda_opt_lb(&k, dev + first, (int)nc, partial + 2 * first, scalars,
                              stream_of(be)));
        first += nc;
    }
    return TB_OK;
}

/* ---------------------------------------------------------------- the slot */

static int cuda_opt_step(tb_backend *be, const tb_opt_hparams *hp, const tb_param_view *tensors,
                         int count, int fused)
{
    TB_TRY(tb_check_opt_step(hp, tensors, count));
    TB_TRY(tb_cuda_bind(be));
    if (hp->kind >= TB_OPT_LARS)
        return opt_large_batch(be, hp, tensors, count, fused);
    tb_opt_coefs k = tb_opt_coefs_make(hp);
    if (fused)
        return opt_fused(be, hp, tensors, count, &k.sgd, &k.adamw);
    return opt_per_tensor(be, hp, tensors, count, &k.sgd, &k.adamw);
}

void tb_cuda_optim_release(tb_backend *be)
{
    cuda_ctx *c = tb_cuda_ctx(be);
    free(c->opt_built);
    free(c->opt_sent);
    c->opt_built = c->opt_sent = NULL;
    c->opt_built_cap = c->opt_sent_cap = c->opt_sent_bytes = 0;
}

void tb_cuda_install_optim(tb_backend *be) { be->opt_step = cuda_opt_step; }
