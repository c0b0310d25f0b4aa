#!/bin/bash
# budget_test.sh - bench:all holds the techniques' time budgets to the
# profile's limit (bench/cmd/plan.h), end to end: the real bench:all binary
# planning a run of stand-in technique binaries (shell scripts answering
# --describe with the budgets this test chooses, failing anything else), so
# that nothing is timed.
#   - over the limit: refused with exit 2, the reason on stderr, nothing
#     written (not even the results folder);
#   - over, with --allow-over-budget: a loud warning, the run goes on, and
#     budget.json and the report record the limit that applied and "over";
#   - at (or just under) the limit: accepted, the total printed;
#   - estimated run times above the limit: a warning only;
#   - the tiny profile is held to its own limit.
#
#   bazel test //bench:budget_test
# args: the bench:all binary.
set -u
ALL=$1
fail() { echo "FAIL: $*" >&2; for f in "$TEST_TMPDIR"/err*; do echo "--- $f"; cat "$f"; done >&2; exit 1; }

# The techniques this build has, from the real binaries (--help asks them).
names=$("$ALL" --help 2>/dev/null | sed -n 's/^techniques: //p')
[ -n "$names" ] || fail "bench:all --help listed no techniques"
names="ceilings $names"
n=$(echo $names | wc -w)

# Stand-ins: $RF/tunebench/bench/<name>, as bench:all looks for them under
# RUNFILES_DIR. Their budgets come from BUDGET_D (default) and BUDGET_T (tiny).
RF=$TEST_TMPDIR/runfiles
mkdir -p "$RF/tunebench/bench"
for t in $names; do
    cat > "$RF/tunebench/bench/$t" <<EOF
#!/bin/sh
[ "\$1" = "--describe" ] || { echo "$t: a stand-in, not run by this test" >&2; exit 1; }
echo "{\"name\":\"$t\",\"results\":\"$t\",\"what\":null,\"est_seconds\":[\${EST_D:-10},60,5,10],\"budget_seconds\":[\$BUDGET_D,3600,\$BUDGET_T,1],\"order\":0,\"after\":[],\"tiny\":{\"min_rows\":1,\"plots\":\"\",\"na_note\":null,\"gbench\":true}}"
EOF
    chmod +x "$RF/tunebench/bench/$t"
done

run_all() { # run_all LOG ARGS...: bench:all on the stand-ins; its exit status
    local log=$1
    shift
    RUNFILES_DIR=$RF "$ALL" "$@" > /dev/null 2> "$TEST_TMPDIR/$log"
}

# 1. Over the default limit (900 s) by a few seconds: refused, nothing written.
over=$((900 / n + 1))
OUT=$TEST_TMPDIR/out_refused
BUDGET_D=$over BUDGET_T=1 run_all err_over --device=cpu --out-dir="$OUT"
rc=$?
[ $rc -eq 2 ] || fail "over the limit ($n x $over s): exit $rc, want 2"
grep -q "refused: the budgets add up to" "$TEST_TMPDIR/err_over" || fail "no reason given"
grep -q "limit 15 min 00 s" "$TEST_TMPDIR/err_over" || fail "the limit is not printed"
[ ! -e "$OUT" ] || fail "a refused run wrote $(find "$OUT" | head -3)"
grep -q "budgets of this plan per profile: default $((n * over)) s of 900 s (OVER), full $((n * 3600)) s of 14400 s (OVER), tiny $n s of 600 s, gpu $n s of 600 s$" \
    "$TEST_TMPDIR/err_over" || fail "the totals per profile are not printed"
echo "ok: $n techniques x $over s > 900 s refused (exit 2), nothing written"

# 2. The same with --allow-over-budget: warned, run (the stand-ins fail at
# once), and recorded.
OUT=$TEST_TMPDIR/out_allowed
BUDGET_D=$over BUDGET_T=1 run_all err_allowed --device=cpu --out-dir="$OUT" --allow-over-budget
grep -q "WARNING: the budgets add up to.*going on as --allow-over-budget asks" \
    "$TEST_TMPDIR/err_allowed" || fail "no warning"
