#!/bin/bash
# tools/fuzz.sh - builds the fuzz targets of fuzz/ with clang and libFuzzer
# (Debian's clang and libclang-rt-dev) and runs them.
#
#   tools/fuzz.sh [TARGET...]              CI: fixed seed and input count
#   tools/fuzz.sh --long SECONDS [TARGET...]  maintainers: unseeded, timed
#
# Targets: flags idx json run_state results_csv plan (default: all). Each binary is
# built from the sources of //fuzz:<target>_fuzz (asked of bazel query, so it
# links what the replay test links) with ASan and UBSan, into .fuzz/.
#
# CI mode runs each target with -seed=1 and its fixed -runs count (RUNS
# below), starting from fuzz/corpus/<target> in name order: the same inputs
# every time on any machine for the same code (run() says what that takes),
# so an unrelated change never turns CI red by chance. A crash, a sanitizer
# report, a leak or a broken contract fails the target; the input that did it
# is saved as .fuzz/<target>/crash-<sha1> and the line says so. Once the bug
# is fixed, copy that file into fuzz/crashes/<target>/: the replay test
# (bazel test //fuzz:<target>_replay_test) then keeps it fixed.
#
# --long runs each target for SECONDS with a seed libFuzzer picks, keeping
# what it finds in .fuzz/<target>/corpus (grow fuzz/corpus/<target> from it
# with the binary's -merge=1 when it covers more). Ends with
# "fuzz: N passed, N failed", one test per target.
set -uo pipefail
cd "$(dirname "$0")/.."

# target  -runs in CI  -max_len
TARGETS=(
  "flags       1000000  512"
  "idx          100000  4096"
  "json         200000  4096"
  "run_state    100000  4096"
  "results_csv  100000  8192"
  "plan         200000  1024"
)

long=0
if [ "${1:-}" = "--long" ]; then
  long="${2:-}"
  case "$long" in
  '' | *[!0-9]* | 0) echo "fuzz.sh: --long takes a number of seconds, e.g. --long 600" >&2; exit 2 ;;
  esac
  shift 2
fi

clang_bin=$(command -v clang || command -v clang-14 || true)
if [ -z "$clang_bin" ]; then
  echo "fuzz.sh: no clang: run tools/setup.sh (it installs clang and libclang-rt-dev)" >&2
  echo "fuzz: 0 passed, 1 failed"
  exit 1
fi

# The workspace .c files target $1 is built from, as paths.
sources() {
  bazel query "kind('source file', deps(//fuzz:$1_fuzz))" 2>/dev/null |
    sed -n 's|^//\([^:]*\):\(.*\.c\)$|\1/\2|p; s|^//:\(.*\.c\)$|\1|p'
}

build() {
  local name="$1" srcs
  srcs=$(sources "$name")
  if [ -z "$srcs" ]; then
    echo "fuzz.sh: bazel query found no sources for //fuzz:${name}_fuzz" >&2
    return 1
  fi
  # shellcheck disable=SC2086
  "$clang_bin" -std=gnu11 -g -O1 -fno-omit-frame-pointer -I. \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    $srcs -o ".fuzz/$name/$name" -lz -lm -lpthread
}

run() {
  local name="$1" runs="$2" max_len="$3" dir=".fuzz/$1"
  local opts=(-max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$dir/")
  if [ "$long" != 0 ]; then
    opts+=(-max_total_time="$long")
    mkdir -p "$dir/corpus"
    "$dir/$name" "${opts[@]}" "$dir/corpus" "fuzz/corpus/$name" >"$dir/log" 2>&1
    return
  fi
  # The same inputs each time, on any machine: the same seed and count;
  # the seed inputs named in name order (libFuzzer sorts them by size only,
  # so inputs of one size run in the order it got them, and a folder lists
  # them in an order of its file system's: CI's fresh machine found a
  # crash, since fixed, that this machine's order never reached); no
  # re-reading of the corpus folder (-reload, every second by the clock);
  # and no address randomization where setarch can turn it off (compared
  # pointers feed libFuzzer's mutations). libFuzzer writes what it finds
  # into a fresh $dir/corpus, not into fuzz/corpus.
  rm -rf "$dir/corpus"
  mkdir -p "$dir/corpus"
  find "fuzz/corpus/$name" -maxdepth 1 -type f | LC_ALL=C sort | paste -sd, >"$dir/seeds"
  local fixed=()
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    fixed=(setarch "$(uname -m)" -R)
  fi
  opts+=(-seed=1 -runs="$runs" -reload=0 -seed_inputs=@"$dir/seeds")
  "${fixed[@]}" "$dir/$name" "${opts[@]}" "$dir/corpus" >"$dir/log" 2>&1
}

# The targets that read files write each input to a scratch folder
# (fuzz/fuzz_files.h): in memory when /dev/shm is there, ten times faster here
# than the disk behind /tmp.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi

wanted=("$@")
for w in "${wanted[@]}"; do
  if [[ " ${TARGETS[*]} " != *" $w "* ]]; then
    echo "fuzz.sh: no fuzz target '$w': the targets are flags idx json run_state results_csv" >&2
    exit 2
  fi
done
passed=0
failed=0
for line in "${TARGETS[@]}"; do
  read -r name runs max_len <<<"$line"
  if [ ${#wanted[@]} -gt 0 ] && [[ " ${wanted[*]} " != *" $name "* ]]; then
    continue
  fi
  mkdir -p ".fuzz/$name"
  rm -f ".fuzz/$name"/crash-* ".fuzz/$name"/leak-* ".fuzz/$name"/oom-* ".fuzz/$name"/timeout-*
  start=$(date +%s)
  if ! build "$name"; then
    echo "fuzz.sh: $name: FAILED to build"
    failed=$((failed + 1))
    continue
  fi
  built=$(date +%s)
  run "$name" "$runs" "$max_len"
  rc=$?
  done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' ".fuzz/$name/log" | tail -1)
  took="build $((built - start)) s, run $(($(date +%s) - built)) s"
  if [ "$rc" = 0 ]; then
    echo "fuzz.sh: $name: ${done_runs:-?} inputs ($took): passed"
    passed=$((passed + 1))
  else
    tail -n 60 ".fuzz/$name/log"
    found=$(ls ".fuzz/$name"/crash-* ".fuzz/$name"/leak-* ".fuzz/$name"/oom-* ".fuzz/$name"/timeout-* 2>/dev/null | head -1)
    echo "fuzz.sh: $name: FAILED after ${done_runs:-?} inputs ($took); input: ${found:-none saved}"
    echo "fuzz.sh: reproduce with .fuzz/$name/$name ${found:-INPUT}; once fixed, copy it into fuzz/crashes/$name/"
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" = 0 ]
