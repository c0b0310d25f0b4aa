#!/usr/bin/env python3
"""gpu_estimate.py - how long bench:all --profile=gpu should take on one H100 (and H200).

An ESTIMATE, not a measurement: a cost model of the step harness and the op
sweeps (bench/harness/step_harness.c, opbench.c, rounds.c) whose constants come
from the one GPU run that timed part of the profile (results/gpu-h200-2026-11-28,
profile.log). The model is checked against that run first: with the step
profile that run used (full's row: 3 warm-up steps per build, 6 settling probes,
2-step repetitions) it must reproduce the measured wall times of the techniques
it ran; then it predicts the whole profile with the gpu profile's own row.

    python3 tools/gpu_estimate.py            # per technique on one H100 80GB, the total,
                                             # then the H200's total
    python3 tools/gpu_estimate.py --device=h200   # per technique on one H200
    python3 tools/gpu_estimate.py --check    # the model against the H200 run

Per workload of a step technique (seconds):
    setup   describe the workload, open its data              SETUP_S (the big models:
                                                               SETUP_BIG_S)
    checks  one build and 3 steps per check run                CHECK_S (x4 batch: x CHECK_BIG;
                                                               the small CNN: SMALL_CHECK_S)
    warm-up per arm: build, the profile's warm-up units, then the engine's
            probes (full: 6; gpu: until 0.5 s, at least 3); an arm that
            takes its check's trainer (ADOPTS: all but the workload's first
            check's) unparks it instead of the build and warm-up units
    rounds  MIN_ROUNDS rounds of every slot: a baseline with k compared arms
            (its A/A arm included) runs 2k + 1 repetitions a round
    rebuild one rebuild of every arm within the minimum rounds (rounds.c
            stretches the interval when a rebuild outweighs its repetitions)
    tuning  an arm with the conv autotuner on searches cuDNN's algorithms
            afresh in every build (its check, its warm-up, its rebuilds):
            TUNE_S a build (an assumption, below)
Memory decides how each group of arms (a baseline, the arms compared with
it, its A/A copy) lives across the rounds, as bench/harness/step_plan.c
does (tb_step_plan_park) with the check's peaks measured on the H200 and
85% of the device's memory: alive (the costs above); parked (alive with
its activations freed while other arms run: before each of its slots in a
round, an unpark and one untimed step, UNPARK_S + a step, and a CUDA
graph's capture again, CAPTURE_S); or rebuilt every round (a prepare hook:
the allocator's policy; or where parked arms do not fit either): every arm
built afresh every round. The waterfall adds its time-to-accuracy runs
(TTA_RUNS of TTA_RUN_S). Step times are the H200's (STEP_S); another
device's run at its own pace (step_scale: its bandwidth for a step's
memory-bound share, MEM_BOUND_SHARE, an assumption).
"""
import math
import sys

# ---- constants measured in results/gpu-h200-2026-11-28/profile.log ----
SETUP_S = 2.0        # "resnet50-full-synthetic: ..." line to the first check: 1.5-2 s
# not measured (an assumption): that set-up held the batch-size search's
# trial, a trainer built and stepped once, and the data made twice; the
# workload's first check is the trial since (step_harness.c, fits_by_halving):
# 0.5 s less for ResNet-50 and GPT-2
SETUP_BIG_S = SETUP_S - 0.5
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
# memory (GiB): the check's peaks of the H200 run (profile.log: "peak ... MiB"),
# per workload kind for its fp32 arms; entries give other arms' own
PEAK_GIB = {"resnet50": 18.62, "resnet50_epoch": 18.96, "gpt2": 10.30, "gpt2_epoch": 10.55,
            "resnet50_epoch8": 18.96, "gpt2_epoch8": 10.55,
            "gpt2x4": 35.36, "small_cnn": 0.1, "small_cnn_epoch": 0.1}
R50_AMP, GPT2_AMP = 21.36, 10.76  # bf16/fp16 autocast's peaks there
# what a parked trainer keeps (not measured on a GPU: from the parameter
# counts): weights, gradients and the optimizer's state in fp32 (ResNet-50's
# 25.6M with SGD's momentum, GPT-2's 124.4M with AdamW's two moments), plus
# 0.5 GiB for its batch staging, loss buffers and conv workspace (an
# assumption)
KEPT_GIB = {"resnet50": 25.6e6 * 4 * 3 / 2**30 + 0.5, "gpt2": 124.4e6 * 4 * 4 / 2**30 + 0.5}
KEPT_GIB.update({"resnet50_epoch": KEPT_GIB["resnet50"], "gpt2_epoch": KEPT_GIB["gpt2"],
                 "resnet50_epoch8": KEPT_GIB["resnet50"], "gpt2_epoch8": KEPT_GIB["gpt2"],
                 "gpt2x4": KEPT_GIB["gpt2"], "small_cnn": 0.05, "small_cnn_epoch": 0.05})
