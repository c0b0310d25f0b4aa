/*
 * checkpointing.c - bench:checkpointing: activation checkpointing
 * (torch.utils.checkpoint; --checkpointing: BN+ReLU, GELU and pooling
 * outputs, and the manual attention's probabilities (one buffer shared by
 * all layers, lib/nn/layer_attn.c), recomputed in backward instead of
 * stored) vs storing everything,
 * the baseline: step time added and peak memory saved (memory_bytes; the
 * saving in the note), at the profile's batch B and at 4B. The larger batch
 * it allows: the 4B row's note says whether checkpointing at 4B fits under a
 * --mem-limit equal to the stored run's peak at B (both peaks measured by
 * the backend's allocator in the same run). The recompute runs the same
 * kernels: bitwise the same loss (act_mem_test).
 *
 *   bazel run //bench:checkpointing -- [--device=cpu] [--mem-limit=MiB] [--profile=...]
 */
#include <stdio.h>

#include "bench/harness/step_harness.h"

static double store_peak[2];   /* the baseline's peak per batch, bytes */

static void set_batch(tb_config *cfg, double big)
{
    cfg->batch_size = big != 0 ? 4 * cfg->batch_size : cfg->batch_size;
}

static void set_store(tb_config *cfg, double big)
{
    set_batch(cfg, big);
    cfg->checkpointing = 0;
}

static void set_ckpt(tb_config *cfg, double big)
{
    set_batch(cfg, big);
    cfg->checkpointing = 1;
}

static int memory_note(tb_step_ctx *c, char *note, size_t cap)
{
    size_t in_use = 0, peak = 0;
    TB_TRY(c->t->be->mem_stats(c->t->be, &in_use, &peak));
    int big = c->setting->param != 0;
    if (!c->cfg.checkpointing) {
        store_peak[big] = (double)peak;
        return TB_OK;
    }
    int n = 0;
    if (store_peak[big] > 0)
        n = snprintf(note, cap, "peak %.1f MiB vs %.1f MiB stored: %.1f%% saved (batch %d)",
                     peak / 1048576.0, store_peak[big] / 1048576.0,
                     100.0 * (1.0 - peak / store_peak[big]), c->cfg.batch_size);
    if (big && store_peak[0] > 0 && n >= 0 && (size_t)n < cap)
        n += snprintf(note + n, cap - (size_t)n, "; under a limit of the stored peak at batch %d "
                      "it would %s (by the measured peaks; not run under that limit)",
                      c->cfg.batch_size / 4, peak <= store_peak[0] ? "fit" : "not fit");
    /* not torch.utils.checkpoint around whole blocks, which recomputes
     * every activation of a block and keeps only its input */
    if (n >= 0 && (size_t)n < cap)
        snprintf(note + n, cap - (size_t)n, "%srecomputes %s, not whole blocks", n > 0 ? "; " : "",
                 c->cfg.model == TB_MODEL_GPT2 ? "GELU outputs and attention probabilities"
                                                : "BN+ReLU, GELU and pooling outputs");
    return TB_OK;
}

static const tb_step_setting settings[] = {
    {"store", 0, 0, set_store, NULL, NULL},
    {"checkpointing", 0, 0, set_ckpt, NULL, NULL},
    {"store, 4x batch", 1, 2, set_store, NULL, NULL},
    {"checkpointing, 4x batch", 1, 2, set_ckpt, NULL, NULL},
};

static const tb_step_technique tech = {
    .desc = {
        .name = "checkpointing",
        .headline = "checkpointing",
        .what = "activation checkpointing vs storing: time added, memory saved, larger batch",
        .est_seconds = {34, 130, 26, 42}, /* default, full, tiny, gpu */
        /* of its rounds, same order; default: the whole technique took 10-19 s in
         * six idle runs (it stops on its target), so 22 (was 30) */
        .budget_seconds = {22, 120, 2, 13},
        .order = 250,
        .tiny = {.min_rows = 4, .plots = "checkpointing"},
    },
    .param_name = "4x_batch",
    TB_STEP_SETTINGS(settings),
    .workloads = TB_WL_BIT(TB_WL_GPT2),
    .metric = TB_METRIC_STEP,
    .na_reason = tb_step_na_never,
    .tolerance = 0,
    .check_note = memory_note,
};

TB_STEP_MAIN(tech)
