/*
 * toggles.c - selfcheck's training-toggle cases (sc_toggle_checks[]): every
 * training toggle switched on for a few steps on the backend under test,
 * against the toggle's fp32 equivalent on the CPU backend, compared by the
 * loss after the steps within a tolerance chosen by the dtype the backend
 * under test computes in (lib/selfcheck/selfcheck.h, tb_step_check).
 *
 * The CPU side is the setting whose result the toggle must not change:
 * NCHW for --channels-last, the default algorithm for --conv-autotune,
 * the unfused ops for the fused ones, launches for --cuda-graphs, host-made
 * tensors and loader augmentation for the device-side ones, fp32 for
 * --amp and --tf32 (the CPU has neither fp16 nor TF32), memset gradients
 * for --grads-to-none=false, one batch of 32 for two micro-batches of 16,
 * no loader workers for --workers. Toggles that change the model (no conv
 * bias, dropout) or the optimizer run the same setting on the CPU.
 *
 * On the CPU backend (selfcheck_test) every case runs on the CPU twice:
 * the toggles that mean something there (layout, fusion, amp=bf16, tf32
 * as oneDNN's bf16 fpmath where oneDNN honours it, accumulation, workers,
 * optimizers, DDP over MPI, memory limits) are checked against their
 * equivalent on the same CPU; the ones only a GPU has (--cuda-graphs,
 * --tensors-on-device, --augment-on-device, --amp=fp16, preallocation) are
 * refused by the trainer or the allocator with their reason and reported
 * n/a. The memory cases drive the backend's allocator slots around the
 * steps (lib/backend/backend.h).
 *
 * Tolerances, relative, on the loss after the steps:
 *   fp32 1e-3   algorithms and reduction orders differ (SC_STEP_TOL_F32);
 *               the CPU's own layout, fusion and accumulation changes
 *               measured under 1e-7 (channels-last 5e-8, accum-steps 1e-8,
 *               GPT-2's fused ops 3e-8).
 *   tf32 1e-2   10 mantissa bits: ~5e-4 per product, the per-op tolerance
 *               of TF32 convolutions and GEMMs (TOL_TF32), which a few
 *               steps of a loss near 2 do not grow past (oneDNN 2.6
 *               ignored bf16 fpmath on the CPUs seen: losses bitwise equal).
 *   bf16 3e-2   8 mantissa bits, activations and weights rounded at every
 *               layer: TOL_LOWP per op, and the steps compound it; the
 *               small CNN measured 4.4e-4 on the CPU's bf16 (AVX-512 BF16).
 *   fp16 1e-2   11 mantissa bits (TF32's), with dynamic loss scaling.
 *
 *   bazel run //bench:selfcheck -- --device=cuda --only=step
 *   bazel test //lib/selfcheck:selfcheck_test
 */
#include <stddef.h>

#include "lib/backend/backend.h"
#include "lib/train/config.h"
#include "lib/train/loader.h"
#include "lib/selfcheck/internal.h"
#include "lib/core/status.h"

#define TOL_STEP_TF32 1e-2
#define TOL_STEP_BF16 3e-2
#define TOL_STEP_FP16 1e-2
#define WHY_TF32 "TF32 keeps 10 mantissa bits; the CPU reference is fp32"
#define WHY_BF16 "bf16 keeps 8 mantissa bits at every layer; the CPU reference is fp32"
#define WHY_FP16 "fp16 keeps 11 mantissa bits, loss scaled; the CPU reference is fp32"

/* A toggle case: the workload with the toggle on, on the backend under
 * test, and its equivalent on the CPU. */
typedef struct toggle_run {
    void (*dut)(tb_config *);
    void (*ref)(tb_config *);
    int evaluate; /* compare the test loss after the steps */
} toggle_run;

static int cpu_loss(const tb_config *c, int evaluate, double *loss)
{
    tb_backend *cpu;
    TB_TRY(tb_backend_open(TB_DEVICE_CPU, 0, 0, &cpu));
    int rc = sc_config_loss(cpu, c, evaluate, loss);
    tb_backend_close(cpu);
    return rc;
}