# cudaMemGetInfo's total on each (GiB; the step harness keeps arms alive in
# 85% of it) and the published memory bandwidth (TB/s: H100 SXM's HBM3,
# H200's HBM3e; their published dense FLOPs are the same)
DEVICES = {"h100": ("one H100 80GB HBM3", 79.65, 3.35), "h200": ("one H200", 140.4, 4.8)}
# STEP_S are the H200's. On another device a step's memory-bound share
# (batch norm, activations, elementwise and optimizer passes) runs at its
# bandwidth, the rest (GEMMs, convolutions) at the same FLOPs: an assumed
# share of 35% of the step time (not measured) makes an H100's ResNet-50 and
# GPT-2 steps 1.15x the H200's. The two runs on record agree roughly, with
# other code: the H100's (2026-11-24) fp32 steps were 1.3x the H200's
# (2026-11-28) on ResNet-50 (169 vs 130 ms) and 1.07x on GPT-2 (137 vs 128).
MEM_BOUND_SHARE = 0.35


def step_scale(device):
    return 1 + MEM_BOUND_SHARE * (DEVICES["h200"][2] / DEVICES[device][2] - 1)
SHARE = 0.85
# not measured on a GPU (assumptions): an unpark takes its activations'
# blocks back from the caching allocator (no cudaMalloc) and waits for the
# device; a graph's capture again records one step's launches and
# instantiates them (in the untimed step before each of a capturing parked
# arm's slots: step_harness.c, arm_resume)
UNPARK_S = 0.02
CAPTURE_S = 0.05
# not measured on a GPU (an assumption): the autotuner's search of a fresh
# ResNet-50 trainer at 224x224 batch 64 (cudnnFind for each convolution's
# forward and two backward passes; the H100 run of 2026-11-24 suggests 0.3-0.5 s)
TUNE_S = 0.4
STEP_S = {"resnet50": 0.13, "gpt2": 0.128, "gpt2x4": 0.44,
          # not measured on a GPU: the small CNN's step is launch-bound (a
          # repetition is then the profile's minimum), its loader epochs an
          # assumption of 0.3 s (32 batches of 64 from 4 workers)
          "small_cnn": 0.005, "small_cnn_epoch": 0.3,
          # host_syncs' epochs: 8 steps took 0.8-1.4 s on the H200 (its run's
          # unit, THEN); 4 steps since (epoch_batches), half of that
          "resnet50_epoch8": 1.0, "gpt2_epoch8": 1.0, "resnet50_epoch": 0.5, "gpt2_epoch": 0.5}

PROFILES = {  # (warm-up units per build, settling probes rule, repetition seconds)
    "full": {"warmup": 3, "min_rep": 0.2, "probes": lambda u, build: 6},
    "gpu": {"warmup": 1, "min_rep": 0.1,
            "probes": lambda u, build: max(3, math.ceil((0.5 - build) / u))},
}

