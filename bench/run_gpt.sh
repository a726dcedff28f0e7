#!/usr/bin/env bash
# GPT on the CPU, Tandem vs PyTorch 1.13 (bench/peers/gpt_torch.py), same machine, same threads:
#  1. nanoGPT's CPU recipe on the King James Bible's bytes (gpt-nano, batch 12, AdamW, clip 1,
#     warm-up 100 then cosine to 1e-4 over STEPS): ms/step, val loss over 200 batches, a sample;
#  2. the GPT-2 124M shape (gpt2, B=4, T=64, AdamW): ms per training step and peak RSS;
#  3. ddp at 2 ranks x 1 thread: gpt-nano, batch 12 per rank, the recipe's optimizer, DDP_STEPS
#     steps: Tandem's ddp over MPI vs PyTorch DDP over gloo, ms per step (after 5 warm-up steps).
#   bench/run_gpt.sh [steps=2000] [gpt2_steps=5] [ddp_steps=50]   (THREADS=2, PARTS="train step ddp";
#   TANDEM_BUILD_DIR=build; the build is made only when its bench_gpt is missing)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench --data
BIN=${TANDEM_BUILD_DIR:-build}/bin
if [[ ! -x "$BIN/bench_gpt" ]]; then scripts/build.sh >/dev/null; fi
THREADS=${THREADS:-2}
STEPS=${1:-2000}
GPT2_STEPS=${2:-5}
DDP_STEPS=${3:-50}
PARTS=${PARTS:-train step ddp}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
KJV=${XDG_CACHE_HOME:-$HOME/.cache}/tandem/kjv.txt
if [ ! -s "$KJV" ]; then
  mkdir -p "$(dirname "$KJV")"
  bible -f Gen1:1-Rev22:21 > "$KJV.tmp.$$" && mv "$KJV.tmp.$$" "$KJV"
fi
if [[ " $PARTS " == *" train "* ]]; then
t=$("$BIN"/bench_gpt train "$KJV" "$STEPS")
p=$(/usr/bin/python3 bench/peers/gpt_torch.py train "$KJV" "$STEPS" "$THREADS")
/usr/bin/python3 -c "
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print('| gpt-nano, KJV, $STEPS steps | ms/step | val loss (200 batches) |')
print('|---|---|---|')
print(f\"| Tandem | {t['ms_per_step']:.1f} | {t['val_loss']:.4f} |\")
print(f\"| PyTorch | {p['ms_per_step']:.1f} | {p['val_loss']:.4f} |\")
print(f\"speed ratio Tandem/PyTorch: {p['ms_per_step'] / t['ms_per_step']:.2f}x\")
print('--- Tandem sample ---'); print(t['sample']); print('--- PyTorch sample ---'); print(p['sample'])
" "$t" "$p"
fi
if [[ " $PARTS " == *" step "* ]]; then
t=$("$BIN"/bench_gpt step gpt2 4 64 "$GPT2_STEPS")
p=$(/usr/bin/python3 bench/peers/gpt_torch.py step gpt2 4 64 "$GPT2_STEPS" "$THREADS")
/usr/bin/python3 -c "
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print('| gpt2 124M, B=4, T=64 | ms/step (median) | peak RSS MB |')
print('|---|---|---|')
print(f\"| Tandem | {t['ms_per_step_median']:.0f} | {t['peak_rss_mb']:.0f} |\")
print(f\"| PyTorch | {p['ms_per_step_median']:.0f} | {p['peak_rss_mb']:.0f} |\")
print(f\"speed ratio Tandem/PyTorch: {p['ms_per_step_median'] / t['ms_per_step_median']:.2f}x\")
" "$t" "$p"
fi
if [[ " $PARTS " == *" ddp "* ]]; then
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
t=$(mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 "$BIN"/bench_gpt ddp "$KJV" "$DDP_STEPS" | tail -1)
p=$(/usr/bin/python3 bench/peers/gpt_torch.py ddp "$KJV" "$DDP_STEPS" 2)
/usr/bin/python3 -c "
import json, sys
t, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print('| gpt-nano ddp, 2 ranks x 1 thread, batch 12/rank, $DDP_STEPS steps | ms/step | peak RSS MB/rank |')
print('|---|---|---|')
print(f\"| Tandem (MPI) | {t['ms_per_step']:.1f} | {t['peak_rss_mb_per_rank']:.0f} |\")
print(f\"| PyTorch DDP (gloo) | {p['ms_per_step']:.1f} | {p['peak_rss_mb_per_rank']:.0f} |\")
print(f\"speed ratio Tandem/PyTorch: {p['ms_per_step'] / t['ms_per_step']:.2f}x\")
" "$t" "$p"
fi
