/*
 * act_mem_test.c - activation memory toggles on the CPU backend, on small
 * synthetic data, for the small CNN and the wide CNN (dropout, global
 * average pooling):
 *   --eval-no-grad    the same logits (bitwise), accuracy and loss as an
 *                     evaluation that keeps activations; a lower peak
 *                     (be->mem_stats) during evaluation; training after it
 *                     gives bitwise the same weights as without it; the
 *                     activations stay freed between evaluations in a row
 *                     (less memory held between them than after training),
 *                     a park after them gives the no_grad scratch back too,
 *                     and training straight after them is bitwise the same
 *   --checkpointing   gradients and weights after 3 steps bitwise equal to
 *                     no checkpointing (the recompute runs the same kernels
 *                     on the same inputs; BN's running statistics are not
 *                     updated twice: evaluation is equal too); lower memory
 * It prints the small CNN's memory at batch 256 with and without
 * checkpointing (what a user weighing checkpointing wants to know).
 *
 * Run: bazel test //lib/train:act_mem_test
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/train/train.h"
#include "lib/core/testing.h"

typedef struct data_pair {
    tb_dataset *train, *test;
    int model, batch;
} data_pair;

static void base_config(tb_config *c, const data_pair *d)
{
    tb_config_defaults(c);
    c->device = "cpu";
    c->dataset = TB_DATA_SYNTHETIC;
    c->model = d->model;
    c->batch_size = d->batch;
    c->max_steps = 3;
    c->lr = 0.01;
}

static int make(tb_config *c, tb_backend *be, const data_pair *d, tb_trainer **t)
{
    TB_TRY(tb_config_validate(c));
    return tb_trainer_create_with_data(c, be, d->train, d->test, t);
}

/* Host copy of n floats of device memory (the CPU backend's is host memory). */
static float *host_copy(tb_backend *be, const float *dev, size_t n)
{
    float *h = malloc(n * sizeof *h);
    if (h && be->copy_d2h(be, h, dev, n * sizeof *h, NULL) != TB_OK) {
        free(h);
        return NULL;
    }
    return h;
}

/* Whether trainers a and b hold bitwise the same weights. */
static int same_weights(tb_backend *be, const tb_trainer *a, const tb_trainer *b)
{
    float *wa = host_copy(be, a->model->flat_w, a->model->numel);
    float *wb = host_copy(be, b->model->flat_w, b->model->numel);
    int same = wa && wb && a->model->numel == b->model->numel &&
               !memcmp(wa, wb, a->model->numel * sizeof *wa);
    free(wa);
    free(wb);
    return same;
}

/* Logits of the trainer's current device batch, evaluation mode. */
static float *eval_logits(tb_trainer *t, int no_grad)
{
    const tb_tensor *y;
    tb_model_train_mode(t->model, 0);
    if (tb_model_set_no_grad(t->model, no_grad) != TB_OK ||
        tb_model_forward(t->model, &t->x, &y) != TB_OK)
        return NULL;
    float *h = host_copy(t->be, y->data, tb_tensor_numel(y));
    tb_model_set_no_grad(t->model, 0);
    tb_model_train_mode(t->model, 1);
    return h;
}

