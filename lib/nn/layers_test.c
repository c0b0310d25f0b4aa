/*
 * layers_test.c - the layer and model machinery around the math that
 * gradcheck_test checks:
 *   - zero_grad: set_to_none then backward gives bitwise the gradients of
 *     memset then backward; a second backward without zero_grad adds (2x);
 *   - the conv autotuner's cache: tunes once per shape, again when the batch
 *     size changes, never when the autotuner is off;
 *   - evaluation of a partial batch gives the rows of the full batch;
 *   - batch norm's running statistics follow PyTorch's momentum rule;
 *   - the flat buffers: parameters are consecutive views, no conv bias
 *     removes exactly the conv biases;
 *   - the LR schedule: warm-up and the linear scaling rule.
 *
 * Run: bazel test //lib/nn:layers_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/rng.h"
#include "lib/train/config.h"
#include "lib/nn/model.h"
#include "lib/nn/optim.h"
#include "lib/nn/nn_testing.h"

#define BATCH 4

static tb_rng rng = {99};
static float urand(void) /* [-1, 1) */
{
    return (float)tb_rng_uniform(&rng, -1, 1);
}

typedef struct fixture {
    tb_backend *be;
    tb_model *m;
    tb_tensor x;        /* (BATCH, 1, 28, 28) */
    int32_t *labels;    /* (BATCH) */
} fixture;

static int fixture_init(fixture *f, tb_backend *be, int conv_bias)
{
    memset(f, 0, sizeof *f);
    f->be = be;
    tb_model_opts o = {.in = {1, 28, 28}, .classes = 10, .max_batch = BATCH,
                       .conv_bias = conv_bias, .dropout = 0.1f, .seed = 3};
    TB_TRY(tb_model_build(be, tb_spec_small_cnn, &o, &f->m));
    TB_TRY(tb_tensor_alloc(be, BATCH, 1, 28, 28, &f->x));
    float host[BATCH * 784];
    int32_t lab[BATCH];
    for (int i = 0; i < BATCH * 784; i++)
        host[i] = urand();
    for (int i = 0; i < BATCH; i++)
        lab[i] = i % 10;
    TB_TRY(tb_tensor_from_host(&f->x, host));
    TB_TRY(be->dev_alloc(be, (void **)&f->labels, sizeof lab));
    return be->copy_h2d(be, f->labels, lab, sizeof lab, NULL);
}

static void fixture_free(fixture *f)
{
    tb_model_destroy(f->m);
    tb_tensor_free(&f->x);
    if (f->labels)
        f->be->dev_free(f->be, f->labels);
}

/* zero_grad(set_to_none), forward, backward; gradients copied to g. */
static int grads_after(fixture *f, int zero, int set_to_none, float *g)
{
    if (zero)
        TB_TRY(tb_model_zero_grad(f->m, set_to_none));
    TB_TRY(tb_model_forward_loss(f->m, &f->x, f->labels, NULL));
    TB_TRY(tb_model_backward(f->m, 1.0f));
    return f->be->copy_d2h(f->be, g, f->m->flat_g, f->m->numel * sizeof(float), NULL);
}

static int check_zero_grad(fixture *f)
{
    size_t n = f->m->numel;
    float *g1 = malloc(n * sizeof *g1), *g2 = malloc(n * sizeof *g2), *g3 = malloc(n * sizeof *g3);
    /* garbage first: set_to_none must overwrite it */
    TB_TRY(f->be->memset(f->be, f->m->flat_g, 0x7f, n * sizeof(float), NULL));
    TB_TRY(grads_after(f, 1, 1, g2));
    TB_TRY(grads_after(f, 1, 0, g1));
    TB_TRY(grads_after(f, 0, 0, g3));
    CHECK_WHAT(memcmp(g1, g2, n * sizeof(float)) == 0,
          "set_to_none + backward == memset + backward, bitwise");
    double worst = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)g3[i] - 2.0 * g1[i]));
        mag = fmax(mag, fabs((double)g1[i]));
    }
    char what[128];
    snprintf(what, sizeof what, "second backward accumulates: |g - 2 g1| / |g1| = %.1e <= 1e-6",
             worst / mag);
    CHECK_WHAT(mag > 0 && worst / mag <= 1e-6, what);
    free(g1);
    free(g2);
    free(g3);
    return TB_OK;
}