budget=$(ls "$OUT"/results/*/budget.json 2>/dev/null | head -1)
[ -n "$budget" ] || fail "no budget.json"
python3 - "$budget" "$n" "$over" <<'EOF' || fail "budget.json is not what the run planned"
import json, sys
b = json.load(open(sys.argv[1]))
n, over = int(sys.argv[2]), float(sys.argv[3])
assert b["schema"] == "tunebench-budget/1", b["schema"]
assert b["profile"] == "default" and b["limit_s"] == 900, b
assert b["budget_s"] == n * over and b["over"] is True and b["allowed_over"] is True, b
assert len(b["techniques"]) == n, len(b["techniques"])
assert all(t["budget_s"] == over and t["est_s"] == 10 for t in b["techniques"]), b["techniques"]
EOF
report=$(dirname "$budget")/REPORT.md
grep -q 'Profile `default`, limit 900 s' "$report" || fail "the report does not say which limit applied"
grep -q '\*\*Over the limit\*\*' "$report" || fail "the report does not say the plan was over"
echo "ok: --allow-over-budget warns, runs, and budget.json and REPORT.md record it"

# 3. Exactly at the limit (or just under): accepted, the total printed.
under=$((900 / n))
BUDGET_D=$under BUDGET_T=1 run_all err_under --device=no-such-device --out-dir="$TEST_TMPDIR/out_under"
grep -q "refused\|WARNING: the budgets" "$TEST_TMPDIR/err_under" && fail "$n x $under s <= 900 s refused"
grep -q "add up to $(python3 -c "s=$n*$under; print('%d s' % s if s < 90 else '%d min %02d s' % (s // 60, s % 60))")" \
    "$TEST_TMPDIR/err_under" || fail "the total is not printed"
grep -q "WARNING: the estimated run time" "$TEST_TMPDIR/err_under" &&
    fail "estimates of $n x 10 s warned about"
echo "ok: $n x $under s <= 900 s accepted, total printed"

# 3b. Estimated run times above the limit, budgets within it: warned
# about (the budgets must leave room for the rest), not refused.
est=$((900 / n + 1))
BUDGET_D=1 BUDGET_T=1 EST_D=$est run_all err_est --device=no-such-device --out-dir="$TEST_TMPDIR/out_est"
grep -q "WARNING: the estimated run time .* is above profile default's limit" "$TEST_TMPDIR/err_est" ||
    fail "no warning for estimates of $n x $est s"
grep -q "refused" "$TEST_TMPDIR/err_est" && fail "refused on estimates"
echo "ok: estimates above the limit warned about, not refused"

# 4. The tiny profile has its own limit (600 s): default budgets do not count.
tiny_over=$((600 / n + 1))
BUDGET_D=1 BUDGET_T=$tiny_over run_all err_tiny --profile=tiny --device=cpu \
    --out-dir="$TEST_TMPDIR/out_tiny"
rc=$?
[ $rc -eq 2 ] && grep -q "profile tiny's limit of 10 min 00 s" "$TEST_TMPDIR/err_tiny" ||
    fail "tiny over its 600 s: exit $rc"
echo "ok: the tiny profile is held to 600 s"

# 5. --only's techniques all skipped by --skip: refused (exit 2, nothing
# written), not a run of the ceilings alone; one left: planned as asked.
first=$(echo $names | cut -d' ' -f2)
second=$(echo $names | cut -d' ' -f3)
OUT=$TEST_TMPDIR/out_only_skip
BUDGET_D=1 BUDGET_T=1 run_all err_only_skip --device=cpu --out-dir="$OUT" --only="$first" --skip="$first"
rc=$?
[ $rc -eq 2 ] || fail "--only=$first --skip=$first: exit $rc, want 2"
grep -q "leave none of --only's techniques to run" "$TEST_TMPDIR/err_only_skip" || fail "no reason given"
[ ! -e "$OUT" ] || fail "a refused run wrote $(find "$OUT" | head -3)"
BUDGET_D=1 BUDGET_T=1 run_all err_only_one --device=no-such-device --out-dir="$TEST_TMPDIR/out_one" \
    --only="$first,$second" --skip="$first"
grep -q "budgets of this plan per profile: default 2 s of 900 s" "$TEST_TMPDIR/err_only_one" ||
    fail "--only=$first,$second --skip=$first did not plan the ceilings and $second"
echo "ok: --only all skipped refused; --only less --skip planned"

# 6. Empty names are refused, not read as every technique (an empty
#    --only=) or silently dropped (a trailing comma).
for bad in "--only=" "--skip=" "--only=$first," "--only=,$first" "--only=$first,,$second"; do
    OUT=$TEST_TMPDIR/out_empty
    BUDGET_D=1 BUDGET_T=1 run_all err_empty --device=cpu --out-dir="$OUT" "$bad"
    rc=$?
    [ $rc -eq 2 ] || fail "$bad: exit $rc, want 2"
    grep -q "names no technique\|an empty technique name" "$TEST_TMPDIR/err_empty" ||
        fail "$bad: no reason given"
    [ ! -e "$OUT" ] || fail "$bad: a refused run wrote $(find "$OUT" | head -3)"
done
echo "ok: empty technique names refused"
echo PASS
