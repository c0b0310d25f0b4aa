#!/usr/bin/env python3
"""gpu_estimate.py - how long bench:all --profile=gpu should take on one H100/H200.

An ESTIMATE, not a measurement: a cost model of the step harness and the op
sweeps (bench/harness/step_harness.c, opbench.c, rounds.c) whose constants come
from the one GPU run that timed part of the profile (results/gpu-h200-2026-11-28,
profile.log). The model is checked against that run first: with the step
profile that run used (full's row: 3 warm-up steps per build, 6 settling probes,
2-step repetitions) it must reproduce the measured wall times of the techniques
it ran; then it predicts the whole profile with the gpu profile's own row.

    python3 tools/gpu_estimate.py            # per technique, then the total
    python3 tools/gpu_estimate.py --check    # the model against the H200 run

Per workload of a step technique (seconds):
    setup   describe the workload, open its data              SETUP_S
    checks  one build and 3 steps per check run                CHECK_S (x4 batch: x CHECK_BIG;
                                                               the small CNN: SMALL_CHECK_S)
    warm-up per arm: build, the profile's warm-up units, then the engine's
            probes (full: 6; gpu: until 0.5 s, at least 3)
    rounds  MIN_ROUNDS rounds of every slot: a baseline with k compared arms
            (its A/A arm included) runs 2k + 1 repetitions a round
    rebuild one rebuild of every arm within the minimum rounds (rounds.c
            stretches the interval when a rebuild outweighs its repetitions)
    tuning  an arm with the conv autotuner on searches cuDNN's algorithms
            afresh in every build (its check, its warm-up, its rebuilds):
            TUNE_S a build (an assumption, below)
A technique whose trainers cannot all be alive (checkpointing's GPT-2 arms, the
allocator's prepare hook) rebuilds every arm every round instead. The
waterfall adds its time-to-accuracy runs (TTA_RUNS of TTA_RUN_S).
"""
import math
import sys

# ---- constants measured in results/gpu-h200-2026-11-28/profile.log ----
SETUP_S = 2.0        # "resnet50-full-synthetic: ..." line to the first check: 1.5-2 s
CHECK_S = 1.0        # check lines 1.0 s apart (ResNet-50), 0.75 (GPT-2): build + 3 steps
CHECK_BIG = 2.5      # checkpointing's 4x-batch checks: 2.5 s apart
BUILD_S = 0.27       # a rebuild of 4 arms took 2.65 s with 3 warm-up steps of 0.13 s each
# not measured on a GPU (assumptions): the small CNN (129k parameters) builds
# in about a third of ResNet-50's time, and its check is the profile's 100
# launch-bound steps (step_harness.c: the gpu row's check_steps)
SMALL_BUILD_S = 0.1
SMALL_CHECK_S = SMALL_BUILD_S + 100 * 0.005
# the waterfall's time to accuracy (bench/techniques/waterfall.c, tta_plans'
# gpu row): 3 seeds of the baseline and of all on, each a fresh small CNN
# trained until 85% (100-120 steps of 256 on the CPU, evaluated on 10,000
# images every 20 steps); an assumption of 5 s a run (not measured on a GPU)
TTA_RUNS = 2 * 3
TTA_RUN_S = 5.0
# work of a step technique outside its step harness, in the gpu profile
AFTER_STEPS_S = {"waterfall": TTA_RUNS * TTA_RUN_S}   # its time-to-accuracy part
BUILD_ALONE_S = 1.5  # one alive at a time: the last trainer's memory freed first (checkpointing's
                     # rounds of 6 GPT-2 arms: 16 s, 7.2 s of it steps)
MIN_ROUNDS = 5
# not measured on a GPU (an assumption): the autotuner's search of a fresh
# ResNet-50 trainer at 224x224 batch 64 (cudnnFind for each convolution's
# forward and two backward passes; the H100 run of 2026-11-24 suggests 0.3-0.5 s)
TUNE_S = 0.4
STEP_S = {"resnet50": 0.13, "gpt2": 0.128, "gpt2x4": 0.44,
          # not measured on a GPU: the small CNN's step is launch-bound (a
          # repetition is then the profile's minimum), its loader epochs an
          # assumption of 0.3 s (32 batches of 64 from 4 workers)
          "small_cnn": 0.005, "small_cnn_epoch": 0.3,
          "resnet50_epoch": 1.0, "gpt2_epoch": 1.0}  # host_syncs' 8-step epochs: 0.8-1.4 s

PROFILES = {  # (warm-up units per build, settling probes rule, repetition seconds)
    "full": {"warmup": 3, "min_rep": 0.2, "probes": lambda u, build: 6},
    "gpu": {"warmup": 1, "min_rep": 0.1,
            "probes": lambda u, build: max(3, math.ceil((0.5 - build) / u))},
}

