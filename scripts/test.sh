#!/usr/bin/env bash
# The whole test suite: installs what is missing, then
#   1. builds the CUDA emulation build (build-emu/, -DTANDEM_CUDA=EMULATE) and runs every test
#      in it: the CPU suite, and the `gpu` tests on emulated GPUs (our CUDA kernels executing on
#      the CPU, kernels/cuda/emulation); `gpu-only` tests (8 GiB tensors) skip;
#   2. where nvcc is installed, also compiles what only the real CUDA build compiles (build/:
#      kernels/cuda/*.cu by nvcc, the cuBLASLt/cuDNN seams, the NCCL communicator), since the
#      emulator does not run nvcc and cannot catch nvcc-only errors. The host C++ they share with
#      the emulation build is compiled there already.
# Multi-rank tests run under mpirun. On a GPU machine, scripts/gpu_run.sh runs the real suite.
# TANDEM_SANITIZE=address,undefined makes step 1 a sanitized build (build-emu-sanitized/):
# the same suite under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer
# (docs/TESTING.md, "Sanitizers").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ -n "${TANDEM_SANITIZE:-}" ]; then
  EMU_BUILD_DIR=${TANDEM_EMU_BUILD_DIR:-build-emu-sanitized}
  TANDEM_BUILD_DIR="$EMU_BUILD_DIR" scripts/build.sh -DTANDEM_CUDA=EMULATE -DTANDEM_SANITIZE="$TANDEM_SANITIZE"
else
  EMU_BUILD_DIR=${TANDEM_EMU_BUILD_DIR:-build-emu}
  TANDEM_BUILD_DIR="$EMU_BUILD_DIR" scripts/build.sh -DTANDEM_CUDA=EMULATE
fi
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  BUILD_DIR=${TANDEM_BUILD_DIR:-build}
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  mapfile -t cuda_objects < <(ninja -C "$BUILD_DIR" -t targets all |
    sed -n 's#^\(CMakeFiles/tandem.dir/\(kernels/cuda/[^:]*\.cu\|collectives/nccl/[^:]*\)\.o\): .*#\1#p')
  ninja -C "$BUILD_DIR" -j "${TANDEM_JOBS:-$(nproc)}" "${cuda_objects[@]}"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "$EMU_BUILD_DIR" -j "$(nproc)" --output-on-failure
