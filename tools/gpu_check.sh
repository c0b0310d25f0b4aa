#!/bin/bash
# tools/gpu_check.sh - runs the GPU kit (//kit:gpu_kit, tools/build_kit.sh) on a
# machine with the NVIDIA driver and the CUDA toolkit but no Bazel and no
# network, and writes one folder to bring back.
#
#   tools/gpu_check.sh KIT OUTDIR [--device=cuda|cpu] [--quick] [--stage=STAGES]
#
# KIT: the kit's tar.xz (or the folder it unpacks to). STAGES, comma-separated,
# default all of them in this order, each short enough for a 10-minute command:
#   fingerprint  OUTDIR/fingerprint/: nvidia-smi -q, driver, toolkit, CPU, kit
#   selfcheck    OUTDIR/selfcheck.txt: every op against the CPU reference
#   profile      OUTDIR/run/: bench:all --profile=${TB_GPU_PROFILE:-gpu} (the
#                default profile, saying so, where bench:all does not know it);
#                stopped (SIGINT, results kept) after ${TB_STAGE_LIMIT:-540} s,
#                and run again it continues the same run (--resume)
#   torch        OUTDIR/torch_ratio.csv: tunebench's train steps/s over PyTorch's
#                (tools/torch_step.py) on ResNet-50 and GPT-2, where torch imports,
#                with TF32 off on both sides, then allowed on both
# --quick: tiny sizes and a few techniques (the CPU rehearsal). OUTDIR/stages.txt
# has one line per stage run with its exit status; exit 1 when one failed.
# Without gnuplot the plots' scripts (.gp, .dat) are written but not drawn:
# `cd OUTDIR/run/plots/<device> && gnuplot NAME.gp` draws them later.
# Rehearsed on a machine without a GPU:
#   env -i PATH=/usr/bin:/bin bash tools/gpu_check.sh KIT OUT --device=cpu --quick
set -uo pipefail

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
die() { echo "gpu_check: $*" >&2; exit 2; }
say() { echo "gpu_check: $*" >&2; }

[ "$#" -ge 2 ] || usage
kit="$1"; out="$2"; shift 2
device=cuda; quick=0; stages=fingerprint,selfcheck,profile,torch
for a in "$@"; do
  case "$a" in
    --device=cuda|--device=cpu|--device=cuda:[0-9]*) device="${a#--device=}" ;;
    --device=*) die "bad $a: use --device=cuda, cuda:N or cpu" ;;
    --quick) quick=1 ;;
    --stage=*) stages="${a#--stage=}" ;;
    -h|--help) usage ;;
    *) die "unknown argument '$a' (see --help)" ;;
  esac
done
for s in ${stages//,/ }; do
  case "$s" in fingerprint|selfcheck|profile|torch) ;;
    *) die "unknown stage '$s': use fingerprint, selfcheck, profile, torch" ;; esac
done
mkdir -p "$out" || die "cannot create $out"
out="$(cd "$out" && pwd)"

