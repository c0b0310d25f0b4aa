#!/bin/bash
# tools/cuda12_build.sh - .ci/run's CUDA 12 stage: builds the CUDA backend,
# every .cu file and bench:selfcheck against CUDA 12 from NVIDIA's wheels,
# and checks that what it linked is CUDA 12's (GPU machines with R535-R570
# drivers run CUDA 12 only; the toolkit here is 13.0, which needs R580+).
#
#   tools/cuda12_build.sh [VERSION]      VERSION: 12.x, default 12.9
#
# What is CUDA 12 and what is not: host code (lib/backend/cuda, lib/selfcheck,
# bench) compiles against CUDA 12's headers and everything links against its
# cudart, cuBLAS, cuDNN 9 and NCCL. No CUDA 12 nvcc is published as a wheel
# (see tools/cuda_wheels.sh), so the .cu files are compiled by the main
# toolkit's nvcc (TB_NVCC) with its own headers: this stage proves the host
# side's API use and the link, not that CUDA 12's compiler takes the kernels.
#
# Wheels and a separate Bazel output base live under TB_CACHE_DIR
# (~/.cache/tunebench), so the main build's output base is not evicted and a
# second run downloads nothing. Prints "cuda12: PASSED ..." or
# "cuda12: FAILED ..." last; exit status 0 or 1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
version="${1:-12.9}"
cache="${TB_CACHE_DIR:-$HOME/.cache/tunebench}"
prefix="$cache/cuda-$version"
nvcc="${TB_NVCC:-${CUDA_PATH:-/usr/local/cuda}/bin/nvcc}"
fail() { echo "cuda12: FAILED: $*"; exit 1; }

[ -x "$nvcc" ] || fail "no nvcc at $nvcc to compile the .cu files (set TB_NVCC)"
SECONDS=0
tools/cuda_wheels.sh "$version" "$prefix" || fail "tools/cuda_wheels.sh $version $prefix"
echo "cuda12: wheels ready in ${SECONDS}s"
SECONDS=0

ob="$cache/bazel-cuda12"
targets=(//kernels/... //lib/backend/cuda/... //lib/selfcheck/... //bench:selfcheck)
bz() { bazel --output_base="$ob" "$@"; }
bz build --repo_env=CUDA_PATH="$prefix" --repo_env=TB_NVCC="$nvcc" "${targets[@]}"
rc=$?
bin="$(bz info --repo_env=CUDA_PATH="$prefix" --repo_env=TB_NVCC="$nvcc" bazel-bin 2>/dev/null)"
ext="$(bz info output_base 2>/dev/null)/external/local_config/defs.bzl"
bz shutdown >/dev/null 2>&1
echo "cuda12: build took ${SECONDS}s"
[ "$rc" = 0 ] || fail "bazel build ${targets[*]} against $prefix (exit $rc)"

# The build must have taken the CUDA 12 kit, not dropped CUDA or found 13.
grep -q '^HAS_CUDA = True' "$ext" || fail "the build found no CUDA at $prefix ($ext)"
grep -q "^CUDA_VERSION = \"$version\"" "$ext" ||
  fail "the build's CUDA headers are not $version: $(grep CUDA_VERSION "$ext")"
exe="$bin/bench/selfcheck"
[ -x "$exe" ] || fail "no $exe"
needed="$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
for lib in libcudart.so.12 libcublas.so.12 libcudnn.so.9 libnccl.so.2; do
  echo "$needed" | grep -qx "$lib" || fail "bench/selfcheck does not link $lib: ${needed//$'\n'/ }"
done
readelf -d "$exe" | grep -q "$prefix/lib64" ||
  fail "bench/selfcheck's run path does not name $prefix/lib64"
echo "cuda12: PASSED: CUDA backend, kernels and bench:selfcheck built against CUDA $version" \
     "(host code and link; .cu compiled by $nvcc)"
