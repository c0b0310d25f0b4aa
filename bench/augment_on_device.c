/*
 * augment_on_device.c - bench:augment_on_device: augmentation (crop, flip, normalize) on the device vs in the loader workers.
 * The kernel shares its per-pixel math with datasets/augment.c (kernels/augment_math.h), with crops and flips drawn on the host from the same (seed, epoch, index).
 * Baseline: the toggle off (the technique off). On the CPU backend the
 * setting is an n/a row with the reason; the baseline step is still timed.
 *
 *   bazel run //bench:augment_on_device -- [--device=cuda] [--profile=default|full|tiny]
 */
#include <string.h>

#include "bench/step_harness.h"

static void set_toggle(tb_config *cfg, double on)
{
    cfg->augment_on_device = on != 0;
}

static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    if (s->param == 0 || strcmp(backend, "cpu") != 0)
        return NULL;
    return "n/a on the CPU backend: the CPU is the device, augmentation already runs where the model runs";
}

static const tb_step_setting settings[] = {
    {"off", 0, 0, set_toggle, NULL, NULL},
    {"on", 1, 0, set_toggle, NULL, NULL},
};

static const tb_step_technique tech = {
    .name = "augment_on_device",
    .what = "augmentation (crop, flip, normalize) on the device vs in the loader workers",
    .param_name = "on",
    .settings = settings,
    .n_settings = 2,
    .metric = TB_METRIC_STEP,
    .na_reason = na_reason,
    .tolerance = 0,
    .tolerance_why = "the same bytes reach the model either way: bitwise equal",
};

int main(int argc, char **argv)
{
    return tb_step_main(&tech, argc, argv);
}
