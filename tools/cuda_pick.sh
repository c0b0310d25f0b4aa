# shellcheck shell=bash
# tools/cuda_pick.sh - sourced by tools/setup.sh: which CUDA toolkit to
# install from NVIDIA's wheels on a machine with a driver and no toolkit.
#
#   tb_driver_cuda              the driver's CUDA version (MAJOR.MINOR), or
#                               nothing when there is no driver
#   tb_cuda_wheels_for VERSION  the wheel set (tools/cuda_wheels.sh VERSION)
#                               that matches a driver of that CUDA version
#   tb_cuda_setup CUDA_PATH CACHE  setup.sh's whole CUDA step
#
# TB_SIMULATE_DRIVER_CUDA=12.4 (or "none") stands in for the driver in
# tb_driver_cuda only, so the decision can be tested on a machine with no
# GPU; TB_CUDA_DRY_RUN=1 makes tb_cuda_setup print what it would run
# instead of downloading. Tested by tools/cuda_pick_test.sh
# (bazel test //tools:cuda_pick_test).

# nvidia-smi's banner says "CUDA Version: 12.4": the newest CUDA its driver
# runs. Nothing printed when there is no nvidia-smi or it fails (no driver).
tb_driver_cuda() {
  if [ -n "${TB_SIMULATE_DRIVER_CUDA:-}" ]; then
    [ "$TB_SIMULATE_DRIVER_CUDA" = none ] || echo "$TB_SIMULATE_DRIVER_CUDA"
    return 0
  fi
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  # A failing nvidia-smi (a driver in a bad state) counts as no driver.
  { nvidia-smi 2>/dev/null || true; } |
    sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -1
}

# CUDA 13 drivers (R580+) get the 13.0 wheels, the toolkit tunebench is
# built with. A CUDA 12.N driver gets the 12.N wheels: a runtime no newer
# than the driver, so nothing leans on minor-version compatibility. There
# was no CUDA 12.7 (12.6 for it) and 12.9 is the last (for anything newer).
# Older drivers: none, status 1.
tb_cuda_wheels_for() {
  local v="$1" major minor
  case "$v" in
    [0-9]*.[0-9]*) ;;
    *) echo "cuda_pick: '$v' is not a CUDA version (MAJOR.MINOR)" >&2; return 2 ;;
  esac
  major="${v%%.*}"; minor="${v#*.}"; minor="${minor%%.*}"
  if [ "$major" -ge 13 ]; then
    echo 13.0
  elif [ "$major" = 12 ]; then
    [ "$minor" -le 9 ] || minor=9
    [ "$minor" != 7 ] || minor=6
    echo "12.$minor"
  else
    echo "cuda_pick: the driver runs CUDA $v; tunebench needs CUDA 12 or 13 (driver R525 or newer)" >&2
    return 1
  fi
}

# Leaves a toolkit where the build looks (CUDA_PATH, /usr/local/cuda, then
# CACHE/cuda: tools/local_config.bzl) when a driver is there and no toolkit
# is: the wheels into CACHE/cuda-VERSION, CACHE/cuda a link to it.
tb_cuda_setup() {
  local cuda="$1" cache="$2" here drv ver
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  if [ -x "$cuda/bin/nvcc" ] && [ -f "$cuda/include/cudnn.h" ] && [ -f "$cuda/include/nccl.h" ]; then
    echo "setup: CUDA toolkit found at $cuda" >&2
    return 0
  fi
  drv="$(tb_driver_cuda)"
  if [ -z "$drv" ]; then
    cat >&2 <<MSG
setup: no CUDA toolkit with cuDNN and NCCL at $cuda, and no NVIDIA driver.
  tunebench builds and runs its CPU backend without them. On a GPU machine
  this script installs a toolkit from NVIDIA's wheels itself; or point
  CUDA_PATH at a toolkit with include/cudnn.h, include/nccl.h, lib64/libcudnn.so.
MSG
    return 0
  fi
  ver="$(tb_cuda_wheels_for "$drv")" || return 0
  echo "setup: the driver runs CUDA $drv and no toolkit is at $cuda:" \
       "installing CUDA $ver from NVIDIA's wheels into $cache/cuda-$ver" >&2
  if [ "${TB_CUDA_DRY_RUN:-0}" = 1 ]; then
    echo "would run: $here/cuda_wheels.sh $ver $cache/cuda-$ver"
    return 0
  fi
  mkdir -p "$cache"
  "$here/cuda_wheels.sh" "$ver" "$cache/cuda-$ver" || return 1
  ln -sfn "cuda-$ver" "$cache/cuda"
  if [ -x "$cache/cuda/bin/nvcc" ]; then
    echo "setup: CUDA $ver installed; the build finds it at $cache/cuda" >&2
  else
    cat >&2 <<MSG
setup: CUDA $ver's runtime, cuBLAS, cuDNN and NCCL are in $cache/cuda, but NVIDIA
  publishes no CUDA 12 nvcc as a wheel, so the CUDA backend cannot be compiled
  from them alone. Install NVIDIA's cuda-nvcc-${ver/./-} package (their apt
  repository) and set TB_NVCC to its nvcc, or use a driver R580+ (CUDA 13).
MSG
  fi
}
