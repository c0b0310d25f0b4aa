#!/bin/bash
# orphan_test.sh - SIGKILL of bench:all during the ddp sweep, whose MPI ranks
# are bench:all's great-grandchildren (bench:all -> guard -> ddp_sweep ->
# mpirun -> ranks): every process it started is gone within seconds, and
# while they lived a second run on the same folder (--resume) refused
# instead of racing with them; afterwards nothing holds the folder's lock.
#
#   bazel test //bench:orphan_test
# args: the bench:all binary. Checks processes and exit codes, never timings.
set -u
ALL=$1
TMP=${TEST_TMPDIR:-$(mktemp -d)}
OUT=$TMP/out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*" >&2; for f in "$TMP"/log*; do echo "--- $f"; tail -20 "$f"; done >&2; exit 1; }

# "pid:starttime" of every descendant of $1 (the start time tells a reused
# pid from the process seen), from /proc alone.
descendants() {
    python3 - "$1" << 'PY'
import os, sys
procs = {}
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    try:
        stat = open("/proc/%s/stat" % name).read()
    except OSError:
        continue
    fields = stat[stat.rindex(")") + 2:].split()
    procs[int(name)] = (int(fields[1]), fields[19])  # ppid, start time
todo = [int(sys.argv[1])]
while todo:
    parent = todo.pop()
    for pid, (ppid, start) in procs.items():
        if ppid == parent:
            print("%d:%s" % (pid, start))
            todo.append(pid)
PY
}

alive() { # pid:starttime
    local pid=${1%%:*} start=${1#*:}
    [ -r "/proc/$pid/stat" ] && [ "$(cut -d' ' -f22 "/proc/$pid/stat" 2> /dev/null)" = "$start" ] &&
        ! grep -q '^State:.*Z' "/proc/$pid/status" 2> /dev/null
}

setsid "$ALL" --device=cpu --profile=tiny --skip=ceilings --only=ddp_sweep --out-dir="$OUT" \
    > "$TMP/log1" 2>&1 &
pid=$!

# 1. Wait for the MPI ranks (processes named ddp_worker under mpirun).
ranks=""
for _ in $(seq 1 600); do
    if ! kill -0 $pid 2> /dev/null; then fail "bench:all ended before the ddp sweep started its ranks"; fi
    ranks=$(for d in $(descendants $pid); do
        grep -qs ddp_worker "/proc/${d%%:*}/cmdline" && echo "$d"
    done)
    [ -n "$ranks" ] && break
    sleep 0.1
done
[ -n "$ranks" ] || fail "no ddp_worker rank appeared within 60 s"
echo "ranks running: $ranks"

# 2. A second run on the same folder refuses while the first one's processes live.
"$ALL" --device=cpu --profile=tiny --skip=ceilings --only=ddp_sweep --out-dir="$OUT" --resume \
    > "$TMP/log2" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--resume beside a live run exited $rc, expected 2"
grep -q 'in use by another run' "$TMP/log2" || fail "the refusal does not say why"

# 3. SIGKILL bench:all alone (not its process group): nothing it started may survive.
seen=$(descendants $pid)
echo "processes under bench:all: $(echo $seen | wc -w)"
kill -KILL $pid
wait $pid 2> /dev/null
left=""
for _ in $(seq 1 100); do
    left=""
    for d in $seen; do alive "$d" && left="$left $d"; done
    [ -z "$left" ] && break
    sleep 0.1
done
if [ -n "$left" ]; then
    for d in $left; do tr '\0' ' ' < "/proc/${d%%:*}/cmdline"; echo; done >&2
    for d in $left; do kill -KILL "${d%%:*}" 2> /dev/null; done
    fail "processes outlived bench:all by 10 s:$left"
fi

# 4. Nothing holds the folder's run lock any more: a --resume may start.
lock=$(echo "$OUT"/results/*/.bench_all.lock)
[ -f "$lock" ] || fail "no run lock in the results folder"
flock -n "$lock" true || fail "the run lock is still held after every process ended"
echo "orphan_test: ok"
