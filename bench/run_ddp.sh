#!/usr/bin/env bash
# Issue 6's DDP comparison: Tandem DDP over MPI (bench/bench_ddp) vs PyTorch DDP over gloo
# (bench/peers/ddp_torch.py), same model, data, sharding and per-rank batch, one thread per
# rank, one after the other in one run. Prints a markdown table with the ratio.
#   bench/run_ddp.sh               (NP=2, BATCH=128 per rank, MODELS="mlp cnn", ROUNDS=1)
# ROUNDS > 1 alternates the two and keeps each one's best samples/s (noisy shared machines).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
if [[ ! -x "$BUILD_DIR/bin/bench_ddp" ]]; then scripts/build.sh >/dev/null; fi
NP=${NP:-2}
BATCH=${BATCH:-128}
ROOT=${ROOT:-/usr/share/datasets/fashion-mnist}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
echo "| model | ranks | batch/rank | Tandem samples/s | PyTorch DDP (gloo) samples/s | ratio | Tandem exposed comm ms/step | Tandem peak RSS MB/rank | PyTorch peak RSS MB/rank |"
echo "|---|---|---|---|---|---|---|---|---|"
for model in ${MODELS:-mlp cnn}; do
  best_t="" best_p=""
  for round in $(seq 1 "${ROUNDS:-1}"); do
    t=$(mpirun -np "$NP" --oversubscribe --bind-to none "$BUILD_DIR/bin/bench_ddp" "$model" "$BATCH" "$ROOT" | tail -1)
    p=$(/usr/bin/python3 bench/peers/ddp_torch.py "$model" "$BATCH" "$NP" "$ROOT")
    best_t=$(/usr/bin/python3 -c "import json,sys; a=sys.argv[1]; b=json.loads(sys.argv[2]); print(json.dumps(b if not a or b['samples_per_s']>json.loads(a)['samples_per_s'] else json.loads(a)))" "$best_t" "$t")
    best_p=$(/usr/bin/python3 -c "import json,sys; a=sys.argv[1]; b=json.loads(sys.argv[2]); print(json.dumps(b if not a or b['samples_per_s']>json.loads(a)['samples_per_s'] else json.loads(a)))" "$best_p" "$p")
  done
  /usr/bin/python3 -c "
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f\"| {sys.argv[3]} | {t['ranks']} | {t['batch_per_rank']} | {t['samples_per_s']:.0f} | {p['samples_per_s']:.0f} | \"
      f\"{t['samples_per_s'] / p['samples_per_s']:.2f} | {t['exposed_comm_ms_per_step']:.2f} | \"
      f\"{t['peak_rss_mb_per_rank']:.0f} | {p['peak_rss_mb_per_rank']:.0f} |\")
" "$best_t" "$best_p" "$model"
done