static void test_no_grad(tb_backend *be, const data_pair *d, const char *name)
{
    tb_config c;
    base_config(&c, d);
    tb_trainer *a, *b;
    tb_epoch_stats es;
    tb_eval_stats ev0, ev1, ev2;
    char what[160];
    if (make(&c, be, d, &a) != TB_OK || make(&c, be, d, &b) != TB_OK ||
        tb_train_epoch(a, 0, &es) != TB_OK || tb_train_epoch(b, 0, &es) != TB_OK ||
        tb_trainer_evaluate(a, &ev0) != TB_OK) {
        CHECK_WHAT(0, tb_error_message());
        return;
    }
    a->cfg.eval_no_grad = 1;
    int rc = tb_trainer_evaluate(a, &ev1);
    a->cfg.eval_no_grad = 0;
    rc = rc == TB_OK ? tb_trainer_evaluate(b, &ev2) : rc;
    snprintf(what, sizeof what, "%s no_grad eval: accuracy and loss bitwise equal", name);
    CHECK_WHAT(rc == TB_OK && ev0.accuracy == ev1.accuracy && ev0.mean_loss == ev1.mean_loss &&
              ev0.correct == ev1.correct && ev2.mean_loss == ev0.mean_loss, what);
    printf("    eval peak (two trainers alive): %.2f MiB keeping activations, %.2f MiB under "
           "no_grad\n",
           ev0.mem_peak / 1048576.0, ev1.mem_peak / 1048576.0);
    snprintf(what, sizeof what, "%s no_grad eval: lower peak memory", name);
    CHECK_WHAT(ev1.mem_peak < ev0.mem_peak, what);

    float *l0 = eval_logits(a, 0), *l1 = eval_logits(a, 1);
    size_t n = (size_t)a->x.n * a->model->classes;
    snprintf(what, sizeof what, "%s no_grad forward: logits bitwise equal (%zu values)", name, n);
    CHECK_WHAT(l0 && l1 && !memcmp(l0, l1, n * sizeof *l0), what);
    free(l0);
    free(l1);

    /* training goes on on the re-allocated activations, unchanged */
    rc = tb_train_epoch(a, 1, &es);
    rc = rc == TB_OK ? tb_train_epoch(b, 1, &es) : rc;
    snprintf(what, sizeof what, "%s training after a no_grad eval: weights bitwise equal", name);
    CHECK_WHAT(rc == TB_OK && same_weights(be, a, b), what);
    tb_trainer_destroy(a);
    tb_trainer_destroy(b);
    tb_error_clear();
}

/* --eval-no-grad's evaluations in a row (bench:no_grad_eval times them so):
 * the training activations stay freed between them, a park after them gives
 * the no_grad scratch back too, and training straight after them (its first
 * forward allocates the activations again) gives bitwise the weights of a
 * trainer whose evaluations kept them. */
static void test_no_grad_held(tb_backend *be, const data_pair *d, const char *name)
{
    tb_config ca, cb;
    base_config(&ca, d);
    base_config(&cb, d);
    ca.eval_no_grad = 1;
    tb_trainer *a, *b;
    tb_epoch_stats es;
    tb_eval_stats ev;
    char what[200];
    size_t trained = 0, between = 0, parked = 0;
    if (make(&ca, be, d, &a) != TB_OK || make(&cb, be, d, &b) != TB_OK) {
        CHECK_WHAT(0, tb_error_message());
        return;
    }
    int rc = tb_train_epoch(a, 0, &es);
    rc = rc == TB_OK ? tb_train_epoch(b, 0, &es) : rc;
    rc = rc == TB_OK ? be->mem_stats(be, &trained, NULL) : rc;
    rc = rc == TB_OK ? tb_trainer_evaluate(a, &ev) : rc;
    rc = rc == TB_OK ? be->mem_stats(be, &between, NULL) : rc;
    rc = rc == TB_OK ? tb_trainer_evaluate(a, &ev) : rc;
    snprintf(what, sizeof what, "%s no_grad evaluations in a row: less memory held between "
             "them than after training (%zu -> %zu bytes)", name, trained, between);
    CHECK_WHAT(rc == TB_OK && between < trained, what);
    rc = rc == TB_OK ? tb_trainer_park(a) : rc;
    rc = rc == TB_OK ? be->mem_stats(be, &parked, NULL) : rc;
    snprintf(what, sizeof what, "%s parked after a no_grad evaluation: its scratch given back "
             "(%zu -> %zu bytes)", name, between, parked);
    CHECK_WHAT(rc == TB_OK && parked < between, what);
    rc = rc == TB_OK ? tb_trainer_unpark(a) : rc;
    rc = rc == TB_OK ? tb_trainer_evaluate(a, &ev) : rc;
    for (int k = 0; k < 3 && rc == TB_OK; k++)
        rc = tb_trainer_evaluate(b, &ev);
    rc = rc == TB_OK ? tb_train_epoch(a, 1, &es) : rc;
    rc = rc == TB_OK ? tb_train_epoch(b, 1, &es) : rc;
    snprintf(what, sizeof what, "%s training straight after no_grad evaluations: weights "
             "bitwise equal", name);
    CHECK_WHAT(rc == TB_OK && same_weights(be, a, b), what);
    tb_trainer_destroy(a);
    tb_trainer_destroy(b);
    tb_error_clear();
}

/* Parking (tb_trainer_park): a trainer that gave its activations back
 * between epochs trains on as one that never did, to the bit; parked, it
 * holds less memory and refuses to step; unparked twice, or parked twice,
 * nothing changes. With checkpointing too (its scratch stays). */
