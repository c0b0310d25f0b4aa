#!/bin/bash
# technique_test.sh BINARY GOLDEN_CSV
# Runs one technique binary in the tiny profile on the CPU into a fresh
# folder, after those of its declared `after` whose binaries lie beside it
# (bench/BUILD's TEST_RUNS_FIRST: the ones whose results it reads), and
# checks what it wrote against what its declaration expects (--describe;
# check_outputs.py).
set -euo pipefail
bin="$1"; golden="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
out="$tmp/out"
mkdir -p "$out"
"$bin" --describe > "$tmp/describe.json"
after=$(python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))["after"]))' \
    "$tmp/describe.json")
for a in $after; do
    first="$(dirname "$bin")/$a"
    if [ -x "$first" ]; then
        "$first" --device=cpu --profile=tiny --threads=2 --out-dir="$out"
    else
        echo "note: $a (declared after) is not in this test's data; not run first"
    fi
done
"$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$out"
# Under bazel test this script runs as bench/<name>_test: find the checker
# in the runfiles, else beside the script's source.
checker="${TEST_SRCDIR:-/nonexistent}/tunebench/bench/harness/check_outputs.py"
[ -f "$checker" ] || checker="$(dirname "$(readlink -f "$0")")/check_outputs.py"
python3 "$checker" "$out" "--describe=$tmp/describe.json" "$golden"
