/*
 * models_test.c - ResNet-50 and GPT-2 through the trainer (issue 13), small
 * enough for the CPU: what config, data, loader and trainer add to the
 * models the nn tests check.
 *   gpt2 (1 layer, context 16, vocabulary 64, batch 4, synthetic tokens):
 *     - the data is the token stream the flags ask for, the model's input a
 *       (4, 1, 16, 1) TB_I32 tensor holding the loader's ids bit for bit and
 *       the labels the (4, 16) next tokens; the first loss is about ln 64;
 *     - 60 AdamW steps learn the chain: the loss falls below 3 (from 4.16)
 *       and next-token accuracy over every test position (16 x 16
 *       predictions) passes 20% (chance 1.6%; the chain allows ~50%);
 *     - 2 process workers give the 0-worker run's loss and parameters bit
 *       for bit after 5 steps;
 *     - image data handed to a gpt2 trainer is refused, naming the data.
 *   resnet50 (64 x 64 images, batch 2, its SGD recipe lr): --conv-bias=auto
 *     builds torchvision's 25,557,032 parameters, the batch is (2, 3, 64, 64)
 *     fp32 made on the fly, two steps give a finite loss near ln 1000, and
 *     the evaluation judges every test sample once.
 * Run: bazel test //lib/train:models_test
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/nn_testing.h"
#include "lib/train/config.h"
#include "lib/train/train.h"

static void gpt2_config(tb_config *c)
{
    tb_config_defaults(c);
    c->device = "cpu";
    c->model = TB_MODEL_GPT2;
    c->dataset = TB_DATA_SYNTHETIC;
    c->context = 16;
    c->layers = 1;
    c->vocab = 64;
    c->batch_size = 4;
    c->data_limit = 4096;
    c->test_limit = 16;
    c->optimizer = TB_OPT_ADAMW;
    c->seed = 3;
}

/* One micro-batch: what the model read is the loader's batch, as bytes. */
static int check_gpt2_batch(tb_trainer *t)
{
    tb_batch b;
    float loss;
    TB_TRY(tb_trainer_next_batch(t, &b));
    TB_TRY(tb_train_micro_batch(t, &b, 1.0f, &loss));
    const tb_tensor *x = t->x_in;
    CHECK(b.tokens && b.seq == 16 && b.size == 4, "a token batch: seq %d size %d", b.seq, b.size);
    CHECK(x->dtype == TB_I32 && x->n == 4 && x->c == 1 && x->h == 16 && x->w == 1,
          "input tensor dtype %d (%d, %d, %d, %d), want TB_I32 (4, 1, 16, 1)", (int)x->dtype,
          x->n, x->c, x->h, x->w);
    CHECK(memcmp(x->data, b.tokens, 4 * 16 * sizeof(int32_t)) == 0,
          "the device batch holds the loader's ids bit for bit");
    CHECK(memcmp(t->labels_in, b.labels, 4 * 16 * sizeof(int32_t)) == 0,
          "the device labels are the loader's (4, 16) next tokens");
    int shifted = 1;
    for (int k = 0; k < 4; k++)
        shifted &= memcmp(b.tokens + k * 16 + 1, b.labels + k * 16, 15 * sizeof(int32_t)) == 0;
    CHECK(shifted, "labels are the inputs shifted by one");
    CHECK(fabsf(loss - logf(64.0f)) < 0.5f, "first loss %.4f, want about ln 64 = %.4f", loss,
          logf(64.0f));
    return TB_OK;
}

static int check_gpt2_learns(tb_backend *be)
{
    tb_config c;
    gpt2_config(&c);
    c.max_steps = 60;
    c.lr = 1e-3;
    TB_TRY(tb_config_validate(&c));
    CHECK(tb_config_gelu_approx(&c) == TB_GELU_TANH, "gpt2's own GELU is tanh");
    tb_trainer *t;
    TB_TRY(tb_trainer_create(&c, be, &t));
    int rc;
    const tb_dataset *ds = t->train_ds;
    CHECK(ds->kind == TB_SAMPLES_TOKENS && ds->seq == 16 && ds->vocab == 64 && ds->n == 4096 &&
              ds->synthetic && t->test_ds->n == 16,
          "data: %s, %d samples", ds->name, ds->n);
    CHECK(t->model->classes == 64 && t->model->labels_per_sample == 16, "model: %d classes, "
          "%d labels per sample", t->model->classes, t->model->labels_per_sample);
    TB_TRY_GOTO(rc, check_gpt2_batch(t), out_destroy);
    tb_trainer_destroy(t);

    tb_epoch_stats es;
    tb_eval_stats ev;
    TB_TRY(tb_trainer_one_epoch(&c, be, NULL, NULL, &es, &ev));
    printf("  gpt2 60 steps: last loss %.4f, next-token acc %.1f%% over %ld predictions, "
           "%.0f tokens/s\n", es.last_loss, 100 * ev.accuracy, ev.predictions, es.tokens_per_s);
    CHECK(es.steps == 60 && es.last_loss < 3.0f, "loss %.4f after %ld steps, want < 3",
          es.last_loss, es.steps);
    CHECK(ev.images == 16 && ev.predictions == 16 * 16, "evaluation: %ld samples, %ld "
          "predictions, want 16 and 256", ev.images, ev.predictions);
    CHECK(ev.accuracy > 0.2, "next-token accuracy %.3f, want > 0.2", ev.accuracy);
    CHECK(es.tokens_per_s > 0 && fabs(es.tokens_per_s - 16 * es.images_per_s) < 1e-6 *
                                                                   es.tokens_per_s,
          "tokens/s = 16 x sequences/s");
    return TB_OK;

out_destroy:
    tb_trainer_destroy(t);
    return rc;
}

