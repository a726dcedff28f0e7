#!/usr/bin/env bash
# MLP 784-1024-1024-10 training-step throughput, Tandem vs PyTorch, same machine, one run.
#   bench/run_mlp_step.sh [steps]     (THREADS=2, batches 256 and 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench
scripts/build.sh >/dev/null
THREADS=${THREADS:-2}
STEPS=${1:-50}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
echo "| batch | Tandem samples/s | PyTorch samples/s | ratio |"
echo "|---|---|---|---|"
for batch in 256 1024; do
  t=$(build/bin/bench_mlp_step "$batch" "$STEPS")
  p=$(/usr/bin/python3 bench/peers/mlp_step_torch.py "$batch" "$STEPS" "$THREADS")
  /usr/bin/python3 -c "
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f\"| {t['batch']} | {t['samples_per_s']:.0f} | {p['samples_per_s']:.0f} | {t['samples_per_s'] / p['samples_per_s']:.2f} |\")
" "$t" "$p"
done
