/*
 * train_test.c - the training loop's toggles do not change what is learned.
 *
 * On a Fashion-MNIST subset (2048 train / 1000 test samples), small CNN,
 * batch 32, 50 optimizer steps from the same seed:
 *   bitwise equal to the baseline (loss at step 50 and every parameter):
 *     more workers (threads and processes), deeper prefetch, persistent
 *     workers, set_to_none vs memset zeroing. None of these touches the
 *     arithmetic: the loader's batches are the same bytes whatever the
 *     workers, and "to none" writes dw where memset adds it to +0.0.
 *   within 1e-5 relative: fused GELU, fused optimizer (same math, maybe a
 *     different rounding order; today both are bitwise equal too).
 *   conv autotuner within 5e-2 relative: a different algorithm sums the
 *     convolution in a different order (~1e-7 relative per op), and 50 steps
 *     of SGD with momentum amplify such differences (training is chaotic):
 *     measured 1.1e-2 here (lr 0.01 at batch 32; 4.5e-2 at lr 0.05, which is
 *     why the test uses the scaled-down lr). What the tolerance must catch
 *     is a wrong algorithm, which gives O(1) differences or NaN. The test
 *     also checks that another seed lands farther than the tolerance
 *     (measured 0.68), so the tolerance separates.
 * Also: the config's defaults are PyTorch's; bad flag values are refused;
 * gradient accumulation trains; LARS gets its hyper-parameters and trains.
 *
 * With --full (target //lib/train:train_epoch_test, tagged manual: it takes a few
 * minutes) it trains one full epoch on all of Fashion-MNIST, default
 * settings and again with every toggle on, and requires >= 85% test accuracy.
 *
 * Run: bazel test //lib/train:train_test
 *      bazel test //lib/train:train_epoch_test   (manual)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/train/config.h"
#include "lib/train/loader.h"
#include "lib/train/train.h"
#include "lib/nn/nn_testing.h"

#define STEPS 50
#define TOL_FUSED 1e-5
#define TOL_AUTOTUNE 5e-2

typedef struct run_result {
    float loss;             /* mean loss of step STEPS's batch */
    float *params;          /* host copy of every parameter */
    size_t numel;
} run_result;

static void base_config(tb_config *c)
{
    tb_config_defaults(c);
    c->device = "cpu";
    c->batch_size = 32;
    c->max_steps = STEPS;
    c->grads_to_none = 0;   /* the baseline is the technique off */
    c->seed = 5;
    c->lr = 0.01;           /* the recipe's 0.05 at 256, scaled down for batch 32 */
}

static int train_steps(tb_backend *be, tb_config *cfg, const tb_dataset *train,
                       const tb_dataset *test, run_result *r)
{
    TB_TRY(tb_config_validate(cfg));
    tb_trainer *t;
    TB_TRY(tb_trainer_create_with_data(cfg, be, train, test, &t));
    tb_epoch_stats es;
    int rc;
    TB_TRY_GOTO(rc, tb_train_epoch(t, 0, &es), out_destroy);
    if (es.steps != STEPS) {
        rc = TB_FAIL(TB_ERR_INTERNAL, "ran %ld steps, wanted %d", es.steps, STEPS);
        goto out_destroy;
    }
    r->loss = es.last_loss;
    r->numel = t->model->numel;
    r->params = malloc(r->numel * sizeof(float));
    if (!r->params) {
        rc = TB_FAIL(TB_ERR_NOMEM, "params copy");
        goto out_destroy;
    }
    TB_TRY_GOTO(rc, be->copy_d2h(be, r->params, t->model->flat_w, r->numel * sizeof(float), NULL),
                out_destroy);

out_destroy:
    tb_trainer_destroy(t);
    return rc;
}

static double rel_diff(float a, float b) { return fabs((double)a - b) / fmax(fabs((double)b), 1e-30); }

