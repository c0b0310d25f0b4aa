/*
 * loss_scaler_train_test.c - the dynamic loss scaler (lib/nn/loss_scaler.c) as
 * the trainer drives it (lib/train/train.c: loss_scale_of scales the loss before
 * backward, optimizer_step unscales through grad_scale or skips), in fp32 on
 * the CPU backend. loss_scaler_test checks the rule alone; amp_test drives
 * the wiring on bf16 with an Inf scale. This one checks each effect the rule
 * must have on training.
 *
 * Small CNN, Fashion-MNIST (1024 samples), batch 32, SGD momentum 0.9 with
 * weight decay 5e-4 (so the skip has optimizer state to leave alone), seed 5,
 * scaling on through tb_trainer_enable_loss_scaling (fp32 has no --amp that
 * turns it on; --amp=fp16 would, and the CPU has no fp16):
 *   overflow: after one good step (so the momentum buffer is not zeros),
 *     the first linear layer's weights are multiplied by 1e4, which makes
 *     the last linear layer's weight gradient ~1e2; times the scale 2^127
 *     that overflows fp32 (a gradient of this model is otherwise below 2,
 *     so 2^127 alone does not: measured). The test first checks that some
 *     gradient is Inf/NaN after the step, else the setup proves nothing.
 *     The step is skipped (counted), the parameters, the momentum buffer
 *     and the optimizer's step count are bitwise unchanged, and the scale
 *     is backed off by exactly the factor (2^126);
 *   growth: with growth_interval 3 at scale 1024, two good steps keep the
 *     scale and the third doubles it (2048), none skipped, the parameters
 *     move;
 *   exactness: 5 steps with scaling on at the default scale 65536 (a power
 *     of two: multiplying by it and dividing by it in the optimizer is exact
 *     in fp32 while nothing overflows or goes subnormal) give parameters and
 *     momentum bitwise equal to 5 steps without scaling; for SGD and AdamW.
 *
 * Run: bazel test //lib/train:loss_scaler_train_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/train/config.h"
#include "lib/nn/nn_testing.h"
#include "lib/train/train.h"

#define EXACT_STEPS 5

static void base_config(tb_config *c, int optimizer)
{
    tb_config_defaults(c);
    c->device = "cpu";
    c->batch_size = 32;
    c->data_limit = 1024;
    c->test_limit = 100;
    c->seed = 5;
    c->lr = optimizer == TB_OPT_ADAMW ? 1e-3 : 0.01;
    c->weight_decay = 5e-4;
    c->optimizer = optimizer;
}

/* Host copies of what a step may change: parameters, optimizer state. */
typedef struct snapshot {
    float *w, *state;
    size_t w_bytes, state_bytes;
    int opt_step;
} snapshot;

static void snapshot_free(snapshot *s)
{
    free(s->w);
    free(s->state);
    memset(s, 0, sizeof *s);
}

static int snapshot_take(tb_trainer *t, snapshot *s)
{
    tb_backend *be = t->be;
    int states = t->cfg.optimizer == TB_OPT_ADAMW ? 2 : 1;
    snapshot_free(s);
    s->w_bytes = t->model->numel * sizeof(float);
    s->state_bytes = (size_t)states * t->opt.numel * sizeof(float);
    s->w = malloc(s->w_bytes);
    s->state = malloc(s->state_bytes);
    if (!s->w || !s->state)
        return TB_FAIL(TB_ERR_NOMEM, "host snapshot of %zu + %zu bytes", s->w_bytes,
                       s->state_bytes);
    TB_TRY(be->copy_d2h(be, s->w, t->model->flat_w, s->w_bytes, NULL));
    TB_TRY(be->copy_d2h(be, s->state, t->opt.state, s->state_bytes, NULL));
    s->opt_step = t->opt.hp.step;
    return TB_OK;
}

/* Non-finite values in the gradient buffer, counted on the host. */
static int count_nonfinite_grads(tb_trainer *t, long *count)
{
    size_t n = t->model->numel;
    float *g = malloc(n * sizeof(float));
    if (!g)
        return TB_FAIL(TB_ERR_NOMEM, "host copy of %zu gradients", n);
    int rc = t->be->copy_d2h(t->be, g, t->model->flat_g, n * sizeof(float), NULL);
    *count = 0;
    for (size_t i = 0; rc == TB_OK && i < n; i++)
        *count += !isfinite(g[i]);
    free(g);
    return rc;
}

