#!/bin/bash
# tools/test.sh - runs `bazel test //...` and ends with "N passed, N failed".
#
#   tools/test.sh [extra bazel test flags]
#
# Tests skipped because the CUDA toolkit is missing are counted apart.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel test //... "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
skipped=$(grep -cE '^//[^ ]+ +SKIPPED' "$log")
# A build failure runs no test: count it as a failure so it cannot pass.
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
  failed=1
  echo "test.sh: bazel test exited $rc before any test failed (build error?)"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$rc" = 0 ]
