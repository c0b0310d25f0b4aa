#!/bin/bash
# tools/build_kit.sh - builds the GPU kit (//kit:gpu_kit, -c opt) and puts it at
# kit/tunebench-gpu-kit.tar.xz (ignored by git; carry it to the GPU machine).
# README: On a GPU machine. Check it with: bazel test -c opt //kit:gpu_kit_test
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //kit:gpu_kit
cp -f .bazel/bin/kit/gpu_kit.tar.xz kit/tunebench-gpu-kit.tar.xz
echo "kit/tunebench-gpu-kit.tar.xz: $(stat -c %s kit/tunebench-gpu-kit.tar.xz) bytes"