# ---- the techniques of the gpu profile ----
# step techniques: name -> list of (unit kind, arms per baseline group as
# [k compared arms incl. A/A, ...], check runs, rebuild every round?[, arms
# with the conv autotuner on])
# arms come from each technique's tiny run (timing N arms) with the settings a
# GPU adds (fp16, CUDA graphs, TF32, pinned memory mean something there).
STEP = {
    "grads_to_none": [("resnet50", [2], 3, 0), ("gpt2", [2], 3, 0)],
    "fused_gelu_step": [("gpt2", [2], 3, 0)],
    "conv_bias": [("resnet50", [2], 3, 0)],
    # its two "on" arms (fixed shapes, batch varies)
    "conv_autotuner_step": [("resnet50", [2, 2], 6, 0, 2)],
    "fused_optimizer_step": [("gpt2", [2, 2], 6, 0)],
    "batch_size": [("small_cnn", [3], 4, 1)],
    "pinned_memory": [("resnet50", [2], 3, 0), ("gpt2", [2], 3, 0)],
    "tensors_on_device": [("small_cnn", [2], 3, 0)],
    "augment_on_device": [("small_cnn", [2], 3, 0)],
    "cuda_graphs": [("resnet50", [2], 3, 0), ("gpt2", [2], 3, 0)],
    "caching_allocator": [("resnet50", [2], 3, 1), ("gpt2", [2], 3, 1)],
    "tf32_step": [("resnet50", [3], 4, 0), ("gpt2", [2], 3, 0)],  # + fp32 convolutions (ResNet)
    "debug_apis": [("resnet50", [2], 3, 0), ("gpt2", [2], 3, 0)],
    "profiler": [("resnet50", [2], 3, 0), ("gpt2", [2], 3, 0)],
    "host_syncs": [("resnet50_epoch", [3], 8, 0), ("gpt2_epoch", [3], 8, 0)],  # + an epoch each
    "large_batch_optimizers": [("small_cnn", [3, 2], 7, 0)],
    "mixed_precision": [("resnet50", [3], 4, 0), ("gpt2", [3], 4, 0)],
    "channels_last": [("resnet50", [2, 2], 6, 0)],
    # its 4x-batch group (106 GB of peaks) rebuilt every round, the 30 GB one alive
    # (step_plan.h: tb_step_plan_alone); the H200 run rebuilt all six
    "checkpointing": [("gpt2", [2], 3, 0), ("gpt2x4", [2], 3 * CHECK_BIG, 1)],
    "no_grad_eval": [("small_cnn", [2], 3, 0)],
    # the gpu profile leaves the small CNN's step part out (gpu_workloads);
    # on ResNet-50, 17 of its settings tune: the stages from conv_autotune on,
    # all on, and every leave-one-out but conv_autotune's (GPT-2 has no conv)
    "waterfall": [("resnet50", [18], 35, 0, 17), ("gpt2", [18], 35, 0)],
    "workers": [("small_cnn_epoch", [5], 5, 0)],
    "prefetch": [("small_cnn_epoch", [4], 4, 0)],
    "persistent_workers": [("small_cnn_epoch", [2], 3, 0)],
    "data_format": [("small_cnn_epoch", [3], 4, 0)],
}
# op sweeps and the rest: measured on the H200 where they ran (the op sweeps'
# rounds then scaled to what their budget now allows: opbench.c's 5 ms floor,
# 8a3f51c), else their gpu budget plus 2 s of set-up (an assumption)
# ceilings' repetitions now last 0.2 s (bench/techniques/ceilings.c), not 10
# calls: per case (s a call on the H200, calls a repetition then, now), 5
# repetitions each; the other cases' calls stay within one of what they were
CEILINGS_CALLS = {"fp32 GEMM": (0.163, 10, 2), "h2d pinned": (0.0387, 10, 6),
                  "h2d pageable": (0.281, 10, 1)}
CEILINGS_CUT_S = sum(5 * t * (then - now) for t, then, now in CEILINGS_CALLS.values())
MEASURED_OTHER = {  # name: (measured s less what was cut since, of which rounds s, gpu budget s)
    "ceilings": (40.7 - CEILINGS_CUT_S, 0, 0),
    "gelu": (68.3, 50.2, 10),
    "fused_layernorm": (14.1, 12.0, 10),
    "fused_attention": (32.6, 31.9, 16),
    "mixed_precision_ops": (14.2, 12.7, 12),
}
UNMEASURED_OTHER = {"fused_optimizer": 12, "tf32": 12, "conv_autotuner": 24,
                    "caching_allocator_ops": 5, "pinned_memory_bw": 8, "scaling_model": 1,
                    "ddp_sweep": 14, "validation_frequency": 20}