static void compare_bitwise(const char *name, const run_result *base, const run_result *r)
{
    char what[128];
    int same = memcmp(&base->loss, &r->loss, sizeof(float)) == 0 &&
               memcmp(base->params, r->params, base->numel * sizeof(float)) == 0;
    snprintf(what, sizeof what, "%s: loss %.9g, bitwise equal loss and params", name, r->loss);
    CHECK_WHAT(same, what);
}

static void compare_tol(const char *name, const run_result *base, const run_result *r, double tol)
{
    char what[128];
    double d = rel_diff(r->loss, base->loss);
    snprintf(what, sizeof what, "%s: loss %.9g, rel diff %.2e <= %.0e", name, r->loss, d, tol);
    CHECK_WHAT(d <= tol, what);
}

typedef struct variant {
    const char *name;
    void (*set)(tb_config *c);
    int bitwise;            /* else: tolerance below */
    double tol;
} variant;

static void v_workers2(tb_config *c) { c->workers = 2; }
static void v_workers3_prefetch4(tb_config *c) { c->workers = 3; c->prefetch_factor = 4; }
static void v_persistent(tb_config *c) { c->workers = 2; c->persistent_workers = 1; }
static void v_processes(tb_config *c) { c->workers = 2; c->worker_mode = TB_WORKERS_PROCESSES; }
static void v_to_none(tb_config *c) { c->grads_to_none = 1; }
static void v_flush(tb_config *c) { c->flush_denormal = 1; }
static void v_fused_gelu(tb_config *c) { c->fused_gelu = 1; }
static void v_fused_opt(tb_config *c) { c->fused_optimizer = 1; }
static void v_autotune(tb_config *c) { c->conv_autotune = 1; }
/* oneDNN's bf16 fpmath: f32 on CPUs without AVX512_BF16 (this VM, loss
 * bitwise equal); on one with it, products rounded to bf16 inputs, well
 * inside 2% after 50 steps. */
static void v_tf32(tb_config *c) { c->tf32 = 1; }

static const variant variants[] = {
    {"workers=2", v_workers2, 1, 0},
    {"workers=3 prefetch_factor=4", v_workers3_prefetch4, 1, 0},
    {"workers=2 persistent_workers", v_persistent, 1, 0},
    {"workers=2 worker_mode=processes", v_processes, 1, 0},
    {"grads_to_none", v_to_none, 1, 0},
    {"flush_denormal", v_flush, 0, TOL_FUSED},
    {"fused_gelu", v_fused_gelu, 0, TOL_FUSED},
    {"fused_optimizer (sgd)", v_fused_opt, 0, TOL_FUSED},
    {"conv_autotune", v_autotune, 0, TOL_AUTOTUNE},
    {"tf32", v_tf32, 0, 2e-2},
};

static int run_variant(tb_backend *be, const tb_dataset *train, const tb_dataset *test,
                       const tb_config *base_cfg, const run_result *base, const variant *v)
{
    tb_config c = *base_cfg;
    v->set(&c);
    run_result r = {0};
    TB_TRY(train_steps(be, &c, train, test, &r));
    if (v->bitwise)
        compare_bitwise(v->name, base, &r);
    else
        compare_tol(v->name, base, &r, v->tol);
    free(r.params);
    return TB_OK;
}

static int check_toggles(tb_backend *be, const tb_dataset *train, const tb_dataset *test)
{
    tb_config c;
    base_config(&c);
    run_result base = {0}, other = {0};
    TB_TRY(train_steps(be, &c, train, test, &base));
    printf("  baseline (sgd, memset zero_grad, 0 workers): loss at step %d = %.9g\n", STEPS,
           base.loss);
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        TB_TRY(run_variant(be, train, test, &c, &base, &variants[i]));
    tb_config s = c;
    s.seed = c.seed + 1;
    TB_TRY(train_steps(be, &s, train, test, &other));
    printf("  (another seed lands at rel diff %.2e: the autotuner tolerance separates)\n",
           rel_diff(other.loss, base.loss));
    CHECK_WHAT(rel_diff(other.loss, base.loss) > TOL_AUTOTUNE, "another seed differs by more than the autotuner tolerance");
    free(base.params);
    free(other.params);
    return TB_OK;
}