/* Multiplies parameter tensor i's values by factor (on the device). */
static int scale_param(tb_trainer *t, int i, float factor)
{
    const tb_param *p = t->model->params[i];
    float *h = malloc(p->n * sizeof(float));
    if (!h)
        return TB_FAIL(TB_ERR_NOMEM, "host copy of %zu parameters", p->n);
    int rc = t->be->copy_d2h(t->be, h, p->w, p->n * sizeof(float), NULL);
    for (size_t j = 0; j < p->n; j++)
        h[j] *= factor;
    if (rc == TB_OK)
        rc = t->be->copy_h2d(t->be, p->w, h, p->n * sizeof(float), NULL);
    free(h);
    return rc;
}

/* A trainer on base_config's settings for optimizer, with the loss scaler
 * enabled when scaling is set (*t NULL on failure). */
static int make_trainer(tb_backend *be, int optimizer, int scaling, tb_trainer **t)
{
    tb_config c;
    base_config(&c, optimizer);
    *t = NULL;
    TB_TRY(tb_config_validate(&c));
    TB_TRY(tb_trainer_create(&c, be, t));
    if (!scaling)
        return TB_OK;
    int rc = tb_trainer_enable_loss_scaling(*t);
    if (rc != TB_OK) {
        tb_trainer_destroy(*t);
        *t = NULL;
    }
    return rc;
}

static int step_synced(tb_trainer *t)
{
    float loss;
    TB_TRY(tb_trainer_step(t, &loss));
    return tb_trainer_sync(t);
}

/* Scale 2^127: overflow, skip, back off. */
static int check_overflow_skip(tb_backend *be)
{
    tb_trainer *t;
    TB_TRY(make_trainer(be, TB_OPT_SGD, 1, &t));
    snapshot before = {0}, after = {0};
    long bad = 0;
    int rc;
    /* One good step first, so the momentum buffer is not all zeros. */
    t->scaler.scale = 1024.0f;
    TB_TRY_GOTO(rc, step_synced(t), out_free);
    /* The small CNN ends linear(64), GELU, linear(classes): params[n - 4]
     * is the first linear layer's weight. */
    TB_TRY_GOTO(rc, scale_param(t, t->model->nparams - 4, 1e4f), out_free);
    TB_TRY_GOTO(rc, snapshot_take(t, &before), out_free);
    const float big = ldexpf(1.0f, 127);
    t->scaler.scale = big;
    TB_TRY_GOTO(rc, step_synced(t), out_free);
    TB_TRY_GOTO(rc, snapshot_take(t, &after), out_free);
    TB_TRY_GOTO(rc, count_nonfinite_grads(t, &bad), out_free);
    char what[200];
    snprintf(what, sizeof what, "scale 2^127: %ld of %zu gradients Inf/NaN (the setup overflows)",
             bad, t->model->numel);
    CHECK(bad > 0, "%s", what);
    snprintf(what, sizeof what, "the step is skipped (skipped_steps %ld, expected 1)",
             t->scaler.skipped_steps);
    CHECK(t->scaler.skipped_steps == 1, "%s", what);
    CHECK(!memcmp(before.w, after.w, before.w_bytes), "parameters bitwise unchanged");
    CHECK(!memcmp(before.state, after.state, before.state_bytes),
          "momentum buffer bitwise unchanged");
    snprintf(what, sizeof what, "optimizer step count unchanged (%d, was %d)", after.opt_step,
             before.opt_step);
    CHECK(after.opt_step == before.opt_step, "%s", what);
    snprintf(what, sizeof what, "scale backed off by %g: %g (expected 2^126 = %g)",
             (double)t->scaler.backoff_factor, (double)t->scaler.scale,
             (double)ldexpf(1.0f, 126));
    CHECK(t->scaler.scale == big * t->scaler.backoff_factor &&
          t->scaler.scale == ldexpf(1.0f, 126), "%s", what);

out_free:
    snapshot_free(&before);
    snapshot_free(&after);
    tb_trainer_destroy(t);
    return rc;
}

