#!/bin/bash
# alone_groups_test.sh BINARY - when a step technique's arms do not all fit
# in memory (step_plan.h, tb_step_plan_alone), only the largest groups are
# rebuilt every round, one arm at a time, and the rest stay alive: on the
# CPU, bench:checkpointing's tiny GPT-2 under --mem-limit=12 (its check
# peaks: the batch-1 group 1.6 + 1.7 + 1.6 MiB, the 4x-batch group 4.0 + 4.2
# + 4.0: 17.1 MiB in all; 4.9 alive + 4.2 rebuilt fit in 12). Every row is
# still timed, compared and checked. Without the limit, none is rebuilt.
# Shapes, never timings.
set -uo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; cat "$tmp"/err* >&2; exit 1; }

"$bin" --device=cpu --profile=tiny --threads=2 --mem-limit=12 --out-dir="$tmp/split" \
    > /dev/null 2> "$tmp/err_split" || fail "exit $? under --mem-limit=12"
grep -q "timing 6 arms (3 of them rebuilt every round, one at a time" "$tmp/err_split" ||
    fail "under --mem-limit=12: not 3 of the 6 arms rebuilt every round"
python3 - "$tmp"/split/results/*/checkpointing.csv <<'PY' || fail "rows"
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
assert len(rows) == 4, len(rows)
for r in rows:
    assert r["timing_verdict"] not in ("", "n/a"), (r["setting"], r["timing_verdict"], r["note"])
    assert r["correctness"] == "exact", (r["setting"], r["correctness"])
print("ok: 4 rows, every one timed and exact")
PY
"$bin" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/all" > /dev/null 2> "$tmp/err_all" ||
    fail "exit $? without a limit"
grep -q "timing 6 arms (trainers rebuilt every" "$tmp/err_all" ||
    fail "without a limit: arms rebuilt every round"
echo PASS
