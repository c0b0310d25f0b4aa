/*
 * persistent_workers.c - bench:persistent_workers: 2 loader workers kept
 * across epochs vs started and joined every epoch. The unit timed is one
 * short epoch of the profile's subset (a repetition: as many as last the
 * profile's minimum, each starting its workers anew when they are not
 * persistent). The workers are processes, as PyTorch's (forked; a
 * PyTorch worker also starts an interpreter's worker loop and unpickles
 * the dataset, so its start-up costs more than this fork): with threads,
 * as until 2026-11-30, starting and joining 2 cost 0.14 ms of a 106 ms
 * epoch, and the rows could not differ. Each row's note gives the share
 * of an epoch the step waited for batches. Same batches either way: exact.
 *
 *   bazel run //bench:persistent_workers -- [--device=cpu] [--profile=...]
 */
#include "bench/harness/step_harness.h"

static void setup(tb_config *cfg, int profile)
{
    (void)profile;
    cfg->augment = 1;
    cfg->worker_mode = TB_WORKERS_PROCESSES; /* as PyTorch's DataLoader workers */
    cfg->workers = 2;
}

static void set_persistent(tb_config *cfg, double on)
{
    cfg->persistent_workers = on != 0;
}

static const tb_step_setting settings[] = {
    {"restarted", 0, 0, set_persistent, NULL, NULL},
    {"persistent", 1, 0, set_persistent, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "persistent_workers",
        .headline = "persistent",
        .what = "loader workers kept across short epochs vs restarted every epoch",
        .est_seconds = {18, 80, 15, 15}, /* default, full, tiny, gpu */
        .budget_seconds = {16, 60, 2, 8}, /* of its rounds, same order */
        .order = 40,
        .tiny = {.min_rows = 2, .plots = "persistent_workers"},
    },
    .param_name = "persistent",
    TB_STEP_SETTINGS(settings),
    .metric = TB_METRIC_EPOCH,
    .own_loader = 1,
    .setup = setup,
    .na_reason = tb_step_na_never,
    .check_note = tb_step_loader_note,
};

TB_STEP_MAIN(tech)
