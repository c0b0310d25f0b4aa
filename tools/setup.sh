#!/bin/bash
# tools/setup.sh - installs what tunebench needs on Debian 12, idempotently.
#
#   sudo tools/setup.sh        (or as root: tools/setup.sh)
#
# Does nothing slow when everything is there: apt-get runs only when a
# package is missing. The CUDA toolkit is not a Debian package of this
# release: on a machine with an NVIDIA driver and no toolkit this installs
# one from NVIDIA's PyPI wheels (tools/cuda_wheels.sh) that matches the
# driver; with no driver, tunebench builds and runs its CPU backend.
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
  python3-pip unzip    # CUDA wheels: tools/cuda_wheels.sh (setup on a GPU machine, .ci/run)
  patchelf             # //kit:gpu_kit sets the bundled binaries' $ORIGIN run paths
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

# ---- CUDA toolkit (tools/cuda_pick.sh): found, or installed from NVIDIA's
# wheels into ~/.cache/tunebench/cuda-VERSION when a driver is there and no
# toolkit is (the version the driver runs), or the CPU backend alone. ----
# shellcheck source=tools/cuda_pick.sh
. "$(dirname "$0")/cuda_pick.sh"
tb_cuda_setup "${CUDA_PATH:-/usr/local/cuda}" "${TB_CACHE_DIR:-$HOME/.cache/tunebench}"
# ---- end CUDA toolkit ----
echo "setup: ready" >&2
