#!/bin/bash
# resume_test.sh - an interrupted bench:all keeps what it finished, leaves no
# temporary files, and --resume continues without redoing finished work;
# --resume refuses when the run would differ (another thread count) or its
# state cannot be read, runs again a finished technique whose results are
# gone, and keeps the earlier session's telemetry.
#
#   bazel test //bench:resume_test
# args: the bench:all binary. Runs ceilings + grads_to_none (a training step: seconds, long enough to be interrupted) in the tiny profile on
# the CPU. Checks files and state, never timings.
set -u
ALL=$1
OUT=$TEST_TMPDIR/out
fail() { echo "FAIL: $*" >&2; for f in "$TEST_TMPDIR"/log*; do echo "--- $f"; tail -20 "$f"; done >&2; exit 1; }

# Waits until run_state.json lists ceilings as done (the first step).
wait_ceilings_done() {
    local root=$1
    for _ in $(seq 1 1500); do
        if grep -qs '"ceilings"' "$root"/results/*/run_state.json; then return 0; fi
        sleep 0.2
    done
    fail "ceilings did not finish within 300 s"
}

no_temps() {
    local left
    left=$(find "$1" -name '*.tmp.*' | head -5)
    [ -z "$left" ] || fail "temporary files left behind: $left"
}

csv_intact() {
    local f=$1 rows=$2
    [ -s "$f" ] || fail "$f missing or empty"
    head -1 "$f" | grep -q '^technique,backend,device,setting' || fail "$f: header missing"
    [ "$(tail -c1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || fail "$f: last line cut"
    [ "$(wc -l < "$f")" -eq "$rows" ] || fail "$f: $(wc -l < "$f") lines, expected $rows"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "${f%.csv}.json" ||
        fail "${f%.csv}.json is not valid JSON"
}

# Waits until grads_to_none's rounds hold after round 1 (TB_TEST_HOLD_ROUNDS,
# bench/harness/rounds.c): the interrupt then lands mid-technique however
# fast or slow the machine is (a tiny grads_to_none lasts about a second;
# polling for its start once missed it on a busy CI machine).
wait_held() {
    for _ in $(seq 1 3000); do
        if grep -qs 'rounds: held after round 1' "$1"; then return 0; fi
        sleep 0.1
    done
    fail "grads_to_none's rounds did not reach round 1 within 300 s"
}
# 1. Interrupt with SIGINT (what Ctrl-C sends) once ceilings finished and
# grads_to_none is mid-run.
TB_TEST_HOLD_ROUNDS=1 "$ALL" --device=cpu --profile=tiny --only=grads_to_none --out-dir="$OUT" \
    > "$TEST_TMPDIR/log1" 2>&1 &
pid=$!
wait_ceilings_done "$OUT"
wait_held "$TEST_TMPDIR/log1"
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || fail "interrupted bench:all exited $rc, expected 130"
R=$(echo "$OUT"/results/*)
csv_intact "$R/ceilings.csv" 8
[ ! -e "$R/grads_to_none.csv" ] || fail "grads_to_none.csv exists although grads_to_none was interrupted"
no_temps "$OUT"
grep -q '"done": \["ceilings"\]' "$R/run_state.json" || fail "run state: $(cat "$R/run_state.json")"
sum_before=$(md5sum < "$R/ceilings.csv")
mtime_before=$(stat -c %Y.%N "$R/ceilings.csv")

# 2. A different thread count must not continue this run.
"$ALL" --device=cpu --profile=tiny --only=grads_to_none --threads=1 --out-dir="$OUT" --resume \
    > "$TEST_TMPDIR/log2" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--resume with other threads exited $rc, expected 2"
grep -q 'resume refused' "$TEST_TMPDIR/log2" || fail "no refusal message"
grep -q 'threads: 0 -> 1' "$TEST_TMPDIR/log2" || fail "refusal does not say what differs"

# 3. --resume continues: ceilings kept byte for byte, grads_to_none run, report written.
"$ALL" --device=cpu --profile=tiny --only=grads_to_none --out-dir="$OUT" --resume > "$TEST_TMPDIR/log3" 2>&1 ||
    fail "--resume run failed"
grep -q 'ceilings: finished in the interrupted run, kept' "$TEST_TMPDIR/log3" ||
    fail "--resume did not skip ceilings"
[ "$(md5sum < "$R/ceilings.csv")" = "$sum_before" ] || fail "ceilings.csv changed"
[ "$(stat -c %Y.%N "$R/ceilings.csv")" = "$mtime_before" ] || fail "ceilings.csv rewritten"
csv_intact "$R/grads_to_none.csv" "$(wc -l < "$R/grads_to_none.csv")"
for f in REPORT.md REPORT.html summary.md summary.tex telemetry.json; do
    [ -s "$R/$f" ] || fail "$f missing after the resumed run"
done
grep -q '"complete": true' "$R/run_state.json" || fail "run not marked complete"
no_temps "$OUT"
# the earlier session's telemetry is kept beside this one's
python3 - "$R/telemetry.json" <<'PY' || fail "telemetry.json lost the earlier session"
import json, sys
labels = [s["label"] for s in json.load(open(sys.argv[1]))["segments"]]
assert "ceilings" in labels and "grads_to_none" in labels, labels
PY

# 4. SIGKILL of the whole process group (no chance to clean up): the next
#    --resume removes the orphaned temporaries and keeps finished work.
OUT2=$TEST_TMPDIR/out2
TB_TEST_HOLD_ROUNDS=1 setsid "$ALL" --device=cpu --profile=tiny --only=grads_to_none \
    --out-dir="$OUT2" > "$TEST_TMPDIR/log4" 2>&1 &
pid=$!
wait_ceilings_done "$OUT2"
wait_held "$TEST_TMPDIR/log4"
kill -KILL -- -$pid 2> /dev/null || kill -KILL $pid
wait $pid 2> /dev/null
R2=$(echo "$OUT2"/results/*)
csv_intact "$R2/ceilings.csv" 8
sum_before=$(md5sum < "$R2/ceilings.csv")
"$ALL" --device=cpu --profile=tiny --only=grads_to_none --out-dir="$OUT2" --resume > "$TEST_TMPDIR/log5" 2>&1 ||
    fail "--resume after SIGKILL failed"
grep -q 'ceilings: finished in the interrupted run, kept' "$TEST_TMPDIR/log5" ||
    fail "--resume after SIGKILL did not skip ceilings"
[ "$(md5sum < "$R2/ceilings.csv")" = "$sum_before" ] || fail "ceilings.csv changed after SIGKILL"
no_temps "$OUT2"

# 5. A technique the state lists as finished whose CSV is gone since runs
#    again, saying so (it used to be "kept", and the report lacked it).
rm "$R2/grads_to_none.csv"
"$ALL" --device=cpu --profile=tiny --only=grads_to_none --out-dir="$OUT2" --resume > "$TEST_TMPDIR/log6" 2>&1 ||
    fail "--resume with a finished technique's CSV gone failed"
grep -q 'grads_to_none: finished in the interrupted run, but its results cannot be read now' \
    "$TEST_TMPDIR/log6" || fail "--resume did not say it runs grads_to_none again"
csv_intact "$R2/grads_to_none.csv" "$(wc -l < "$R2/grads_to_none.csv")"

# 6. A state that cannot be read is refused, not taken for no earlier run
#    (which started over, over the results it listed).
sum_before=$(md5sum < "$R2/ceilings.csv")
head -c 20 "$R2/run_state.json" > "$TEST_TMPDIR/cut" && cp "$TEST_TMPDIR/cut" "$R2/run_state.json"
"$ALL" --device=cpu --profile=tiny --only=grads_to_none --out-dir="$OUT2" --resume > "$TEST_TMPDIR/log7" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--resume on a cut-off run_state.json exited $rc, expected 2"
grep -q "resume refused: the earlier run's state in .* cannot be read" "$TEST_TMPDIR/log7" ||
    fail "the refusal does not say the state cannot be read"
[ "$(md5sum < "$R2/ceilings.csv")" = "$sum_before" ] || fail "ceilings.csv changed after the refusal"

# 8. SIGTERM (what a job scheduler sends) is said as such: 128 + 15, not Ctrl-C's 130.
OUT3="$TEST_TMPDIR/out3"
TB_TEST_HOLD_ROUNDS=1 "$ALL" --device=cpu --profile=tiny --only=grads_to_none --out-dir="$OUT3" \
    > "$TEST_TMPDIR/log8" 2>&1 &
pid=$!
wait_held "$TEST_TMPDIR/log8"
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 143 ] || fail "bench:all ended by SIGTERM exited $rc, expected 143"
no_temps "$OUT3"
echo "resume_test: ok"
