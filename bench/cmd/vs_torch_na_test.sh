#!/bin/bash
# vs_torch_na_test.sh: bench:vs_torch with a Python that cannot import torch
# (/bin/false) exits 0, says so on stderr, and writes one n/a row per
# configuration ("n/a: PyTorch not installed") in the results schema.
set -uo pipefail
bin="$TEST_SRCDIR/$TEST_WORKSPACE/bench/vs_torch"
out="${TEST_TMPDIR:-$(mktemp -d)}/out"
fail() { echo "FAIL: $*"; exit 1; }

"$bin" --python=/bin/false --out-dir="$out" > "$out.stdout" 2> "$out.stderr"; rc=$?
[ "$rc" = 0 ] || fail "exited $rc: $(cat "$out.stderr")"
grep -q "PyTorch is not installed" "$out.stderr" || fail "no stderr message: $(cat "$out.stderr")"
csv=$(ls "$out"/results/*/vs_torch.csv 2>/dev/null | head -1)
[ -n "$csv" ] || fail "no results/<device>/vs_torch.csv under $out"
head -1 "$csv" | grep -q "^technique," || fail "no header: $(head -1 "$csv")"
rows=$(tail -n +2 "$csv" | grep -c "n/a: PyTorch not installed")
[ "$rows" = 8 ] || fail "want 8 n/a rows, got $rows: $(cat "$csv")"
for c in "fp32 nchw" "channels-last" "bf16 autocast" "channels-last bf16" "gpt2" \
         "small_cnn 28x28 b32 fp32" "small_cnn 28x28 b32 bf16" "gpt2 2 layers ctx128 b2 bf16"; do
  grep -q "$c" "$csv" || fail "no row for $c"
done
# TB_TORCH_PYTHON is the default when --python is not given
TB_TORCH_PYTHON=/bin/false "$bin" --out-dir="$out/env" > /dev/null 2> "$out.env" ||
  fail "TB_TORCH_PYTHON=/bin/false exited non-zero"
grep -q "/bin/false" "$out.env" || fail "TB_TORCH_PYTHON not used: $(cat "$out.env")"
# bad input is refused before anything is written: the earlier CSV stays
before=$(md5sum "$csv")
"$bin" --python=/bin/false --only=no_such_model --out-dir="$out" > /dev/null 2> "$out.only" &&
  fail "--only matching nothing exited 0"
grep -q "matches no configuration" "$out.only" || fail "--only: $(cat "$out.only")"
"$bin" --python=/nonexistent/python --out-dir="$out" > /dev/null 2> "$out.py" &&
  fail "--python that cannot run exited 0"
grep -q "cannot run" "$out.py" || fail "--python: $(cat "$out.py")"
[ "$(md5sum "$csv")" = "$before" ] || fail "a refused run changed $csv"
echo "PASS: n/a path"