# the H200 run's wall times (bench:all: ... took), and what those techniques
# were then where they have changed since (channels_last: fp32 alone;
# checkpointing: every arm rebuilt every round)
MEASURED_STEP = {"mixed_precision": 46.5, "channels_last": 20.9, "checkpointing": 105.5,
                 "fused_gelu_step": 17.5, "conv_bias": 18.3, "host_syncs": 165.4}
THEN = {"channels_last": [("resnet50", [2], 3, 0)],
        "checkpointing": [("gpt2", [2], 3, 1), ("gpt2x4", [2], 3 * CHECK_BIG, 1)]}


# techniques with a CUDA-graphs setting: their checks run past the graph's
# settling (step_harness.c: graph_check_steps; 4 steps, then 2 replays):
# 6 steps a check instead of 3, for every setting of the workload
GRAPH_CHECK_EXTRA_STEPS = 3
GRAPH_TECHS = {"cuda_graphs", "waterfall"}
# and each build of an arm that captures warms up past its capture
# (step_harness.c: arm_open, tb_trainer_graph_settle_steps: 4 steps, the
# gpu profile's 1 otherwise): 3 more steps a build, at its first build and
# its rebuild. Arms that capture, per workload: cuda_graphs' "on"; the
# waterfall's "+ cuda_graphs", "all on" and every leave-one-out but graphs'
# own and the n/a ones (10 of its 18 on either model)
GRAPH_ARMS = {"cuda_graphs": 1, "waterfall": 10}


def workload_s(prof, kind, groups, checks, rebuild_each, tuned=0, graphs=False, graph_arms=0):
    p = PROFILES[prof]
    u = STEP_S[kind]
    rep_units = max(1, math.ceil(1.05 * p["min_rep"] / u))
    rep = rep_units * u
    arms = sum(k + 1 for k in groups)          # each group: a baseline and k compared arms
    slots = sum(2 * k + 1 for k in groups)
    small = kind.startswith("small_cnn")
    build = SMALL_BUILD_S if small else BUILD_S
    warm = arms * (build + p["warmup"] * u + p["probes"](u, build + p["warmup"] * u) * u)
    rounds = MIN_ROUNDS * slots * rep
    if rebuild_each:   # one alive at a time: every arm rebuilt and warmed every round
        rebuild = (MIN_ROUNDS - 1) * arms * ((build if small else BUILD_ALONE_S) + p["warmup"] * u)
    elif kind.endswith("_epoch"):
        rebuild = 0
    else:
        rebuild = arms * (build + p["warmup"] * u)
    # a tuned arm's builds: its check, its warm-up, its rebuilds
    tuning = tuned * TUNE_S * (2 + (MIN_ROUNDS - 1 if rebuild_each else 1))
    check = (SMALL_CHECK_S if small else CHECK_S) + (GRAPH_CHECK_EXTRA_STEPS * u if graphs else 0)
    graph_warm = graph_arms * GRAPH_CHECK_EXTRA_STEPS * u * 2  # first build and rebuild
    return SETUP_S + checks * check + warm + rounds + rebuild + tuning + graph_warm


def step_s(name, prof, table=STEP):
    graphs = prof == "gpu" and name in GRAPH_TECHS
    ga = GRAPH_ARMS.get(name, 0) if prof == "gpu" else 0
    s = sum(workload_s(prof, *w, graphs=graphs, graph_arms=ga) if len(w) > 4 else
            workload_s(prof, *w, 0, graphs=graphs, graph_arms=ga)
            for w in table.get(name, STEP[name]))
    return s + (AFTER_STEPS_S.get(name, 0) if prof == "gpu" else 0)


def main():
    check = "--check" in sys.argv[1:]
    if check:
        print("technique            H200 measured  model (full's row)")
        for name, meas in MEASURED_STEP.items():
            print(f"{name:20s} {meas:10.1f} s {step_s(name, 'full', THEN):12.1f} s")
        return
    rows = []
    for name in STEP:
        rows.append((name, step_s(name, "gpu"), "model, gpu row"))
    for name, (meas, rounds, budget) in MEASURED_OTHER.items():
        fit = min(rounds, 0.85 * budget) if rounds else 0
        rows.append((name, meas - rounds + fit, "H200 measured, rounds to budget" if rounds
                     else "H200 measured, less what was cut since"))
    for name, budget in UNMEASURED_OTHER.items():
        rows.append((name, budget + 2.0, "budget + 2 s (not run on a GPU)"))
    total = 0
    for name, s, how in sorted(rows, key=lambda r: -r[1]):
        total += s
        print(f"{name:24s} {s:7.1f} s  {how}")
    print(f"{'total':24s} {total:7.1f} s  ({total / 60:.1f} min; an estimate)")


if __name__ == "__main__":
    main()