static int check_adamw(tb_backend *be, const tb_dataset *train, const tb_dataset *test)
{
    tb_config c;
    base_config(&c);
    c.optimizer = TB_OPT_ADAMW;
    run_result base = {0};
    TB_TRY(train_steps(be, &c, train, test, &base));
    printf("  baseline adamw: loss at step %d = %.9g\n", STEPS, base.loss);
    variant v = {"fused_optimizer (adamw)", v_fused_opt, 0, TOL_FUSED};
    TB_TRY(run_variant(be, train, test, &c, &base, &v));
    free(base.params);
    return TB_OK;
}

/* accum_steps=2 at batch 16 trains (loss falls) and takes 2 batches a step. */
static int check_accumulation(tb_backend *be, const tb_dataset *train, const tb_dataset *test)
{
    tb_config c;
    base_config(&c);
    c.batch_size = 16;
    c.accum_steps = 2;
    c.warmup_steps = 10;
    c.max_steps = 0;
    tb_epoch_stats es;
    tb_eval_stats ev;
    TB_TRY(tb_trainer_one_epoch(&c, be, train, test, &es, &ev));
    char what[128];
    snprintf(what, sizeof what, "accum_steps=2: %ld steps for %ld images, test acc %.1f%%",
             es.steps, es.images, 100 * ev.accuracy);
    CHECK_WHAT(es.steps == (train->n + 31) / 32 && ev.accuracy > 0.3, what);
    return TB_OK;
}

/* LARS through the trainer: every hyper-parameter of the config reaches the
 * optimizer, and it learns. The trust coefficient was once left out of the
 * trainer's tb_opt_hparams (0): every tensor with a nonzero norm got trust 0
 * and never moved, and LARS stayed near chance (7.7% here) at any lr.
 * Measured after the fix: 76.9% (lr 1, trust 0.002, batch 32, 64 steps). */
static int check_lars(tb_backend *be, const tb_dataset *train, const tb_dataset *test)
{
    tb_config c;
    base_config(&c);
    c.optimizer = TB_OPT_LARS;
    c.lr = 1.0;
    c.trust_coef = 0.002;   /* not the default, so a default cannot pass for it */
    c.warmup_steps = 10;
    c.max_steps = 0;
    TB_TRY(tb_config_validate(&c));
    tb_trainer *t;
    TB_TRY(tb_trainer_create_with_data(&c, be, train, test, &t));
    const tb_opt_hparams *hp = &t->opt.hp;
    CHECK_WHAT(hp->kind == TB_OPT_LARS && hp->trust_coef == (float)c.trust_coef &&
              hp->momentum == (float)c.momentum && hp->weight_decay == (float)c.weight_decay &&
              hp->eps == (float)c.eps,
          "lars: trust_coef, momentum, weight decay, eps reach the optimizer");
    tb_epoch_stats es;
    tb_eval_stats ev;
    int rc;
    TB_TRY_GOTO(rc, tb_train_epoch(t, 0, &es), out_destroy);
    TB_TRY_GOTO(rc, tb_trainer_evaluate(t, &ev), out_destroy);
    char what[128];
    snprintf(what, sizeof what, "lars lr 1: test acc %.1f%% > 50%% after %ld steps",
             100 * ev.accuracy, es.steps);
    CHECK_WHAT(ev.accuracy > 0.5, what);

out_destroy:
    tb_trainer_destroy(t);
    return rc;
}