# ---- the techniques of the gpu profile ----
# step techniques: name -> list of (unit kind, arms per baseline group as
# [k compared arms incl. A/A, ...], check runs, rebuilt every round by design
# (a prepare hook, rebuild_each_round)?[, arms with the conv autotuner on[,
# {"peaks": per group, each arm's peak in GiB: its baseline, its compared
# arms, its A/A copy}]]; the arms that capture CUDA graphs: GRAPH_ARMS)
# arms come from each technique's tiny run (timing N arms) with the settings a
# GPU adds (fp16, CUDA graphs, TF32, pinned memory mean something there).
R, G = PEAK_GIB["resnet50"], PEAK_GIB["gpt2"]
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
    # ResNet-50's cached setting n/a where its step allocates nothing (its
    # check decides: caching_allocator.c, alloc_note; its trainer keeps every
    # buffer from the build, as on the CPU): its baseline and A/A copy stay
    # alive. GPT-2's step allocated 32.5 KiB on the CPU: timed, rebuilt every
    # round for the policy (assumed so on a GPU too; not measured there)
    "caching_allocator": [("resnet50", [1], 3, 0), ("gpt2", [2], 3, 1)],
    "tf32_step": [("resnet50", [3], 4, 0), ("gpt2", [2], 3, 0)],  # + fp32 convolutions (ResNet)
    "debug_apis": [("resnet50", [2], 3, 0), ("gpt2", [2], 3, 0)],
    "profiler": [("resnet50", [2], 3, 0), ("gpt2", [2], 3, 0)],
    # per workload 4 checks (3 settings, the baseline's second), each of the
    # settings' notes a fresh trainer and an epoch (its own verdict): 8 units
    # with 8-step epochs (THEN), 4 + 3 x (BUILD_S + 0.5) / CHECK_S with 4
    "host_syncs": [("resnet50_epoch", [3], 6.3, 0), ("gpt2_epoch", [3], 6.3, 0)],
    "large_batch_optimizers": [("small_cnn", [3, 2], 7, 0)],
    "mixed_precision": [("resnet50", [3], 4, 0, 0, {"peaks": [[R, R50_AMP, R50_AMP, R]]}),
                        ("gpt2", [3], 4, 0, 0, {"peaks": [[G, GPT2_AMP, GPT2_AMP, G]]})],
    "channels_last": [("resnet50", [2, 2], 6, 0, 0,
                       {"peaks": [[R, 18.70, R], [R50_AMP, R50_AMP, R50_AMP]]})],
    # the H200's check peaks: store 10.0, checkpointing 9.5 GiB; at 4x the
    # batch 35.4 and 33.5
    "checkpointing": [("gpt2", [2], 3, 0, 0, {"peaks": [[9.99, 9.52, 9.99]]}),
                      ("gpt2x4", [2], 3 * CHECK_BIG, 0, 0, {"peaks": [[35.36, 33.48, 35.36]]})],
    "no_grad_eval": [("small_cnn", [2], 3, 0)],
    # the gpu profile leaves the small CNN's step part out (gpu_workloads).
    # On CUDA each big model has 10 stages (ResNet-50: grads_to_none, conv
    # bias, fused optimizer, autotuner, tf32, debug APIs, channels last,
    # bf16, pinned memory, graphs; GPT-2 has fused GELU, layer norm and
    # attention for the conv three), so 21 settings, every one compared with
    # all off (one group): 10 stages, all on, 9 leave-one-outs (graphs need
    # debug APIs off), of which all on is the last stage and all on but
    # graphs the one before (step_harness.c, same_as: timed once for both
    # rows): 19 timed, and the A/A arm. Checks: 19, the baseline's second,
    # and the update witness's controls for its bf16 settings (the tiny
    # ResNet-50 on the CPU: 43 check lines, 25 of them draws of a build and
    # a step): 30 checks' worth. On ResNet-50 14 timed settings tune: the 7
    # stages from conv_autotune on and 7 leave-one-outs (not conv_autotune's,
    # not debug's, not graphs', which is the pinned-memory stage)
    "waterfall": [("resnet50", [19], 30, 0, 14), ("gpt2", [19], 30, 0)],
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
# gelu's float64 reference (bench/techniques/gelu.c, reference): once for
# the largest size on every thread instead of per size on one; the gpu
# profile's sizes (2^10..2^26 elements, 2^27 in all) at this VM's 35 ns an
# element forward and backward on one core: 4.7 s, then 2^26 on 15 threads
# 0.16 s (the H200 run had 17 s between gelu's rounds and its rows; its
# host's core assumed as fast as this VM's)
GELU_REF_CUT_S = 35e-9 * (2**27 - 2**26 / 15)
MEASURED_OTHER = {  # name: (measured s less what was cut since, of which rounds s, gpu budget s)
    "ceilings": (40.7 - CEILINGS_CUT_S, 0, 0),
    "gelu": (68.3 - GELU_REF_CUT_S, 50.2, 10),
    "fused_layernorm": (14.1, 12.0, 10),
    "fused_attention": (32.6, 31.9, 16),
    "mixed_precision_ops": (14.2, 12.7, 12),
}
UNMEASURED_OTHER = {"fused_optimizer": 12, "tf32": 12, "conv_autotuner": 24,
                    "caching_allocator_ops": 5, "pinned_memory_bw": 8, "scaling_model": 1,
                    "ddp_sweep": 14, "validation_frequency": 20}
