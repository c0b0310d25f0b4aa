/*
 * pinned_memory.c - bench:pinned_memory: the end-to-end training step with
 * the loader's batches in pinned (page-locked) host memory and the copy to
 * the device asynchronous (pin_memory=True, non_blocking=True) vs pageable
 * memory and synchronous copies. The bandwidth sweep over sizes is the
 * op-level pinned memory bench. The baseline (pageable) is timed on every
 * backend as the step's reference.
 *
 *   bazel run //bench:pinned_memory -- [--device=cuda] [--profile=...]
 */
#include <string.h>

#include "bench/step_harness.h"

static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    (void)s;
    if (strcmp(backend, "cpu") == 0)
        return "no copy to a device on the CPU backend: batches are already where the "
               "kernels read them";
    return "the trainer has no pin_memory toggle in lib/config.h yet";
}

static const tb_step_setting settings[] = {
    {"pageable", 0, 0, NULL, NULL, NULL},
    {"pinned + non_blocking", 1, 0, NULL, NULL, NULL},
};

static const tb_step_technique tech = {
    .name = "pinned_memory",
    .what = "pinned host memory and async copies on the training step",
    .param_name = "pinned",
    .settings = settings,
    .n_settings = 2,
    .metric = TB_METRIC_STEP,
    .na_reason = na_reason,
};

int main(int argc, char **argv)
{
    return tb_step_main(&tech, argc, argv);
}
