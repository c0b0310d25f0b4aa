#!/bin/bash
# device_flag_test.sh BINARY: a bench binary asked for --device=cuda on a
# machine with no usable GPU exits 2 with a clear error; an unknown flag or
# device exits 2 naming it; --help exits 0. Results already written stay.
set -uo pipefail
bin="$1"
out="${TEST_TMPDIR:-$(mktemp -d)}/out"
fail() { echo "FAIL: $*"; exit 1; }

"$bin" --help > "$out.help" 2>&1; rc=$?
[ "$rc" = 0 ] || fail "--help exited $rc"
grep -q -- "--device" "$out.help" || fail "--help does not list --device"

"$bin" --bogus-flag > "$out.bogus" 2>&1; rc=$?
[ "$rc" = 2 ] || fail "unknown flag exited $rc, want 2"
grep -q "unknown flag '--bogus-flag'" "$out.bogus" || fail "unknown flag not named: $(cat "$out.bogus")"

"$bin" --device=tpu > "$out.tpu" 2>&1; rc=$?
[ "$rc" = 2 ] || fail "--device=tpu exited $rc, want 2"
grep -q "unknown device 'tpu'" "$out.tpu" || fail "bad device not named: $(cat "$out.tpu")"

if [ -e /dev/nvidia0 ]; then
  echo "a GPU device node exists: skipping the no-GPU checks"
  exit 0
fi
mkdir -p "$out/results/keep"
echo "earlier,result" > "$out/results/keep/old.csv"
"$bin" --device=cuda --out-dir="$out" > "$out.cuda" 2>&1; rc=$?
[ "$rc" = 2 ] || fail "--device=cuda without a GPU exited $rc, want 2: $(cat "$out.cuda")"
grep -q "no CUDA device is usable" "$out.cuda" || fail "no clear error: $(cat "$out.cuda")"
grep -q -- "--device=cpu" "$out.cuda" || fail "error does not say what to do"
[ "$(cat "$out/results/keep/old.csv")" = "earlier,result" ] || fail "earlier results touched"
echo "ok: device flag checks passed"
