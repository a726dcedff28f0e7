#!/usr/bin/env bash
# The whole test suite: installs what is missing, then
#   1. builds the CUDA emulation build under AddressSanitizer, LeakSanitizer and
#      UndefinedBehaviorSanitizer (build-emu-sanitized/: -DTANDEM_CUDA=EMULATE
#      -DTANDEM_SANITIZE=address,undefined, compiled at -O1) and runs every test in it: the CPU
#      suite, the `gpu` tests on emulated GPUs (our CUDA kernels executing on the CPU,
#      kernels/cuda/emulation; `gpu-only` tests, 8 GiB tensors, skip), the multi-rank tests under
#      mpirun, and the fuzz targets over their corpora and mutants of them. One build serves
#      both: emulated GPUs and sanitizers (docs/TESTING.md);
#   2. where nvcc is installed, also compiles what only the real CUDA build compiles (build/:
#      kernels/cuda/*.cu by nvcc, the cuBLASLt/cuDNN seams, the NCCL communicator), since the
#      emulator does not run nvcc and cannot catch nvcc-only errors.
#   3. builds the targets of the `mpi`-labelled tests in build/ as a user builds it (plain
#      Release, -O3, no sanitizer; the nvcc objects of step 2 are shared) and runs those tests
#      there too: a race or a timing assumption that only -O3 exposes (the sanitized -O1 build
#      is 3 to 10 times slower) fails CI instead of a user's first run (docs/TESTING.md).
#   Steps 2 and 3 compile at the lowest CPU priority while step 1's tests run.
# TANDEM_SANITIZE= (empty) runs the same suite unsanitized at -O3 instead (build-emu/), e.g. to
# time tests, and skips step 3; TANDEM_SANITIZE=thread runs it under ThreadSanitizer. On a GPU
# machine, scripts/gpu_run.sh runs the GPU tests for real (docs/CUDA.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Slurm's daemons for the `slurm` tests (a cluster on network namespaces), where namespaces can
# be made; elsewhere those tests skip saying why.
if scripts/netns_cluster.sh check >/dev/null 2>&1; then scripts/install-deps.sh --slurm; fi
SANITIZE=${TANDEM_SANITIZE-address,undefined}
if [ -n "$SANITIZE" ]; then
  EMU_BUILD_DIR=${TANDEM_EMU_BUILD_DIR:-build-emu-sanitized}
  [ "$SANITIZE" = address,undefined ] || EMU_BUILD_DIR=${TANDEM_EMU_BUILD_DIR:-build-emu-${SANITIZE//,/-}}
  TANDEM_BUILD_DIR="$EMU_BUILD_DIR" scripts/build.sh -DTANDEM_CUDA=EMULATE -DTANDEM_SANITIZE="$SANITIZE"
else
  EMU_BUILD_DIR=${TANDEM_EMU_BUILD_DIR:-build-emu}
  TANDEM_BUILD_DIR="$EMU_BUILD_DIR" scripts/build.sh -DTANDEM_CUDA=EMULATE -DTANDEM_SANITIZE=
fi
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
# What build/ compiles: the nvcc-only objects (step 2) and, for a sanitized suite, the targets of
# the mpi-labelled tests (step 3).
release_targets=()
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  mapfile -t cuda_objects < <(ninja -C "$BUILD_DIR" -t targets all |
    sed -n 's#^\(CMakeFiles/tandem_[a-z]*.dir/\(kernels/cuda/[^:]*\.cu\|collectives/nccl/[^:]*\)\.o\): .*#\1#p')
  if [ "${#cuda_objects[@]}" -eq 0 ]; then
    echo "scripts/test.sh: no CUDA or NCCL objects found in $BUILD_DIR's targets; the pattern above needs updating" >&2
    exit 1
  fi
  release_targets+=("${cuda_objects[@]}")
fi
if [ -n "$SANITIZE" ]; then
  # The executables the mpi tests run, as the fully built suite lists them (its
  # GoogleTest-discovered tests included): the paths in their commands that are executable
  # files named as a target of the build.
  emu_abs=$(cd "$EMU_BUILD_DIR" && pwd)
  ninja -C "$BUILD_DIR" -t targets all | sed -n 's/^\([A-Za-z0-9_.-]*\): phony$/\1/p' | sort -u >"$BUILD_DIR/phony_targets.txt"
  mapfile -t mpi_targets < <(ctest --test-dir "$EMU_BUILD_DIR" -N -L mpi --show-only=json-v1 |
    grep -o "\"$emu_abs/[^\"]*\"" | tr -d '"' | sort -u |
    while read -r f; do [ -f "$f" ] && [ -x "$f" ] && basename "$f"; done | sort -u |
    comm -12 - "$BUILD_DIR/phony_targets.txt")
  if [ "${#mpi_targets[@]}" -eq 0 ]; then
    echo "scripts/test.sh: no executables of mpi-labelled tests found in $EMU_BUILD_DIR" >&2
    exit 1
  fi
  release_targets+=("${mpi_targets[@]}")
fi
# build/ compiles at the lowest CPU priority while the suite runs, on the CPU time the suite
# leaves idle (its multi-rank tests mostly wait on each other), instead of after it.
release_pid=
if [ "${#release_targets[@]}" -gt 0 ]; then
  nice -n 19 ninja -C "$BUILD_DIR" -j "${TANDEM_JOBS:-$(nproc)}" "${release_targets[@]}" >"$BUILD_DIR/test_sh_build.log" 2>&1 &
  release_pid=$!
  trap 'kill "$release_pid" 2>/dev/null || true' EXIT  # an interrupted suite stops it too
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
ctest --test-dir "$EMU_BUILD_DIR" -j "$(nproc)" --output-on-failure || status=$?
if [ -n "$release_pid" ]; then
  if ! wait "$release_pid"; then
    tail -n 60 "$BUILD_DIR/test_sh_build.log" >&2
    echo "scripts/test.sh: building the nvcc objects or the mpi tests in $BUILD_DIR failed (log: $BUILD_DIR/test_sh_build.log)" >&2
    exit 1
  fi
  trap - EXIT
fi
if [ -n "$SANITIZE" ]; then
  ctest --test-dir "$BUILD_DIR" -j "$(nproc)" -L mpi --output-on-failure || status=$?
fi
exit $status
