#!/bin/bash
# update_witness_test.sh BINARY...
# The step checks' first-update witness (results/README.md, "The step
# techniques' correctness check"), in the tiny profile on the CPU, on
# techniques whose GPT-2 check is weak (its loss within the tolerance of
# ln vocabulary): every compared row with a weak loss check carries a
# "first update:" witness and no other row does; the note is valid UTF-8
# (the witness names a tensor); the verdict is DIFFERS exactly when the
# witness says "past the tolerance" or the losses are further apart than
# the tolerance; a distance it reports is within the tolerance otherwise.
# Shapes and arithmetic, never timings.
set -euo pipefail
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
for bin in "$@"; do
    name=$(basename "$bin")
    out="$tmp/$name"
    mkdir -p "$out"
    "$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$out" > /dev/null
    python3 - "$out" "$name" <<'PY'
import csv, glob, re, sys
out, name = sys.argv[1:3]
path = glob.glob("%s/results/*/%s.csv" % (out, name))[0]
text = open(path, "rb").read().decode("utf-8")  # raises on bytes that are not UTF-8
rows = list(csv.DictReader(text.splitlines()))
seen = 0
for r in rows:
    if r["correctness"] not in ("exact", "within tolerance", "DIFFERS"):
        continue
    note, weak = r["note"], "weak loss check" in r["note"]
    wit = re.search(r"first update: ([^;]*)", note)
    if r["is_baseline"] == "1":
        if wit:
            sys.exit("FAIL: %s: baseline row %r has a first-update witness" % (name, r["setting"]))
        continue
    if weak != bool(wit):
        sys.exit("FAIL: %s %s: weak loss check %s, witness %r" % (name, r["setting"], weak, wit and wit.group(0)))
    if not wit:
        continue
    seen += 1
    past = "past the tolerance" in wit.group(1)
    d = re.match(r"per-tensor norms ([-0-9.e+]+) apart", wit.group(1))
    if past:
        # the witness decided: its distance and tolerance are the row's columns
        dist, rtol = float(r["max_rel_err"]), float(r["tolerance"])
        if (r["correctness"] != "DIFFERS" or
                r["checked_against"] != "baseline's first update (per-tensor norms)" or
                not d or abs(dist - float(d.group(1))) > 0.051 * dist or not dist > rtol):
            sys.exit("FAIL: %s %s: the witness decided, but the row says %s against %r, "
                     "max_rel_err %s, tolerance %s (witness: %r)" % (name, r["setting"],
                     r["correctness"], r["checked_against"], r["max_rel_err"], r["tolerance"],
                     wit.group(1)))
        continue
    tol = float(r["tolerance"])
    m = re.search(r"loss at step \d+ ([-0-9.e+]+) vs ([-0-9.e+]+)", note)
    got, ref = float(m.group(1)), float(m.group(2))
    loss_bad = abs(got - ref) > tol * abs(ref) * (1 + 1e-6)
    # the witness's own rounding control widens its tolerance to twice it
    wide = re.search(r"tolerance ([-0-9.e+]+) \(from nudged weights its own moved ([-0-9.e+]+), "
                     r"the farthest of (\d+) draws?\)", wit.group(1))
    wtol = tol
    if wide:
        wtol, moved, draws = float(wide.group(1)), float(wide.group(2)), int(wide.group(3))
        if abs(wtol - 2 * moved) > 0.051 * wtol or wtol <= tol:
            sys.exit("FAIL: %s %s: witness tolerance %g is not twice its control %g, above %g"
                     % (name, r["setting"], wtol, moved, tol))
        # the draws stop early only once the tolerance reached the distance
        if not 1 <= draws <= 6 or draws < 6 and d and float(d.group(1)) > wtol * (1 + 0.05):
            sys.exit("FAIL: %s %s: %d draws stopped with distance %s past tolerance %g"
                     % (name, r["setting"], draws, d.group(1), wtol))
    if d and not past and float(d.group(1)) > wtol * (1 + 0.05):
        sys.exit("FAIL: %s %s: distance %s past tolerance %g but not said" % (name, r["setting"], d.group(1), wtol))
    want = "DIFFERS" if (past or loss_bad) else None
    if want and r["correctness"] != want or not want and r["correctness"] == "DIFFERS":
        sys.exit("FAIL: %s %s: verdict %s, witness %r, losses %g vs %g" % (name, r["setting"], r["correctness"], wit.group(1), got, ref))
compared = [r for r in rows if r["is_baseline"] == "0" and r["timing_verdict"] != "n/a"]
if not seen and not compared:
    # tf32_step on a CPU without avx512_bf16: its settings are n/a there
    print("%s: every compared row n/a on this machine: nothing to witness" % name)
    sys.exit(0)
if not seen:
    sys.exit("FAIL: %s: no row with a first-update witness" % name)
print("%s: %d witnessed rows consistent" % (name, seen))
PY
done
echo PASS
