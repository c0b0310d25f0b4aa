#!/bin/bash
# ddp_test.sh - runs a test program under mpirun, as bazel test does for the
# communicator and DDP tests, and checks how the job ended.
#
#   ddp_test.sh [--ranks=N] [--expect-fail=REGEX] [--within=SECONDS] PROGRAM [ARGS...]
#
# Without --expect-fail the job must exit 0. With it, the job must exit
# non-zero within SECONDS (default 60) and its stderr+stdout must match
# REGEX: a rank that dies or hangs makes the whole job fail, with a clear
# message, in bounded time. mpirun flags: -np N, --oversubscribe (2 cores
# here), --bind-to none, --allow-run-as-root when root (the OMPI_ALLOW_*
# variables come from .bazelrc's test_env as well).
set -u
ranks=2
expect_fail=""
within=60
while [ $# -gt 0 ]; do
    case "$1" in
    --ranks=*) ranks="${1#--ranks=}" ;;
    --expect-fail=*) expect_fail="${1#--expect-fail=}" ;;
    --within=*) within="${1#--within=}" ;;
    *) break ;;
    esac
    shift
done
prog="$1"
shift
flags=(-np "$ranks" --oversubscribe --bind-to none)
if [ "$(id -u)" = 0 ]; then
    flags+=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Under the asan config (tools/sanitize.sh): OpenMPI is built without frame
# pointers, so the fast unwinder stops at its first frame and the leak
# suppressions (tools/lsan.supp) cannot see that a leak came from MPI_Init.
if [ -n "${ASAN_OPTIONS:-}" ]; then
    export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
fi
log="${TEST_TMPDIR:-/tmp}/mpirun.$$.log"
start=$(date +%s)
# timeout(1) is a backstop only: the test fails if it is what ended the job.
timeout -k 5 $((within + 30)) mpirun "${flags[@]}" "$prog" "$@" >"$log" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
cat "$log"
echo "ddp_test.sh: mpirun exited $rc after ${elapsed}s"
if [ -z "$expect_fail" ]; then
    [ "$rc" = 0 ] || { echo "FAIL: the job failed"; exit 1; }
    exit 0
fi
if [ "$rc" = 0 ]; then
    echo "FAIL: the job succeeded; a failure was expected"
    exit 1
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ] || [ "$elapsed" -gt "$within" ]; then
    echo "FAIL: the job took ${elapsed}s (limit ${within}s) or was ended by timeout(1)"
    exit 1
fi
grep -Eq "$expect_fail" "$log" || { echo "FAIL: no line matches /$expect_fail/"; exit 1; }
echo "PASS: failed as expected in ${elapsed}s with a clear message"
