#!/bin/bash
# technique_test.sh BINARY TECHNIQUE GOLDEN_CSV [check_outputs.py flags...]
# Runs one technique binary in the tiny profile on the CPU into a fresh
# folder and checks the shape of what it wrote (bench/check_outputs.py).
set -euo pipefail
bin="$1"; tech="$2"; golden="$3"; shift 3
out="${TEST_TMPDIR:-$(mktemp -d)}/out"
mkdir -p "$out"
"$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$out"
python3 "$(dirname "$0")/check_outputs.py" "$out" "$tech" "$golden" "$@"