static void test_park(tb_backend *be, const data_pair *d, const char *name, int ckpt)
{
    tb_config c;
    base_config(&c, d);
    c.checkpointing = ckpt;
    tb_trainer *a, *b;
    tb_epoch_stats es;
    char what[160];
    float loss;
    size_t before = 0, parked = 0, after = 0;
    if (make(&c, be, d, &a) != TB_OK || make(&c, be, d, &b) != TB_OK) {
        CHECK_WHAT(0, tb_error_message());
        return;
    }
    int rc = tb_train_epoch(a, 0, &es);
    rc = rc == TB_OK ? tb_train_epoch(b, 0, &es) : rc;
    rc = rc == TB_OK ? be->mem_stats(be, &before, NULL) : rc;
    rc = rc == TB_OK ? tb_trainer_park(a) : rc;
    rc = rc == TB_OK ? tb_trainer_park(a) : rc;
    rc = rc == TB_OK ? be->mem_stats(be, &parked, NULL) : rc;
    snprintf(what, sizeof what, "%s%s parked: less memory held (%zu -> %zu bytes)", name,
             ckpt ? " checkpointing" : "", before, parked);
    CHECK_WHAT(rc == TB_OK && parked < before, what);
    snprintf(what, sizeof what, "%s%s parked: a step is refused", name, ckpt ? " checkpointing" : "");
    CHECK_WHAT(rc == TB_OK && tb_trainer_step(a, &loss) == TB_ERR_INVALID, what);
    tb_error_clear();
    rc = rc == TB_OK ? tb_trainer_unpark(a) : rc;
    rc = rc == TB_OK ? tb_trainer_unpark(a) : rc;
    rc = rc == TB_OK ? be->mem_stats(be, &after, NULL) : rc;
    snprintf(what, sizeof what, "%s%s unparked: the memory back (%zu bytes)", name,
             ckpt ? " checkpointing" : "", after);
    CHECK_WHAT(rc == TB_OK && after == before, what);
    rc = rc == TB_OK ? tb_train_epoch(a, 1, &es) : rc;
    rc = rc == TB_OK ? tb_train_epoch(b, 1, &es) : rc;
    snprintf(what, sizeof what, "%s%s training after a park and an unpark: weights bitwise equal",
             name, ckpt ? " checkpointing" : "");
    CHECK_WHAT(rc == TB_OK && same_weights(be, a, b), what);
    /* a parked trainer is destroyed whole (the sanitizers' run sees a leak) */
    CHECK_WHAT(tb_trainer_park(b) == TB_OK, "parked before its destruction");
    tb_trainer_destroy(a);
    tb_trainer_destroy(b);
    tb_error_clear();
}

typedef struct ckpt_run {
    float *w, *g;         /* host copies after the steps */
    size_t numel;
    size_t in_use, peak;  /* bytes after creation; peak over creation and steps */
    tb_eval_stats ev;
} ckpt_run;

static int ckpt_train(tb_backend *be, const data_pair *d, int batch, int ckpt, int eval,
                      ckpt_run *r)
{
    tb_config c;
    tb_trainer *t;
    tb_epoch_stats es;
    memset(r, 0, sizeof *r);
    base_config(&c, d);
    c.batch_size = batch;
    c.checkpointing = ckpt;
    size_t base;
    TB_TRY(be->mem_stats(be, &base, NULL));
    TB_TRY(be->mem_reset_peak(be));
    TB_TRY(make(&c, be, d, &t));
    int rc = be->mem_stats(be, &r->in_use, NULL);
    rc = rc == TB_OK ? tb_train_epoch(t, 0, &es) : rc;
    rc = rc == TB_OK ? be->mem_stats(be, NULL, &r->peak) : rc;
    if (rc == TB_OK && eval)
        rc = tb_trainer_evaluate(t, &r->ev);
    r->in_use -= base;
    r->peak -= base;
    r->numel = t->model->numel;
    r->w = host_copy(be, t->model->flat_w, r->numel);
    r->g = host_copy(be, t->model->flat_g, r->numel);
    tb_trainer_destroy(t);
    return rc != TB_OK ? rc : r->w && r->g ? TB_OK : TB_FAIL(TB_ERR_NOMEM, "host copies");
}

