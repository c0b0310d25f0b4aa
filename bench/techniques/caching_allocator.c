/*
 * caching_allocator.c - bench:caching_allocator: the training step with the
 * device allocator caching freed blocks (PyTorch's default) vs one device
 * malloc/free per allocation (the baseline: the technique off), through
 * the backend's mem_set_mode. Where a backend has one policy only
 * (mem_set_mode NULL: the CPU backend) the cached setting is n/a; the
 * baseline step is timed as the reference.
 *
 *   bazel run //bench:caching_allocator -- [--device=cuda] [--profile=...]
 */
#include <stdlib.h>
#include <string.h>

#include "bench/harness/step_harness.h"

static int set_policy(tb_backend *be, double caching)
{
    if (!be->mem_set_mode)
        return TB_OK;
    return be->mem_set_mode(be, caching != 0 ? TB_MEM_CACHING : TB_MEM_PLAIN, 0);
}

/* TB_TEST_ALLOC_ON_CPU (tests only: alloc_na_test) runs the cached
 * setting on the CPU anyway, where either policy is malloc, so that the
 * check's finding (alloc_note) is exercised where CI runs. */
static const char *na_reason(const char *backend, const tb_step_setting *s)
{
    (void)s;
    const char *test = getenv("TB_TEST_ALLOC_ON_CPU");
    if (strcmp(backend, "cpu") == 0 && !(test && *test))
        return "the CPU backend allocates with malloc and has no device allocator policy to "
               "switch (mem_set_mode is NULL)";
    return NULL;
}

static int one_step(void *trainer)
{
    float loss;
    return tb_trainer_step(trainer, &loss);
}

/* Whether a step allocates at all: the allocator's counted peak over one
 * more step against the bytes in use before it. A model whose trainer
 * keeps every buffer from its build (this library's ResNet-50: activations,
 * batch-norm buffers, a grow-only conv workspace) allocates nothing in a
 * step, and neither policy has anything to act on; PyTorch's eager step
 * allocates each op's output through the cache. The note says which, and
 * where nothing is allocated the cached setting is n/a: both policies would
 * time the same step (the GPU profile's ~20 s a workload of trainers
 * rebuilt every round for the policy, spent on an A/A comparison). A step's
 * allocations are the same under either policy, so the cached setting's
 * own check decides. */
static int alloc_note(tb_step_ctx *c, char *note, size_t cap)
{
    double above;
    TB_TRY(tb_bench_peak_of(c->t->be, one_step, c->t, &above));
    if (above > 0) {
        snprintf(note, cap, "a step allocates: %.4g %s above what its trainer keeps at its "
                 "peak", above >= 1048576 ? above / 1048576 : above / 1024,
                 above >= 1048576 ? "MiB" : "KiB");
        return TB_OK;
    }
    snprintf(note, cap, "a step allocates nothing here (its peak is what its trainer keeps "
             "from the build): the policy has nothing to act on, unlike PyTorch's eager step, "
             "which allocates every op's output");
    if (c->setting->param != 0)
        snprintf(c->na_why, sizeof c->na_why, "n/a on this workload: a step allocates nothing "
                 "(its trainer keeps every buffer from its build), so both policies would time "
                 "the same step; bench:caching_allocator_ops times them on allocations");
    return TB_OK;
}

static const tb_step_setting settings[] = {
    {"malloc/free per allocation", 0, 0, NULL, NULL, set_policy},
    {"caching", 1, 0, NULL, NULL, set_policy},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "caching_allocator",
        .headline = "caching",
        .what = "caching device allocator vs malloc/free per allocation on the training step",
        .est_seconds = {6, 35, 5, 40}, /* default, full, tiny, gpu */
        .budget_seconds = {5, 25, 1, 18}, /* of its rounds, same order */
        .order = 160,
        .tiny = {.min_rows = 2},
    },
    .param_name = "caching",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = na_reason,
    .check_note = alloc_note,
    .tolerance = 0,
};

TB_STEP_MAIN(tech)
