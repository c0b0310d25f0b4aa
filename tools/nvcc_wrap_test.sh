#!/bin/bash
# nvcc_wrap_test.sh - the build's spill check (tools/nvcc_wrap.sh) fails a
# kernel that spills registers to local memory, names it, and lets it pass
# only when --allow-spill names it; a kernel that does not spill passes.
# The spilling kernel is made so by -maxrregcount=16 (48 live accumulators).
# Run: bazel test //tools:nvcc_wrap_test (CUDA only; needs nvcc, no GPU).
# usage: nvcc_wrap_test.sh NVCC
set -uo pipefail
nvcc="$1"
dir="$(cd "$(dirname "$0")" && pwd)"
[ -n "${TEST_SRCDIR:-}" ] && dir="$(cd "$TEST_SRCDIR/${TEST_WORKSPACE:-__main__}/tools" && pwd)"
wrap="$dir/nvcc_wrap.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/k.cu" <<'CU'
__global__ void hot_kernel(const float *x, float *y, int n)
{
    float acc[48];
#pragma unroll
    for (int k = 0; k < 48; k++)
        acc[k] = x[k];
    for (int i = 0; i < n; i++)
#pragma unroll
        for (int k = 0; k < 48; k++)
            acc[k] = acc[k] * x[i + k] + acc[(k + 1) % 48];
#pragma unroll
    for (int k = 0; k < 48; k++)
        y[k] = acc[k];
}
CU
# shellcheck disable=SC2054  # the commas belong to -gencode
flags=(-gencode=arch=compute_90,code=sm_90 -O3 -Xptxas -v)
fails=0
check() { # check WHAT GOT WANT
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: got $2, want $3" >&2; fails=$((fails + 1)); fi
}

"$wrap" "$nvcc" "$tmp/a.o" "$tmp/a.txt" "$tmp/k.cu" -- "${flags[@]}" -maxrregcount=16 2> "$tmp/err"
check "a spilling kernel fails the build" "$?" 1
grep -q "spill registers to local memory:.*hot_kernel" "$tmp/err"
check "the message names the kernel" "$?" 0
"$wrap" "$nvcc" "$tmp/b.o" "$tmp/b.txt" "$tmp/k.cu" --allow-spill hot_kernel -- "${flags[@]}" \
  -maxrregcount=16 2> "$tmp/err"
check "--allow-spill lets it through" "$?" 0
"$wrap" "$nvcc" "$tmp/c.o" "$tmp/c.txt" "$tmp/k.cu" -- "${flags[@]}" 2> "$tmp/err"
check "with its registers it does not spill and passes" "$?" 0
grep -q "0 bytes spill stores" "$tmp/c.txt"
check "the report is kept" "$?" 0
echo "$fails failed"
[ "$fails" = 0 ]
