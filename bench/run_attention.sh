#!/usr/bin/env bash
# Causal attention forward and forward + backward: Tandem's CPU backend (one fused op, tiled)
# vs PyTorch's composed attention (matmul, mask, softmax, matmul) on this machine, one run,
# same thread count. Prints a markdown table: milliseconds, the ratio PyTorch time / Tandem
# time (above 1: Tandem is faster), and each side's GFLOP/s as % of its own 1024^3 matmul rate
# measured in the same run.
#   bench/run_attention.sh [reps]     (THREADS=2 by default; BUILD_DIR=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ "$BUILD_DIR" = build ]; then
  scripts/install-deps.sh --bench
  scripts/build.sh >/dev/null
else
  cmake --build "$BUILD_DIR" --target bench_attention >/dev/null
fi
THREADS=${THREADS:-2}
REPS=${1:-20}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
tandem_out=$("$BUILD_DIR/bin/bench_attention" "$REPS")
torch_out=$(/usr/bin/python3 -c "import torch; torch.set_num_threads($THREADS); import runpy, sys; sys.argv=['attention_torch.py', '$REPS']; runpy.run_path('bench/peers/attention_torch.py', run_name='__main__')")
/usr/bin/python3 - "$tandem_out" "$torch_out" <<'PY'
import json, sys
t = [json.loads(l) for l in sys.argv[1].splitlines()]
p = [json.loads(l) for l in sys.argv[2].splitlines()]
tpeak, ppeak = t[0]["gflops"], p[0]["gflops"]
print(f"1024^3 matmul: Tandem {tpeak:.1f} GFLOP/s, PyTorch {ppeak:.1f} GFLOP/s")
print()
print("| shape (B, H, T, D) | pass | Tandem ms | PyTorch ms | ratio | Tandem % of matmul | PyTorch % of matmul |")
print("|---|---|---|---|---|---|---|")
for a, b in zip(t[1:], p[1:]):
    dims = f"{a['shape']} ({a['B']}, {a['H']}, {a['T']}, {a['D']})"
    for key, label in (("fwd", "forward"), ("fwd_bwd", "forward + backward")):
        print(f"| {dims} | {label} | {a[key + '_ms']:.3f} | {b[key + '_ms']:.3f} | {b[key + '_ms'] / a[key + '_ms']:.2f} | "
              f"{100 * a[key + '_gflops'] / tpeak:.0f}% | {100 * b[key + '_gflops'] / ppeak:.0f}% |")
PY
