#!/usr/bin/env bash
# GPT on the CPU, Tandem vs PyTorch 1.13 (bench/peers/gpt_torch.py), same machine, same threads:
#  1. nanoGPT's CPU recipe on the King James Bible's bytes (gpt-nano, batch 12, AdamW, clip 1,
#     warm-up 100 then cosine to 1e-4 over STEPS): ms/step, val loss over 200 batches, a sample;
#  2. the GPT-2 124M shape (gpt2, B=4, T=64, AdamW): ms per training step and peak RSS.
#   bench/run_gpt.sh [steps=2000] [gpt2_steps=5]      (THREADS=2; TANDEM_BUILD_DIR=build,
#   TANDEM_SKIP_BUILD=1 to run that build's binaries as they are)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench --data
if [ -z "${TANDEM_SKIP_BUILD:-}" ]; then
  TANDEM_BUILD_DIR=${TANDEM_BUILD_DIR:-build} scripts/build.sh >/dev/null
fi
BIN=${TANDEM_BUILD_DIR:-build}/bin
THREADS=${THREADS:-2}
STEPS=${1:-2000}
GPT2_STEPS=${2:-5}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
KJV=${XDG_CACHE_HOME:-$HOME/.cache}/tandem/kjv.txt
if [ ! -s "$KJV" ]; then
  mkdir -p "$(dirname "$KJV")"
  bible -f Gen1:1-Rev22:21 > "$KJV.tmp.$$" && mv "$KJV.tmp.$$" "$KJV"
fi
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
