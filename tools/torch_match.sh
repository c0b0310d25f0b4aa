#!/bin/bash
# torch_match.sh - every model against PyTorch at its reduced, seeded size:
# exports each with bench:export_model (CPU backend, one SGD step) and runs
# tools/torch_match.py on it. Outside CI (PyTorch is a multi-GB download).
#
#   PYTHON=/work/torch-venv/bin/python tools/torch_match.sh [OUT_DIR] [CASE...]
#
# OUT_DIR defaults to a temporary folder; CASE (a model, or resnet50_4blocks)
# defaults to all of them.
# Exit status: 0 when every model matched, 1 when any did not (or its
# export failed).
set -uo pipefail

py="${PYTHON:-python3}"
out="$(realpath -m "${1:-$(mktemp -d)}")"
shift || true
cd "$(dirname "$0")/.." || exit 1
models=("$@")
((${#models[@]})) || models=(small_cnn wide_cnn transformer resnet50 resnet50_4blocks gpt2)

# The reduced configurations of issue 13 (the small models at their own size).
# ResNet-50 at 64x64: at 32x32 (batch 4) float32 itself cannot give its logits
# to 1e-4 (PyTorch float32 is 1.1e-3 from float64 there). Its gradients are
# ill-conditioned from stage 2 on (torch_match.py says so), so the same
# network cut after its first 4 bottlenecks (stage 1 and the stride-2
# projection block opening stage 2) checks the bottleneck's backward too.
declare -A args=(
    [small_cnn]="--model=small_cnn --batch-size=4"
    [wide_cnn]="--model=wide_cnn --batch-size=4"
    [transformer]="--model=transformer --batch-size=4"
    [resnet50]="--model=resnet50 --image-size=64 --classes=10 --batch-size=4"
    [resnet50_4blocks]="--model=resnet50 --resnet-blocks=4 --image-size=64 --classes=10 --batch-size=4"
    [gpt2]="--model=gpt2 --layers=2 --context=64 --batch-size=2"
)

bazel build //bench:export_model >/dev/null 2>&1 || { echo "bazel build //bench:export_model failed"; exit 1; }
bin="$(bazel info bazel-bin 2>/dev/null)/bench/export_model"
failed=0
for m in "${models[@]}"; do
    [[ -n "${args[$m]+x}" ]] || { echo "unknown model $m"; failed=1; continue; }
    echo "=== $m: bench:export_model ${args[$m]} --seed=0 --threads=1"
    # shellcheck disable=SC2086
    if ! "$bin" ${args[$m]} --seed=0 --threads=1 --out="$out/$m" 2>&1 |
        grep -v "no usable GPU"; then
        echo "FAIL  $m: export failed"
        failed=1
        continue
    fi
    "$py" tools/torch_match.py --sensitivity "$out/$m" || failed=1
done
exit $failed
