/*
 * tensors_on_device.c - bench:tensors_on_device: per-step tensors made by
 * device ops vs built on the host and copied; with the toggle the labels
 * travel as the dataset's uint8 bytes and are widened to int32 on the device
 * (lib/train/train_device.c). n/a on the CPU backend.
 *
 *   bazel run //bench:tensors_on_device -- [--device=cuda] [--profile=default|full|tiny]
 */
#include "bench/harness/device_toggle.h"

static const tb_device_toggle toggle = {
    .desc = {
        .name = "tensors_on_device",
        .headline = "on",
        /* what it moves is the labels alone: B bytes and one widening
         * kernel instead of 4B bytes, a few hundred bytes a step; the
         * tip's other half (torch.rand(..., device=) for noise, masks,
         * positions) has no per-step host tensor in these models to move */
        .what = "per-step tensors made on the device vs built on the host and copied: here the "
                "labels only (uint8 up, widened to int32 on the device, vs int32 copied)",
        .est_seconds = {5, 35, 5, 8}, /* default, full, tiny, gpu */
        .budget_seconds = {5, 25, 1, 6}, /* of its rounds, same order */
        .order = 130,
        .tiny = {.min_rows = 2},
    },
    .field = offsetof(tb_config, tensors_on_device),
    .cpu_reason = "n/a on the CPU backend: host and device memory are the same",
    .tolerance_why = "the same labels reach the loss either way: bitwise equal",
};

TB_DEVICE_TOGGLE_MAIN(toggle)