static int toggle_losses(tb_backend *be, const toggle_run *r, double *got, double *ref)
{
    tb_config c;
    sc_step_defaults(&c);
    r->dut(&c);
    TB_TRY(sc_config_loss(be, &c, r->evaluate, got)); /* first: refused at once where n/a */
    sc_step_defaults(&c);
    r->ref(&c);
    return cpu_loss(&c, r->evaluate, ref);
}

/* ---- memory: preallocation and the retry after an out-of-memory ---- */

/* Preallocation (mem_set_mode(TB_MEM_CACHING, bytes)): the steps carve
 * their buffers from one reserved segment, the last batch a partial one
 * (7 batches of 32 and one of 16), then the reserve goes back. */
#define PREALLOC_BYTES ((size_t)64 << 20)

static int step_prealloc(tb_backend *be, double *got, double *ref)
{
    if (!be->mem_set_mode)
        return TB_FAIL(TB_ERR_UNSUPPORTED, "preallocation: n/a on the %s backend: mem_set_mode "
                       "is NULL there (one allocation policy, no cache to reserve)", be->name);
    tb_config c;
    sc_step_defaults(&c);
    c.data_limit = 240;
    c.max_steps = 0;
    TB_TRY(be->mem_set_mode(be, TB_MEM_CACHING, PREALLOC_BYTES));
    int rc = sc_config_loss(be, &c, 0, got);
    int rc_back = be->mem_set_mode(be, TB_MEM_CACHING, 0);
    TB_TRY(rc);
    TB_TRY(rc_back);
    return cpu_loss(&c, 0, ref);
}

/* The retry after an out-of-memory: under a device memory limit the small
 * CNN cannot fit in (its parameters alone are 517 KB), building the
 * trainer must fail with TB_ERR_DEVICE_OOM and leave nothing allocated;
 * with the limit lifted and the cache emptied (where there is one), the
 * same backend then trains to the CPU's loss. */
#define OOM_LIMIT ((size_t)256 << 10)

static int oom_then_lift(tb_backend *be, const tb_config *c)
{
    size_t before, after, peak;
    double loss;
    TB_TRY(be->mem_stats(be, &before, &peak));
    TB_TRY(be->mem_set_limit(be, before + OOM_LIMIT));
    int rc = sc_config_loss(be, c, 0, &loss);
    TB_TRY(be->mem_set_limit(be, 0));
    if (rc == TB_OK)
        return TB_FAIL(TB_ERR_INTERNAL, "the steps ran within a limit of %zu bytes: "
                       "mem_set_limit was not applied", OOM_LIMIT);
    if (rc != TB_ERR_DEVICE_OOM)
        return rc; /* its message says what failed instead */
    tb_error_clear();
    TB_TRY(be->mem_stats(be, &after, &peak));
    if (after != before)
        return TB_FAIL(TB_ERR_INTERNAL, "after the out-of-memory failure %zu bytes are still "
                       "allocated (%zu before it): the trainer's error path leaks device memory",
                       after, before);
    return be->mem_empty_cache ? be->mem_empty_cache(be) : TB_OK;
}

static int step_oom_retry(tb_backend *be, double *got, double *ref)
{
    tb_config c;
    sc_step_defaults(&c);
    TB_TRY(oom_then_lift(be, &c));
    TB_TRY(sc_config_loss(be, &c, 0, got));
    return cpu_loss(&c, 0, ref);
}

/* ---- workloads (the default is the small CNN of sc_step_defaults) ---- */

/* The transformer: 28 tokens of 64, 4 heads of 16, MLP 128 with GELU. */
static void transformer(tb_config *c) { c->model = TB_MODEL_TRANSFORMER; }

