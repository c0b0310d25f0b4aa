#!/bin/bash
# Runs nvcc for one .cu file and reads its resource report.
# usage: nvcc_wrap.sh NVCC OUT.o REPORT.txt SRC.cu [--allow-spill NAME]... -- NVCC_FLAGS...
# Fails when a kernel spills registers to local memory (the report's
# "bytes spill stores" or "bytes spill loads" is not 0), unless its mangled
# name contains one of the --allow-spill strings.
set -euo pipefail
nvcc="$1"; out="$2"; report="$3"; src="$4"; shift 4
allow=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  [ "$1" = "--allow-spill" ] && { allow+=("$2"); shift 2; continue; }
  shift
done
shift  # the --
# nvcc names its temporaries /tmp/tmpxft_<pid>_...: inside Bazel's sandboxes
# every nvcc has a tiny PID (the same one, often 3) while /tmp is shared, so
# two nvcc actions at once overwrite each other's files ("cannot open module
# id file /tmp/tmpxft_00000003_...", seen in CI's CUDA 12 build). Each gets
# a directory of its own.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nvcc_wrap.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! TMPDIR="$tmp" "$nvcc" "$@" -c "$src" -o "$out" 2> "$report.tmp"; then
  cat "$report.tmp" >&2
  echo "nvcc_wrap: nvcc failed on $src" >&2
  exit 1
fi
mv "$report.tmp" "$report"
# ptxas prints "Compiling entry function 'NAME' for 'sm_XX'" then
# "N bytes stack frame, N bytes spill stores, N bytes spill loads".
spills=$(awk '
  /Compiling entry function/ { fn = $0; sub(/.*function .\047?/, "", fn); sub(/\047.*/, "", fn) }
  /spill stores/ {
    for (i = 1; i <= NF; i++) {
      if ($(i+1) == "bytes" && $(i+2) == "spill" && $i + 0 > 0) { print fn; break }
    }
  }' "$report" | sort -u)
bad=""
for fn in $spills; do
  ok=0
  for a in "${allow[@]+"${allow[@]}"}"; do
    case "$fn" in *"$a"*) ok=1 ;; esac
  done
  [ "$ok" = 1 ] || bad="$bad $fn"
done
if [ -n "$bad" ]; then
  echo "nvcc_wrap: kernels in $src spill registers to local memory:$bad" >&2
  grep -B2 "spill" "$report" >&2 || true
  exit 1
fi
