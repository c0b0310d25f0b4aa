#!/bin/bash
# telemetry_nvml_test.sh - runs telemetry_nvml_test (ARG 1) with the fake
# libnvidia-ml.so.1 (ARG 2) first on the loader's path.
set -euo pipefail
LD_LIBRARY_PATH="$(cd "$(dirname "$2")" && pwd)" exec "$1"