/* The transformer as its fused-op cases run it: AdamW at lr 0.002, judged
 * by the test loss after the steps. Under SGD at lr 0.01 its outputs stay
 * near uniform (mean training loss 2.3049, ln 10 = 2.3026), and one
 * attention output off by half moved that loss by 1e-7; AdamW brings the
 * test loss to 1.68 in 4 steps, so what the ops compute shows. */
static void transformer_adamw(tb_config *c)
{
    c->model = TB_MODEL_TRANSFORMER;
    c->optimizer = TB_OPT_ADAMW;
    c->lr = 0.002;
}

/* The wide CNN: 3 x 32 x 32, with the dropout layer the small CNN lacks. */
static void wide_cnn(tb_config *c) { c->model = TB_MODEL_WIDE_CNN; }

/* ResNet-50 v1.5 on 32 x 32 images (every bottleneck and projection,
 * stage 4 at 1 x 1), batch 4: the whole network in seconds. Its training
 * loss is ill-conditioned at this size: stage 4's batch norm sees 4 values
 * per channel, and a near-zero variance amplifies rounding up to
 * 1/sqrt(eps) = 316x, so two steps at lr 1e-3 differ by 1-2% between the
 * CPU's own layouts, algorithms and thread counts. The case compares the
 * test loss (eval-mode batch norm, running statistics) after one step at
 * lr 1e-4 instead, where those CPU variants agree within 2e-5. */
static void resnet_tiny(tb_config *c)
{
    c->model = TB_MODEL_RESNET50;
    c->image_size = 32;
    c->batch_size = 4;
    c->max_steps = 1;
    c->lr = 1e-4;
    c->data_limit = 8;
    c->test_limit = 4;
}

/* GPT-2 with one block (d 768, 12 heads of 64, causal attention, tanh
 * GELU, tied embedding, lse cross-entropy), context 64, vocabulary 256,
 * batch 2, 3 steps. */
static void gpt2_tiny(tb_config *c)
{
    c->model = TB_MODEL_GPT2;
    c->context = 64;
    c->layers = 1;
    c->vocab = 256;
    c->batch_size = 2;
    c->max_steps = 3;
    c->data_limit = 6;
    c->test_limit = 2;
}

/* Enough steps that --cuda-graphs replays: 3 warm-up micro-batches
 * (TB_GRAPH_WARMUP), the capture, then replays. */
#define GRAPH_STEPS 6

