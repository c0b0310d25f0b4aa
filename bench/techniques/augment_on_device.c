/*
 * augment_on_device.c - bench:augment_on_device: augmentation (crop, flip,
 * normalize) on the device vs in the loader workers; the kernel shares its
 * per-pixel math with datasets/augment.c (kernels/augment_math.h), crops and
 * flips drawn on the host from the same (seed, epoch, index). n/a on the CPU
 * backend.
 *
 *   bazel run //bench:augment_on_device -- [--device=cuda] [--profile=default|full|tiny]
 */
#include "bench/harness/device_toggle.h"

/* Both settings augment (random crop with padding 4, horizontal flip,
 * normalize): "on" moves it from the loader's workers to the device. Left
 * at --augment's default (off), both only normalized, and the rows timed
 * where normalization runs, not the tip. */
static void augment(tb_config *cfg, int profile)
{
    (void)profile;
    cfg->augment = 1;
}

static const tb_device_toggle toggle = {
    .desc = {
        .name = "augment_on_device",
        .headline = "on",
        .what = "augmentation (crop, flip, normalize) on the device vs in the loader workers",
        .est_seconds = {4, 35, 5, 8}, /* default, full, tiny, gpu */
        .budget_seconds = {5, 25, 1, 8}, /* of its rounds, same order */
        .order = 140,
        .tiny = {.min_rows = 2},
    },
    .field = offsetof(tb_config, augment_on_device),
    .cpu_reason = "n/a on the CPU backend: the CPU is the device, augmentation already runs "
                  "where the model runs",
    .tolerance_why = "the same bytes reach the model either way: bitwise equal",
    .setup = augment,
};

TB_DEVICE_TOGGLE_MAIN(toggle)
