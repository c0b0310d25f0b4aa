#!/bin/bash
# data_format_signal_test.sh - an interrupted bench:data_format leaves
# nothing behind: neither its raw copy of the training set in /dev/shm
# (45 MB of RAM) nor the temporary its rounds write their JSON into.
# SIGINT and SIGTERM each, mid-rounds (TB_TEST_HOLD_ROUNDS holds them after
# round 1, so the signal lands there however fast the machine is).
#
#   bazel test //bench:data_format_signal_test
# args: the data_format binary
set -uo pipefail
BIN="$1"
fail() { echo "FAIL: $*"; exit 1; }
for sig in INT TERM; do
    OUT="$TEST_TMPDIR/out_$sig"
    LOG="$TEST_TMPDIR/log_$sig"
    TB_TEST_HOLD_ROUNDS=1 "$BIN" --device=cpu --profile=tiny --out-dir="$OUT" > "$LOG" 2>&1 &
    pid=$!
    for _ in $(seq 1 3000); do
        grep -qs 'rounds: held after round 1' "$LOG" && break
        sleep 0.1
    done
    grep -qs 'rounds: held after round 1' "$LOG" || fail "no round 1 within 300 s: $(tail -3 "$LOG")"
    [ -d "/dev/shm/tunebench-data-$pid" ] || fail "no /dev/shm copy while running (the test is stale)"
    kill -$sig $pid
    wait $pid
    rc=$?
    [ $rc -gt 128 ] || fail "SIG$sig: exited $rc, expected death by the signal"
    [ ! -e "/dev/shm/tunebench-data-$pid" ] || fail "SIG$sig left /dev/shm/tunebench-data-$pid"
    left=$(find "$OUT" -name '*.tmp.*' | head -3)
    [ -z "$left" ] || fail "SIG$sig left temporaries: $left"
    echo "ok: SIG$sig, exit $rc, nothing left"
done
echo PASS
