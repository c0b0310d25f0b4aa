/*
 * profiler.c - bench:profiler: the technique "profiler off" on the training
 * step: what the --trace timeline (autograd.profiler / emit_nvtx: each
 * phase closed by a device sync and recorded, each layer and marked op
 * timed by two device events with no host wait, NVTX ranges on CUDA)
 * costs.
 * As in every sweep, the baseline is the technique off, which here means
 * the profiler ON (--trace); the compared setting runs without it, so a
 * speedup > 1 is what switching the profiler off gains. The trace only
 * observes: the loss is bitwise the same. The check writes the trace once
 * (to a temporary file, removed) and notes its size; writing is not timed.
 *
 *   bazel run //bench:profiler -- [--device=cpu] [--profile=default|full|tiny]
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/harness/step_harness.h"

static char trace_path[96];

/* param: 1 = the technique on = the profiler off. */
static void set_profiler_off(tb_config *cfg, double off)
{
    cfg->trace = off == 0 ? trace_path : NULL;
}

static int trace_note(tb_step_ctx *c, char *note, size_t cap)
{
    if (!c->cfg.trace)
        return TB_OK;
    TB_TRY(tb_trainer_write_trace(c->t));
    struct stat sb;
    long long bytes = stat(trace_path, &sb) == 0 ? (long long)sb.st_size : -1;
    unlink(trace_path);
    snprintf(note, cap, "the check's trace: %zu phase events, %lld bytes of JSON (written "
             "untimed)%s", c->t->trace ? c->t->trace->n : (size_t)0, bytes,
             strcmp(c->t->be->name, "cuda") == 0
                 ? "; CUDA: each traced phase ends with a device sync, which torch.profiler "
                   "does not: its cost here includes them"
                 : "");
    return TB_OK;
}

static const tb_step_setting settings[] = {
    {"trace on", 0, 0, set_profiler_off, NULL, NULL},
    {"profiler off", 1, 0, set_profiler_off, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "profiler",
        .headline = "profiler off",
        .what = "profiler off: baseline --trace ON (technique off) vs no trace, on the training step",
        .est_seconds = {15, 70, 20, 24}, /* default, full, tiny, gpu */
        .budget_seconds = {16, 60, 2, 18}, /* of its rounds, same order */
        .order = 190,
        .tiny = {.min_rows = 2, .plots = "profiler"},
    },
    .param_name = "profiler_off",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_RESNET50) | TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 0,
    .check_note = trace_note,
};

int main(int argc, char **argv)
{
    snprintf(trace_path, sizeof trace_path, "/tmp/tunebench-profiler-%d.json", (int)getpid());
    return tb_step_main(&tech, argc, argv);
}
