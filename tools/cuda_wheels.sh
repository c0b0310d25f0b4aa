#!/bin/bash
# tools/cuda_wheels.sh - lays out a CUDA toolkit in PREFIX from NVIDIA's
# PyPI wheels, with no driver and no root: what tools/setup.sh installs on a
# GPU machine that has a driver but no toolkit, and what .ci/run's CUDA 12
# stage builds against.
#
#   tools/cuda_wheels.sh VERSION PREFIX     VERSION: 12.9 or 13.0 (MAJOR.MINOR)
#
# PREFIX gets bin/, include/, lib64/ (lib -> lib64), nvvm/ and
# targets/<arch>-linux/{include,lib} as nvcc.profile expects. The wheels
# (about 1.3 GB for 12.9) are downloaded into PREFIX/.wheels, unpacked and
# deleted; a finished install leaves PREFIX/.tb_wheels listing them, and a
# second run with the same VERSION returns at once.
#
# What the two wheel families hold (read from the wheels themselves):
#   13.x  nvidia-cuda-nvcc (nvcc, cudafe++, fatbinary, nvlink, ptxas),
#         nvidia-nvvm (cicc, libdevice), nvidia-cuda-crt, -runtime, -cccl,
#         nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13: a whole toolkit.
#   12.x  nvidia-cuda-nvcc-cu12 holds ptxas, libnvvm, libdevice and the crt
#         headers but NOT nvcc's driver, cicc, cudafe++, fatbinary or nvlink
#         (no cu12 wheel does); runtime, cccl, cuBLAS, cuDNN 9 and NCCL are
#         all there. So a 12.x PREFIX has no bin/nvcc: host code compiles and
#         links against it, and .cu files need nvcc from elsewhere
#         (TB_NVCC, see tools/local_config.bzl).
# Exit status: 0 when PREFIX is laid out, 1 with a message otherwise.
# Run for real by .ci/run's CUDA 12 stage (its build is the check); the
# choice of VERSION is tested by //tools:cuda_pick_test.
set -euo pipefail

die() { echo "cuda_wheels: $*" >&2; exit 1; }

[ "$#" = 2 ] || die "usage: tools/cuda_wheels.sh VERSION PREFIX (VERSION 12.9 or 13.0)"
version="$1"; prefix="$2"
case "$version" in
  12.[0-9]*|13.[0-9]*) ;;
  *) die "VERSION '$version' is not 12.x or 13.x: the wheels exist for CUDA 12 and 13 only" ;;
esac
major="${version%%.*}"

# The wheel set of one CUDA version, pinned to its MAJOR.MINOR where the
# package follows the toolkit's numbering. cuBLAS, cuDNN and NCCL number
# their own releases: the newest of the major is taken.
wheel_specs() {
  if [ "$major" = 12 ]; then
    echo "nvidia-cuda-nvcc-cu12==$version.* nvidia-cuda-runtime-cu12==$version.*" \
         "nvidia-cuda-cccl-cu12==$version.* nvidia-cublas-cu12==12.* nvidia-cudnn-cu12==9.*" \
         "nvidia-nccl-cu12"
  else
    echo "nvidia-cuda-nvcc==$version.* nvidia-cuda-crt==$version.* nvidia-nvvm==$version.*" \
         "nvidia-cuda-runtime==$version.* nvidia-cuda-cccl==$version.* nvidia-cublas==13.*" \
         "nvidia-cudnn-cu13==9.* nvidia-nccl-cu13"
  fi
}

# Copies every nvidia/<pkg>/{bin,include,lib,nvvm} of the unpacked wheels in
# $1 into the toolkit layout at $2.
lay_out() {
  local raw="$1" dst="$2" pkg
  mkdir -p "$dst/bin" "$dst/include" "$dst/lib64" "$dst/nvvm"
  for pkg in "$raw"/nvidia/*/; do
    [ -d "$pkg/bin" ] && cp -a "$pkg/bin/." "$dst/bin/"
    [ -d "$pkg/include" ] && cp -a "$pkg/include/." "$dst/include/"
    [ -d "$pkg/lib" ] && cp -a "$pkg/lib/." "$dst/lib64/"
    [ -d "$pkg/nvvm" ] && cp -a "$pkg/nvvm/." "$dst/nvvm/"
  done
  find "$dst" -name __init__.py -delete
  rm -rf "$dst/include/__pycache__" "$dst/lib64/__pycache__"
  # Linkers want libX.so; the wheels ship libX.so.N only.
  local so base
  for so in "$dst"/lib64/*.so.*; do
    [ -e "$so" ] || continue
    base="${so%%.so.*}.so"
    [ -e "$base" ] || ln -s "$(basename "$so")" "$base"
  done
  [ -e "$dst/lib" ] || ln -s lib64 "$dst/lib"
  local tgt
  tgt="$dst/targets/$(uname -m)-linux"
  mkdir -p "$tgt"
  [ -e "$tgt/include" ] || ln -s ../../include "$tgt/include"
  [ -e "$tgt/lib" ] || ln -s ../../lib64 "$tgt/lib"
  chmod +x "$dst"/bin/* "$dst"/nvvm/bin/* 2>/dev/null || true
}

if [ -f "$prefix/.tb_wheels" ] && grep -qx "version $version" "$prefix/.tb_wheels"; then
  echo "cuda_wheels: CUDA $version already laid out in $prefix" >&2
  exit 0
fi

command -v python3 >/dev/null || die "python3 is needed (pip downloads the wheels)"
python3 -m pip --version >/dev/null 2>&1 ||
  die "python3's pip is missing: apt-get install python3-pip, then run this again"
command -v unzip >/dev/null || die "unzip is missing: apt-get install unzip"

wheels="$prefix/.wheels"
mkdir -p "$wheels"
echo "cuda_wheels: downloading the CUDA $version wheels into $wheels (about 1.5 GB)" >&2
# shellcheck disable=SC2046
python3 -m pip download --quiet --no-cache-dir --no-deps --only-binary=:all: \
  --platform "manylinux2014_$(uname -m)" -d "$wheels" $(wheel_specs) ||
  die "pip download failed for: $(wheel_specs). Is PyPI reachable (proxy, pip.conf)?"

raw="$prefix/.unpacked"
rm -rf "$raw"
mkdir -p "$raw"
for w in "$wheels"/*.whl; do
  unzip -q -o "$w" -d "$raw"
done
lay_out "$raw" "$prefix"
{ echo "version $version"; ls "$wheels"; } > "$prefix/.tb_wheels"
rm -rf "$raw" "$wheels"
if [ -x "$prefix/bin/nvcc" ]; then
  echo "cuda_wheels: CUDA $version toolkit ready in $prefix: CUDA_PATH=$prefix" >&2
else
  echo "cuda_wheels: CUDA $version runtime, headers, cuBLAS, cuDNN and NCCL ready in $prefix;" \
       "no bin/nvcc (NVIDIA publishes no CUDA $major nvcc driver as a wheel)" >&2
fi
