/*
 * cuda_graphs.c - bench:cuda_graphs: CUDA graph capture and replay of the
 * training step vs kernel launches: forward, loss and backward captured
 * after three warm-up steps and replayed, the optimizer outside the graph
 * (lib/train/train_device.c). n/a on the CPU backend.
 *
 *   bazel run //bench:cuda_graphs -- [--device=cuda] [--profile=default|full|tiny]
 */
#include "bench/harness/device_toggle.h"

static const tb_device_toggle toggle = {
    .desc = {
        .name = "cuda_graphs",
        .headline = "on",
        .what = "CUDA graph capture and replay of the training step vs kernel launches",
        .est_seconds = {6, 35, 5, 28}, /* default, full, tiny, gpu */
        .budget_seconds = {5, 25, 1, 18}, /* of its rounds, same order */
        .order = 150,
        .tiny = {.min_rows = 2},
    },
    .field = offsetof(tb_config, cuda_graphs),
    .cpu_reason = "n/a on the CPU backend: no kernel launches to capture",
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .tolerance_why = "replay runs the same kernels on the same buffers: bitwise equal",
    .on_note = "graph: forward, loss and backward, one replay a step; outside it every step: "
               "zero_grad, the batch's copy into its inputs, the optimizer (learning rate and "
               "step count change per step; PyTorch captures it only if capturable) and the "
               "loss read, a host sync (with AMP the scaler's overflow check too)",
};

TB_DEVICE_TOGGLE_MAIN(toggle)
