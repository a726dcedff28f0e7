#!/usr/bin/env bash
# `tandem fit` with its defaults on one GPU (the MLP 784-1024-1024-10 on Fashion-MNIST, batch 256,
# Adam lr 1e-3 with a cosine to 0, float32) beside its Lightning twin on the same GPU
# (bench/peers/fashion_mnist_lightning.py: the same model, optimizer, schedule, batch size, epochs,
# train/val split and batch order). Prints a markdown table: each process's wall time (start to
# exit: startup, data decoding and checkpoints included), Lightning's trainer.fit time, and the
# final val_loss and val_acc of both. Each row is printed as soon as its run ends.
#   bench/run_fit_cuda.sh [epochs]   (TANDEM=the tandem CLI, ROOT=dataset dir with the training file
#                                     pair, PYTHON=a python with torch and lightning, WORK=scratch dir)
set -euo pipefail
cd "$(dirname "$0")/.."
TANDEM=${TANDEM:-build/bin/tandem}
EPOCHS=${1:-5}
ROOT=${ROOT:-/usr/share/datasets/fashion-mnist}
PY=${PYTHON:-python3}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {print b - a}'; }
row() {  # row NAME WALL_S METRICS_CSV [FIT_S]: the last logged val_loss and val_acc
  "$PY" - "$@" <<'PY'
import csv, sys
name, wall, path = sys.argv[1:4]
fit = sys.argv[4] if len(sys.argv) > 4 else "-"
rows = [r for r in csv.DictReader(open(path)) if r.get("val_loss")]
last = rows[-1]
print(f"| {name} | {int(last['epoch']) + 1} | {float(wall):.1f} | {fit} | {float(last['val_loss']):.4f} | "
      f"{float(last['val_acc']):.4f} |")
PY
}
echo "| run | epochs | process wall s | fit s | val_loss | val_acc |"
echo "|---|---|---|---|---|---|"
failed=0
start=$(now)
if "$TANDEM" fit --trainer.accelerator=cuda --trainer.devices=1 --trainer.max_epochs="$EPOCHS" --data.root="$ROOT" \
  --trainer.default_root_dir="$WORK/tandem" --trainer.enable_progress_bar=false > "$WORK/tandem.log" 2>&1; then
  row "tandem fit" "$(since "$start")" "$WORK/tandem/lightning_logs/version_0/metrics.csv"
else
  failed=1
  echo "tandem fit failed:" && tail -n 20 "$WORK/tandem.log"
fi
start=$(now)
if "$PY" bench/peers/fashion_mnist_lightning.py "$EPOCHS" "$ROOT" "$WORK/lightning" gpu > "$WORK/lightning.json" \
  2> "$WORK/lightning.log"; then
  # Lightning's model summary goes to stdout too: the JSON is the last line.
  fit_s=$("$PY" -c 'import json, sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["fit_s"])' \
    "$WORK/lightning.json")
  row "lightning" "$(since "$start")" "$WORK/lightning/lightning_logs/version_0/metrics.csv" "$fit_s"
  tail -n 1 "$WORK/lightning.json"
else
  failed=1
  echo "lightning failed:" && tail -n 20 "$WORK/lightning.log"
fi
exit $failed
