/*
 * train.c - the training command: trains a model with every toggle of
 * lib/train/config.h settable from a flag, one progress line per epoch.
 *
 *   bazel run //bench:train -- --model=small_cnn --epochs=1 [toggles]
 *   bazel run //bench:train -- --help          (every toggle and its default)
 *
 *   bazel run //bench:train -- --model=resnet50 --dataset=synthetic --image-size=64 \
 *       --batch-size=8 --max-steps=3
 *   bazel run //bench:train -- --model=gpt2 --dataset=synthetic --context=256 \
 *       --batch-size=2 --max-steps=2
 *
 * Before training it prints the data (marked [SYNTHETIC DATA] when it is),
 * the model's parameter count (for resnet50 and gpt2 also the full-size
 * count: ResNet-50's does not depend on --image-size; GPT-2's at the full
 * context 1024 and GPT-2 small's), and the FLOPs of one sample's forward +
 * backward (lib/nn/flops.h). Each epoch prints: epoch, mean train loss, test
 * loss and accuracy (next-token accuracy for gpt2), training images/s (and
 * tokens/s for gpt2), the model FLOP rate they amount to, and epoch seconds (training only; evaluation is timed
 * apart). Exit codes: 0 done, 2 bad flag or unusable device, 1 any other
 * error (printed as the error chain).
 */
#include <stdio.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/core/flags.h"
#include "lib/core/status.h"
#include "lib/nn/flops.h"
#include "lib/train/train.h"

static const char *summary =
    "Trains a model on Fashion-MNIST (or synthetic data; ResNet-50 and GPT-2 on synthetic\n"
    "data made on the fly) and evaluates it on the test set after every epoch. Performance\n"
    "toggles default to PyTorch's defaults; training hyper-parameters to the recipe that\n"
    "reaches 85% on Fashion-MNIST in one epoch.";

static int fail(void)
{
    int code = tb_error_last();
    tb_error_print(stderr);
    return tb_exit_code(code);
}

/* What the epoch lines need beside the statistics. */
typedef struct run_info {
    const tb_trainer *t;
    double flops_per_sample; /* forward + backward, lib/nn/flops.h */
} run_info;

/* "1234 images/s", or for a token model "5678 tokens/s (2.77 sequences/s)",
 * then the model FLOP rate they amount to. */
static void rate(const tb_epoch_stats *es, double flops_per_sample, char *out, size_t cap)
{
    int n;
    if (es->tokens_per_s > 0)
        n = snprintf(out, cap, "%.0f tokens/s (%.2f sequences/s)", es->tokens_per_s,
                     es->images_per_s);
    else
        n = snprintf(out, cap, "%.*f images/s", es->images_per_s < 100 ? 2 : 0,
                     es->images_per_s);
    if (n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, ", %.1f GFLOP/s", es->images_per_s *
                 flops_per_sample / 1e9);
}

static void print_epoch(const tb_epoch_stats *es, const tb_eval_stats *ev, void *user)
{
    const run_info *info = user;
    const tb_trainer *t = info->t;
    char r[128];
    rate(es, info->flops_per_sample, r, sizeof r);
    const char *acc = tb_config_token_model(&t->cfg) ? "next-token acc" : "test acc";
    if (ev)
        printf("epoch %d  train loss %.4f  test loss %.4f  %s %.2f%%  %s  "
               "%.1f s  (loader wait %.1f s, eval %.1f s)\n",
               es->epoch + 1, es->mean_loss, ev->mean_loss, acc, 100.0 * ev->accuracy, r,
               es->seconds, es->loader_wait_s, ev->seconds);
    else
        printf("epoch %d  train loss %.4f  (not validated: --val-every)  %s  %.1f s  "
               "(loader wait %.1f s)\n",
               es->epoch + 1, es->mean_loss, r, es->seconds, es->loader_wait_s);
    fflush(stdout);
}

static int run_epochs(tb_trainer *t, double flops_per_sample)
{
    run_info info = {t, flops_per_sample};
    tb_fit_stats fs;
    TB_TRY(tb_trainer_fit(t, &fs, print_epoch, &info));
    printf("stopped by %s after %d epochs, %d evaluations: best test acc %.2f%%, train %.1f s, "
           "eval %.1f s, total %.1f s",
           fs.stopped_by, fs.epochs, fs.evaluations, 100.0 * fs.best_accuracy, fs.train_s,
           fs.eval_s, fs.total_s);
    if (t->cfg.target_accuracy > 0) {
        if (fs.reached_target)
            printf(", time to %.2f%%: %.1f s", 100.0 * t->cfg.target_accuracy,
                   fs.time_to_target_s);
        else if (fs.target_at_deadline)
            printf(", target %.2f%% not reached on the validation schedule (the evaluation the "
                   "time limit forced was past it)", 100.0 * t->cfg.target_accuracy);
        else
            printf(", target %.2f%% not reached", 100.0 * t->cfg.target_accuracy);
    }
    printf("\n");
    TB_TRY(tb_trainer_write_trace(t));
    if (t->cfg.trace)
        printf("trace: %s (Chrome trace JSON; open in https://ui.perfetto.dev)\n", t->cfg.trace);
    if (t->cfg.conv_autotune)
        printf("conv autotuner: %d shapes tuned\n", t->model->ctx.algos.tunings);
    return TB_OK;
}

