/*
 * tensors_on_device.c - bench:tensors_on_device: per-step tensors made by device ops vs built on the host and copied.
 * With the toggle the labels travel as the dataset's uint8 bytes and are widened to int32 on the device (lib/train_device.c).
 * Baseline: the toggle off (the technique off). On the CPU backend the
 * setting is an n/a row with the reason; the baseline step is still timed.
 *
 *   bazel run //bench:tensors_on_device -- [--device=cuda] [--profile=default|full|tiny]
 */
#include <string.h>

#include "bench/step_harness.h"

static void set_toggle(tb_config *cfg, double on)
{
    cfg->tensors_on_device = on != 0;
}

static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    if (s->param == 0 || strcmp(backend, "cpu") != 0)
        return NULL;
    return "n/a on the CPU backend: host and device memory are the same";
}

static const tb_step_setting settings[] = {
    {"off", 0, 0, set_toggle, NULL, NULL},
    {"on", 1, 0, set_toggle, NULL, NULL},
};

static const tb_step_technique tech = {
    .name = "tensors_on_device",
    .what = "per-step tensors made by device ops vs built on the host and copied",
    .param_name = "on",
    .settings = settings,
    .n_settings = 2,
    .metric = TB_METRIC_STEP,
    .na_reason = na_reason,
    .tolerance = 0,
    .tolerance_why = "the same labels reach the loss either way: bitwise equal",
};

int main(int argc, char **argv)
{
    return tb_step_main(&tech, argc, argv);
}
