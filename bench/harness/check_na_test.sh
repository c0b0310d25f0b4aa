#!/bin/bash
# check_na_test.sh CACHING_ALLOCATOR
# A check that finds a compared setting means nothing on a workload after
# all makes its row n/a with that reason, untimed (tb_step_ctx.na_why):
# the caching allocator's cached setting where a step allocates nothing,
# both policies then timing the same step. On the CPU the setting is n/a
# anyway (one policy, malloc); the test-only TB_TEST_ALLOC_ON_CPU runs it
# so that its check decides. Per workload of the tiny profile: a baseline
# whose note says a step allocates nothing has its cached row n/a saying
# why, and its arms are not rebuilt every round (the policy that forced
# that is the same for every timed setting); one whose step allocates has
# its cached row timed. This library's ResNet-50 trainer keeps every buffer
# from its build, so at least one workload takes the n/a path. Shapes, never
# timings.
set -euo pipefail
ca="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }

TB_TEST_ALLOC_ON_CPU=1 "$ca" --device=cpu --profile=tiny --threads=2 --out-dir="$tmp/ca" \
    > /dev/null 2> "$tmp/ca.err" || fail "caching_allocator: exit $?: $(tail -3 "$tmp/ca.err")"
python3 - "$tmp" <<'PY'
import csv, glob, re, sys
tmp = sys.argv[1]
rows = list(csv.DictReader(open(glob.glob("%s/ca/results/*/caching_allocator.csv" % tmp)[0])))
err = open("%s/ca.err" % tmp).read()
wls = sorted({r["workload"] for r in rows})
if len(wls) < 2:
    sys.exit("FAIL: workloads %r, expected ResNet-50 and GPT-2" % wls)
na_seen = 0
for wl in wls:
    base = [r for r in rows if r["workload"] == wl and r["is_baseline"] == "1"]
    cached = [r for r in rows if r["workload"] == wl and r["is_baseline"] != "1"]
    if len(base) != 1 or len(cached) != 1:
        sys.exit("FAIL: %s: %d baseline and %d cached rows" % (wl, len(base), len(cached)))
    b, c = base[0], cached[0]
    if not b["median"]:
        sys.exit("FAIL: %s: the baseline is not timed: %r" % (wl, b["note"][:200]))
    timing = re.search(r"%s: timing (\d+) arms? \(([^)]*)\)" % re.escape(wl), err)
    if not timing:
        sys.exit("FAIL: %s: no timing line on stderr" % wl)
    if "a step allocates nothing" in b["note"]:
        na_seen += 1
        if c["median"] or c["speedup"] or "n/a on this workload: a step allocates nothing" not in c["note"]:
            sys.exit("FAIL: %s: a step allocates nothing, yet the cached row is %r / %r: %r"
                     % (wl, c["median"], c["speedup"], c["note"][:200]))
        if timing.group(1) != "2" or "rebuilt every round" in timing.group(2):
            sys.exit("FAIL: %s: the baseline and its A/A copy alone should stay alive: "
                     "%s arms (%s)" % (wl, timing.group(1), timing.group(2)))
    elif "a step allocates:" in b["note"]:
        if not c["speedup"]:
            sys.exit("FAIL: %s: a step allocates, yet the cached row is not timed: %r"
                     % (wl, c["note"][:200]))
    else:
        sys.exit("FAIL: %s: the baseline's note does not say whether a step allocates: %r"
                 % (wl, b["note"][:200]))
if not na_seen:
    sys.exit("FAIL: no workload took the n/a path (ResNet-50's step should allocate nothing)")
print("ok: %d workloads, %d with the cached row n/a by its check" % (len(wls), na_seen))
PY
