#!/usr/bin/env bash
# Configures and builds Tandem into build/ (Release). Extra arguments go to cmake, e.g.
#   scripts/build.sh -DTANDEM_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
JOBS=${TANDEM_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD_DIR" -j "$JOBS"