/* toggle_<id>: stmt_dut on the backend under test, stmt_ref on the CPU. */
#define TOGGLE(id, evaluate, stmt_dut, stmt_ref)                                        \
    static void dut_##id(tb_config *c) { stmt_dut; }                                   \
    static void ref_##id(tb_config *c) { stmt_ref; }                                   \
    static int toggle_##id(tb_backend *be, double *got, double *ref)                   \
    {                                                                                  \
        static const toggle_run run = {dut_##id, ref_##id, evaluate};                   \
        return toggle_losses(be, &run, got, ref);                                       \
    }

/* ---- whole-step capture and device-side data ---- */
TOGGLE(graphs, 0, c->max_steps = GRAPH_STEPS; c->cuda_graphs = 1, c->max_steps = GRAPH_STEPS)
TOGGLE(graphs_fp16, 0, c->max_steps = GRAPH_STEPS; c->cuda_graphs = 1; c->amp_dtype = TB_AMP_FP16,
       c->max_steps = GRAPH_STEPS)
/* two micro-batches a step: the capture must add to the first's gradients */
TOGGLE(graphs_accum, 0,
       c->max_steps = GRAPH_STEPS; c->cuda_graphs = 1; c->batch_size = 16; c->accum_steps = 2,
       c->max_steps = GRAPH_STEPS; c->batch_size = 16; c->accum_steps = 2)
/* GPT-2's step frees and allocates per-layer temporaries (unfused layer
 * norm, manual attention): the capture reuses what it freed and holds it
 * (lib/backend/cuda/alloc.c) */
TOGGLE(gpt2_graphs, 0, gpt2_tiny(c); c->max_steps = GRAPH_STEPS; c->cuda_graphs = 1,
       gpt2_tiny(c); c->max_steps = GRAPH_STEPS)
/* pinned batches copied on a side stream, then into the graph's inputs */
TOGGLE(graphs_pinned, 0,
       c->max_steps = GRAPH_STEPS; c->cuda_graphs = 1; c->pin_memory = 1; c->non_blocking = 1,
       c->max_steps = GRAPH_STEPS)
TOGGLE(tensors_on_device, 0, c->tensors_on_device = 1, (void)c)
TOGGLE(augment_on_device, 0, c->augment = 1; c->augment_on_device = 1, c->augment = 1)

/* ---- precision ---- */
TOGGLE(amp_bf16, 0, c->amp_dtype = TB_AMP_BF16, (void)c)
TOGGLE(amp_fp16, 0, c->amp_dtype = TB_AMP_FP16, (void)c)
TOGGLE(tf32, 0, c->tf32 = 1; c->cudnn_tf32 = 1, (void)c)
TOGGLE(transformer_tf32, 1, transformer_adamw(c); c->tf32 = 1, transformer_adamw(c))

/* ---- layout, algorithms, fusion ---- */
TOGGLE(channels_last, 0, wide_cnn(c); c->channels_last = 1, wide_cnn(c))
TOGGLE(conv_autotune, 0, c->conv_autotune = 1, (void)c)
TOGGLE(fused_gelu, 1, transformer_adamw(c); c->fused_gelu = 1, transformer_adamw(c))
TOGGLE(fused_layernorm, 1, transformer_adamw(c); c->fused_layernorm = 1, transformer_adamw(c))
TOGGLE(fused_attention, 1, transformer_adamw(c); c->fused_attention = 1,
       transformer_adamw(c))

/* ---- optimizers and gradients ---- */
TOGGLE(adamw, 0, c->optimizer = TB_OPT_ADAMW; c->lr = 0.002,
       c->optimizer = TB_OPT_ADAMW; c->lr = 0.002)
TOGGLE(adamw_fused, 0, c->optimizer = TB_OPT_ADAMW; c->lr = 0.002; c->fused_optimizer = 1,
       c->optimizer = TB_OPT_ADAMW; c->lr = 0.002)
TOGGLE(grads_memset, 0, c->grads_to_none = 0, c->grads_to_none = 1)
/* no batch norm in the transformer: two micro-batches of 16 are one of 32 */
TOGGLE(accum, 0, transformer(c); c->batch_size = 16; c->accum_steps = 2, transformer(c))
/* the first step alone (the optimizer's state is empty before it): the
 * test loss after it */
TOGGLE(first_sgd, 1, c->max_steps = 1, c->max_steps = 1)
TOGGLE(first_lars, 1, c->max_steps = 1; c->optimizer = TB_OPT_LARS; c->lr = 1.0,
       c->max_steps = 1; c->optimizer = TB_OPT_LARS; c->lr = 1.0)
TOGGLE(first_novograd, 1, c->max_steps = 1; c->optimizer = TB_OPT_NOVOGRAD,
       c->max_steps = 1; c->optimizer = TB_OPT_NOVOGRAD)

/* ---- data and model ---- */
TOGGLE(workers, 0, c->workers = 2, (void)c)
/* bench:workers' and persistent_workers' mode: processes forked from one
 * that holds the device's context (they make no device call) */
TOGGLE(workers_processes, 0,
       c->workers = 2; c->worker_mode = TB_WORKERS_PROCESSES; c->persistent_workers = 1,
       (void)c)
TOGGLE(no_conv_bias, 0, c->conv_bias = 0, c->conv_bias = 0)
TOGGLE(dropout, 0, wide_cnn(c); c->dropout = 0.2, wide_cnn(c); c->dropout = 0.2)

/* ---- the big workloads, shrunk ---- */
TOGGLE(resnet, 1, resnet_tiny(c), resnet_tiny(c))
TOGGLE(resnet_channels_last, 1, resnet_tiny(c); c->channels_last = 1, resnet_tiny(c))
TOGGLE(gpt2, 0, gpt2_tiny(c), gpt2_tiny(c))
TOGGLE(gpt2_fused, 0, gpt2_tiny(c); c->fused_attention = 1; c->fused_layernorm = 1;
       c->fused_gelu = 1, gpt2_tiny(c))

#define F32 SC_STEP_TOL_F32, SC_STEP_WHY_F32

const tb_step_check sc_toggle_checks[] = {
    {"cuda-graphs (vs launches)", F32, toggle_graphs},
    {"cuda-graphs amp=fp16 (vs fp32 launches)", TOL_STEP_FP16, WHY_FP16, toggle_graphs_fp16,
     .dtype = "fp16"},
    {"cuda-graphs accum-steps=2", F32, toggle_graphs_accum},
    {"gpt2 1 layer cuda-graphs (vs launches)", F32, toggle_gpt2_graphs},
    {"cuda-graphs pin-memory non-blocking (vs launches)", F32, toggle_graphs_pinned},
    {"tensors-on-device", F32, toggle_tensors_on_device},
    {"augment-on-device (vs the loader's)", F32, toggle_augment_on_device},
    {"amp=bf16 (vs fp32)", TOL_STEP_BF16, WHY_BF16, toggle_amp_bf16, .dtype = "bf16"},
    {"amp=fp16 loss scaling (vs fp32)", TOL_STEP_FP16, WHY_FP16, toggle_amp_fp16,
     .dtype = "fp16"},
    {"tf32 (vs fp32)", TOL_STEP_TF32, WHY_TF32, toggle_tf32, .dtype = "tf32"},
    {"transformer tf32 (test loss, vs fp32)", TOL_STEP_TF32, WHY_TF32, toggle_transformer_tf32,
     .dtype = "tf32"},
    {"wide_cnn channels-last (vs NCHW)", F32, toggle_channels_last},
    {"conv-autotune (vs default algorithms)", F32, toggle_conv_autotune},
    {"transformer fused-gelu (test loss, vs unfused)", F32, toggle_fused_gelu},
    {"transformer fused-layernorm (test loss, vs unfused)", F32, toggle_fused_layernorm},
    {"transformer fused-attention (test loss, vs manual)", F32, toggle_fused_attention},
    {"optimizer=adamw", F32, toggle_adamw},
    {"optimizer=adamw fused-optimizer (vs unfused)", F32, toggle_adamw_fused},
    {"grads-to-none=false (vs none)", F32, toggle_grads_memset},
    {"transformer accum-steps=2 batch 16 (vs batch 32)", F32, toggle_accum},
    {"optimizer=sgd first step (test loss)", F32, toggle_first_sgd},
    {"optimizer=lars first step (test loss)", F32, toggle_first_lars},
    {"optimizer=novograd first step (test loss)", F32, toggle_first_novograd},
    {"workers=2 (vs 0)", F32, toggle_workers},
    {"workers=2 processes persistent (vs 0)", F32, toggle_workers_processes},
    {"conv-bias=false", F32, toggle_no_conv_bias},
    {"wide_cnn dropout=0.2", F32, toggle_dropout},
    {"preallocation, partial last batch", F32, step_prealloc},
    {"retry after an out-of-memory", F32, step_oom_retry},
    {"DDP one rank, NCCL on CUDA / MPI on the CPU (vs plain backward)", F32,
     sc_step_ddp_one_rank},
    {"resnet50 32x32 one step (test loss)", F32, toggle_resnet},
    {"resnet50 32x32 channels-last one step (test loss, vs NCHW)", F32,
     toggle_resnet_channels_last},
    {"gpt2 1 layer", F32, toggle_gpt2},
    {"gpt2 1 layer fused attention, layernorm, gelu (vs unfused)", F32, toggle_gpt2_fused},
    {NULL, 0.0, NULL, NULL, NULL, NULL},
};
