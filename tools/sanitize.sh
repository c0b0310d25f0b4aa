#!/bin/bash
# tools/sanitize.sh - runs the fast tests under the sanitizer configs of
# .bazelrc and ends with "sanitize: N passed, N failed".
#
#   tools/sanitize.sh [asan|tsan]...      (default: both)
#
# asan (ASan + UBSan, leaks on) runs ASAN_TESTS, tsan runs TSAN_TESTS: the
# tests that start threads of their own (the loader, DataParallel, the MPI
# communicator's watchdog, the telemetry sampler). Each config builds into
# its own output tree, so neither evicts the normal build. The lists are
# explicit: one technique of each harness (an op sweep, a step technique:
# their flags, rounds and rows); CUDA-only targets and slow tests stay out (transformer_test takes
# 80 s under ASan, train_epoch_test minutes under TSan). A test added here
# must pass under the sanitizer; a leak found only inside OpenMPI or oneDNN
# goes in tools/lsan.supp, anything else is a bug to fix.
# Run by .ci/run after tools/test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."

ASAN_TESTS=(
  //lib/core:atomic_file_test //lib/core:flags_test //lib/core:grow_test
  //lib/core:json_test //lib/core:stats_test
  //datasets:idx_test //datasets:fashion_mnist_test //datasets:synthetic_test
  //datasets:tokens_test //datasets:augment_test
  //lib/report:results_test //lib/report:fingerprint_test //lib/report:compare_test
  //lib/report:report_test //lib/report:plot_test //lib/report:telemetry_test
  //lib/train:config_test //lib/train:loader_test //lib/train:device_toggles_test
  //lib/train:trace_ops_test
  //lib/nn:layers_test //lib/nn:gradcheck_test //lib/nn:loss_scaler_test
  //lib/nn:embed_test //lib/nn:flops_test
  //lib/backend:device_fallback_test
  //lib/backend/cpu:backend_cpu_test //lib/backend/cpu:cpu_ops_test
  //lib/backend/cpu:gelu_cpu_test //lib/backend/cpu:cpu_dnnl_test
  //lib/backend/cpu:cast_test //lib/backend/cpu:cpu_attn_test //lib/backend/cpu:cpu_tokens_test
  //lib/dist:scaling_model_test //lib/dist:comm_test //lib/dist:ddp_test
  //lib/dist:ddp_accum_test //lib/dist:syncbn_test
  //bench/harness:rounds_test //bench/harness:gb_results_test //bench/harness:step_plan_test
  //bench/harness:opb_plan_test //bench/harness:gbench_shim_test //bench:plan_test
  //bench:gelu_test //bench:grads_to_none_test
  //fuzz:flags_replay_test //fuzz:idx_replay_test //fuzz:json_replay_test
  //fuzz:run_state_replay_test //fuzz:results_csv_replay_test
)

TSAN_TESTS=(
  //lib/train:loader_test
  //lib/dist:dp_test
  //lib/dist:comm_test //lib/dist:ddp_test //lib/dist:ddp_accum_test //lib/dist:syncbn_test
  //lib/report:telemetry_test
)

configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(asan tsan)
passed=0
failed=0
for c in "${configs[@]}"; do
  case "$c" in
  asan)
    targets=("${ASAN_TESTS[@]}")
    env=(--test_env=LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp:print_suppressions=0")
    ;;
  tsan)
    targets=("${TSAN_TESTS[@]}")
    env=(--test_env=TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tools/tsan.supp")
    ;;
  *) echo "sanitize.sh: unknown config '$c': give asan, tsan or nothing (both)" >&2; exit 2 ;;
  esac
  log=$(mktemp)
  start=$(date +%s)
  bazel test --config="$c" "${env[@]}" "${targets[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  p=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
  f=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
  rm -f "$log"
  # A build failure runs no test: it counts as one failure.
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
    f=1
    echo "sanitize.sh: bazel test --config=$c exited $rc before any test failed (build error?)"
  fi
  echo "sanitize.sh: $c: $p passed, $f failed in $(($(date +%s) - start)) s"
  passed=$((passed + p))
  failed=$((failed + f))
done
echo "sanitize: $passed passed, $failed failed"
[ "$failed" = 0 ]
