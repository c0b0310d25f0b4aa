#!/bin/bash
# step_rounds_test.sh GOLDEN_CSV BINARY...
# Step techniques on the rounds engine (bench/harness/step_harness.h), in
# the tiny profile on the CPU: every timed row comes from rounds (at least
# 5, reps = rounds, why they stopped, a minimum detectable effect: the
# checker's --rounds), Google Benchmark's JSON holds one run of every arm per
# round, and bad values of the rounds' flags (and Google Benchmark's own
# flags, which the rounds do not use) are refused. Shapes, never timings.
set -euo pipefail
golden="$1"; shift
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
checker="${TEST_SRCDIR:-/nonexistent}/tunebench/bench/harness/check_outputs.py"
[ -f "$checker" ] || checker="$(dirname "$(readlink -f "$0")")/check_outputs.py"
for bin in "$@"; do
    name=$(basename "$bin")
    out="$tmp/$name"
    mkdir -p "$out"
    "$bin" --describe > "$tmp/$name.describe.json"
    "$bin" --device=cpu --profile=tiny --threads=2 --reps=6 --out-dir="$out"
    python3 "$checker" "$out" "--describe=$tmp/$name.describe.json" "$golden" --rounds
    # Each round registers every arm once: the runs of a timed setting
    # (setNN) in the JSON are the row's rounds; the baseline's A/A arm
    # (againNN) is there as often.
    python3 - "$out" "$name" <<'PY'
import csv, glob, json, sys
out, name = sys.argv[1], sys.argv[2]
res = glob.glob("%s/results/*/" % out)[0]
rows = list(csv.DictReader(open(res + name + ".csv")))
runs = json.load(open(res + name + ".gbench.json"))["benchmarks"]
count = {}
for b in runs:
    if b.get("run_type", "iteration") == "iteration":
        arm = b["run_name"].split("/")[0]
        count[arm] = count.get(arm, 0) + 1
timed = [r for r in rows if r["median"] != ""]
if not timed:
    sys.exit("FAIL: %s: no timed row" % name)
rounds = {int(r["rounds"]) for r in timed}
if len(rounds) != 1 or min(rounds) < 6:
    sys.exit("FAIL: %s: rounds %r, want one count >= --reps=6" % (name, rounds))
n = rounds.pop()
sets = {k: v for k, v in count.items() if k.startswith("set")}
again = {k: v for k, v in count.items() if k.startswith("again")}
if len(sets) != len(timed) or set(sets.values()) != {n}:
    sys.exit("FAIL: %s: runs per arm %r, want %d for each of %d timed rows" % (name, count, n, len(timed)))
if not again or set(again.values()) != {n}:
    sys.exit("FAIL: %s: no A/A arm run every round: %r" % (name, count))
for r in timed:
    if r["is_baseline"] == "1" and r["noise_floor"] == "":
        sys.exit("FAIL: %s: baseline %s without its A/A noise floor" % (name, r["setting"]))
print("ok: %s: %d rounds, arms %r" % (name, n, sorted(count)))
PY
done
# Bad values of the rounds' flags are refused before anything runs.
bin="$1"
for bad in --target=-0.1 --target=0.5 --budget=-1 --max-rounds=4 --reps=4 --benchmark_filter=set00; do
    if "$bin" --device=cpu --profile=tiny --out-dir="$tmp/bad" "$bad" 2> "$tmp/err"; then
        echo "FAIL: $bad was accepted"; exit 1
    fi
    grep -q -- "${bad%%=*}" "$tmp/err" || { echo "FAIL: $bad: the error does not name it"; cat "$tmp/err"; exit 1; }
done
echo "ok: bad --target, --budget, --max-rounds, --reps and --benchmark_* refused"