# the H200 run's wall times (bench:all: ... took), and what those techniques
# were then where they have changed since (channels_last: fp32 alone;
# checkpointing: every arm rebuilt every round; host_syncs: 8-step epochs)
MEASURED_STEP = {"mixed_precision": 46.5, "channels_last": 20.9, "checkpointing": 105.5,
                 "fused_gelu_step": 17.5, "conv_bias": 18.3, "host_syncs": 165.4}
THEN = {"channels_last": [("resnet50", [2], 3, 0)],
        "host_syncs": [("resnet50_epoch8", [3], 8, 0), ("gpt2_epoch8", [3], 8, 0)],
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
# waterfall's "+ cuda_graphs" (all on, timed once) and every leave-one-out
# but graphs' own and the n/a ones (9 of its 19 timed on either model)
GRAPH_ARMS = {"cuda_graphs": 1, "waterfall": 9}

# techniques whose arms take their checks' trainers as their first builds
# (step_harness.c, adopts: a step metric, not per sample, no prepare hook,
# not rebuilt every round by design); the epoch kinds never do
ADOPTS = set(STEP) - {"batch_size", "large_batch_optimizers", "caching_allocator"}


def group_modes(kind, groups, rebuild_each, opts, device, graph_arms=0):
    """Per group: "alive", "parked" or "rebuilt", as tb_step_plan_park
    decides (step_plan.c) in 85% of the device's memory. The techniques
    with arms that capture (GRAPH_ARMS) have one group a workload."""
    if rebuild_each:
        return ["rebuilt"] * len(groups)
    peaks = opts.get("peaks") or [[PEAK_GIB[kind]] * (k + 1) for k in groups]
    graphs = [graph_arms > 0] * len(groups)
    kept = KEPT_GIB[kind]
    limit = SHARE * DEVICES[device][1]
    sums = [sum(p) for p in peaks]
    # tb_step_plan_alone: the largest groups go until the rest and the
    # largest arm gone fit
    alive, most, away = sum(sums), 0.0, [0] * len(groups)
    while alive + most > limit:
        left = [g for g in range(len(groups)) if not away[g]]
        if not left:
            break
        g = max(left, key=lambda g: sums[g])
        away[g] = 1
        alive -= sums[g]
        most = max([most] + peaks[g])
    if not any(away):
        return ["alive"] * len(groups)

    def fits(parked):
        held = sum(kept * len(peaks[g]) if parked[g] else sums[g] for g in range(len(groups)))
        acts = max(p - kept for g in range(len(groups)) if parked[g] for p in peaks[g])
        return held + acts <= limit
    graph_alive = any(graphs[g] and not away[g] for g in range(len(groups)))
    if not graph_alive and fits(away):
        return ["parked" if a else "alive" for a in away]
    if fits([1] * len(groups)):
        return ["parked"] * len(groups)
    return ["rebuilt" if a else "alive" for a in away]


def workload_s(prof, kind, groups, checks, rebuild_each, tuned=0, opts=None, graphs=False,
               graph_arms=0, device="h100", modes=None, adopt=False, then=False):
    p = PROFILES[prof]
    small = kind.startswith("small_cnn")
    # the small CNN's steps are launch-bound and its loader epochs the CPU's
    scale = 1.0 if small else step_scale(device)
    u = STEP_S[kind] * scale
    rep_units = max(1, math.ceil(1.05 * p["min_rep"] / u))
    rep = rep_units * u
    build = SMALL_BUILD_S if small else BUILD_S
    modes = modes or group_modes(kind, groups, rebuild_each, opts or {}, device, graph_arms)
    total_arms = sum(k + 1 for k in groups)
    # a check's 3 steps at this device's pace (CHECK_S was the H200's; a
    # 4x-batch check unit is CHECK_BIG of them)
    step0 = STEP_S[kind.replace("_epoch8", "").replace("_epoch", "")]  # an epoch kind's step
    check_s = (SMALL_CHECK_S if small else
               CHECK_S + (scale - 1) * 3 * step0 / (CHECK_BIG if kind == "gpt2x4" else 1))
    s = (SETUP_S if small or then else SETUP_BIG_S) + checks * (
        check_s + (GRAPH_CHECK_EXTRA_STEPS * u if graphs else 0))
    for g, (k, mode) in enumerate(zip(groups, modes)):
        arms = k + 1                 # a baseline and k compared arms (its A/A copy among them)
        slots = 2 * k + 1
        share = arms / total_arms    # of the workload's tuned and capturing arms
        # arms whose first build is their check's trainer, unparked: every
        # one but the workload's first check's (step_harness.c, adopts)
        took = 0 if not adopt or mode == "rebuilt" else arms - (1 if g == 0 else 0)
        fresh = arms - took
        s += fresh * (build + p["warmup"] * u + p["probes"](u, build + p["warmup"] * u) * u)
        s += took * (UNPARK_S + p["probes"](u, UNPARK_S) * u)
        s += took / arms * graph_arms * share * (u + CAPTURE_S)  # a capture again
        s += MIN_ROUNDS * slots * rep
        if mode == "rebuilt":        # every arm rebuilt and warmed every round
            s += (MIN_ROUNDS - 1) * arms * ((build if small else BUILD_ALONE_S) + p["warmup"] * u)
        elif "_epoch" not in kind:
            s += arms * (build + p["warmup"] * u)
        if mode == "parked":         # before each slot: an unpark; a capturing arm's
            # slots (their share of the group's) also a step that captures again
            slots_graph = slots * graph_arms / total_arms
            s += MIN_ROUNDS * (slots * UNPARK_S + slots_graph * (u + CAPTURE_S))
        # a tuned arm's builds: its check, its warm-up, its rebuilds
        builds = 2 - took / arms     # first build (unless taken) and rebuild
        s += tuned * share * TUNE_S * (1 + (MIN_ROUNDS - 1 if mode == "rebuilt" else builds))
        s += graph_arms * share * GRAPH_CHECK_EXTRA_STEPS * u * builds
    return s


def step_s(name, prof, table=STEP, device="h100", then=False):
    graphs = prof == "gpu" and name in GRAPH_TECHS
    ga = GRAPH_ARMS.get(name, 0) if prof == "gpu" else 0
    s = 0
    for w in table.get(name, STEP[name]):
        kind, groups, checks, rebuild_each = w[:4]
        tuned = w[4] if len(w) > 4 else 0
        opts = w[5] if len(w) > 5 else {}
        # the H200 run's code: alive, or every arm rebuilt (no parking then)
        modes = (["rebuilt" if rebuild_each else "alive"] * len(groups)) if then else None
        adopt = name in ADOPTS and not then and "_epoch" not in kind
        s += workload_s(prof, kind, groups, checks, rebuild_each, tuned, opts, graphs, ga,
                        device, modes, adopt, then)
    return s + (AFTER_STEPS_S.get(name, 0) if prof == "gpu" else 0)


def rows_for(device):
    rows = []
    for name in STEP:
        rows.append((name, step_s(name, "gpu", device=device), "model, gpu row"))
    for name, (meas, rounds, budget) in MEASURED_OTHER.items():
        fit = min(rounds, 0.85 * budget) if rounds else 0
        rows.append((name, meas - rounds + fit, "H200 measured, rounds to budget" if rounds
                     else "H200 measured, less what was cut since"))
    for name, budget in UNMEASURED_OTHER.items():
        rows.append((name, budget + 2.0, "budget + 2 s (not run on a GPU)"))
    return rows


def main():
    args = sys.argv[1:]
    if "--check" in args:
        print("technique            H200 measured  model (full's row)")
        for name, meas in MEASURED_STEP.items():
            print(f"{name:20s} {meas:10.1f} s {step_s(name, 'full', THEN, 'h200', True):12.1f} s")
        return
    device = "h100"
    for a in args:
        if a.startswith("--device="):
            device = a.split("=", 1)[1]
            if device not in DEVICES:
                sys.exit(f"gpu_estimate.py: --device={device}: one of {', '.join(DEVICES)}")
        else:
            sys.exit(f"gpu_estimate.py: unknown argument {a}")
    total = 0
    for name, s, how in sorted(rows_for(device), key=lambda r: -r[1]):
        total += s
        print(f"{name:24s} {s:7.1f} s  {how}")
    what = DEVICES[device][0]
    print(f"{'total':24s} {total:7.1f} s  ({total / 60:.1f} min on {what}; an estimate)")
    for other in DEVICES:
        if other != device:
            t = sum(s for _, s, _ in rows_for(other))
            print(f"# on {DEVICES[other][0]}: {t:.1f} s ({t / 60:.1f} min; an estimate)")


if __name__ == "__main__":
    main()
