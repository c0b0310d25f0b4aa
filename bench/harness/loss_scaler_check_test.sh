#!/bin/bash
# loss_scaler_check_test.sh BINARY
# The step checks with a loss scaler that skips steps (fp16's, GradScaler's
# rules; lib/nn/loss_scaler.h). The CPU has no fp16, so TB_TEST_LOSS_SCALE
# (test only, step_harness.c) makes every check's trainer scale its loss, from
# a scale so large that the first steps overflow. In the tiny profile,
# bench:mixed_precision's ResNet-50 rows (fp32 and bf16) must then say that
# K >= 1 of their N check steps were skipped from that scale and that the
# check ran again from a smaller one, and keep a verdict that is not DIFFERS
# (both sides compared over their updates, not over skipped steps). Without
# the variable no row mentions a loss scaler. Shapes and verdicts, never
# timings.
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }
TB_TEST_LOSS_SCALE=1e38 "$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/scaled" \
    > /dev/null 2> "$tmp/scaled.err" || fail "exit $?: $(tail -5 "$tmp/scaled.err")"
grep -q "its loss scaler skipped steps" "$tmp/scaled.err" || fail "stderr does not say so"
"$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/plain" > /dev/null 2>&1 ||
    fail "the run without TB_TEST_LOSS_SCALE failed"
python3 - "$tmp" <<'PY'
import csv, glob, re, sys
tmp = sys.argv[1]
def rows(run):
    path = glob.glob("%s/%s/results/*/mixed_precision.csv" % (tmp, run))[0]
    return [r for r in csv.DictReader(open(path)) if r["metric"] == "step time"]
seen = 0
for r in rows("scaled"):
    if not r["workload"].startswith("resnet50") or r["correctness"] == "n/a":
        continue
    m = re.search(r"loss scaler: from scale ([0-9.e+]+), (\d+) of the (\d+) check steps overflowed "
                  r"and were skipped \(as GradScaler skips them\); checked again from scale ([0-9.e+]+)",
                  r["note"])
    if not m:
        sys.exit("FAIL: %s: no loss-scaler note: %r" % (r["setting"], r["note"][:400]))
    s0, k, n, s1 = float(m.group(1)), int(m.group(2)), int(m.group(3)), float(m.group(4))
    if not (s0 == 1e38 and 1 <= k <= n and 0 < s1 < s0):
        sys.exit("FAIL: %s: scale %g, %d of %d skipped, again from %g" % (r["setting"], s0, k, n, s1))
    if r["correctness"] == "DIFFERS":
        sys.exit("FAIL: %s: DIFFERS after the check ran again: %r" % (r["setting"], r["note"][:400]))
    print("ok: %s: %d of %d skipped from %g, checked again from %g: %s"
          % (r["setting"], k, n, s0, s1, r["correctness"]))
    seen += 1
if seen < 2:
    sys.exit("FAIL: %d ResNet-50 rows with a loss-scaler note, want fp32 and bf16" % seen)
for r in rows("plain"):
    if "loss scaler" in r["note"]:
        sys.exit("FAIL: %s mentions a loss scaler without one: %r" % (r["setting"], r["note"][:300]))
print("ok: no loss-scaler note without TB_TEST_LOSS_SCALE")
PY
