#!/usr/bin/env bash
# Issue 5's training goals on one GPU: MLP 784-1024-1024-10 at batch 256 and 1024 and the CNN at
# batch 256, forward + backward + Adam on random in-memory batches, Tandem vs PyTorch eager (and
# torch.compile where it runs) on the same GPU in one run, per precision. Prints a markdown table
# with samples/s, the ratio, and peak device memory of both; "graph" is Tandem with forward and
# backward replayed from a CUDA graph (what --trainer.cuda_graph=true does), against eager PyTorch.
#   bench/run_train_step_cuda.sh [steps]   (BENCH=path to bench_mlp_step, PRECISIONS="32-true bf16-mixed",
#                                           TORCH_COMPILE=0 leaves torch.compile out: its compiles take minutes)
# Goals: ratio >= 1.5 on the MLP and >= 1.0 on the CNN against eager.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-build/bin/bench_mlp_step}
STEPS=${1:-100}
PY=${PYTHON:-python3}
echo "| model | batch | precision | Tandem samples/s | PyTorch eager | ratio | torch.compile | ratio | Tandem graph | ratio | Tandem peak MB | PyTorch peak MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for precision in ${PRECISIONS:-32-true bf16-mixed}; do
  for run in "mlp 256" "mlp 1024" "cnn 256"; do
    set -- $run
    model=$1 batch=$2
    t=$("$BENCH" "$batch" "$STEPS" "$model" cuda "$precision")
    g=$("$BENCH" "$batch" "$STEPS" "$model" cuda "$precision" graph || echo '{}')
    e=$($PY bench/peers/mlp_step_torch.py "$batch" "$STEPS" 1 "$model" cuda "$precision" eager)
    c='{}'
    [ "${TORCH_COMPILE:-1}" = 0 ] ||
      c=$($PY bench/peers/mlp_step_torch.py "$batch" "$STEPS" 1 "$model" cuda "$precision" compile 2>/dev/null || echo '{}')
    $PY -c "
import json, sys
t, e, c, g = (json.loads(a) for a in sys.argv[1:5])
cs = c.get('samples_per_s')
gs = g.get('samples_per_s')
print(f\"| {sys.argv[5]} | {t['batch']} | {t['precision']} | {t['samples_per_s']:.0f} | {e['samples_per_s']:.0f} | \"
      f\"{t['samples_per_s'] / e['samples_per_s']:.2f} | {cs if cs else '-'} | {(t['samples_per_s'] / cs) if cs else float('nan'):.2f} | \"
      f\"{gs if gs else '-'} | {(gs / e['samples_per_s']) if gs else float('nan'):.2f} | \"
      f\"{t['peak_device_mb']:.0f} | {e['peak_device_mb']:.0f} |\")
" "$t" "$e" "$c" "$g" "$model"
  done
done
