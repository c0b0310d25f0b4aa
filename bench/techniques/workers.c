/*
 * workers.c - bench:workers: loader workers (DataLoader num_workers) 0, 1,
 * 2, ... up to twice the cores of this machine's 2-core VM; epoch time of
 * the small CNN on the Fashion-MNIST subset with augmentation (random crop
 * and flip), so the knee shows where workers stop paying for themselves.
 * The workers are processes, as PyTorch's DataLoader's (threads until
 * 2026-11-30); each row's note gives the share of an epoch the step waited
 * for batches (with 0 workers: built them), the most any setting can save.
 * The loader's batches are the same bytes whatever the workers: exact.
 *
 *   bazel run //bench:workers -- [--device=cpu] [--profile=...]
 */
#include "bench/harness/step_harness.h"

static void setup(tb_config *cfg, int profile)
{
    (void)profile;
    cfg->augment = 1;
    cfg->worker_mode = TB_WORKERS_PROCESSES; /* as PyTorch's DataLoader workers */
}

static void set_workers(tb_config *cfg, double n)
{
    cfg->workers = (int)n;
}

static const tb_step_setting settings[] = {
    {"workers=0", 0, 0, set_workers, NULL, NULL}, {"workers=1", 1, 0, set_workers, NULL, NULL},
    {"workers=2", 2, 0, set_workers, NULL, NULL}, {"workers=3", 3, 0, set_workers, NULL, NULL},
    {"workers=4", 4, 0, set_workers, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "workers",
        .headline = "workers=2",
        .what = "loader workers 0..2x cores: epoch time with augmentation",
        .est_seconds = {16, 150, 40, 29}, /* default, full, tiny, gpu */
        .budget_seconds = {28, 120, 2, 12}, /* of its rounds, same order */
        .order = 20,
        .tiny = {.min_rows = 5, .plots = "workers"},
    },
    .param_name = "workers",
    TB_STEP_SETTINGS(settings),
    .metric = TB_METRIC_EPOCH,
    .own_loader = 1,
    .setup = setup,
    .na_reason = tb_step_na_never,
    .check_note = tb_step_loader_note,
};

TB_STEP_MAIN(tech)
