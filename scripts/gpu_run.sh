#!/usr/bin/env bash
# Runs on the lent GPU machine (see scripts/gpu_build.sh), in one call: the whole test suite's
# executables with the GPU tests included, compute-sanitizer memcheck on the CUDA tests, NCCL at
# one rank, and issue 5's benchmarks against their PyTorch twins. Each step's log goes to a
# scratch folder; $OUT (or ./gpu-out) gets summary.txt, the benchmark tables and logs.tgz with
# every log (the device tool returns at most 8 files). Each step reports and the script goes on,
# so one failure does not hide the rest.
# The device tool allows 10 minutes a call, so the run comes in phases, one call each:
#   bash scripts/gpu_run.sh gpu      GPU tests, NCCL at one rank, memcheck     (<= ~9 min)
#   bash scripts/gpu_run.sh suite    the rest of the suite's executables        (~2 min)
#   bash scripts/gpu_run.sh bench    benchmarks with their PyTorch twins        (<= ~9 min)
# (no argument: all three, for a machine without that limit). device-env.sh is sourced here.
PHASE=${1:-all}
case "$PHASE" in
  gpu | suite | bench | all) ;;
  *) echo "gpu_run.sh: unknown phase '$PHASE'; expected gpu, suite, bench or all" >&2; exit 2 ;;
esac
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
LOGS=$(mktemp -d /tmp/tandem-gpu-logs.XXXX)
# The carried binaries (.gpu/, laid out as build-gpu/ was) answer to build-gpu/ here too.
[ -e build-gpu ] || ln -s .gpu build-gpu
BUILD=$PWD/build-gpu
[ -f .device/device-env.sh ] && source .device/device-env.sh
export LD_LIBRARY_PATH=$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda/bin  # compute-sanitizer
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
# A GPU test that finds no device fails (printing the runtime's reason) instead of skipping green.
export TANDEM_REQUIRE_GPU=1
# The test binaries name the CLI and plugins by the checkout path they were built in: make that
# path lead here.
built_at=$(cat "$BUILD/BUILT_AT" 2>/dev/null || echo "")
if [ -n "$built_at" ] && [ "$built_at" != "$PWD" ] && [ ! -e "$built_at" ]; then
  mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"
fi
summary=$OUT/summary.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$summary" 2>&1
step() {  # step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2
  shift 2
  local start=$(date +%s)
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - start )) s; $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$LOGS/$name.log" | tr '\n' ' ')" | tee -a "$summary"
}
if [ "$PHASE" = gpu ] || [ "$PHASE" = all ]; then
  step cuda_tests 180 "$BUILD/tests/gpu/test_cuda_backend"
  step cuda_graph 120 "$BUILD/tests/gpu/test_cuda_graph"
  step cuda_cli 120 "$BUILD/tests/gpu/test_cuda_cli"
  step nccl_np1 60 mpirun -np 1 "$BUILD/tests/gpu/test_nccl"
  step mpi_cuda_np2 120 mpirun -np 2 --oversubscribe "$BUILD/tests/gpu/test_mpi_cuda"
  step bagua_cuda_np2 120 mpirun -np 2 --oversubscribe "$BUILD/tests/gpu/test_bagua_cuda"
  step memcheck 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/gpu/test_cuda_backend" \
    --gtest_filter='-*Large*:*Huge*:*2Pow31*:CudaTraining.*:CudaGraphTrainer.*'
fi
if [ "$PHASE" = suite ] || [ "$PHASE" = all ]; then
  for t in "$BUILD"/tests/*/test_*; do
    case "$t" in */gpu/* | */test_ddp_fault | */test_collectives_abort) continue ;; esac  # the last two need mpirun
    step "suite_$(basename "$t")" 120 "$t"
  done
fi
if [ "$PHASE" = bench ] || [ "$PHASE" = all ]; then
  step bench_train 300 env BENCH="$BUILD/bin/bench_mlp_step" PRECISIONS="32-true bf16-mixed" bench/run_train_step_cuda.sh 100
  step bench_gemm 100 env TANDEM_BUILD_DIR="$BUILD" TANDEM_NO_BUILD=1 bench/run_gemm_cuda.sh
  step bench_bandwidth 80 env TANDEM_BUILD_DIR="$BUILD" TANDEM_NO_BUILD=1 bench/run_cuda_bandwidth.sh
  step bench_reduce 40 "$BUILD/bin/bench_reduce_cuda"
  step bench_attention 120 env TANDEM_BUILD_DIR="$BUILD" TANDEM_NO_BUILD=1 bench/run_attention_cuda.sh
  step allreduce_nccl 30 mpirun -np 1 "$BUILD/bin/allreduce_perf" --backend nccl -b 1M -e 256M -f 4
fi
cat "$LOGS"/bench_*.log "$LOGS"/allreduce_nccl.log > "$OUT/benchmarks.md" 2>/dev/null
grep -h -B2 -A12 'FAILED\|Failure\|ERROR SUMMARY' "$LOGS"/*.log > "$OUT/failures.txt" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$LOGS" .
cat "$summary"
