#!/bin/bash
# alone_groups_test.sh BINARY - when a step technique's arms do not all fit
# in memory whole (step_plan.h), the groups that cannot stay alive park
# between their repetitions (tb_step_plan_park: their activations freed,
# one unparked at a time), and only where even that does not fit are they
# rebuilt every round: on the CPU, bench:checkpointing's tiny GPT-2 (its
# check peaks: the batch-1 group 1.5 + 1.6 + 1.5 MiB, the 4x-batch group
# 3.7 + 4.0 + 3.7; parked they keep 0.9 + 1.0 + 0.9 and 1.1 + 1.6 + 1.1):
#   --mem-limit=12: the 4x group parks (4.6 alive + 3.8 kept + its largest
#                   activations 2.6 = 11.0), the batch-1 group stays alive;
#   --mem-limit=10: that does not fit, every arm parked does (6.6 + 2.6);
#   --mem-limit=7:  nothing parked fits: every arm rebuilt every round.
# Every row is still timed, compared and checked. Without the limit, none
# parks or is rebuilt. An arm's first build is its check's trainer, kept
# parked (step_harness.c, adopts): all 6 arms but the first check's
# baseline; under --mem-limit=7 the kept trainers leave a later check no
# room: they are released (said on stderr), the check runs again, and the
# arms, rebuilt every round, build their own. Shapes, never timings.
set -uo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; cat "$tmp"/err* >&2; exit 1; }

rows() {
    python3 - "$1"/results/*/checkpointing.csv <<'PY' || fail "rows of $1"
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
assert len(rows) == 4, len(rows)
for r in rows:
    assert r["timing_verdict"] not in ("", "n/a"), (r["setting"], r["timing_verdict"], r["note"])
    assert r["correctness"] == "exact", (r["setting"], r["correctness"])
print("ok: 4 rows, every one timed and exact")
PY
}

run() { # limit, what its timing line must say
    "$bin" --device=cpu --profile=tiny --threads=2 --mem-limit="$1" --out-dir="$tmp/m$1" \
        > /dev/null 2> "$tmp/err_m$1" || fail "exit $? under --mem-limit=$1"
    grep -q "timing 6 arms ($2" "$tmp/err_m$1" || fail "under --mem-limit=$1: not '$2'"
    rows "$tmp/m$1"
}
run 12 "3 of them parked between their repetitions"
grep -q "5 first built for their checks and kept)" "$tmp/err_m12" ||
    fail "under --mem-limit=12: not 5 arms first built for their checks"
run 10 "6 of them parked between their repetitions"
run 7 "rebuilt every round)"
grep -q "out of memory with .* of earlier checks kept for the rounds .*: released" "$tmp/err_m7" ||
    fail "under --mem-limit=7: the kept trainers were not released for a later check"
grep -q "first built for their checks" "$tmp/err_m7" &&
    fail "under --mem-limit=7: arms rebuilt every round took their checks' trainers"
"$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/all" > /dev/null 2> "$tmp/err_all" ||
    fail "exit $? without a limit"
grep -q "timing 6 arms (trainers rebuilt every" "$tmp/err_all" ||
    fail "without a limit: arms parked or rebuilt every round"
echo PASS
