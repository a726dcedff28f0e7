#!/usr/bin/env bash
# GEMM throughput: Tandem's CPU backend vs PyTorch's matmul/linear on this machine, one run, same
# thread count, for 1 and 2 threads (THREADS="1 2"). Prints a markdown table with the ratio
# Tandem / PyTorch and Tandem's % of the FMA peak measured in the same process (bench/peak_measure.h).
#   bench/run_gemm.sh [reps]     (reps: timed runs per shape, median reported; default 5)
# TANDEM_BUILD_DIR (default build) names the build to use; only the benchmark targets are built.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
if [ -z "${TANDEM_SKIP_BUILD:-}" ]; then
  scripts/install-deps.sh --bench
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" --target bench_gemm >/dev/null
fi
REPS=${1:-5}
echo "load: $(uptime)"
echo "GFLOP/s per wall second, then per CPU second (process CPU time / threads: robust to other jobs);"
echo "% of peak: Tandem's rate over the FMA peak measured in the same process (the best of 3 medians), per wall"
echo "second and per CPU second (a product below the parallel threshold runs on one thread: at 2 threads its"
echo "CPU-second rate counts one busy thread as two, so read the wall column there)."
echo "| threads | op | M x N x K | ta tb | batch | Tandem | PyTorch | ratio | Tandem (CPU s) | PyTorch (CPU s) | ratio (CPU s) | % of peak (wall) | % of peak (CPU s) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for threads in ${THREADS:-1 2}; do
  export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
  tandem_out=$("$BUILD_DIR"/bin/bench_gemm "$REPS")
  torch_out=$(/usr/bin/python3 -c "import torch; torch.set_num_threads($threads); import runpy, sys; sys.argv=['gemm_torch.py', '$REPS']; runpy.run_path('bench/peers/gemm_torch.py', run_name='__main__')")
  /usr/bin/python3 - "$tandem_out" "$torch_out" <<'PY'
import json, sys
t = [json.loads(l) for l in sys.argv[1].splitlines()]
p = [json.loads(l) for l in sys.argv[2].splitlines()]
for a, b in zip(t, p):
    assert (a["op"], a["M"], a["N"], a["K"], a["batch"]) == (b["op"], b["M"], b["N"], b["K"], b["batch"])
    print(f"| {a['threads']} | {a['op']} | {a['M']} x {a['N']} x {a['K']} | {a['ta']} {a['tb']} | {a['batch']} | "
          f"{a['gflops']:.1f} | {b['gflops']:.1f} | {a['gflops']/b['gflops']:.2f} | "
          f"{a['gflops_cpu']:.1f} | {b['gflops_cpu']:.1f} | {a['gflops_cpu']/b['gflops_cpu']:.2f} | "
          f"{a['pct_peak']:.0f}% of {a['peak_gflops']:.0f} | {a['pct_peak_cpu']:.0f}% of {a['peak_gflops_cpu']:.0f} |")
PY
done
echo "load: $(uptime)"
