#!/usr/bin/env bash
# GEMM throughput on one GPU: Tandem through the op API and through Backend::gemm (cuBLASLt)
# vs cuBLAS called directly with the same settings, in one process, timed with CUDA events.
# Prints a markdown table; the goal is Tandem (backend) >= 0.95 x cuBLAS. A second table times
# linear with a bias: cuBLASLt's bias epilogue vs the unfused bias copy + GEMM.
#   bench/run_gemm_cuda.sh [reps]     (TANDEM_ALLOW_TF32=1 to time float32 with TF32 on both sides;
#                                      BENCH=path to a bench_gemm_cuda built elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
# TANDEM_BUILD_DIR=build-gpu TANDEM_NO_BUILD=1 runs a binary built elsewhere (the lent GPU machine).
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
[ -n "${TANDEM_NO_BUILD:-}" ] || scripts/build.sh >/dev/null
REPS=${1:-20}
out=$("${BENCH:-$BUILD_DIR/bin/bench_gemm_cuda}" "$REPS")
${PYTHON:-python3} - "$out" <<'PY'
import json, sys
rows, bias_rows = {}, {}
for line in sys.argv[1].splitlines():
    r = json.loads(line)
    (bias_rows if r["bench"] == "linear_bias_cuda" else rows).setdefault((r["problem"], r["dtype"]), {})[r["impl"]] = r
print("| problem | dtype | cuBLAS TFLOP/s | Tandem backend TFLOP/s | ratio | Tandem ops TFLOP/s | ratio |")
print("|---|---|---|---|---|---|---|")
for (problem, dtype), r in rows.items():
    c, b, o = r["cublas"], r["tandem_backend"], r["tandem_ops"]
    print(f"| {problem} | {dtype} | {c['tflops']:.1f} | {b['tflops']:.1f} | {b['vs_cublas']:.2f} | "
          f"{o['tflops']:.1f} | {o['vs_cublas']:.2f} |")
if bias_rows:
    print()
    print("| linear with bias | dtype | bias epilogue ms | bias copy + GEMM ms | speedup |")
    print("|---|---|---|---|---|")
    for (problem, dtype), r in bias_rows.items():
        f, u = r["bias_epilogue"], r["bias_copy_then_gemm"]
        print(f"| {problem} | {dtype} | {f['ms']:.4f} | {u['ms']:.4f} | {f['speedup_vs_unfused']:.2f} |")
PY
