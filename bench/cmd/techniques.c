/* techniques.c - the technique list for bench:all; see techniques.h. */
#include "bench/cmd/techniques.h"

const tb_technique_entry tb_techniques[] = {
    {"gelu", "fused vs unfused GELU, forward and backward, over tensor sizes", {40, 240, 5}},
    /* training-step and loader techniques (bench/harness/step_harness.h) */
    {"workers", "loader workers 0..2x cores: epoch time with augmentation", {40, 150, 40}},
    {"prefetch", "prefetch depth per loader worker: epoch time", {30, 120, 15}},
    {"persistent_workers", "loader workers kept across short epochs vs restarted", {20, 80, 15}},
    /* data_format, conv_autotuner_step, waterfall: default measured 13, 5 and 51 s at
     * load 2.3 (2026-11-22), estimates with room for a loaded machine */
    {"data_format", "gzip IDX per epoch vs raw uint8 in /dev/shm vs decoded once in RAM",
     {25, 120, 10}},
    {"grads_to_none", "zero_grad(set_to_none=True) vs memset on the training step", {15, 60, 5}},
    {"fused_gelu_step", "fused vs unfused GELU on the training step", {15, 60, 10}},
    {"conv_bias", "no conv bias before batch norm on the training step", {15, 60, 10}},
    {"conv_autotuner_step", "conv autotuner on the training step, fixed and changing batch",
     {15, 120, 10}},
    {"fused_optimizer_step", "fused vs per-tensor optimizer (SGD, AdamW) on the training step",
     {25, 100, 15}},
    {"batch_size", "batch 16.. the largest that fits: throughput, memory, accuracy", {60, 300, 15}},
    {"pinned_memory", "pinned memory + async copies on the training step (n/a on the CPU)",
     {10, 30, 5}},
    {"tensors_on_device", "per-step tensors made on the device vs host + copy (n/a on the CPU)",
     {5, 20, 5}},
    {"augment_on_device", "augmentation on the device vs in the loader (n/a on the CPU)",
     {5, 20, 5}},
    {"cuda_graphs", "CUDA graph replay of the training step vs launches (n/a on the CPU)",
     {5, 20, 5}},
    {"caching_allocator", "caching allocator on the training step (n/a on the CPU)",
     {10, 30, 5}},
    /* Issue 6's remaining step techniques. Default measured 2026-11-22:
     * tf32_step 3 s, debug_apis 4 s, profiler 6 s at load 1.5 (65-121 s at
     * load 10-12); host_syncs 165 s (load 1.6 -> 6), large_batch_optimizers
     * 124-138 s at load 6-7 (on an idle machine, in one bench:all run:
     * 4.6 s and 10.6 s: 2 threads on 2 loaded cores collapse). The "about
     * 1 s an epoch whatever its size" seen then through train_epoch did not
     * come back on an idle machine: 2-step epochs took 0.3 s, 46 ms between
     * them (--trace). validation_frequency: 204 s idle since its default
     * profile reaches 85% (5 seeds x 3 settings of 10-17 s fits). */
    {"tf32_step", "TF32 math vs fp32 on the training step (CPU: f32 computed without "
     "AVX512_BF16)", {10, 60, 20}},
    {"debug_apis", "debug APIs off: detect_anomaly on (baseline) vs off, training step",
     {10, 60, 12}},
    {"profiler", "profiler off: --trace on (baseline) vs off, training step", {12, 60, 20}},
    {"host_syncs", "loss read every step (.item()) vs every 10 / 50 steps", {150, 600, 75}},
    {"large_batch_optimizers", "LARS / LAMB / NovoGrad vs SGD / AdamW at a large batch: time, "
     "accuracy", {120, 900, 67}},
    {"validation_frequency", "time to 85% accuracy validating every 1 / 2 / 5 epochs",
     {210, 3600, 30}},
    /* tiny measured 10-26 s each under load (tests); default like tf32_step's */
    {"mixed_precision", "autocast off / bf16 / fp16 on the training step (CPU fp16 n/a)",
     {15, 120, 10}},
    {"channels_last", "channels last (NHWC) vs NCHW on the training step", {10, 60, 10}},
    {"checkpointing", "activation checkpointing: time added, memory saved, at batch B and 4B",
     {20, 120, 26}},
    {"no_grad_eval", "evaluation under no_grad vs keeping activations: time, peak memory",
     {30, 120, 11}},
    /* cumulative and leave-one-out step time, then time to 85% accuracy */
    {"waterfall", "techniques on one after another, all on but one; time to 85% accuracy",
     {110, 1800, 30}},
    {"fused_optimizer", "per-tensor vs fused optimizer step (SGD, AdamW) over parameter counts",
     {30, 420, 3}},
    {"fused_layernorm", "fused vs unfused layer norm, forward and backward, transformer shapes",
     {15, 90, 3}},
    /* default with n = 8192: 373 s idle in bench:all (2026-11-22) while the
     * warm-ups ran before every repetition, 216 s idle once they ran before
     * the first only: 20 calls of one 8192 GEMM at about 9.3 s each (about
     * twice that loaded) are most of it; up to 4096 it was 45 s idle */
    {"tf32", "square GEMMs n = 256 .. 8192, fp32 vs TF32 math", {230, 600, 3}},
    {"fused_attention", "manual vs fused attention, T = 128 .. 4096, causal or not: time, memory",
     {90, 420, 6}},
    {"ddp_sweep", "DP (CPU threads / GPUs from one thread) vs DDP (MPI ranks 1..N, buckets, "
     "overlap, imbalance, SyncBN), "
     "all-reduce bus bandwidth", {60, 300, 45}},
    /* after ddp_sweep: reads its ddp.csv */
    {"scaling_model", "alpha-beta MODEL of scaling efficiency 1..1024 devices, ring and tree",
     {2, 2, 2}},
    {"conv_autotuner", "default vs autotuned convolution, tuning cost, batch changing every step",
     {90, 900, 15}},
    {"caching_allocator_ops", "device allocator modes on a step's allocations (n/a on the CPU)",
     {5, 20, 2}},
    {"pinned_memory_bw", "host-device copy bandwidth, pageable vs pinned, 4 KiB .. 256 MiB",
     {10, 40, 1}},
    {"mixed_precision_ops", "GEMM and convolution alone: fp32 vs bf16 / fp16 (n/a where refused)",
     {15, 200, 3}},
};

const int tb_technique_count = sizeof tb_techniques / sizeof tb_techniques[0];
