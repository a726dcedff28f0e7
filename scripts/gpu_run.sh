#!/usr/bin/env bash
# Runs on the lent GPU machine, in ONE device call, what scripts/gpu_build.sh built and packed:
#   run(command="bash scripts/gpu_run.sh", carry=[".device", ".gpu"], timeout_s=540)
# Steps, most valuable first, each under `timeout min(its limit, time left)` of one overall deadline
# (DEADLINE_S, 450 s from the start; a step with no time left is skipped and says so):
#   cuda_tests      test_cuda_backend (TANDEM_REQUIRE_GPU=1: no device is a failure, not a skip)
#   cuda_cli        test_cuda_cli: `tandem fit` on the GPU through the CLI, DDP over NCCL at one rank
#   fit_lightning   `tandem fit` on the GPU beside its Lightning twin (bench/run_fit_cuda.sh)
#   bench_step, bench_gpt, bench_gemm, bench_attention   the CUDA benchmarks beside PyTorch, short settings
#   racecheck       compute-sanitizer racecheck on the tensor-core attention test
#   nccl_np1, allreduce_nccl                  NCCL at one rank under mpirun
#   memcheck        compute-sanitizer memcheck on a subset of test_cuda_backend
# It first checks that every carried binary finds its libraries (stops at once when one does not).
# $OUT (else ./gpu-out) gets summary.txt (one line per step, appended as each ends), results.md
# (the benchmark and fit tables), failures.txt and logs.tgz (every log; rewritten after each step,
# so a call cut short still returns what ran). Each step reports and the run goes on.
#   bash scripts/gpu_run.sh [check]     (the one phase; DEADLINE_S=seconds overrides 450; ONLY="step
#                                        names" runs just those, for a short second call)
PHASE=${1:-check}
[ "$PHASE" = check ] || { echo "gpu_run.sh: unknown phase '$PHASE'; the one phase is check" >&2; exit 2; }
set -uo pipefail
# Every step below, in order; ONLY names a subset, and a name not here stops the run before it
# spends device time (a misspelt step would otherwise be skipped without a word).
STEPS="cuda_tests cuda_cli fit_lightning bench_step bench_gpt bench_gemm bench_attention racecheck nccl_np1
allreduce_nccl memcheck"
for name in ${ONLY:-}; do
  [[ " $(echo $STEPS) " == *" $name "* ]] || {
    echo "gpu_run.sh: ONLY names '$name', which is not a step; the steps are: $(echo $STEPS)" >&2
    exit 2
  }
done
started=$(date +%s)
DEADLINE_S=${DEADLINE_S:-450}
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
LOGS=$(mktemp -d /tmp/tandem-gpu-logs.XXXX)
summary=$OUT/summary.txt results=$OUT/results.md
: > "$summary"
: > "$results"

# The carried binaries (.gpu/, laid out as build-gpu/ was) answer to build-gpu/ here too, and to the
# absolute path of the checkout they were built in (the CLI path baked into test_cuda_cli, RUNPATHs).
[ -d .gpu ] || { echo "gpu_run.sh: no .gpu/ here: run scripts/gpu_build.sh and carry .gpu and .device" | tee -a "$summary"; exit 1; }
[ -e build-gpu ] || ln -s .gpu build-gpu
BUILD=$PWD/build-gpu
built_at=$(cat .gpu/BUILT_AT 2>/dev/null || echo "")
if [ -n "$built_at" ] && [ "$built_at" != "$PWD" ] && [ ! -e "$built_at" ]; then
  mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"
fi
bin() { echo "$BUILD/$(awk -v t="$1" '$1 == t {print $2}' .gpu/targets.txt)"; }  # bin TARGET: its executable

