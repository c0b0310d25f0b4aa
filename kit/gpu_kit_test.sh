#!/bin/bash
# kit/gpu_kit_test.sh - checks the GPU kit (//kit:gpu_kit) as a bare GPU
# machine would load it: every binary there (all, selfcheck, train, each
# technique), MANIFEST matching the files, run paths $ORIGIN/../lib on
# binaries and $ORIGIN on libraries, and ldd, under an empty environment,
# resolving every library inside the kit or glibc; only the CUDA toolkit's
# and driver's may come from elsewhere (or be missing, on a machine without
# them). Fails listing what is wrong.
#
#   bazel test -c opt //kit:gpu_kit_test     (manual: builds the kit)
set -uo pipefail

kit="$1"; shift
tmp="${TEST_TMPDIR:-$(mktemp -d)}/kit"
rm -rf "$tmp"; mkdir -p "$tmp"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

tar -C "$tmp" -xJf "$kit" || { echo "FAIL: cannot unpack $kit"; exit 1; }
root="$(readlink -f "$tmp/tunebench-gpu-kit")"
[ -f "$root/MANIFEST" ] || { echo "FAIL: no MANIFEST"; exit 1; }

want=(all selfcheck train gpu_check.sh torch_step.py)
for t in "$@"; do want+=("$(basename "$t")"); done
for w in "${want[@]}"; do
  case "$w" in *.sh|*.py) p="$w" ;; *) p="tunebench/bench/$w" ;; esac
  grep -q "^$p binary \|^$p file " "$root/MANIFEST" || fail "MANIFEST lacks $p"
  [ -f "$root/$p" ] || fail "the kit lacks $p"
done
while read -r path kind size; do
  [ -f "$root/$path" ] || { fail "MANIFEST lists $path, not in the kit"; continue; }
  [ "$(stat -c %s "$root/$path")" = "$size" ] || fail "$path: size differs from MANIFEST"
done < "$root/MANIFEST"
listed=$(wc -l < "$root/MANIFEST")
present=$(cd "$root" && find . -type f ! -name MANIFEST | wc -l)
[ "$listed" = "$present" ] || fail "MANIFEST lists $listed files, the kit has $present"

glibc='/(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libutil\.so\.1)$'
toolkit='^(libcuda|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink|libnvidia-)'
check_loads() {
  local f="$1" name arrow path
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [[ "$name" =~ $toolkit ]]; then continue; fi
    if [ "$path" = "not" ]; then fail "$f: $name not found"; continue; fi
    path="$(readlink -f "$path")"   # ldd writes $ORIGIN/../lib as bench/../lib
    case "$path" in
      "$root"/tunebench/lib/*) ;;
      *) [[ "$path" =~ $glibc ]] || fail "$f loads $path from outside the kit" ;;
    esac
  done < <(env -i PATH=/usr/bin:/bin ldd "$f" 2>&1)
}
nbin=0; nlib=0
for b in "$root"/tunebench/bench/*; do
  rp=$(readelf -d "$b" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
  case "$rp" in '$ORIGIN/../lib'*) ;; *) fail "$b: run path '$rp', not \$ORIGIN/../lib" ;; esac
  readelf -S "$b" | grep -q '\.debug_info' && fail "$b is not stripped"
  check_loads "$b"; nbin=$((nbin + 1))
done
for l in "$root"/tunebench/lib/*; do
  rp=$(readelf -d "$l" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
  [ "$rp" = '$ORIGIN' ] || fail "$l: run path '$rp', not \$ORIGIN"
  check_loads "$l"; nlib=$((nlib + 1))
done
for l in libstdc++.so.6 libgomp.so.1 libdnnl.so.2 libbenchmark.so.1debian libz.so.1; do
  [ -f "$root/tunebench/lib/$l" ] || fail "the kit lacks $l"
done
# Fashion-MNIST as raw IDX: 60000 and 10000 28x28 images (header counts).
idx_count() { od -An -tu1 -j4 -N4 "$1" | awk '{print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4}'; }
for f in train-images-idx3-ubyte:60000 train-labels-idx1-ubyte:60000 t10k-images-idx3-ubyte:10000 t10k-labels-idx1-ubyte:10000; do
  p="$root/data/fashion-mnist/${f%%:*}"
  [ -f "$p" ] || { fail "the kit lacks ${p#$root/}"; continue; }
  [ "$(idx_count "$p")" = "${f##*:}" ] || fail "${p#$root/}: not ${f##*:} items"
done
# Well under the 64 MiB a device session carries.
size=$(stat -L -c %s "$kit")
[ "$size" -lt $((48 * 1048576)) ] || fail "the kit is $size bytes, over 48 MiB"
echo "kit: $(stat -L -c %s "$kit") bytes, $nbin binaries, $nlib libraries, $fails failures"
[ "$fails" = 0 ] && echo PASS || { echo FAIL; exit 1; }
