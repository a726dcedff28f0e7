#!/usr/bin/env bash
# GPU memory bandwidth of Tandem's elementwise ops, casts and sums against cudaMemcpyAsync on
# the same device, 1M .. 256M elements. Prints a markdown table; the goal is >= 0.80 of memcpy
# at the large sizes for the elementwise rows.
#   bench/run_cuda_bandwidth.sh [--max-elements N] [--repeats R] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
if [ -z "${TANDEM_NO_BUILD:-}" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" --target bench_cuda_bandwidth -j "${TANDEM_JOBS:-$(nproc)}" >/dev/null
fi
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
fi
"$BUILD_DIR/bin/bench_cuda_bandwidth" "$@"
