#!/bin/bash
# vs_torch_slow_test.sh: bench:vs_torch leaves out a configuration whose
# PyTorch step outlasts the budget. With a stand-in Python
# (vs_torch_fake_python.sh) whose bf16 steps never end, --only=small_cnn
# --budget=2 must: exit 0; say on stderr that the bf16 configuration's first
# step was still running; write its two rows n/a saying so; time the fp32
# configuration alone (its tunebench row with a speedup); and write the
# model's bf16 gain row n/a. Without the rule the bf16 arm would wait on a
# step that never ends.
set -uo pipefail
dir="$TEST_SRCDIR/$TEST_WORKSPACE/bench"
out="${TEST_TMPDIR:-$(mktemp -d)}/out"
fail() { echo "FAIL: $*"; exit 1; }

FAKE_SLOW=--amp=bf16 "$dir/vs_torch" --python="$dir/cmd/vs_torch_fake_python.sh" \
  --only=small_cnn --budget=2 --out-dir="$out" > "$out.stdout" 2> "$out.stderr"; rc=$?
[ "$rc" = 0 ] || fail "exited $rc: $(tail -5 "$out.stderr")"
grep -q "small_cnn 28x28 b32 bf16 autocast: PyTorch's first step was still running after" \
  "$out.stderr" || fail "no stderr line for the slow configuration: $(cat "$out.stderr")"
csv=$(ls "$out"/results/*/vs_torch.csv 2>/dev/null | head -1)
[ -n "$csv" ] || fail "no results/<device>/vs_torch.csv under $out"
row() { grep "^vs_torch,[^,]*,[^,]*,$1," "$csv"; }
for side in pytorch tunebench; do
  row "$side small_cnn 28x28 b32 bf16 autocast" | grep -q "n/a: PyTorch's first step was still running" ||
    fail "$side bf16 row not n/a: $(row "$side small_cnn 28x28 b32 bf16 autocast")"
done
row "bf16 gain small_cnn 28x28 b32" | grep -q "n/a: a precision's PyTorch step outlasted" ||
  fail "gain row not n/a: $(row "bf16 gain small_cnn 28x28 b32")"
# the fp32 configuration timed: its tunebench row has a speedup (column 17)
speedup=$(row "tunebench small_cnn 28x28 b32 fp32" | cut -d, -f17)
[ -n "$speedup" ] || fail "fp32 not timed: $(row "tunebench small_cnn 28x28 b32 fp32")"
[ "$(tail -n +2 "$csv" | wc -l)" = 5 ] || fail "want 5 rows: $(cat "$csv")"
echo "PASS: the slow configuration left out, the other timed (speedup $speedup)"
