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
"$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$out" | tee "$tmp/stdout.txt"
# The console speaks like the report: a number it does not have is "n/a (why)".
if grep -qiwE 'nan|-nan' "$tmp/stdout.txt"; then
    echo "FAIL: stdout prints nan where it means n/a:" >&2
    grep -iwE 'nan|-nan' "$tmp/stdout.txt" >&2
    exit 1
fi
# Under bazel test this script runs as bench/<name>_test: find the checker
# in the runfiles, else beside the script's source.
checker="${TEST_SRCDIR:-/nonexistent}/tunebench/bench/harness/check_outputs.py"
[ -f "$checker" ] || checker="$(dirname "$(readlink -f "$0")")/check_outputs.py"
python3 "$checker" "$out" "--describe=$tmp/describe.json" "$golden"
