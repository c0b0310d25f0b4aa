/*
 * cuda_graphs.c - bench:cuda_graphs: CUDA graph capture and replay of the training step vs kernel launches.
 * Forward, loss and backward are captured after three warm-up steps and replayed; the optimizer runs outside the graph (lib/train_device.c).
 * Baseline: the toggle off (the technique off). On the CPU backend the
 * setting is an n/a row with the reason; the baseline step is still timed.
 *
 *   bazel run //bench:cuda_graphs -- [--device=cuda] [--profile=default|full|tiny]
 */
#include <string.h>

#include "bench/step_harness.h"

static void set_toggle(tb_config *cfg, double on)
{
    cfg->cuda_graphs = on != 0;
}

static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    if (s->param == 0 || strcmp(backend, "cpu") != 0)
        return NULL;
    return "n/a on the CPU backend: no kernel launches to capture";
}

static const tb_step_setting settings[] = {
    {"off", 0, 0, set_toggle, NULL, NULL},
    {"on", 1, 0, set_toggle, NULL, NULL},
};

static const tb_step_technique tech = {
    .name = "cuda_graphs",
    .what = "CUDA graph capture and replay of the training step vs kernel launches",
    .param_name = "on",
    .settings = settings,
    .n_settings = 2,
    .metric = TB_METRIC_STEP,
    .na_reason = na_reason,
    .tolerance = 0,
    .tolerance_why = "replay runs the same kernels on the same buffers: bitwise equal",
};

int main(int argc, char **argv)
{
    return tb_step_main(&tech, argc, argv);
}
