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
    # Each round times every running arm once, between two repetitions of
    # its baseline: the runs of a compared setting (setNN, NN its row) in
    # the JSON are its row's rounds; the baseline's A/A arm (againNN) runs
    # as often as the baseline row's rounds say; the baseline itself runs
    # more often than any arm compared with it.
    python3 - "$out" "$name" <<'PY'
import csv, glob, json, sys
out, name = sys.argv[1], sys.argv[2]
res = glob.glob("%s/results/*/" % out)[0]
allrows = list(csv.DictReader(open(res + name + ".csv")))
# one experiment per workload (step_harness.h): its own rows, numbered from 0,
# and its own Google Benchmark JSON when there are several
wls = []
for r in allrows:
    if r["workload"] not in wls:
        wls.append(r["workload"])
timed_all = []
for wl in wls:
    rows = [r for r in allrows if r["workload"] == wl]
    path = res + (name + "." + wl if len(wls) > 1 else name) + ".gbench.json"
    runs = json.load(open(path))["benchmarks"]
    count = {}
    for b in runs:
        if b.get("run_type", "iteration") == "iteration":
            arm = b["run_name"].split("/")[0]
            count[arm] = count.get(arm, 0) + 1
    timed = [(i, r) for i, r in enumerate(rows) if r["median"] != ""]
    if not timed:
        sys.exit("FAIL: %s: no timed row on %s" % (name, wl))
    timed_all += timed
    for i, r in timed:
        n, arm = int(r["rounds"]), "set%02d" % i
        if n < 6:
            sys.exit("FAIL: %s: row %d has %d rounds, want >= --reps=6" % (name, i, n))
        if r["stopped_by"] not in ("target", "budget", "cap"):
            sys.exit("FAIL: %s: row %d stopped by %r" % (name, i, r["stopped_by"]))
        if r["is_baseline"] == "1":
            if r["noise_floor"] == "" or count.get("again%02d" % i) != n:
                sys.exit("FAIL: %s: baseline row %d: A/A arm ran %r times, its row says %d "
                         "rounds (runs %r)" % (name, i, count.get("again%02d" % i), n, count))
            if count.get(arm, 0) <= n:
                sys.exit("FAIL: %s: baseline %s ran %r times, not more than its A/A's %d"
                         % (name, arm, count.get(arm), n))
        elif count.get(arm) != n:
            sys.exit("FAIL: %s: %s ran %r times, its row says %d rounds (runs %r)"
                     % (name, arm, count.get(arm), n, count))
timed = timed_all
n = max(int(r["rounds"]) for _, r in timed)
print("ok: %s: up to %d rounds on %s" % (name, n, ",".join(wls)))
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
