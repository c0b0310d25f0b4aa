#!/bin/bash
# gpu_profile_test.sh - the gpu profile's shape, on a machine without a GPU
# (bench/harness/technique.h: the real ResNet-50 and GPT-2 at batches for
# an 80 GB GPU, in 10 minutes):
#   - the real technique binaries' gpu budgets add up to at most 600 s, and
#     every technique declares one (bench:all prints the plan per profile
#     before it opens anything; an unknown device stops it right after);
#   - their gpu run-time estimates add up to tools/gpu_estimate.py's total (a
#     cost model checked against the H200 run's log; each technique declares
#     the model's figure rounded to a second), and when
#     they add up to more than 600 s the plan says so (it does: ~19 minutes,
#     which gpu_check.sh runs in stages across visits, --resume);
#   - --profile=gpu on the CPU warns that it is sized for an 80 GB GPU;
#   - the waterfall's step part runs ResNet-50 and GPT-2 there, not the small
#     CNN (--describe's gpu_workloads; the others run the tiny test's);
#   - its workloads are the full models (rows labeled gpt2-full-synthetic),
#     and a batch that does not fit in memory is halved, then becomes n/a
#     rows saying why, never a crash (GPT-2 under a 64 MiB --mem-limit:
#     nothing fits, which makes it quick).
#
#   bazel test //bench:gpu_profile_test
# args: the bench:all binary, the fused_gelu_step binary, tools/gpu_estimate.py,
# the waterfall binary.
set -u
ALL=$1
GELU=$2
ESTIMATE=$3
WATERFALL=$4
fail() { echo "FAIL: $*" >&2; for f in "$TEST_TMPDIR"/err*; do echo "--- $f"; cat "$f"; done >&2; exit 1; }

"$ALL" --profile=gpu --device=no-such-device --out-dir="$TEST_TMPDIR/none" \
    > /dev/null 2> "$TEST_TMPDIR/err_plan"
line=$(grep "budgets of this plan per profile:" "$TEST_TMPDIR/err_plan")
[ -n "$line" ] || fail "bench:all printed no plan"
total=$(echo "$line" | sed -n 's/.* gpu \([0-9.]*\) s of 600 s$/\1/p')
[ -n "$total" ] || fail "no gpu total within its 600 s limit in: $line"
grep -q "declare no budget for profile gpu" "$TEST_TMPDIR/err_plan" &&
    fail "techniques without a gpu budget"
grep -q "profile gpu: the time budgets of" "$TEST_TMPDIR/err_plan" || fail "not planned as gpu"
echo "ok: the gpu profile's budgets add up to $total s of 600 s, every technique declares one"

# the declared estimates against the model's, which must know every technique
python3 "$ESTIMATE" > "$TEST_TMPDIR/model" || fail "gpu_estimate.py failed"
# (--help lists the techniques; the ceilings run first, before them)
{ "$ALL" --help 2>&1 | sed -n 's/^techniques: //p' | tr ' ' '\n' | grep .; echo ceilings; } |
    sort > "$TEST_TMPDIR/names"
# (the model's last line, "# on one H200: ...", is another device's total)
awk '$1 != "total" && $1 != "#" {print $1}' "$TEST_TMPDIR/model" | sort > "$TEST_TMPDIR/model_names"
[ -s "$TEST_TMPDIR/names" ] || fail "bench:all --help lists no techniques"
diff "$TEST_TMPDIR/names" "$TEST_TMPDIR/model_names" > "$TEST_TMPDIR/err_names" ||
    fail "tools/gpu_estimate.py and bench:all know different techniques (< bench:all, > model)"
python3 - "$TEST_TMPDIR/model" "$TEST_TMPDIR/err_plan" <<'PY' || fail "gpu estimates differ from tools/gpu_estimate.py's"
import re, subprocess, sys
model = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] not in ("total", "#"):
        model[f[0]] = float(f[1])
plan = open(sys.argv[2]).read()
m = re.search(r"profile gpu: the time budgets of (\d+) techniques .*estimated run time "
              r"(?:(\d+) min )?(\d+) s\)", plan)
assert m, "no gpu estimate in the plan"
est = int(m.group(2) or 0) * 60 + int(m.group(3))
total = sum(model.values())
# bench:all adds the declared est_seconds, each the model's rounded to a second
assert abs(est - total) <= len(model) / 2 + 1, (est, total)
over = "WARNING: the estimated run time" in plan
assert over == (est > 600), ("warning", over, est)
print(f"ok: the plan's gpu estimate {est} s matches the model's {total:.0f} s "
      f"({len(model)} techniques){'; over the 600 s limit, and it says so' if over else ''}")
PY

for bin in "$WATERFALL" "$GELU"; do
    "$bin" --describe > "$TEST_TMPDIR/describe_$(basename "$bin")" ||
        fail "$(basename "$bin") --describe failed"
done
python3 - "$TEST_TMPDIR/describe_$(basename "$WATERFALL")" \
    "$TEST_TMPDIR/describe_$(basename "$GELU")" <<'PY' || fail "the gpu profile's workloads"
import json, sys
waterfall, gelu = (json.loads(open(p).read()) for p in sys.argv[1:3])
assert waterfall["tiny"]["workloads"] == "small_cnn,resnet50,gpt2", waterfall["tiny"]
assert waterfall["gpu_workloads"] == "resnet50,gpt2", waterfall["gpu_workloads"]
assert gelu["gpu_workloads"] == gelu["tiny"]["workloads"] == "gpt2", gelu
PY
echo "ok: the gpu profile's waterfall times ResNet-50 and GPT-2 (not the small CNN); the others their workloads"

"$GELU" --profile=gpu --device=cpu --mem-limit=64 --out-dir="$TEST_TMPDIR/gelu" \
    > /dev/null 2> "$TEST_TMPDIR/err_gelu"
rc=$?
[ $rc -eq 0 ] || fail "fused_gelu_step --profile=gpu under a 64 MiB limit: exit $rc"
grep -q "WARNING: profile gpu on the cpu backend: it is sized for one 80 GB GPU" \
    "$TEST_TMPDIR/err_gelu" || fail "no warning that gpu is sized for an 80 GB GPU"
grep -q "gpt2-full-synthetic: batch 4 does not fit in device memory.*: halving it" \
    "$TEST_TMPDIR/err_gelu" || fail "batch 4 (the gpu profile's) not halved"
csv=$(ls "$TEST_TMPDIR"/gelu/results/*/fused_gelu_step.csv 2>/dev/null | head -1)
[ -n "$csv" ] || fail "no CSV"
python3 - "$csv" <<'PY' || fail "rows are not the full GPT-2's n/a rows"
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
assert rows, "no rows"
for r in rows:
    assert r["workload"] == "gpt2-full-synthetic", r["workload"]
    assert r["timing_verdict"] == "n/a" and "out of memory" in r["note"], (r["timing_verdict"], r["note"])
PY
echo "ok: --profile=gpu warns on the CPU, runs the full GPT-2, and an out-of-memory batch is halved, then n/a"
echo PASS