[ -f .device/device-env.sh ] && source .device/device-env.sh  # Open MPI, the pip CUDA libraries
# Libraries that machine lacks (lib/), and Debian's copies of those it may lack (fallback/), used
# only where its ldconfig has none.
fallback=/tmp/tandem-fallback-libs
mkdir -p "$fallback"
for f in .device/fallback/*; do
  [ -e "$f" ] && ! ldconfig -p | grep -qF "$(basename "$f") " && ln -sf "$PWD/$f" "$fallback/"
done
lib_dirs=$(find "$BUILD/" -name 'libtandem*.so*' -printf '%h\n' | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH=${lib_dirs}$PWD/.device/lib:$fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda/bin  # compute-sanitizer
# test_cuda_cli starts DDP through the mpiexec path CMake found here.
if [ ! -e /usr/bin/mpiexec ] && command -v mpirun >/dev/null && [ -w /usr/bin ]; then
  ln -s "$(command -v mpirun)" /usr/bin/mpiexec
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 GTEST_COLOR=no
export TANDEM_REQUIRE_GPU=1  # a GPU test that finds no device fails, printing the runtime's reason

collect() {  # failures.txt and logs.tgz as they stand (written aside, then moved in; no checkpoints)
  grep -h -B2 -A12 'FAILED\|Failure\|ERROR SUMMARY: [1-9]\|Traceback\|failed:' "$LOGS"/*.log > "$LOGS.failures" 2>/dev/null
  mv -f "$LOGS.failures" "$OUT/failures.txt"
  tar czf "$LOGS.tgz" --exclude='*.safetensors' --exclude='*.ckpt' -C "$LOGS" . && mv -f "$LOGS.tgz" "$OUT/logs.tgz"
}
step() {  # step NAME LIMIT_S COMMAND...: runs it under timeout min(LIMIT_S, time left), one summary line
  local name=$1 limit=$2
  shift 2
  [[ " $(echo $STEPS) " == *" $name "* ]] || { echo "gpu_run.sh: step $name is missing from STEPS" >&2; exit 2; }
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
    echo "$name: not in ONLY=\"$ONLY\"" >> "$summary"
    return
  fi
  # What is left, less 5 s for timeout's kill of a command that ignores SIGTERM.
  local left=$((started + DEADLINE_S - $(date +%s) - 5))
  if [ "$left" -lt 5 ]; then
    echo "$name: skipped: no time left of the ${DEADLINE_S} s deadline" | tee -a "$summary"
    return
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  local start=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  local what="exit $rc"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && what="timed out (limit $limit s)"
  local details
  details=$(grep -E '^\[  (PASSED|FAILED)  \] [0-9]|^\[  SKIPPED \] [0-9]|ERROR SUMMARY|^\| (tandem|lightning) ' \
    "$LOGS/$name.log" | tr -s ' ' | tr '\n' ' ')
  echo "$name: $what in $(( $(date +%s) - start )) s; ${details:-$(tail -n 1 "$LOGS/$name.log" | cut -c1-200)}" | tee -a "$summary"
  collect
}
bench() {  # bench NAME LIMIT_S COMMAND...: a step whose output (markdown tables) goes to results.md
  local name=$1
  step "$@"
  [ -f "$LOGS/$name.log" ] && printf '## %s\n\n%s\n\n' "$name" "$(cat "$LOGS/$name.log")" >> "$results"
}

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$summary" 2>&1
else
  echo "no nvidia-smi here: no NVIDIA driver" >> "$summary"
fi
python3 -c 'import torch, lightning; print(f"torch {torch.__version__}, lightning {lightning.__version__}, cuda {torch.cuda.is_available()}")' \
  >> "$summary" 2>/dev/null || echo "python3 lacks torch or lightning: the peer runs fail" >> "$summary"
# Every carried binary must find its libraries, else nothing below can run: stop at once.
missing=$(for f in $(cut -d' ' -f2 .gpu/targets.txt) $(find .gpu -name 'libtandem*.so*' -type f); do
  ldd "$BUILD/${f#.gpu/}" 2>&1 | awk -v f="$f" '/not found/ {print f ": " $1}'
done | sort -u)
if [ -n "$missing" ]; then
  { echo "preflight: libraries not found, stopping:"; echo "$missing"; } | tee -a "$summary"
  collect
  exit 1
fi
echo "preflight: every binary finds its libraries ($(( $(date +%s) - started )) s in)" | tee -a "$summary"

step cuda_tests 120 "$(bin test_cuda_backend)"
step cuda_cli 60 "$(bin test_cuda_cli)"
bench fit_lightning 100 env TANDEM="$(bin tandem_cli)" ROOT="$PWD/.device/data/fashion-mnist" WORK="$LOGS/fit" \
  bench/run_fit_cuda.sh 5
bench bench_step 90 env BENCH="$(bin bench_mlp_step)" PRECISIONS="32-true bf16-mixed" TORCH_COMPILE=0 \
  bench/run_train_step_cuda.sh 30
bench bench_gpt 130 env BENCH="$(bin bench_gpt)" bench/run_gpt_cuda.sh 20
bench bench_gemm 40 env BENCH="$(bin bench_gemm_cuda)" TANDEM_NO_BUILD=1 bench/run_gemm_cuda.sh 5
bench bench_attention 40 env BENCH="$(bin bench_attention_cuda)" TANDEM_NO_BUILD=1 bench/run_attention_cuda.sh 3
# The tensor-core attention kernels' shared-memory traffic under racecheck (barriers between tiles).
step racecheck 45 compute-sanitizer --tool racecheck --error-exitcode 9 "$(bin test_cuda_backend)" \
  --gtest_filter='CudaAttention.TensorCores*'
step nccl_np1 30 mpirun -np 1 "$(bin test_nccl)"
bench allreduce_nccl 20 mpirun -np 1 "$(bin allreduce_perf)" --backend nccl -b 1M -e 64M -f 4 -n 10 -w 2
# Kernels of the training path and the elementwise families; the huge sizes stay out (memcheck is
# slow). API errors are not counted: tests provoke them on purpose (bad inputs, mixed devices).
step memcheck 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$(bin test_cuda_backend)" \
  --gtest_filter='CudaBackend.*:CudaElementwiseBinary.*:CudaSoftmax.*:CudaCrossEntropy.*:CudaOptim.*:CudaLinear.*:CudaReduce.*:CudaAttention.*:CudaNorm.*:CudaEmbedding.*:CudaGraph.*-*Large*:*TenMillion*:*2To31*:*RunToRun*'

echo "done in $(( $(date +%s) - started )) s of the ${DEADLINE_S} s deadline" | tee -a "$summary"
collect
