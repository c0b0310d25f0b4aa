/*
 * train.c - the training command: trains a model with every toggle of
 * lib/train/config.h settable from a flag, one progress line per epoch.
 *
 *   bazel run //bench:train -- --model=small_cnn --epochs=1 [toggles]
 *   bazel run //bench:train -- --help          (every toggle and its default)
 *
 * Each epoch prints: epoch, mean train loss, test loss and accuracy,
 * training images/s and epoch seconds (training only; evaluation is timed
 * apart). Exit codes: 0 done, 2 bad flag or unusable device, 1 any other
 * error (printed as the error chain).
 */
#include <stdio.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/core/flags.h"
#include "lib/core/status.h"
#include "lib/train/train.h"

static const char *summary =
    "Trains a model on Fashion-MNIST (or synthetic data) and evaluates it on the test set\n"
    "after every epoch. Performance toggles default to PyTorch's defaults; training\n"
    "hyper-parameters to the recipe that reaches 85% on Fashion-MNIST in one epoch.";

static int fail(void)
{
    int code = tb_error_last();
    tb_error_print(stderr);
    return tb_exit_code(code);
}

static void print_epoch(const tb_epoch_stats *es, const tb_eval_stats *ev, void *user)
{
    (void)user;
    if (ev)
        printf("epoch %d  train loss %.4f  test loss %.4f  test acc %.2f%%  %.0f images/s  "
               "%.1f s  (loader wait %.1f s, eval %.1f s)\n",
               es->epoch + 1, es->mean_loss, ev->mean_loss, 100.0 * ev->accuracy,
               es->images_per_s, es->seconds, es->loader_wait_s, ev->seconds);
    else
        printf("epoch %d  train loss %.4f  (not validated: --val-every)  %.0f images/s  %.1f s  "
               "(loader wait %.1f s)\n",
               es->epoch + 1, es->mean_loss, es->images_per_s, es->seconds, es->loader_wait_s);
    fflush(stdout);
}

static int run_epochs(tb_trainer *t)
{
    tb_fit_stats fs;
    TB_TRY(tb_trainer_fit(t, &fs, print_epoch, NULL));
    printf("stopped by %s after %d epochs, %d evaluations: best test acc %.2f%%, train %.1f s, "
           "eval %.1f s, total %.1f s",
           fs.stopped_by, fs.epochs, fs.evaluations, 100.0 * fs.best_accuracy, fs.train_s,
           fs.eval_s, fs.total_s);
    if (t->cfg.target_accuracy > 0) {
        if (fs.reached_target)
            printf(", time to %.2f%%: %.1f s", 100.0 * t->cfg.target_accuracy,
                   fs.time_to_target_s);
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
    printf("device %s (%s, %d threads)\n%s\n", info.backend, info.name, info.threads, desc);
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
    printf("data: %s (%d samples), test %s (%d samples)%s\nmodel: %s, %zu parameters\n",
           t->train_ds->name, t->train_ds->n, t->test_ds->name, t->test_ds->n,
           t->train_ds->synthetic ? "  [SYNTHETIC DATA]" : "", tb_model_names[cfg->model],
           t->model->numel);
    TB_TRY_GOTO(rc, run_epochs(t), out_destroy);

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
    if (tb_config_validate(&cfg) != TB_OK || run(&cfg) != TB_OK)
        return fail();
    return 0;
}
