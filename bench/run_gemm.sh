#!/usr/bin/env bash
# GEMM (linear layer) throughput: Tandem's CPU backend vs PyTorch on this machine, one run,
# same thread count. Prints a markdown table with the ratio Tandem / PyTorch.
#   bench/run_gemm.sh [reps]     (THREADS=2 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench
scripts/build.sh >/dev/null
THREADS=${THREADS:-2}
REPS=${1:-20}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
tandem_out=$(build/bin/bench_gemm "$REPS")
torch_out=$(/usr/bin/python3 -c "import torch; torch.set_num_threads($THREADS); import runpy, sys; sys.argv=['gemm_torch.py', '$REPS']; runpy.run_path('bench/peers/gemm_torch.py', run_name='__main__')")
/usr/bin/python3 - "$tandem_out" "$torch_out" <<'PY'
import json, sys
t = [json.loads(l) for l in sys.argv[1].splitlines()]
p = [json.loads(l) for l in sys.argv[2].splitlines()]
print("| M x N x K | Tandem GFLOP/s | PyTorch GFLOP/s | ratio |")
print("|---|---|---|---|")
for a, b in zip(t, p):
    print(f"| {a['M']} x {a['N']} x {a['K']} | {a['gflops']:.1f} | {b['gflops']:.1f} | {a['gflops']/b['gflops']:.2f} |")
PY
