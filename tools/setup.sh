#!/bin/bash
# tools/setup.sh - installs what tunebench needs on Debian 12, idempotently.
#
#   sudo tools/setup.sh        (or as root: tools/setup.sh)
#
# Does nothing slow when everything is there: apt-get runs only when a
# package is missing. The CUDA toolkit is not a Debian package of this
# release: when it is missing this says how to get it, and tunebench builds
# and runs its CPU backend without it.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap      # Bazel 4.2.3, offline-capable
  build-essential      # gcc, g++ (and GCC's ASan, UBSan, TSan runtimes: tools/sanitize.sh)
  clang libclang-rt-dev  # clang and libFuzzer: the fuzz targets (tools/fuzz.sh)
  gnuplot-nox          # plots (pngcairo, svg, pdfcairo)
  libopenmpi-dev openmpi-bin  # DDP ranks
  libdnnl-dev          # oneDNN: CPU convolution and matmul
  libbenchmark-dev     # Google Benchmark, behind bench/gbench_shim
  zlib1g-dev           # gzip IDX datasets
  dataset-fashion-mnist  # the real dataset
  python3              # a few test helpers
  git
)

missing=()
for p in "${PACKAGES[@]}"; do
  case "$p" in \#*) continue ;; esac
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo"
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# Debian's /usr/bin/bazel wrapper reads .bazelversion (4.2.3) and looks for
# /usr/bin/bazel-4.2.3; the package installs the same release as bazel-4.
if [ ! -x /usr/bin/bazel-4.2.3 ] && [ -x /usr/bin/bazel-4 ]; then
  $SUDO ln -sf /usr/bin/bazel-4 /usr/bin/bazel-4.2.3
fi

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ -x "$cuda/bin/nvcc" ] && [ -f "$cuda/include/cudnn.h" ] && [ -f "$cuda/include/nccl.h" ]; then
  echo "setup: CUDA toolkit found at $cuda" >&2
else
  cat >&2 <<MSG
setup: no CUDA toolkit with cuDNN and NCCL at $cuda.
  tunebench builds and runs its CPU backend without it. For the CUDA backend
  install the CUDA Toolkit 12 or 13, cuDNN 9 and NCCL 2 from NVIDIA (their
  Debian repository or runfile), or point CUDA_PATH at an existing toolkit
  that has include/cudnn.h, include/nccl.h and lib64/libcudnn.so.
MSG
fi
echo "setup: ready" >&2
