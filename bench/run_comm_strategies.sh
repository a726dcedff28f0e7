#!/usr/bin/env bash
# Issue 16's table: Fashion-MNIST (MLP and CNN) at 2 and 4 CPU ranks (mpirun --oversubscribe,
# one OpenMP thread per rank), the same seed, data and epochs for every row; one row per flag set
# given on the command line (each one quoted string of `tandem fit` flags), by default ddp and
# ddp_sharded. Columns: test accuracy, bytes sent per rank per optimizer step (counted by the
# communicator), optimizer state per rank, samples/s over fit.
#   bench/run_comm_strategies.sh ["--trainer.strategy=ddp" "--trainer.strategy=ddp_sharded" ...]
# Environment: MODELS ("mlp cnn"), NPS ("2 4"), MLP_EPOCHS (2), CNN_EPOCHS (1), BATCH (128 per
# rank), BUILD_DIR (build), ROOT (the dataset directory).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BENCH=$BUILD_DIR/bin/bench_comm_strategies
[ -x "$BENCH" ] || { echo "run_comm_strategies.sh: $BENCH is missing; build it (ninja -C $BUILD_DIR bench_comm_strategies)" >&2; exit 2; }
ROOT=${ROOT:-/usr/share/datasets/fashion-mnist}
BATCH=${BATCH:-128}
if [ $# -eq 0 ]; then set -- "--trainer.strategy=ddp" "--trainer.strategy=ddp_sharded"; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "| model | ranks | epochs | flags | test_acc | bytes sent per rank per step | optimizer state per rank (MB) | samples/s |"
echo "|---|---|---|---|---|---|---|---|"
for model in ${MODELS:-mlp cnn}; do
  if [ "$model" = cnn ]; then epochs=${CNN_EPOCHS:-1}; else epochs=${MLP_EPOCHS:-2}; fi
  for np in ${NPS:-2 4}; do
    for flags in "$@"; do
      # shellcheck disable=SC2086  # a flag set is several flags
      line=$(mpirun -np "$np" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 "$BENCH" \
        --model="$model" --data.root="$ROOT" --data.batch_size="$BATCH" --seed_everything=42 \
        --trainer.accelerator=cpu --trainer.devices="$np" --trainer.max_epochs="$epochs" \
        --trainer.limit_val_batches=0 --trainer.num_sanity_val_steps=0 --trainer.enable_checkpointing=false \
        --trainer.enable_progress_bar=false --trainer.enable_model_summary=false \
        $flags | grep '^{"bench"')
      /usr/bin/python3 -c "
import json, sys
r = json.loads(sys.argv[1])
print(f\"| {sys.argv[2]} | {r['world_size']} | {sys.argv[3]} | \`{sys.argv[4]}\` | {r['test_acc']:.4f} | \"
      f\"{r['bytes_per_step']:.0f} | {r['optimizer_state_bytes'] / 1e6:.2f} | {r['samples_per_s']:.0f} |\")
" "$line" "$model" "$epochs" "$flags"
    done
  done
done
