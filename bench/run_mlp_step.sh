#!/usr/bin/env bash
# Training-step throughput of the MLP 784-1024-1024-10 and the CNN, Tandem vs PyTorch, same
# machine, same thread count, one run (random in-memory batches, Adam).
#   bench/run_mlp_step.sh [steps]     (THREADS=2; MLP at batch 256 and 1024, CNN at 256)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
if [ -z "${TANDEM_SKIP_BUILD:-}" ]; then
  scripts/install-deps.sh --bench
  TANDEM_BUILD_DIR=$BUILD_DIR scripts/build.sh >/dev/null
fi
THREADS=${THREADS:-2}
STEPS=${1:-50}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
echo "load: $(uptime)"
echo "| model | batch | Tandem samples/s | PyTorch samples/s | ratio | Tandem % of FMA peak |"
echo "|---|---|---|---|---|---|"
for run in "mlp 256" "mlp 1024" "cnn 256"; do
  set -- $run
  model=$1 batch=$2
  t=$("$BUILD_DIR"/bin/bench_mlp_step "$batch" "$STEPS" "$model")
  p=$(/usr/bin/python3 bench/peers/mlp_step_torch.py "$batch" "$STEPS" "$THREADS" "$model")
  /usr/bin/python3 -c "
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f\"| {t['bench'][:-5]} | {t['batch']} | {t['samples_per_s']:.0f} | {p['samples_per_s']:.0f} | {t['samples_per_s'] / p['samples_per_s']:.2f} | {t['pct_peak']:.0f}% of {t['peak_gflops']:.0f} GFLOP/s |\")
" "$t" "$p"
done
echo "load: $(uptime)"