# The kit's Fashion-MNIST is raw IDX (xz packs it smaller); the loader and
# data_format read the .gz files Debian's package installs: make them.
gzip_data() {
  local f
  for f in "$1"/data/fashion-mnist/*-ubyte; do
    [ -f "$f" ] || continue
    gzip -n -6 "$f" || return 1
  done
}

# ---- unpack (once per kit: later stages reuse it) ----
if [ -d "$kit" ]; then
  root="$(cd "$kit" && pwd)"
else
  [ -f "$kit" ] || die "no kit at '$kit': build it with tools/build_kit.sh (README: On a GPU machine)"
  sum=$(cksum < "$kit" | cut -d' ' -f1)
  unpack="${TMPDIR:-/tmp}/tunebench-gpu-kit.$sum"
  if [ ! -f "$unpack/tunebench-gpu-kit/MANIFEST" ]; then
    say "unpacking $kit ($(stat -c %s "$kit") bytes)"
    rm -rf "$unpack.part" && mkdir -p "$unpack.part" &&
      tar -C "$unpack.part" -xJf "$kit" && gzip_data "$unpack.part/tunebench-gpu-kit" &&
      rm -rf "$unpack" && mv "$unpack.part" "$unpack" || die "cannot unpack $kit"
  fi
  root="$unpack/tunebench-gpu-kit"
fi
bin="$root/tunebench/bench"
[ -x "$bin/all" ] && [ -x "$bin/selfcheck" ] || die "$root is not a tunebench GPU kit (no tunebench/bench/all)"
export RUNFILES_DIR="$root"   # bench:all finds the techniques in $RUNFILES_DIR/tunebench/bench
# The kit's own copy of Fashion-MNIST, unless the caller names one.
if [ -z "${TB_DATA_DIR:-}" ] && [ -f "$root/data/fashion-mnist/train-images-idx3-ubyte.gz" ]; then
  export TB_DATA_DIR="$root/data/fashion-mnist"
fi

# ---- the CUDA toolkit's libraries: the kit leaves them to this machine ----
missing_libs() { ldd "$bin/selfcheck" 2>/dev/null | awk '/not found/{print $1}' | sort -u; }
find_cuda_libs() {
  local miss dirs=() d lib py
  miss="$(missing_libs)"
  [ -n "$miss" ] || return 0
  py=$(python3 -c 'import site,sys; print("\n".join(site.getsitepackages()+[site.getusersitepackages()]))' 2>/dev/null)
  for d in ${CUDA_PATH:+$CUDA_PATH/lib64} /usr/local/cuda/lib64 /usr/local/cuda-*/lib64 \
           /usr/local/cuda*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu $py; do
    [ -d "$d" ] || continue
    for lib in $miss; do
      while read -r hit; do
        dirs+=("$(dirname "$hit")")
      done < <(find "$d" -maxdepth 5 -name "$lib" 2>/dev/null | head -1)
    done
  done
  [ "${#dirs[@]}" -gt 0 ] &&
    export LD_LIBRARY_PATH="$(printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++' | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  miss="$(missing_libs)"
  if [ -n "$miss" ]; then
    say "the CUDA toolkit's libraries are missing here: $(echo $miss); install CUDA 13 with cuDNN 9 and NCCL 2 (or pip install nvidia-cudnn-cu13 nvidia-nccl-cu13 nvidia-cublas), or set CUDA_PATH"
    return 1
  fi
  say "CUDA libraries from LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}
find_cuda_libs || die "the kit's binaries cannot start (ldd $bin/selfcheck)"

# Plots: drawn where gnuplot is installed, else only their scripts are kept.
if [ "${TB_KIT_GNUPLOT:-}" = none ] || ! command -v gnuplot >/dev/null; then
  export TB_GNUPLOT=none   # lib/report/plot.h: scripts only
  say "no gnuplot: plot scripts are written, not drawn (gnuplot NAME.gp in plots/<device> later)"
fi

failed=0
record() { # stage rc seconds note
  printf '%s rc=%s %ss %s\n' "$1" "$2" "$3" "${4:-}" >> "$out/stages.txt"
  [ "$2" = 0 ] || failed=1
  say "stage $1: exit $2 in $3 s${4:+ ($4)}"
}

stage_fingerprint() {
  local f="$out/fingerprint"
  mkdir -p "$f"
  cp "$root/MANIFEST" "$f/kit_MANIFEST.txt"
  { date -u; uname -a; echo "device=$device quick=$quick"; echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"
    echo "TB_DATA_DIR=${TB_DATA_DIR:-}"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; } > "$f/host.txt"
  nvidia-smi -q > "$f/nvidia-smi-q.txt" 2>&1 || echo "nvidia-smi: not available" >> "$f/host.txt"
  nvidia-smi > "$f/nvidia-smi.txt" 2>&1 || true
  cat /proc/driver/nvidia/version > "$f/driver.txt" 2>&1 || echo "no /proc/driver/nvidia" > "$f/driver.txt"
  { command -v nvcc && nvcc --version; } > "$f/toolkit.txt" 2>&1 || echo "no nvcc on PATH" >> "$f/toolkit.txt"
  ls -l ${CUDA_PATH:-/usr/local/cuda}/lib64/ 2>/dev/null | grep -E 'cudart|cublas|cudnn|nccl' >> "$f/toolkit.txt"
  { lscpu || cat /proc/cpuinfo; } > "$f/cpu.txt" 2>&1
  ldd "$bin/selfcheck" > "$f/ldd_selfcheck.txt" 2>&1
  python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpus", torch.cuda.device_count())' \
    > "$f/torch.txt" 2>&1 || true
}

stage_selfcheck() {
  local args=(--device="$device")
  [ "$quick" = 1 ] && [ "$device" = cpu ] && args+=(--only=gelu)
  "$bin/selfcheck" "${args[@]}" 2>&1 | tee "$out/selfcheck.txt" | tail -5
  return "${PIPESTATUS[0]}"
}

profile_note=""
stage_profile() {
  local profile="${TB_GPU_PROFILE:-gpu}" args=() rc probe
  [ "$quick" = 1 ] && profile="${TB_GPU_PROFILE:-tiny}"
  # Read whole (a grep -q in a pipe would cut it short and, under pipefail,
  # turn its match into a failure).
  probe=$("$bin/all" --profile="$profile" --help 2>&1)
  if [[ "$probe" == *"bad value '$profile' for --profile"* ]]; then
    say "bench:all has no profile '$profile' in this build; running the default profile instead"
    profile_note="profile $profile unknown, ran default"
    profile=default
  fi
  args=(--device="$device" --profile="$profile" --out-dir="$out/run")
  [ "$quick" = 1 ] && args+=(--only="${TB_KIT_ONLY:-gelu,fused_layernorm,grads_to_none}")
  [ -n "${TB_KIT_ONLY:-}" ] && [ "$quick" = 0 ] && args+=(--only="$TB_KIT_ONLY")
  if ! command -v mpirun >/dev/null; then
    # The kit carries no MPI launcher: the DDP sweep (and the scaling model
    # read from it) are n/a here, not failures.
    args+=(--skip=ddp_sweep,scaling_model)
    echo "ddp_sweep, scaling_model: n/a (no mpirun on this machine; the kit carries no MPI)" > "$out/n_a.txt"
  fi
  ls "$out"/run/results/*/run_state.json >/dev/null 2>&1 && args+=(--resume) &&
    say "continuing the run in $out/run (--resume)"
  say "bench:all ${args[*]}"
  # profile.log's lines carry the time they were printed (where set-up goes)
  timeout -s INT -k 30 "${TB_STAGE_LIMIT:-540}" "$bin/all" "${args[@]}" 2>&1 |
    while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done | tee -a "$out/profile.log" |
    grep --line-buffered 'bench:all: \[\|failed\|took\|error'
  rc="${PIPESTATUS[0]}"
  if [ "$rc" = 130 ] || [ "$rc" = 124 ]; then
    profile_note="${profile_note:+$profile_note; }stopped at the stage limit: run --stage=profile again to continue"
  fi
  return "$rc"
}

# tunebench's steady-state throughput: two runs, W and W+N steps; the
# difference of their training times is N steps' time, without the warm-up.
# Prints items/s; ITEMS is the items (images or tokens) of one step.
tb_throughput() { # model unit W N batch train-flags...
  local model="$1" unit="$2" w="$3" n="$4" batch="$5" r1 r2
  shift 5
  # Exactly the samples the steps take, so no epoch ends early.
  r1=$("$bin/train" --device="$device" --model="$model" --dataset=synthetic --batch-size="$batch" \
        --max-steps="$w" --data-limit="$((w * batch))" --test-limit=1 "$@" 2>&1 |
       sed -n "s|.* \([0-9.]*\) $unit.*|\1|p" | head -1)
  r2=$("$bin/train" --device="$device" --model="$model" --dataset=synthetic --batch-size="$batch" \
        --max-steps="$((w + n))" --data-limit="$(((w + n) * batch))" --test-limit=1 "$@" 2>&1 |
       sed -n "s|.* \([0-9.]*\) $unit.*|\1|p" | head -1)
  [ -n "$r1" ] && [ -n "$r2" ] || { say "bench:train printed no $unit for $model"; return 1; }
  awk -v w="$w" -v n="$n" -v r1="$r1" -v r2="$r2" -v items="$ITEMS" 'BEGIN {
      d = (w + n) * items / r2 - w * items / r1;
      if (d <= 0) exit 1; printf "%.2f\n", n * items / d }'
}

stage_torch() {
  local tdev="$device" py="$root/torch_step.py" csv="$out/torch_ratio.csv"
  if ! python3 -c 'import torch' 2>/dev/null; then
    echo "n/a: PyTorch is not importable here (python3 -c 'import torch')" > "$csv"
    say "no PyTorch: torch_ratio.csv says n/a"
    return 0
  fi
  [ "$tdev" = cuda ] && tdev=cuda:0
  local rs=224 rb=32 ctx=1024 layers=12 gb=4 w=5 n=20 tf tflag tr tg
  [ "$quick" = 1 ] && { rs=64; rb=4; ctx=64; layers=2; gb=2; w=1; n=2; }
  echo "model,device,batch,size,unit,tf32,tunebench,torch,tunebench_over_torch" > "$csv"
  # fp32 with TF32 off on both sides (convolutions too: tunebench's CUDA
  # default, as PyTorch's, runs them in TF32, so --cudnn-tf32=false), then
  # allowed on both. tunebench's loader runs 4 workers: PyTorch's side reuses one batch
  # already on the device, so a loader in the step would be timed on one side only.
  for tf in 0 1; do
    tflag=(--cudnn-tf32=false); [ "$tf" = 1 ] && tflag=(--tf32 --cudnn-tf32=true)
    python3 "$py" --device="$tdev" --model=resnet50 --image-size=$rs --batch-size=$rb \
      --warmup=$w --steps=$n --tf32=$tf > "$out/torch_steps_tf32_$tf.csv" || return 1
    python3 "$py" --device="$tdev" --model=gpt2 --context=$ctx --layers=$layers --batch-size=$gb \
      --warmup=$w --steps=$n --header=0 --tf32=$tf >> "$out/torch_steps_tf32_$tf.csv" || return 1
    ITEMS=$rb tr=$(tb_throughput resnet50 images/s $w $n $rb --image-size=$rs --workers=4 "${tflag[@]}") || return 1
    ITEMS=$((gb * ctx)) tg=$(tb_throughput gpt2 tokens/s $w $n $gb --context=$ctx --layers=$layers --workers=4 "${tflag[@]}") || return 1
    awk -F, -v tr="$tr" -v tg="$tg" -v tf="$tf" 'NR > 1 { tb = $1 == "resnet50" ? tr : tg
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%.3f\n", $1, $2, $3, $4, $9, tf, tb, $8, tb / $8 }' \
        "$out/torch_steps_tf32_$tf.csv" >> "$csv"
  done
  cat "$csv" >&2
}

for s in ${stages//,/ }; do
  say "stage $s (device $device$([ "$quick" = 1 ] && echo ", quick"))"
  t0=$(date +%s)
  profile_note=""
  "stage_$s"; rc=$?
  record "$s" "$rc" "$(( $(date +%s) - t0 ))" "$profile_note"
done
say "done: $out (stages.txt: $(paste -sd';' "$out/stages.txt"))"
exit "$failed"
