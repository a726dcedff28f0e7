#!/usr/bin/env bash
# Runs on the lent GPU machine (see scripts/gpu_build.sh), in one call: the whole test suite's
# executables with the GPU tests included, compute-sanitizer memcheck on the CUDA tests, NCCL at
# one rank, and issue 5's benchmarks against their PyTorch twins. Logs and tables go to $OUT
# (or ./gpu-out). Each step reports and the script goes on, so one failure does not hide the rest.
#   source .device/device-env.sh is done here.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
# The carried binaries (.gpu/, laid out as build-gpu/ was) answer to build-gpu/ here too.
[ -e build-gpu ] || ln -s .gpu build-gpu
BUILD=$PWD/build-gpu
[ -f .device/device-env.sh ] && source .device/device-env.sh
export LD_LIBRARY_PATH=$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda/bin  # compute-sanitizer
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
# The test binaries name the CLI and plugins by the checkout path they were built in: make that
# path lead here.
built_at=$(cat "$BUILD/BUILT_AT" 2>/dev/null || echo "")
if [ -n "$built_at" ] && [ "$built_at" != "$PWD" ] && [ ! -e "$built_at" ]; then
  mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
summary=$OUT/summary.txt
: > "$summary"
step() {  # step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2
  shift 2
  local start=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - start )) s; $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$OUT/$name.log" | tr '\n' ' ')" | tee -a "$summary"
}
# 1. GPU tests first (they are what this machine is for), then memcheck on them.
step cuda_tests 600 "$BUILD/tests/gpu/test_cuda_backend"
step cuda_cli 300 "$BUILD/tests/gpu/test_cuda_cli"
step nccl_np1 120 mpirun -np 1 "$BUILD/tests/gpu/test_nccl"
step memcheck 900 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/gpu/test_cuda_backend" \
  --gtest_filter='-*Large*:*Huge*:*2Pow31*:CudaTraining.*'
# 2. The rest of the suite's executables (the mpirun-driven cases run in CI).
for t in "$BUILD"/tests/*/test_*; do
  case "$t" in */gpu/* | */test_ddp_fault | */test_collectives_abort) continue ;; esac  # the last two need mpirun
  step "suite_$(basename "$t")" 300 "$t"
done
# 3. Benchmarks with their twins, same GPU, same run.
step bench_train 900 env BENCH="$BUILD/bin/bench_mlp_step" PRECISIONS="32-true bf16-mixed" bench/run_train_step_cuda.sh 100
step bench_gemm 600 env TANDEM_BUILD_DIR="$BUILD" TANDEM_NO_BUILD=1 bench/run_gemm_cuda.sh
step bench_bandwidth 600 env TANDEM_BUILD_DIR="$BUILD" TANDEM_NO_BUILD=1 bench/run_cuda_bandwidth.sh
step bench_reduce 600 "$BUILD/bin/bench_reduce_cuda"
step allreduce_nccl 300 mpirun -np 1 "$BUILD/bin/allreduce_perf" --backend nccl -b 1M -e 256M -f 4
cat "$summary"