static int forward_batch(fixture *f, int n, const tb_tensor **logits)
{
    tb_tensor x = f->x;
    TB_TRY(tb_tensor_set_batch(&x, n));
    return tb_model_forward(f->m, &x, logits);
}

static int check_autotune_cache(fixture *f)
{
    const tb_tensor *y;
    tb_layer_ctx *ctx = &f->m->ctx;
    ctx->conv_autotune = 0;
    TB_TRY(forward_batch(f, BATCH, &y));
    CHECK_WHAT(ctx->algos.tunings == 0, "autotuner off: conv_find never called");
    tb_conv_algo_cache_free(&ctx->algos);
    ctx->conv_autotune = 1;
    TB_TRY(forward_batch(f, BATCH, &y));
    int first = ctx->algos.tunings;
    TB_TRY(forward_batch(f, BATCH, &y));
    int again = ctx->algos.tunings;
    TB_TRY(forward_batch(f, 2, &y));
    int other = ctx->algos.tunings;
    char what[128];
    snprintf(what, sizeof what, "autotuner: %d shapes tuned, +%d on repeat, +%d for batch 2",
             first, again - first, other - again);
    CHECK_WHAT(first > 0 && again == first && other == 2 * first, what);
    ctx->conv_autotune = 0;
    return TB_OK;
}

/* cudnn.deterministic reaches the backend: every conv looked up under it
 * asks with desc.deterministic set, and is cached apart from the default. */
static int check_deterministic_desc(fixture *f)
{
    const tb_tensor *y;
    tb_layer_ctx *ctx = &f->m->ctx;
    tb_conv_algo_cache_free(&ctx->algos);
    TB_TRY(forward_batch(f, BATCH, &y));
    int plain = ctx->algos.count;
    ctx->conv_deterministic = 1;
    TB_TRY(forward_batch(f, BATCH, &y));
    int all = ctx->algos.count, det = 0;
    for (int i = 0; i < all; i++)
        det += ctx->algos.entries[i].desc.deterministic;
    ctx->conv_deterministic = 0;
    char what[160];
    snprintf(what, sizeof what, "deterministic convs: %d default lookups, then %d more, %d of "
             "them asking for deterministic algorithms", plain, all - plain, det);
    CHECK_WHAT(plain > 0 && all == 2 * plain && det == plain, what);
    return TB_OK;
}

static int check_partial_batch(fixture *f)
{
    const tb_tensor *y;
    float full[BATCH * 10], part[2 * 10];
    tb_model_train_mode(f->m, 0);
    TB_TRY(forward_batch(f, BATCH, &y));
    TB_TRY(tb_tensor_to_host(y, full));
    TB_TRY(forward_batch(f, 2, &y));
    TB_TRY(tb_tensor_to_host(y, part));
    tb_model_train_mode(f->m, 1);
    /* Relative to the largest logit (the project's max_rel_err): another
     * batch size may take another GEMM kernel, and a near-zero logit would
     * turn its rounding into a large element-wise ratio. */
    double worst = 0, scale = 0;
    for (int i = 0; i < 20; i++) {
        worst = fmax(worst, fabs((double)full[i] - part[i]));
        scale = fmax(scale, fabs((double)full[i]));
    }
    worst /= fmax(scale, 1e-30);
    char what[128];
    snprintf(what, sizeof what, "eval: batch 2 == first rows of batch %d (rel %.1e <= 1e-5)",
             BATCH, worst);
    CHECK_WHAT(worst <= 1e-5, what);
    return TB_OK;
}

/* One training forward, then eval: y = (x - rm) / sqrt(rv + eps) with
 * rm = 0.1 mean, rv = 0.9 + 0.1 unbiased var (gamma 1, beta 0). */
