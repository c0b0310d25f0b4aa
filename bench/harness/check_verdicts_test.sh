#!/bin/bash
# check_verdicts_test.sh GRADS_TO_NONE HOST_SYNCS BATCH_SIZE
# What a step row's correctness columns say, in the tiny profile on the CPU
# (results/README.md, "The step techniques' correctness check"):
#   - a baseline whose training diverges (TB_TEST_LR, test only: every
#     trainer at a learning rate of 1e30, losses nan) makes its rows n/a,
#     "not checked: ... diverged", never "exact" (nan against nan compared
#     as equal before), while their timings stand;
#   - host_syncs' settings are judged by the check that exercises them (the
#     epoch's mean loss, read later), not by the check's training steps,
#     which read the loss every step whatever the setting: checked_against
#     says so and the tolerance is that check's;
#   - the note's "loss at step N" is the step its check ran to (batch_size's
#     settings run different numbers of steps over the same samples).
# Shapes and verdicts, never timings.
set -euo pipefail
gtn="$1"; hs="$2"; bs="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }

TB_TEST_LR=1e30 "$gtn" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/dv" \
    > /dev/null 2> "$tmp/dv.err" || fail "diverged run: exit $?: $(tail -3 "$tmp/dv.err")"
# host_syncs' compared settings are n/a on the CPU (no sync to avoid); the
# test-only switch times them here so that their check runs in CI
TB_TEST_HOST_SYNCS_ON_CPU=1 "$hs" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/hs" \
    > /dev/null 2> "$tmp/hs.err" ||
    fail "host_syncs: exit $?: $(tail -3 "$tmp/hs.err")"
"$bs" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/bs" > /dev/null 2> "$tmp/bs.err" ||
    fail "batch_size: exit $?: $(tail -3 "$tmp/bs.err")"
python3 - "$tmp" <<'PY'
import csv, glob, re, sys
tmp = sys.argv[1]
def rows(run, name):
    return list(csv.DictReader(open(glob.glob("%s/%s/results/*/%s.csv" % (tmp, run, name))[0])))
dv = [r for r in rows("dv", "grads_to_none") if r["metric"] == "step time"]
if not dv:
    sys.exit("FAIL: no step rows in the diverged run")
for r in dv:
    if r["correctness"] != "n/a" or "not checked: the baseline's loss at step" not in r["note"] \
            or "diverged" not in r["note"]:
        sys.exit("FAIL: diverged %s %s: %s, %r" % (r["workload"], r["setting"], r["correctness"],
                                                   r["note"][:300]))
timed = [r for r in dv if r["is_baseline"] != "1" and r["speedup"]]
if not timed:
    sys.exit("FAIL: the diverged run's settings lost their timings")
hs = [r for r in rows("hs", "host_syncs") if r["is_baseline"] != "1" and r["correctness"] != "n/a"]
if not hs:
    sys.exit("FAIL: host_syncs has no checked setting")
for r in hs:
    if r["checked_against"] != "baseline's epoch mean loss" or r["tolerance"] != "1e-05" or \
            r["correctness"] not in ("exact", "within tolerance"):
        sys.exit("FAIL: host_syncs %s %s: %s against %r, tolerance %r" % (
            r["workload"], r["setting"], r["correctness"], r["checked_against"], r["tolerance"]))
steps = {}
for line in open("%s/bs.err" % tmp):
    m = re.search(r"check (.+?)\s+loss at step (\d+) ", line)
    if m:
        steps[m.group(1).strip()] = int(m.group(2))
seen = 0
for r in rows("bs", "batch_size"):
    m = re.search(r"loss at step (\d+) ", r["note"])
    if not m or r["setting"] not in steps:
        continue
    seen += 1
    if int(m.group(1)) != steps[r["setting"]]:
        sys.exit("FAIL: batch_size %s: note says step %s, its check ran %d" % (
            r["setting"], m.group(1), steps[r["setting"]]))
if len(set(steps.values())) < 2 or not seen:
    sys.exit("FAIL: batch_size's checks should run different step counts: %r" % steps)
print("ok: %d diverged rows n/a, %d host_syncs rows by their own check, %d batch_size notes"
      % (len(dv), len(hs), seen))
PY
echo PASS
