/*
 * layer_loss.c - softmax cross-entropy, the mean over the batch (PyTorch's
 * CrossEntropyLoss with reduction='mean').
 *
 * The loss stays on the device as a sum (reduce_sum of the per-row losses);
 * tb_xent_read_loss copies it to the host. Keeping the read separate is what
 * lets the "no needless host sync" technique read it every N steps.
 *
 * Token models (GPT-2) take the lse path (tb_xent_init_lse): N*T rows over
 * a 50,257-wide vocabulary, where a probs buffer and a separate dlogits
 * buffer would each be as large as the logits. The forward keeps one
 * logsumexp per row; the backward recomputes the softmax from it and writes
 * the gradient over the logits themselves (the head's output, which its
 * backward does not read).
 *
 * Tests: bazel test //lib/nn:gradcheck_test //lib/nn:gpt2_test
 */
#include <string.h>

#include "lib/nn/layers.h"

int tb_xent_init(tb_layer_ctx *ctx, int classes, int max_batch, tb_xent *x)
{
    memset(x, 0, sizeof *x);
    x->ctx = ctx;
    x->classes = classes;
    x->cap_n = max_batch;
    tb_backend *be = ctx->be;
    size_t rows = (size_t)max_batch;
    int rc;
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&x->probs, rows * classes * sizeof(float)), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&x->row_loss, rows * sizeof(float)), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&x->loss_sum, sizeof(float)), out_free);
    TB_TRY_GOTO(rc, tb_tensor_alloc(be, max_batch, classes, 1, 1, &x->dlogits), out_free);
    return TB_OK;

out_free:
    tb_xent_free(x);
    return rc;
}

int tb_xent_init_lse(tb_layer_ctx *ctx, int classes, int max_rows, tb_xent *x)
{
    memset(x, 0, sizeof *x);
    if (classes <= 1 || max_rows <= 0)
        return TB_FAIL(TB_ERR_INVALID, "xent: %d classes, %d rows", classes, max_rows);
    if (!ctx->be->xent_lse_fwd || !ctx->be->xent_lse_bwd)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "xent: backend %s has no xent_lse_fwd/bwd (token "
                       "models' loss)", ctx->be->name);
    x->ctx = ctx;
    x->classes = classes;
    x->cap_n = max_rows;
    x->lse_path = 1;
    tb_backend *be = ctx->be;
    size_t bytes = (size_t)max_rows * sizeof(float);
    int rc;
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&x->lse, bytes), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&x->row_loss, bytes), out_free);
    TB_TRY_GOTO(rc, be->dev_alloc(be, (void **)&x->loss_sum, sizeof(float)), out_free);
    return TB_OK;

out_free:
    tb_xent_free(x);
    return rc;
}

void tb_xent_free(tb_xent *x)
{
    if (!x->ctx)
        return;
    tb_backend *be = x->ctx->be;
    if (x->probs)
        be->dev_free(be, x->probs);
    if (x->lse)
        be->dev_free(be, x->lse);
    if (x->row_loss)
        be->dev_free(be, x->row_loss);
    if (x->loss_sum)
        be->dev_free(be, x->loss_sum);
    tb_tensor_free(&x->dlogits);
    memset(x, 0, sizeof *x);
}

/* The lse path: rows = all of the logits' elements / classes. */
static int xent_lse_forward(tb_xent *x, const tb_tensor *logits, const int32_t *labels)
{
    tb_backend *be = x->ctx->be;
    size_t per = tb_tensor_sample_numel(logits), rows = (size_t)logits->n * per / x->classes;
    if (per % (size_t)x->classes || rows > (size_t)x->cap_n)
        return TB_FAIL(TB_ERR_INVALID, "xent: logits (%d, %zu) are not rows of %d classes, at "
                       "most %d rows", logits->n, per, x->classes, x->cap_n);
    x->n = (int)rows;
    x->labels = (int32_t *)labels;
    x->logits = logits;
    TB_TRY(be->xent_lse_fwd(be, logits->data, labels, x->n, x->classes, x->row_loss, x->lse));
    return be->reduce_sum(be, x->row_loss, rows, x->loss_sum);
}

int tb_xent_forward(tb_xent *x, const tb_tensor *logits, const int32_t *labels)
{
    tb_backend *be = x->ctx->be;
    if (x->lse_path)
        return xent_lse_forward(x, logits, labels);
    if (logits->n > x->cap_n || (int)tb_tensor_sample_numel(logits) != x->classes)
        return TB_FAIL(TB_ERR_INVALID, "xent: logits (%d, %zu) for a loss of %d classes, batch %d",
                       logits->n, tb_tensor_sample_numel(logits), x->classes, x->cap_n);
    x->n = logits->n;
    x->labels = (int32_t *)labels;
    TB_TRY(be->softmax_xent_fwd(be, logits->data, labels, x->n, x->classes, x->probs,
                                x->row_loss));
    return be->reduce_sum(be, x->row_loss, (size_t)x->n, x->loss_sum);
}

/* In place: the logits become their gradient, so they serve one backward. */
static int xent_lse_backward(tb_xent *x, float scale, const tb_tensor **dlogits)
{
    tb_backend *be = x->ctx->be;
    const tb_tensor *lg = x->logits;
    if (!lg)
        return TB_FAIL(TB_ERR_INVALID, "xent: backward without a forward since the last one "
                       "(the logits already hold their gradient)");
    TB_TRY(be->xent_lse_bwd(be, lg->data, x->lse, x->labels, x->n, x->classes, scale,
                            lg->data));
    x->dlogits = *lg;
    x->dlogits.owned = 0;
    x->logits = NULL;
    *dlogits = &x->dlogits;
    return TB_OK;
}

int tb_xent_backward(tb_xent *x, float scale, const tb_tensor **dlogits)
{
    tb_backend *be = x->ctx->be;
    if (x->lse_path)
        return xent_lse_backward(x, scale, dlogits);
    TB_TRY(tb_tensor_set_batch(&x->dlogits, x->n));
    TB_TRY(be->softmax_xent_bwd(be, x->probs, x->labels, x->n, x->classes, scale,
                                x->dlogits.data));
    *dlogits = &x->dlogits;
    return TB_OK;
}

int tb_xent_read_loss(tb_xent *x, float *mean_loss)
{
    tb_backend *be = x->ctx->be;
    float sum = 0;
    TB_TRY(be->sync(be));
    TB_TRY(be->copy_d2h(be, &sum, x->loss_sum, sizeof sum, NULL));
    *mean_loss = x->n > 0 ? sum / (float)x->n : 0.0f;
    return TB_OK;
}