static int check_bn_running_stats(tb_backend *be)
{
    tb_layer_ctx ctx = {.be = be, .training = 1};
    tb_layer *l;
    TB_TRY(tb_layer_batchnorm_create(&ctx, (tb_shape){2, 3, 3}, &l));
    float *w, *g;
    TB_TRY(be->dev_alloc(be, (void **)&w, 4 * sizeof(float)));
    TB_TRY(be->dev_alloc(be, (void **)&g, 4 * sizeof(float)));
    float wh[4] = {1, 1, 0, 0};
    TB_TRY(be->copy_h2d(be, w, wh, sizeof wh, NULL));
    tb_layer_params_bind(l, w, g);
    TB_TRY(tb_layer_alloc(l, 3));
    tb_tensor x;
    TB_TRY(tb_tensor_alloc(be, 3, 2, 3, 3, &x));
    float xh[54], yh[54];
    for (int i = 0; i < 54; i++)
        xh[i] = 2.0f + urand();
    TB_TRY(tb_tensor_from_host(&x, xh));
    const tb_tensor *y;
    TB_TRY(tb_layer_forward(l, &x, &y));
    ctx.training = 0;
    TB_TRY(tb_layer_forward(l, &x, &y));
    TB_TRY(tb_tensor_to_host(y, yh));
    double worst = 0;
    for (int c = 0; c < 2; c++) {
        double m = 0, v = 0;
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 9; i++)
                m += xh[(n * 2 + c) * 9 + i] / 27.0;
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 9; i++)
                v += pow(xh[(n * 2 + c) * 9 + i] - m, 2) / 26.0;
        double rm = 0.1 * m, rv = 0.9 + 0.1 * v;
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 9; i++) {
                int at = (n * 2 + c) * 9 + i;
                worst = fmax(worst, fabs(yh[at] - (xh[at] - rm) / sqrt(rv + 1e-5)));
            }
    }
    char what[128];
    snprintf(what, sizeof what, "batchnorm running stats (momentum 0.1, unbiased): err %.1e", worst);
    CHECK_WHAT(worst < 1e-5, what);
    tb_tensor_free(&x);
    tb_layer_destroy(l);
    be->dev_free(be, w);
    be->dev_free(be, g);
    return TB_OK;
}

static void count_conv_bias(tb_layer *l, size_t *n)
{
    if (!strcmp(l->vt->kind, "conv2d"))
        *n += (size_t)l->out.c;
    for (int i = 0; i < l->nchildren; i++)
        count_conv_bias(l->children[i], n);
}

static int check_flat_buffers(fixture *with_bias, tb_backend *be)
{
    tb_model *m = with_bias->m;
    size_t at = 0;
    int contiguous = 1;
    for (int i = 0; i < m->nparams; i++) {
        contiguous &= m->params[i]->w == m->flat_w + at && m->params[i]->g == m->flat_g + at;
        at += m->params[i]->n;
    }
    CHECK_WHAT(contiguous && at == m->numel, "parameters are consecutive views of the flat buffers");
    fixture nb;
    TB_TRY(fixture_init(&nb, be, 0));
    size_t biases = 0;
    count_conv_bias(m->net, &biases);
    char what[128];
    snprintf(what, sizeof what, "conv_bias=0: %zu -> %zu parameters (%zu conv biases gone)",
             m->numel, nb.m->numel, biases);
    CHECK_WHAT(nb.m->numel + biases == m->numel, what);
    fixture_free(&nb);
    return TB_OK;
}

static void check_schedule(void)
{
    tb_lr_schedule s = {.peak_lr = 0.4, .warmup_steps = 4};
    CHECK_WHAT(fabs(tb_lr_at_step(&s, 1) - 0.1) < 1e-12 && fabs(tb_lr_at_step(&s, 4) - 0.4) < 1e-12 &&
              fabs(tb_lr_at_step(&s, 100) - 0.4) < 1e-12,
          "warm-up: 0.1, ..., 0.4 over 4 steps, then constant");
    tb_config c;
    tb_config_defaults(&c);
    c.lr = 0.1;
    c.batch_size = 512;
    c.accum_steps = 2;
    c.lr_base_batch = 256;
    CHECK_WHAT(fabs(tb_config_peak_lr(&c) - 0.4) < 1e-12, "linear scaling: lr 0.1 at 256 -> 0.4 at 512x2");
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    fixture f;
    int rc;
    TB_TRY_GOTO(rc, fixture_init(&f, be, 1), out_free);
    TB_TRY_GOTO(rc, check_zero_grad(&f), out_free);
    TB_TRY_GOTO(rc, check_autotune_cache(&f), out_free);
    TB_TRY_GOTO(rc, check_deterministic_desc(&f), out_free);
    TB_TRY_GOTO(rc, check_partial_batch(&f), out_free);
    TB_TRY_GOTO(rc, check_flat_buffers(&f, be), out_free);
    TB_TRY_GOTO(rc, check_bn_running_stats(be), out_free);
    check_schedule();

out_free:
    fixture_free(&f);
    return rc;
}

int main(void)
{
    return tb_test_main_cpu(
        2, "layers_test: zero_grad modes, autotuner cache, batches, flat buffers, schedule", run,
        NULL);
}