static void check_config(void)
{
    tb_config c;
    tb_config_defaults(&c);
    CHECK_WHAT(c.workers == 0 && c.prefetch_factor == 2 && !c.persistent_workers &&
              c.worker_mode == TB_WORKERS_THREADS,
          "defaults: num_workers=0 prefetch_factor=2 persistent_workers=False");
    CHECK_WHAT(!c.conv_autotune && c.grads_to_none && !c.fused_optimizer && c.conv_bias &&
              !c.fused_gelu && !c.flush_denormal && c.accum_steps == 1,
          "defaults: benchmark=False set_to_none=True fused=False bias=True");
    size_t n;
    const tb_flag *flags = tb_config_flags(&c, &n);
    char a0[] = "train", a1[] = "--workers=many";
    char *argv[] = {a0, a1, NULL};
    int argc = 2, help;
    int rc = tb_flags_parse(flags, n, &argc, argv, NULL, &help);
    CHECK_WHAT(rc == TB_ERR_INVALID, "--workers=many is refused");
    tb_error_clear();
    c.prefetch_factor = 0;
    CHECK_WHAT(tb_config_validate(&c) == TB_ERR_INVALID, "--prefetch-factor=0 is refused");
    tb_error_clear();
    tb_config_defaults(&c);
    c.amp_dtype = 7;
    CHECK_WHAT(tb_config_validate(&c) == TB_ERR_INVALID, "--amp outside off/bf16/fp16 is refused");
    tb_error_clear();
}

/* One full epoch on all of Fashion-MNIST; prints the progress line. */
static int full_epoch(tb_backend *be, const char *name, tb_config *c)
{
    tb_epoch_stats es;
    tb_eval_stats ev;
    TB_TRY(tb_trainer_one_epoch(c, be, NULL, NULL, &es, &ev));
    char what[160];
    snprintf(what, sizeof what, "%s: loss %.4f, test acc %.2f%% >= 85%%, %.0f images/s, %.1f s",
             name, es.mean_loss, 100 * ev.accuracy, es.images_per_s, es.seconds);
    CHECK_WHAT(ev.accuracy >= 0.85, what);
    return TB_OK;
}

static int run_full(tb_backend *be)
{
    tb_config c;
    tb_config_defaults(&c);
    c.device = "cpu";
    TB_TRY(full_epoch(be, "default toggles", &c));
    tb_config_defaults(&c);
    c.device = "cpu";
    c.workers = 2;
    c.prefetch_factor = 4;
    c.persistent_workers = 1;
    c.conv_autotune = 1;
    c.grads_to_none = 1;
    c.fused_gelu = 1;
    c.fused_optimizer = 1;
    c.conv_bias = 0;
    c.flush_denormal = 1;
    return full_epoch(be, "every toggle on", &c);
}

static int run_quick(tb_backend *be)
{
    tb_dataset *train = NULL, *test = NULL;
    int rc;
    check_config();
    TB_TRY_GOTO(rc, tb_dataset_open_fashion_mnist(NULL, TB_SPLIT_TRAIN, 2048, &train), out_free);
    TB_TRY_GOTO(rc, tb_dataset_open_fashion_mnist(NULL, TB_SPLIT_TEST, 1000, &test), out_free);
    TB_TRY_GOTO(rc, check_toggles(be, train, test), out_free);
    TB_TRY_GOTO(rc, check_adamw(be, train, test), out_free);
    TB_TRY_GOTO(rc, check_accumulation(be, train, test), out_free);
    TB_TRY_GOTO(rc, check_lars(be, train, test), out_free);

out_free:
    tb_dataset_free(train);
    tb_dataset_free(test);
    return rc;
}

static int run(tb_backend *be, void *full)
{
    return *(int *)full ? run_full(be) : run_quick(be);
}

int main(int argc, char **argv)
{
    int full = argc > 1 && strcmp(argv[1], "--full") == 0;
    return tb_test_main_cpu(2,
                            full ? "train_test: one full epoch, >= 85% test accuracy"
                                 : "train_test: toggles vs baseline after 50 steps on a subset",
                            run, &full);
}
