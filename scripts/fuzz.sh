#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang-14, -DTANDEM_FUZZ=ON) into build-fuzz/ and runs
# each for a bounded time from its seed corpus. Usage:
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s; targets: devices idx
#                    allreduce_perf_flags safetensors checkpoint checkpoint_state config; default all)
# New interesting inputs go to build-fuzz/fuzz-work/<target>/corpus/ (not into the repository);
# a crash, leak, timeout or unexpected exception leaves its input in build-fuzz/fuzz-work/<target>/
# and ends the script with exit 1. To keep one as a regression test, copy it into
# tests/fuzz/regressions/<target>/ (ctest's fuzz_replay.<target> then runs it in every build).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(devices idx allreduce_perf_flags safetensors checkpoint checkpoint_state config)
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS_PER_TARGET must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
for t in "${targets[@]}"; do
  [ -f "tests/fuzz/fuzz_$t.cpp" ] || { echo "fuzz.sh: no target '$t' (tests/fuzz/fuzz_$t.cpp)" >&2; exit 2; }
done
command -v clang++-14 >/dev/null || { echo "fuzz.sh: needs clang++-14 (apt-get install clang-14 libclang-rt-14-dev libomp-14-dev)" >&2; exit 2; }

BUILD_DIR=${TANDEM_FUZZ_BUILD_DIR:-build-fuzz}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$root/$BUILD_DIR ;; esac
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# -O1 with assertions on: what libFuzzer's documentation suggests, and half the compile time of -O3.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DTANDEM_FUZZ=ON -DTANDEM_CUDA=OFF -DTANDEM_MPI=OFF \
  -DTANDEM_BUILD_BENCH=OFF -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" >/dev/null
ninja -C "$BUILD_DIR" -j "${TANDEM_JOBS:-$(nproc)}" "${targets[@]/#/fuzz_}"

status=0
for t in "${targets[@]}"; do
  work="$BUILD_DIR/fuzz-work/$t"
  mkdir -p "$work/corpus"
  inputs=("$root/tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && inputs+=("$root/tests/fuzz/regressions/$t")
  echo "== fuzz_$t for ${seconds}s"
  # -timeout: one input running 10 s is a hang; -rss_limit_mb: 2 GB is a runaway allocation.
  # The run directory is the working directory: the checkpoint target trains under it.
  if ! (cd "$work" && "$BUILD_DIR/bin/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=./ corpus "${inputs[@]}" \
        > fuzz.log 2>&1); then
    echo "fuzz_$t: FINDING; input and log in $work (fuzz.log)" >&2
    grep -E "^==[0-9]+==|SUMMARY|fuzz finding|terminate called|what\(\)" "$work/fuzz.log" | head -5 >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec" "$work/fuzz.log" | tr '\n' ' '
  echo
done
exit $status
