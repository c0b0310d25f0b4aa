#!/bin/bash
# loader_workers_test.sh LARGE_BATCH_OPTIMIZERS WORKERS
# The step harness's loader workers (step_harness.h, "The loader"; on by
# default on a GPU only, so driven here with --loader-workers). In the tiny
# profile on the CPU:
#   - bench:large_batch_optimizers (the small CNN, whose subset does not
#     change with the workers) with 2 worker threads checks the same losses
#     as without: the workers build the same batches in the same order;
#   - its baseline rows say "loader: 2 worker threads", and no row says so
#     without the flag (auto is 0 on the CPU);
#   - bench:workers sets its own loader: the flag leaves it alone, and its
#     rows carry no such note.
# Shapes and losses, never timings.
set -euo pipefail
lbo="$1"
workers="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }
run() { # binary out-dir flags...
  local bin="$1" out="$2"
  shift 2
  "$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/$out" "$@" > /dev/null \
    2> "$tmp/$out.err" || fail "$out: exit $?: $(tail -5 "$tmp/$out.err")"
}
run "$lbo" plain
run "$lbo" threaded --loader-workers=2
run "$workers" own --loader-workers=2
python3 - "$tmp" <<'PY'
import csv, glob, re, sys
tmp = sys.argv[1]
def rows(run, tech):
    path = glob.glob("%s/%s/results/*/%s.csv" % (tmp, run, tech))[0]
    return list(csv.DictReader(open(path)))
NOTE = "loader: 2 worker threads build the batches ahead of the step"
plain, threaded = rows("plain", "large_batch_optimizers"), rows("threaded", "large_batch_optimizers")
if [r["setting"] for r in plain] != [r["setting"] for r in threaded]:
    sys.exit("FAIL: the settings differ: %s vs %s" % ([r["setting"] for r in plain],
                                                      [r["setting"] for r in threaded]))
compared = 0
for p, t in zip(plain, threaded):
    lp = re.search(r"loss at step \d+ [0-9.e+-]+", p["note"])
    lt = re.search(r"loss at step \d+ [0-9.e+-]+", t["note"])
    if bool(lp) != bool(lt) or (lp and lp.group(0) != lt.group(0)):
        sys.exit("FAIL: %s: %r without workers, %r with" % (p["setting"], lp and lp.group(0),
                                                           lt and lt.group(0)))
    compared += bool(lp)
    if NOTE in p["note"]:
        sys.exit("FAIL: %s: a loader note without --loader-workers: %r" % (p["setting"], p["note"][:200]))
    baseline = t["is_baseline"] == "1" and t["correctness"] != "n/a"
    if baseline and NOTE not in t["note"]:
        sys.exit("FAIL: baseline %s has no loader note: %r" % (t["setting"], t["note"][:200]))
    if not baseline and NOTE in t["note"]:
        sys.exit("FAIL: %s is no baseline but says %r" % (t["setting"], NOTE))
if compared < 2:
    sys.exit("FAIL: %d rows with a checked loss, want 2 or more" % compared)
print("ok: %d checked losses the same with 2 loader workers as without" % compared)
for r in rows("own", "workers"):
    if "loader:" in r["note"]:
        sys.exit("FAIL: bench:workers %s took the harness's loader: %r" % (r["setting"], r["note"][:200]))
print("ok: bench:workers keeps its own loader")
PY
