#!/usr/bin/env bash
# The machine's ceilings: float32 FMA GFLOP/s per core and for all cores in each instruction set
# the CPU runs (widest first: the peak the CPU benchmarks' "% of peak" divides by) and STREAM
# triad GB/s (bench/bench_peak.cpp, bench/peak_measure.h), per wall second and per CPU second
# (robust to other jobs on a shared machine). Prints a markdown table.
#   bench/run_peak.sh [threads]     (default: all cores)
# TANDEM_BUILD_DIR (default build) names the build to use; only bench_peak is built.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
if [ -z "${TANDEM_SKIP_BUILD:-}" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" --target bench_peak >/dev/null
fi
echo "load: $(uptime)"
out=$("$BUILD_DIR"/bin/bench_peak "$@")
/usr/bin/python3 - "$out" <<'PY'
import json, sys
print("| measure | ISA | threads | per wall second | per CPU second |")
print("|---|---|---|---|---|")
for line in sys.argv[1].splitlines():
    r = json.loads(line)
    if r["bench"] == "fma_peak":
        name = "FMA float32 (the peak)" if r["widest"] else "FMA float32"
        print(f"| {name} | {r['isa']} | {r['threads']} | {r['gflops']:.1f} GFLOP/s | {r['gflops_cpu']:.1f} GFLOP/s |")
    else:
        print(f"| STREAM triad | - | {r['threads']} | {r['gbps']:.1f} GB/s | {r['gbps_cpu']:.1f} GB/s |")
PY
echo "load: $(uptime)"