static void test_checkpointing(tb_backend *be, const data_pair *d, const char *name)
{
    ckpt_run off, on;
    char what[160];
    int rc = ckpt_train(be, d, d->batch, 0, 1, &off);
    rc = rc == TB_OK ? ckpt_train(be, d, d->batch, 1, 1, &on) : rc;
    if (rc != TB_OK)
        CHECK_WHAT(0, tb_error_message());
    size_t bytes = off.numel * sizeof(float);
    snprintf(what, sizeof what, "%s checkpointing: gradients of the 3rd step bitwise equal", name);
    CHECK_WHAT(rc == TB_OK && !memcmp(off.g, on.g, bytes), what);
    snprintf(what, sizeof what, "%s checkpointing: weights after 3 steps bitwise equal", name);
    CHECK_WHAT(rc == TB_OK && !memcmp(off.w, on.w, bytes), what);
    snprintf(what, sizeof what, "%s checkpointing: evaluation (running stats) equal", name);
    CHECK_WHAT(rc == TB_OK && off.ev.mean_loss == on.ev.mean_loss, what);
    printf("    batch %d: %.2f -> %.2f MiB allocated, peak %.2f -> %.2f MiB\n",
           d->batch, off.in_use / 1048576.0, on.in_use / 1048576.0, off.peak / 1048576.0,
           on.peak / 1048576.0);
    snprintf(what, sizeof what, "%s checkpointing: lower peak memory", name);
    CHECK_WHAT(rc == TB_OK && on.peak < off.peak, what);
    free(off.w), free(off.g), free(on.w), free(on.g);
    tb_error_clear();
}

/* Memory with and without checkpointing: the small CNN at batch 256, one step. */
static void report_batch256(tb_backend *be, const data_pair *d)
{
    ckpt_run off, on;
    int rc = ckpt_train(be, d, 256, 0, 0, &off);
    rc = rc == TB_OK ? ckpt_train(be, d, 256, 1, 0, &on) : rc;
    CHECK_WHAT(rc == TB_OK && on.peak < off.peak, "small_cnn batch 256: checkpointing lowers the peak");
    printf("    small_cnn batch 256 training peak: %.2f MiB without, %.2f MiB with "
           "checkpointing (saves %.2f MiB, %.1f%%)\n", off.peak / 1048576.0,
           on.peak / 1048576.0, ((double)off.peak - (double)on.peak) / 1048576.0,
           100.0 * ((double)off.peak - (double)on.peak) / (double)off.peak);
    free(off.w), free(off.g), free(on.w), free(on.g);
    tb_error_clear();
}

static int make_data(int model, int batch, int c, int hw, int n_train, data_pair *d)
{
    d->batch = batch;
    tb_synthetic_cfg sc = {.n = n_train, .c = c, .h = hw, .w = hw, .num_classes = 10,
                           .seed = 1, .noise = -1, .split = TB_SPLIT_TRAIN};
    d->model = model;
    TB_TRY(tb_dataset_synthetic_create(&sc, &d->train));
    sc.n = 2 * batch;
    sc.split = TB_SPLIT_TEST;
    return tb_dataset_synthetic_create(&sc, &d->test);
}

int main(void)
{
    tb_test_verbose = 1;
    tb_backend *be;
    data_pair small = {0}, wide = {0}, big = {0};
    if (tb_backend_open(TB_DEVICE_CPU, 0, 2, &be) != TB_OK ||
        make_data(TB_MODEL_SMALL_CNN, 32, 1, 28, 128, &small) != TB_OK ||
        make_data(TB_MODEL_WIDE_CNN, 8, 3, 32, 32, &wide) != TB_OK ||
        make_data(TB_MODEL_SMALL_CNN, 256, 1, 28, 256, &big) != TB_OK)
        return tb_error_print(stderr), 1;
    test_no_grad(be, &small, "small_cnn");
    test_no_grad(be, &wide, "wide_cnn");
    test_no_grad_held(be, &small, "small_cnn");
    test_no_grad_held(be, &wide, "wide_cnn");
    test_park(be, &small, "small_cnn", 0);
    test_park(be, &wide, "wide_cnn", 0);
    test_park(be, &wide, "wide_cnn", 1);
    test_checkpointing(be, &small, "small_cnn");
    test_checkpointing(be, &wide, "wide_cnn");
    report_batch256(be, &big);
    data_pair *all[] = {&small, &wide, &big};
    for (int i = 0; i < 3; i++) {
        tb_dataset_free(all[i]->train);
        tb_dataset_free(all[i]->test);
    }
    tb_backend_close(be);
    return tb_test_exit(TB_OK);
}
