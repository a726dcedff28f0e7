#!/usr/bin/env bash
# Issue 3's goals: Fashion-MNIST training throughput (and, with EPOCHS > 1, test accuracy) of
# the MLP 784-1024-1024-10 and the CNN, Adam lr 1e-3, batch 256, Tandem vs PyTorch on the same
# machine, thread count and data, in one run. Prints a markdown table.
#   bench/run_fashion_mnist.sh [epochs]      (THREADS=2, MODELS="mlp cnn", ROOT=dataset dir)
# Goals: samples/s ratio >= 1.5 (mlp), >= 1.0 (cnn). The test_acc columns compare both on this same
# constant-rate recipe; the accuracy goals (0.89 mlp, 0.915 cnn within 15 epochs) are measured with
# `tandem fit`'s defaults (cosine schedule), see docs/PERFORMANCE.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench
scripts/build.sh >/dev/null
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
THREADS=${THREADS:-2}
EPOCHS=${1:-1}
ROOT=${ROOT:-/usr/share/datasets/fashion-mnist}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
echo "| model | epochs | Tandem samples/s | PyTorch samples/s | ratio | Tandem peak RSS MB | PyTorch peak RSS MB | Tandem test_acc | PyTorch test_acc |"
echo "|---|---|---|---|---|---|---|---|---|"
for model in ${MODELS:-mlp cnn}; do
  t=$("$BUILD_DIR"/bin/bench_fashion_mnist "$model" "$EPOCHS" "$ROOT")
  p=$(/usr/bin/python3 bench/peers/fashion_mnist_torch.py "$model" "$EPOCHS" "$THREADS" "$ROOT")
  /usr/bin/python3 -c "
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
acc = lambda r: f\"{r['test_acc']:.4f}\" if 'test_acc' in r else '-'
print(f\"| {sys.argv[3]} | {t['epochs']} | {t['samples_per_s']:.0f} | {p['samples_per_s']:.0f} | \"
      f\"{t['samples_per_s'] / p['samples_per_s']:.2f} | {t['peak_rss_mb']:.0f} | {p['peak_rss_mb']:.0f} | \"
      f\"{acc(t)} | {acc(p)} |\")
" "$t" "$p" "$model"
done
