#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs ctest (GPU tests skip
# themselves without a GPU; multi-rank tests run under mpirun).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${TANDEM_BUILD_DIR:-build}" -j "$(nproc)" --output-on-failure
