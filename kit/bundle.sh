#!/bin/bash
# kit/bundle.sh - packs the GPU kit (//kit:gpu_kit): the binaries tools/gpu_check.sh
# runs, every shared library they load that a bare GPU machine may lack, with
# $ORIGIN run paths, stripped, in one tar.xz.
#
#   kit/bundle.sh OUT.tar.xz LIBDIR_CHECK_SCRIPT FILE... -- BINARY...
#
# FILEs are copied to the kit's top (gpu_check.sh, torch_step.py); BINARYs to
# tunebench/bench/ (bench:all finds the techniques there through RUNFILES_DIR).
# Libraries: everything ldd resolves except glibc's own (libc, libm, libdl,
# libpthread, librt, the loader: every Linux has them) and the CUDA toolkit's
# and driver's (cudart, cuBLAS, cuDNN, NCCL, libcuda: the GPU machine has its
# own, matched to its driver; tools/gpu_check.sh finds them). Those go to
# tunebench/lib/ with RUNPATH $ORIGIN; binaries get $ORIGIN/../lib.
# Fashion-MNIST (Debian's dataset-fashion-mnist, which tools/setup.sh installs)
# goes to data/fashion-mnist/ as raw IDX: xz packs it 4 MB smaller than its
# gzip files, and tools/gpu_check.sh gzips it again on arrival (the loader
# and data_format read the .gz files Debian installs).
# MANIFEST lists each file, its kind and its size. Tested by //kit:gpu_kit_test.
set -euo pipefail

out="$1"; shift
files=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do files+=("$1"); shift; done
[ "$#" -gt 0 ] || { echo "bundle.sh: missing -- before the binaries" >&2; exit 2; }
shift
[ "$#" -gt 0 ] || { echo "bundle.sh: no binaries given" >&2; exit 2; }
command -v patchelf >/dev/null || {
  echo "bundle.sh: patchelf not found: install Debian's patchelf (tools/setup.sh does)" >&2
  exit 2
}

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/tunebench-gpu-kit"
mkdir -p "$root/tunebench/bench" "$root/tunebench/lib"

# Provided by every Linux (glibc) or by the GPU machine's driver and CUDA toolkit.
system_lib() {
  case "$(basename "$1")" in
    ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libutil.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*|libnvrtc*|libnvJitLink*) return 0 ;;
    libnvidia-*) return 0 ;;
  esac
  case "$1" in /usr/local/cuda*|*/site-packages/nvidia/*) return 0 ;; esac
  return 1
}

for f in "${files[@]}"; do cp "$f" "$root/"; done
fmnist=/usr/share/datasets/fashion-mnist
mkdir -p "$root/data/fashion-mnist"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -f "$fmnist/$f.gz" ] || {
    echo "bundle.sh: $fmnist/$f.gz missing: install Debian's dataset-fashion-mnist (tools/setup.sh)" >&2
    exit 1
  }
  gzip -dc "$fmnist/$f.gz" > "$root/data/fashion-mnist/$f"
done
declare -A libs=()
for b in "$@"; do
  dst="$root/tunebench/bench/$(basename "$b")"
  cp "$b" "$dst"
  chmod u+w "$dst"
  # "name => /path (addr)"; "not found" here means the build machine lacks it.
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      system_lib "$name" && continue
      echo "bundle.sh: $b needs $name, which this machine does not have" >&2; exit 1
    fi
    system_lib "$path" || libs["$(readlink -f "$path")"]="$name"
  done < <(ldd "$b")
  strip --strip-all "$dst"
  # The toolkit's usual home stays as a fallback; gpu_check.sh adds others.
  patchelf --set-rpath '$ORIGIN/../lib:/usr/local/cuda/lib64' "$dst"
done
for real in "${!libs[@]}"; do
  dst="$root/tunebench/lib/${libs[$real]}"   # under its soname, what the loader asks for
  cp "$real" "$dst"
  chmod u+w "$dst"
  strip --strip-unneeded "$dst"
  patchelf --set-rpath '$ORIGIN' "$dst"
done

( cd "$root" && find . -type f ! -name MANIFEST | sort | while read -r f; do
    case "$f" in ./tunebench/bench/*) kind=binary ;; ./tunebench/lib/*) kind=library ;;
      ./data/*) kind=data ;; *) kind=file ;; esac
    printf '%s %s %s\n' "${f#./}" "$kind" "$(stat -c %s "$f")"
  done ) > "$root/MANIFEST"
# -9: the binaries share most of their code, and xz's 64 MiB window finds it
# across files (-9e saves little more and takes minutes longer).
tar -C "$stage" --owner=0 --group=0 --numeric-owner -cf - tunebench-gpu-kit |
  xz -9 -T1 > "$out"
