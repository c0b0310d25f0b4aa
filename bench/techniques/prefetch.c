/*
 * prefetch.c - bench:prefetch: batches queued per loader worker
 * (prefetch_factor) 1, 2, 4, 8 with 2 workers and augmentation; epoch time.
 * The baseline is the least prefetching (1); PyTorch's default is 2.
 * The workers are processes, as PyTorch's; each row's note gives the share
 * of an epoch the step waited for batches. Same batches whatever the
 * depth: exact.
 *
 *   bazel run //bench:prefetch -- [--device=cpu] [--profile=...]
 */
#include "bench/harness/step_harness.h"

static void setup(tb_config *cfg, int profile)
{
    (void)profile;
    cfg->augment = 1;
    cfg->worker_mode = TB_WORKERS_PROCESSES; /* as PyTorch's DataLoader workers */
    cfg->workers = 2;
}

static void set_depth(tb_config *cfg, double n)
{
    cfg->prefetch_factor = (int)n;
}

static const tb_step_setting settings[] = {
    {"prefetch=1", 1, 0, set_depth, NULL, NULL}, {"prefetch=2", 2, 0, set_depth, NULL, NULL},
    {"prefetch=4", 4, 0, set_depth, NULL, NULL}, {"prefetch=8", 8, 0, set_depth, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "prefetch",
        .headline = "prefetch=2",
        .what = "prefetch depth per loader worker (2 workers): epoch time",
        .est_seconds = {24, 120, 15, 24}, /* default, full, tiny, gpu */
        .budget_seconds = {26, 100, 2, 8}, /* of its rounds, same order */
        .order = 30,
        .tiny = {.min_rows = 4, .plots = "prefetch"},
    },
    .param_name = "prefetch_factor",
    TB_STEP_SETTINGS(settings),
    .metric = TB_METRIC_EPOCH,
    .own_loader = 1,
    .setup = setup,
    .na_reason = tb_step_na_never,
    .check_note = tb_step_loader_note,
};

TB_STEP_MAIN(tech)