static int print_header(tb_backend *be, const tb_config *cfg)
{
    tb_device_info info;
    char desc[TB_CONFIG_DESC_CAP];
    TB_TRY(be->device_info(be, &info));
    tb_config_describe(cfg, desc, sizeof desc);
    char dev[200];
    tb_device_describe(&info, dev, sizeof dev);
    printf("device %s (%s)\n%s\n", info.backend, dev, desc);
    return TB_OK;
}

/* "25,557,032" */
static void commas(size_t v, char *out, size_t cap)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%zu", v), o = 0;
    for (int i = 0; i < n && o + 2 < (int)cap; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

/* The data line: names, sizes, and where they come from. */
static void print_data(const tb_trainer *t)
{
    const tb_dataset *tr = t->train_ds, *te = t->test_ds;
    const tb_config *c = &t->cfg;
    int big = c->model == TB_MODEL_RESNET50 || c->model == TB_MODEL_GPT2;
    printf("data: %s (%d samples%s), test %s (%d samples%s)%s\n", tr->name, tr->n,
           tr->make ? ", made on the fly" : "", te->name, te->n,
           big && c->test_limit <= 0 ? ": the model's default test split, --test-limit=N for "
                                       "another"
                                     : "",
           tr->synthetic ? "  [SYNTHETIC DATA]" : "");
}

/* The parameter counts: this run's, and the full-size model's. */
static void print_model(const tb_trainer *t)
{
    const tb_config *c = &t->cfg;
    char n[32], full[32];
    commas(t->model->numel, n, sizeof n);
    printf("model: %s, %s parameters", tb_model_names[c->model], n);
    if (c->model == TB_MODEL_RESNET50) {
        printf(" (ResNet-50 v1.5 full size: 25,557,032 with 1000 classes and no conv bias; "
               "parameter shapes do not depend on --image-size=%d)", c->image_size);
    } else if (c->model == TB_MODEL_GPT2) {
        tb_gpt2_dims g = tb_train_gpt2_dims(c), small = tb_gpt2_small();
        g.context = small.context;
        commas(tb_gpt2_param_count(&g), full, sizeof full);
        printf(" (%d layers, context %d, vocabulary %d; at the full context %d: %s",
               c->layers, c->context, c->vocab, small.context, full);
        commas(tb_gpt2_param_count(&small), full, sizeof full);
        printf("; GPT-2 small: %s)", full);
    }
    printf("\n");
}

/* FLOPs of one sample's training step (lib/nn/flops.h); *total gets them. */
static int print_flops(const tb_trainer *t, double *total)
{
    tb_flops f;
    char line[TB_FLOPS_LINE];
    tb_model_flops(t->model, &f);
    TB_TRY(tb_flops_format(&f, line, sizeof line));
    printf("FLOPs: %s", line);
    if (tb_config_token_model(&t->cfg))
        printf("; %.3g GFLOP/token", tb_flops_total(&f) / t->cfg.context / 1e9);
    printf("\n");
    *total = tb_flops_total(&f);
    return TB_OK;
}

static int run(const tb_config *cfg)
{
    tb_device_kind kind;
    int ordinal;
    TB_TRY(tb_device_parse(cfg->device, &kind, &ordinal));
    tb_backend *be;
    TB_TRY(tb_backend_open(kind, ordinal, cfg->threads, &be));
    tb_trainer *t = NULL;
    int rc;
    TB_TRY_GOTO(rc, print_header(be, cfg), out_close);
    TB_TRY_GOTO(rc, tb_trainer_create(cfg, be, &t), out_close);
    print_data(t);
    print_model(t);
    double flops;
    TB_TRY_GOTO(rc, print_flops(t, &flops), out_destroy);
    fflush(stdout);
    TB_TRY_GOTO(rc, run_epochs(t, flops), out_destroy);

out_destroy:
    tb_trainer_destroy(t);
out_close:
    tb_backend_close(be);
    return rc;
}

int main(int argc, char **argv)
{
    tb_config cfg;
    tb_config_defaults(&cfg);
    size_t nflags;
    const tb_flag *flags = tb_config_flags(&cfg, &nflags);
    int help = 0;
    if (tb_flags_parse(flags, nflags, &argc, argv, NULL, &help) != TB_OK)
        return fail();
    if (help) {
        tb_flags_usage(stdout, "train", summary, flags, nflags);
        return 0;
    }
    if (argc > 1) {
        TB_FAIL(TB_ERR_INVALID, "unexpected argument '%s'; see --help", argv[1]);
        return fail();
    }
    if (tb_config_validate(&cfg) != TB_OK)
        return fail();
    int rc = run(&cfg);
    /* "use a smaller batch" cannot help at batch 1: the model itself does not fit */
    if ((rc == TB_ERR_DEVICE_OOM || rc == TB_ERR_NOMEM) && cfg.batch_size == 1)
        TB_FAIL(rc, "at --batch-size=1 the model itself does not fit: a smaller model "
                "(--width, --layers, --vocab, --context) or a device with more memory");
    if (rc != TB_OK)
        return fail();
    return 0;
}
