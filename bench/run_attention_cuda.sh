#!/usr/bin/env bash
# Causal attention on one GPU, bfloat16, B = 8, H = 12, D = 64, T = 256 .. 4096: Tandem's kernels
# vs PyTorch's scaled_dot_product_attention, forward and forward + backward, one run. Prints a
# markdown table with the ratio PyTorch time / Tandem time (goal: >= 0.9).
#   bench/run_attention_cuda.sh [reps]
# TANDEM_BUILD_DIR=build-gpu TANDEM_NO_BUILD=1 runs a binary built elsewhere (the lent GPU machine);
# BENCH names a bench_attention_cuda binary directly; PYTHON a python with PyTorch >= 2.0 and CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
[ -n "${TANDEM_NO_BUILD:-}" ] || scripts/build.sh >/dev/null
REPS=${1:-10}
tandem_out=$("${BENCH:-$BUILD_DIR/bin/bench_attention_cuda}" "$REPS")
torch_out=$(${PYTHON:-python3} bench/peers/attention_cuda_torch.py "$REPS")
${PYTHON:-python3} - "$tandem_out" "$torch_out" <<'PY'
import json, sys
t = [json.loads(l) for l in sys.argv[1].splitlines()]
p = [json.loads(l) for l in sys.argv[2].splitlines()]
print("| T | pass | Tandem ms | PyTorch ms | ratio | Tandem TFLOP/s | PyTorch TFLOP/s |")
print("|---|---|---|---|---|---|---|")
for a, b in zip(t, p):
    for key, label in (("fwd", "forward"), ("fwd_bwd", "forward + backward")):
        print(f"| {a['T']} | {label} | {a[key + '_ms']:.3f} | {b[key + '_ms']:.3f} | {b[key + '_ms'] / a[key + '_ms']:.2f} | "
              f"{a[key + '_tflops']:.1f} | {b[key + '_tflops']:.1f} |")
PY