/* growth_interval 3 at scale 1024: 1024, 1024, then 2048. */
static int check_growth(tb_backend *be)
{
    tb_trainer *t;
    TB_TRY(make_trainer(be, TB_OPT_SGD, 1, &t));
    snapshot before = {0}, after = {0};
    int rc;
    t->scaler.scale = 1024.0f;
    t->scaler.growth_interval = 3;
    TB_TRY_GOTO(rc, snapshot_take(t, &before), out_free);
    char what[200];
    for (int i = 1; i <= 3; i++) {
        TB_TRY_GOTO(rc, step_synced(t), out_free);
        float want = i < 3 ? 1024.0f : 2048.0f;
        snprintf(what, sizeof what, "growth interval 3: after good step %d scale %g (expected %g)",
                 i, (double)t->scaler.scale, (double)want);
        CHECK(t->scaler.scale == want && t->scaler.skipped_steps == 0, "%s", what);
    }
    TB_TRY_GOTO(rc, snapshot_take(t, &after), out_free);
    snprintf(what, sizeof what, "the good steps moved the parameters (optimizer step %d)",
             after.opt_step);
    CHECK(memcmp(before.w, after.w, before.w_bytes) != 0 && after.opt_step == 3, "%s", what);

out_free:
    snapshot_free(&before);
    snapshot_free(&after);
    tb_trainer_destroy(t);
    return rc;
}

static int run_steps(tb_backend *be, int optimizer, int scaling, snapshot *s, float *scale)
{
    tb_trainer *t;
    TB_TRY(make_trainer(be, optimizer, scaling, &t));
    int rc = TB_OK;
    for (int i = 0; i < EXACT_STEPS && rc == TB_OK; i++)
        rc = step_synced(t);
    if (rc == TB_OK)
        rc = snapshot_take(t, s);
    *scale = scaling ? t->scaler.scale : 1.0f;
    if (rc == TB_OK && scaling && t->scaler.skipped_steps)
        rc = TB_FAIL(TB_ERR_INTERNAL, "%ld steps skipped at scale %g with nothing overflowing",
                     t->scaler.skipped_steps, (double)t->scaler.scale);
    tb_trainer_destroy(t);
    return rc;
}

/* Largest |a - b| / max |b| over the whole buffer. */
static double max_rel(const float *a, const float *b, size_t n)
{
    double diff = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        mag = fmax(mag, fabs((double)b[i]));
    }
    return diff / fmax(mag, 1e-30);
}

/* Scaling by 65536 and unscaling: bitwise the unscaled training. */
static int check_exact(tb_backend *be, int optimizer)
{
    snapshot plain = {0}, scaled = {0};
    float scale;
    int rc;
    TB_TRY_GOTO(rc, run_steps(be, optimizer, 0, &plain, &scale), out_free);
    TB_TRY_GOTO(rc, run_steps(be, optimizer, 1, &scaled, &scale), out_free);
    size_t nw = plain.w_bytes / sizeof(float), ns = plain.state_bytes / sizeof(float);
    char what[200];
    snprintf(what, sizeof what, "%s, %d steps at scale %g: parameters bitwise equal to "
             "unscaled (max rel %.1e)", tb_optimizer_names[optimizer], EXACT_STEPS,
             (double)scale, max_rel(scaled.w, plain.w, nw));
    CHECK(scale == 65536.0f && !memcmp(plain.w, scaled.w, plain.w_bytes), "%s", what);
    snprintf(what, sizeof what, "%s: optimizer state bitwise equal (max rel %.1e)",
             tb_optimizer_names[optimizer], max_rel(scaled.state, plain.state, ns));
    CHECK(!memcmp(plain.state, scaled.state, plain.state_bytes), "%s", what);

out_free:
    snapshot_free(&plain);
    snapshot_free(&scaled);
    return rc;
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    TB_TRY(check_overflow_skip(be));
    TB_TRY(check_growth(be));
    TB_TRY(check_exact(be, TB_OPT_SGD));
    return check_exact(be, TB_OPT_ADAMW);
}

int main(void)
{
    return tb_test_main_cpu(0, NULL, run, NULL);
}
