#!/bin/bash
# ddp_sweep_test.sh SWEEP MODEL GOLDEN - the DP vs DDP sweep in the tiny
# profile (2 ranks under mpirun), then the scaling model on what it wrote,
# both into one folder, each checked by harness/technique_test.sh and harness/check_outputs.py
# for shape and correctness verdicts (never timing verdicts).
set -euo pipefail
here="$(dirname "$0")"
bash "$here/harness/technique_test.sh" "$1" ddp "$3" --min-rows=12 \
    --plots=ddp,ddp_efficiency,ddp_busbw --no-gbench
bash "$here/harness/technique_test.sh" "$2" scaling_model "$3" --min-rows=88 \
    --plots=scaling_model --no-gbench
