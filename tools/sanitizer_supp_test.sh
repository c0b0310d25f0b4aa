#!/bin/bash
# tools/sanitizer_supp_test.sh - holds the sanitizer suppression files to
# their rule: they may silence only what OpenMPI and oneDNN do, never
# tunebench's own code.
#
#   sanitizer_supp_test.sh FILE...        (bazel test //tools:sanitizer_supp_test)
#
# Every line that is not blank or a comment must be "leak:PATTERN" or, in a
# TSan file, "race:", "deadlock:" or "called_from_lib:PATTERN", where PATTERN is part
# of the name of a shared library file (not a link) installed by Debian's libopenmpi3 or
# libdnnl2, or by a package libopenmpi3 depends on (its event loop, hwloc,
# PMIx: run only by OpenMPI here). A pattern that also names any other
# library, or no installed library, fails. To show that the check can fail,
# the test also feeds it a file with a pattern for tunebench's own code and
# one for zlib, and expects both refused.
set -uo pipefail

libdir=/usr/lib/x86_64-linux-gnu
# The packages whose libraries may be named: OpenMPI, its run-time
# dependencies, and oneDNN.
allowed=" libopenmpi3 libdnnl2 $(apt-cache depends libopenmpi3 2>/dev/null |
  sed -n 's/^ *Depends: //p' | tr '\n' ' ') "

# Prints why PATTERN is refused; silent when it is allowed.
refuse_pattern() {
  local pattern="$1" libs owner found=0
  libs=$(find "$libdir" -type f -name "*$pattern*" -name '*.so*' 2>/dev/null)
  for lib in $libs; do
    found=1
    owner=$(dpkg -S "$lib" 2>/dev/null | head -1 | cut -d: -f1)
    if [[ "$allowed" != *" ${owner:-none} "* ]]; then
      echo "'$pattern' names $lib, of package ${owner:-none}: not OpenMPI's or oneDNN's"
      return
    fi
  done
  [ "$found" = 1 ] || echo "'$pattern' names no installed library (a function or file pattern could hide tunebench's own bugs)"
}

# Checks one file; prints one line per bad entry; returns 1 when any.
check_file() {
  local file="$1" bad=0 n=0 line kind pattern why
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    case "$line" in '' | \#*) continue ;; esac
    kind="${line%%:*}"
    pattern="${line#*:}"
    case "$kind" in
    leak | race | deadlock | called_from_lib) ;;
    *) echo "$file:$n: '$line': expected leak:, race:, deadlock: or called_from_lib:"; bad=1; continue ;;
    esac
    why=$(refuse_pattern "$pattern")
    if [ -n "$why" ]; then
      echo "$file:$n: $why"
      bad=1
    fi
  done <"$file"
  return "$bad"
}

if [ $# = 0 ]; then
  echo "usage: $0 FILE...: the suppression files to check" >&2
  exit 2
fi
if [[ "$allowed" != *" libevent-core-2.1-7 "* ]]; then
  echo "FAIL: apt-cache lists no dependencies of libopenmpi3 (is it installed?)"
  exit 1
fi
status=0
for f in "$@"; do
  check_file "$f" || status=1
done

bad_file="${TEST_TMPDIR:-/tmp}/bad.supp.$$"
for entry in "leak:tb_results_add" "leak:libz.so" "leak:mpi_helpers" "race:loader.c" "leak"; do
  printf '# must be refused\n%s\n' "$entry" >"$bad_file"
  if check_file "$bad_file" >/dev/null; then
    echo "FAIL: the check let '$entry' through"
    status=1
  fi
done
rm -f "$bad_file"
[ "$status" = 0 ] && echo "PASS: $* name only OpenMPI's and oneDNN's libraries"
exit "$status"
