/*
 * device_toggles.c - the step techniques that are one on/off toggle of the
 * config and mean something only where host and device memory are apart:
 *   tensors_on_device  per-step tensors made by device ops vs built on the
 *                      host and copied; with the toggle the labels travel as
 *                      the dataset's uint8 bytes and are widened to int32 on
 *                      the device (lib/train/train_device.c)
 *   augment_on_device  augmentation (crop, flip, normalize) on the device vs
 *                      in the loader workers; the kernel shares its per-pixel
 *                      math with datasets/augment.c (kernels/augment_math.h),
 *                      crops and flips drawn on the host from the same
 *                      (seed, epoch, index)
 *   cuda_graphs        CUDA graph capture and replay of the training step vs
 *                      kernel launches: forward, loss and backward captured
 *                      after three warm-up steps and replayed, the optimizer
 *                      outside the graph (lib/train/train_device.c)
 * Baseline: the toggle off. On the CPU backend the "on" setting is an n/a row
 * with the entry's reason; the baseline step is still timed.
 *
 * One row of the table below per technique; bench/BUILD builds this file
 * once per row with TB_TECHNIQUE naming it, so each keeps its own target:
 *
 *   bazel run //bench:cuda_graphs -- [--device=cuda] [--profile=default|full|tiny]
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "bench/harness/step_harness.h"

typedef struct device_toggle {
    const char *name;
    const char *what;
    size_t field;             /* offsetof(tb_config, the int toggle) */
    const char *cpu_reason;   /* why "on" means nothing on the CPU backend */
    const char *tolerance_why;
} device_toggle;

static const device_toggle toggles[] = {
    {"tensors_on_device", "per-step tensors made by device ops vs built on the host and copied",
     offsetof(tb_config, tensors_on_device),
     "n/a on the CPU backend: host and device memory are the same",
     "the same labels reach the loss either way: bitwise equal"},
    {"augment_on_device", "augmentation (crop, flip, normalize) on the device vs in the loader workers",
     offsetof(tb_config, augment_on_device),
     "n/a on the CPU backend: the CPU is the device, augmentation already runs where the model runs",
     "the same bytes reach the model either way: bitwise equal"},
    {"cuda_graphs", "CUDA graph capture and replay of the training step vs kernel launches",
     offsetof(tb_config, cuda_graphs),
     "n/a on the CPU backend: no kernel launches to capture",
     "replay runs the same kernels on the same buffers: bitwise equal"},
};

static const device_toggle *chosen;

static void set_toggle(tb_config *cfg, double on)
{
    *(int *)((char *)cfg + chosen->field) = on != 0;
}

static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    if (s->param == 0 || strcmp(backend, "cpu") != 0)
        return NULL;
    return chosen->cpu_reason;
}

static const tb_step_setting settings[] = {
    {"off", 0, 0, set_toggle, NULL, NULL},
    {"on", 1, 0, set_toggle, NULL, NULL},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; i < sizeof toggles / sizeof toggles[0]; i++)
        if (strcmp(toggles[i].name, TB_TECHNIQUE) == 0)
            chosen = &toggles[i];
    if (!chosen) {
        fprintf(stderr, "device_toggles: no table row named '%s' (bench/BUILD's TB_TECHNIQUE)\n",
                TB_TECHNIQUE);
        return 2;
    }
    const tb_step_technique tech = {
        .name = chosen->name,
        .what = chosen->what,
        .param_name = "on",
        .settings = settings,
        .n_settings = 2,
        .metric = TB_METRIC_STEP,
        .na_reason = na_reason,
        .tolerance = 0,
        .tolerance_why = chosen->tolerance_why,
    };
    return tb_step_main(&tech, argc, argv);
}