/* Loss and parameters after 5 steps. */
static int gpt2_steps(tb_backend *be, tb_config *c, float *loss, float **params, size_t *n)
{
    TB_TRY(tb_config_validate(c));
    tb_trainer *t;
    TB_TRY(tb_trainer_create(c, be, &t));
    tb_epoch_stats es;
    int rc;
    TB_TRY_GOTO(rc, tb_train_epoch(t, 0, &es), out_destroy);
    *loss = es.last_loss;
    *n = t->model->numel;
    *params = malloc(*n * sizeof(float));
    if (!*params) {
        rc = TB_FAIL(TB_ERR_NOMEM, "params copy");
        goto out_destroy;
    }
    rc = be->copy_d2h(be, *params, t->model->flat_w, *n * sizeof(float), NULL);

out_destroy:
    tb_trainer_destroy(t);
    return rc;
}

static int check_gpt2_workers(tb_backend *be)
{
    tb_config c;
    gpt2_config(&c);
    c.max_steps = 5;
    float l0, l2;
    float *p0 = NULL, *p2 = NULL;
    size_t n0 = 0, n2 = 0;
    TB_TRY(gpt2_steps(be, &c, &l0, &p0, &n0));
    gpt2_config(&c);
    c.max_steps = 5;
    c.workers = 2;
    c.worker_mode = TB_WORKERS_PROCESSES;
    int rc = gpt2_steps(be, &c, &l2, &p2, &n2);
    if (rc == TB_OK)
        CHECK(n0 == n2 && l0 == l2 && memcmp(p0, p2, n0 * sizeof(float)) == 0,
              "2 process workers: loss %.9g vs %.9g, parameters bitwise equal", l2, l0);
    free(p0);
    free(p2);
    return rc;
}

static int check_gpt2_refuses_images(tb_backend *be)
{
    tb_config c;
    gpt2_config(&c);
    TB_TRY(tb_config_validate(&c));
    tb_synthetic_cfg sc = {.n = 8, .c = 1, .h = 16, .w = 4, .seed = 1, .noise = -1};
    tb_dataset *img;
    TB_TRY(tb_dataset_synthetic_create(&sc, &img));
    tb_trainer *t = NULL;
    int rc = tb_trainer_create_with_data(&c, be, img, img, &t);
    CHECK(rc == TB_ERR_DATA && !t && strstr(tb_error_message(), "--context=16") &&
              strstr(tb_error_message(), img->name),
          "gpt2 on images: rc %d, %s", rc, tb_error_message());
    tb_error_clear();
    tb_dataset_free(img);
    return TB_OK;
}

static int check_resnet50(tb_backend *be)
{
    tb_config c;
    tb_config_defaults(&c);
    c.device = "cpu";
    c.model = TB_MODEL_RESNET50;
    c.dataset = TB_DATA_SYNTHETIC;
    c.image_size = 64;
    c.batch_size = 2;
    c.max_steps = 2;
    c.test_limit = 6;
    TB_TRY(tb_config_validate(&c)); /* its SGD recipe: lr 0.1 x 2 / 256 */
    tb_trainer *t;
    TB_TRY(tb_trainer_create(&c, be, &t));
    int rc;
    const tb_dataset *ds = t->train_ds;
    CHECK(ds->make && !ds->images && ds->c == 3 && ds->h == 64 && ds->num_classes == 1000 &&
              ds->synthetic, "data %s", ds->name);
    CHECK(t->model->numel == 25557032, "resnet50 with --conv-bias=auto: %zu parameters, "
          "torchvision's 25,557,032", t->model->numel);
    tb_epoch_stats es;
    tb_eval_stats ev;
    TB_TRY_GOTO(rc, tb_train_epoch(t, 0, &es), out_destroy);
    TB_TRY_GOTO(rc, tb_trainer_evaluate(t, &ev), out_destroy);
    const tb_tensor *x = t->x_in;
    CHECK(x->dtype == TB_F32 && x->c == 3 && x->h == 64 && x->w == 64, "input (%d, %d, %d)",
          x->c, x->h, x->w);
    printf("  resnet50 64x64: 2 steps, last loss %.4f, %.2f images/s\n", es.last_loss,
           es.images_per_s);
    CHECK(es.steps == 2 && isfinite(es.last_loss) && fabsf(es.last_loss - logf(1000.0f)) < 3.0f,
          "loss %.4f after %ld steps (ln 1000 = 6.91)", es.last_loss, es.steps);
    CHECK(ev.images == 6 && ev.predictions == 6 && es.tokens_per_s == 0, "evaluation: %ld "
          "samples, %ld predictions", ev.images, ev.predictions);

out_destroy:
    tb_trainer_destroy(t);
    return rc;
}

static int run(tb_backend *be, void *arg)
{
    (void)arg;
    TB_TRY(check_gpt2_learns(be));
    TB_TRY(check_gpt2_workers(be));
    TB_TRY(check_gpt2_refuses_images(be));
    return check_resnet50(be);
}

int main(void)
{
    return tb_test_main_cpu(2, "models_test: resnet50 and gpt2 through the trainer", run, NULL);
}
