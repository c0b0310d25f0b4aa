#!/bin/bash
# rounding_control_test.sh BINARY
# The step harness's rounding control (results/README.md, "The step
# techniques' correctness check"), in the tiny profile on the CPU:
#   --rounding-control=always: every compared row's note reports the
#     control; its tolerance column is the larger of the declared one and
#     twice the control's distance (read back from the note); and its
#     verdict is what that tolerance gives for the losses in the note, so a
#     difference past it still says DIFFERS;
#   --rounding-control=never: no row mentions it, the declared tolerance
#     holds;
#   a bad value is refused, naming the flag.
# Shapes and arithmetic, never timings.
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
name=$(basename "$bin")

for mode in always never; do
    out="$tmp/$mode"
    mkdir -p "$out"
    "$bin" --device=cpu --profile=tiny --threads=2 --rounding-control=$mode --out-dir="$out" \
        2> "$tmp/$mode.err"
    python3 - "$out" "$name" "$mode" "$tmp/$mode.err" <<'PY'
import csv, glob, re, sys
out, name, mode, err = sys.argv[1:5]
rows = list(csv.DictReader(open(glob.glob("%s/results/*/%s.csv" % (out, name))[0])))
checked = [r for r in rows if r["correctness"] in ("within tolerance", "DIFFERS")]
if not checked:
    sys.exit("FAIL: %s: no row with a loss check" % mode)
log = open(err).read()
for r in checked:
    note, tol = r["note"], float(r["tolerance"])
    m = re.search(r"loss at step \d+ ([-0-9.e+]+) vs ([-0-9.e+]+)", note)
    if not m:
        sys.exit("FAIL: %s: no losses in note %r" % (mode, note))
    got, ref = float(m.group(1)), float(m.group(2))
    ctl = re.search(r"farthest of 3 draws, the baseline (?:itself )?ended ([-0-9.e+]+) away", note)
    if mode == "never":
        if ctl or "rounding control" in note or "tolerance widened" in note:
            sys.exit("FAIL: never: the control shows in %r" % note)
        continue
    if not ctl:
        sys.exit("FAIL: always: no rounding control in note %r" % note)
    moved = float(ctl.group(1))
    if "tolerance widened" in note:
        # the note prints the control to 3 significant digits (%.3g): up to
        # 5e-3 of it (0.0328 for 0.03283 was 1.5e-3 off)
        if abs(tol - 2 * moved) > 5e-3 * tol:
            sys.exit("FAIL: widened tolerance %g is not twice the control's %g" % (tol, moved))
    elif 2 * moved > tol * (1 + 1e-3):
        sys.exit("FAIL: control %g is past half the tolerance %g but not widened" % (moved, tol))
    rel = abs(got - ref) / abs(ref)
    want = "DIFFERS" if rel > tol * (1 + 1e-6) else "within tolerance"
    if rel <= tol * (1 - 1e-6) or rel > tol * (1 + 1e-6):
        if r["correctness"] != want:
            sys.exit("FAIL: %s: loss %g vs %g (%.3g apart), tolerance %g, verdict %s, want %s"
                     % (r["setting"], got, ref, rel, tol, r["correctness"], want))
if mode == "always" and "rounding control 3 of 3 (weights moved by" not in log:
    sys.exit("FAIL: always: stderr does not report the control's 3 draws")
print("%s: %d checked rows consistent" % (mode, len(checked)))
PY
done

# never: every checked row holds the one declared tolerance
python3 - "$tmp/never" "$name" <<'PY'
import csv, glob, sys
out, name = sys.argv[1], sys.argv[2]
tols = {r["tolerance"] for r in csv.DictReader(open(glob.glob("%s/results/*/%s.csv" % (out, name))[0]))
        if r["correctness"] in ("within tolerance", "DIFFERS")}
if len(tols) != 1:
    sys.exit("FAIL: never: tolerances %r, want the declared one only" % sorted(tols))
PY

if "$bin" --device=cpu --profile=tiny --rounding-control=sometimes --out-dir="$tmp/bad" 2> "$tmp/bad.err"; then
    echo "FAIL: --rounding-control=sometimes accepted"; exit 1
fi
grep -q -- "rounding-control" "$tmp/bad.err" || { echo "FAIL: the error does not name the flag:"; cat "$tmp/bad.err"; exit 1; }
echo "PASS"
