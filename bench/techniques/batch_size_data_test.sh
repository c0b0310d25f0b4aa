#!/bin/bash
# batch_size_data_test.sh - what bench:batch_size trains: in the tiny profile with
# no memory limit, every batch up to the largest (1024) has training data of
# its own, so batch 1024 trains on 1024 samples and its loss is not batch
# 512's (it was: the subset held 512 samples and both trained on all of
# them); and each check line says the steps it ran (128 samples: batch 16
# runs 8). Stops the binary once its correctness pass has printed the
# largest batch; reads losses, never timings. Under --mem-limit=1 every
# batch is an out-of-memory row of the CSV.
#
#   bazel test //bench:batch_size_data_test
# args: the bench:batch_size binary.
set -u
BIN=$1
TMP=${TEST_TMPDIR:-$(mktemp -d)}
LOG=$TMP/log
fail() { echo "FAIL: $*" >&2; tail -30 "$LOG" >&2; exit 1; }

"$BIN" --device=cpu --profile=tiny --threads=2 --mem-limit=0 --out-dir="$TMP/out" > "$LOG" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
    grep -q 'check batch=1024\|batch=1024: \|error' "$LOG" && break
    kill -0 $pid 2> /dev/null || break
    sleep 0.1
done
kill $pid 2> /dev/null
wait $pid 2> /dev/null
loss() { sed -n "s/.*check batch=$1 .*loss at step \([0-9]*\) \([^,]*\),.*/\1 \2/p" "$LOG"; }
l512=$(loss 512)
l1024=$(loss 1024)
[ -n "$l512" ] || fail "no check line for batch 512"
[ -n "$l1024" ] || fail "no check line for batch 1024 (n/a, or not reached within 120 s)"
[ "${l512#* }" != "${l1024#* }" ] || fail "batch 512 and 1024 report the same loss ${l512#* }: same samples trained"
[ "$(loss 16 | cut -d' ' -f1)" = 8 ] || fail "batch 16's check should say 8 steps: $(loss 16)"
echo "batch 512: $l512; batch 1024: $l1024 (steps, loss)"

# --mem-limit=1: every batch runs out of memory; the CSV still holds each as
# an n/a row saying so (no Google Benchmark run is left to fail).
"$BIN" --device=cpu --profile=tiny --threads=2 --mem-limit=1 --out-dir="$TMP/oom" > "$LOG" 2>&1 ||
    fail "--mem-limit=1 exited $?"
csv=$(echo "$TMP"/oom/results/*/batch_size.csv)
[ "$(grep -c 'out of memory under --mem-limit=1 MiB' "$csv")" = 7 ] ||
    fail "expected 7 out-of-memory rows in $csv"
echo "batch_size_data_test: ok"
