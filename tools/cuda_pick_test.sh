#!/bin/bash
# cuda_pick_test.sh - tools/cuda_pick.sh picks the CUDA wheels that match the
# driver, with the driver simulated (TB_SIMULATE_DRIVER_CUDA) and nothing
# downloaded (TB_CUDA_DRY_RUN=1).
# Run: bazel test //tools:cuda_pick_test
set -uo pipefail
dir="$(cd "$(dirname "$0")" && pwd)"
[ -n "${TEST_SRCDIR:-}" ] && dir="$(cd "$TEST_SRCDIR/${TEST_WORKSPACE:-__main__}/tools" && pwd)"
# shellcheck source=tools/cuda_pick.sh
. "$dir/cuda_pick.sh"

fails=0
expect() { # expect WHAT GOT WANT
  if [ "$2" = "$3" ]; then
    echo "ok   $1"
  else
    echo "FAIL $1: got '$2', want '$3'" >&2
    fails=$((fails + 1))
  fi
}

# The version rule.
for case in 13.0:13.0 13.2:13.0 12.9:12.9 12.4:12.4 12.2:12.2 12.0:12.0 12.7:12.6 12.8:12.8 12.10:12.9; do
  expect "wheels for a CUDA ${case%%:*} driver" "$(tb_cuda_wheels_for "${case%%:*}")" "${case#*:}"
done
out=$(tb_cuda_wheels_for 11.8 2>&1); rc=$?
expect "CUDA 11.8 driver refused" "$rc" 1
case "$out" in *"needs CUDA 12 or 13"*) ok=yes ;; *) ok="$out" ;; esac
expect "CUDA 11.8 message says what is needed" "$ok" yes
tb_cuda_wheels_for "R535" >/dev/null 2>&1; expect "a non-version is an error" "$?" 2

# The driver's version, simulated; "none" is no driver.
expect "simulated driver" "$(TB_SIMULATE_DRIVER_CUDA=12.4 tb_driver_cuda)" 12.4
expect "simulated no driver" "$(TB_SIMULATE_DRIVER_CUDA=none tb_driver_cuda)" ""

# setup's whole step, dry: what it would run, or nothing.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nocuda="$tmp/no-toolkit"
got=$(TB_SIMULATE_DRIVER_CUDA=12.4 TB_CUDA_DRY_RUN=1 tb_cuda_setup "$nocuda" "$tmp/cache" 2>/dev/null)
expect "R550-like driver (CUDA 12.4)" "$got" "would run: $dir/cuda_wheels.sh 12.4 $tmp/cache/cuda-12.4"
got=$(TB_SIMULATE_DRIVER_CUDA=13.0 TB_CUDA_DRY_RUN=1 tb_cuda_setup "$nocuda" "$tmp/cache" 2>/dev/null)
expect "R580 driver (CUDA 13.0)" "$got" "would run: $dir/cuda_wheels.sh 13.0 $tmp/cache/cuda-13.0"
got=$(TB_SIMULATE_DRIVER_CUDA=none TB_CUDA_DRY_RUN=1 tb_cuda_setup "$nocuda" "$tmp/cache" 2>&1)
case "$got" in *"no NVIDIA driver"*) ok=yes ;; *) ok="$got" ;; esac
expect "no driver: nothing installed, says why" "$ok" yes
got=$(TB_SIMULATE_DRIVER_CUDA=11.8 TB_CUDA_DRY_RUN=1 tb_cuda_setup "$nocuda" "$tmp/cache" 2>/dev/null)
expect "CUDA 11 driver: nothing run" "$got" ""
# A toolkit already there wins over the driver.
mkdir -p "$tmp/tk/bin" "$tmp/tk/include"
printf '#!/bin/sh\n' > "$tmp/tk/bin/nvcc"; chmod +x "$tmp/tk/bin/nvcc"
touch "$tmp/tk/include/cudnn.h" "$tmp/tk/include/nccl.h"
got=$(TB_SIMULATE_DRIVER_CUDA=12.4 TB_CUDA_DRY_RUN=1 tb_cuda_setup "$tmp/tk" "$tmp/cache" 2>/dev/null)
expect "toolkit present: nothing run" "$got" ""
[ ! -e "$tmp/cache" ]; expect "dry runs made no cache" "$?" 0

echo "$fails failed"
[ "$fails" = 0 ]
