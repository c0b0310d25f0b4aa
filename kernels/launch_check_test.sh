#!/bin/bash
# launch_check_test.sh - every kernel launch in kernels/*.cu is followed by
# an error check: a line with `<<<` must have TB_CHECK_LAUNCH() on one of the
# 3 lines after the one where the launch statement ends (the `;`).
# Run: bazel test //kernels:launch_check_test
set -euo pipefail
dir="$(dirname "$0")"
[ -n "${TEST_SRCDIR:-}" ] && dir="$TEST_SRCDIR/${TEST_WORKSPACE:-__main__}/kernels"
shopt -s nullglob
files=("$dir"/*.cu)
[ "${#files[@]}" -gt 0 ] || { echo "no .cu files found in $dir" >&2; exit 1; }
bad=0
launches=0
for f in "${files[@]}"; do
  out=$(awk -v file="$(basename "$f")" '
    /<<</ && !/^[ \t]*(\/\/|\*)/ { pending = 1; start = FNR; launches++ }
    pending == 1 && /;/ { pending = 2; left = 3; next }
    pending == 2 {
      if (/TB_CHECK_LAUNCH\(\)/) { pending = 0; next }
      if (--left == 0) { printf "%s:%d: launch without TB_CHECK_LAUNCH() after it\n", file, start; pending = 0 }
    }
    END { if (pending) printf "%s:%d: launch without TB_CHECK_LAUNCH() after it\n", file, start; print "launches " launches }
  ' "$f")
  n=$(echo "$out" | awk '/^launches/ { print $2 }')
  launches=$((launches + n))
  if echo "$out" | grep -q "without"; then
    echo "$out" | grep "without" >&2
    bad=1
  fi
done
echo "checked $launches launches in ${#files[@]} files"
[ "$launches" -gt 0 ] || { echo "found no launches: the pattern is broken" >&2; exit 1; }
exit $bad
