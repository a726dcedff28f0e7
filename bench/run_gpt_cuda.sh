#!/usr/bin/env bash
# Issue 24's GPU goal: GPT-2 124M (`gpt2`, B=8, T=1024) trained with AdamW at bf16-mixed on one GPU,
# Tandem (`bench_gpt fit`: the Trainer, its data loader included) beside PyTorch eager and
# torch.compile (bench/peers/gpt_torch.py cuda: attention by scaled_dot_product_attention) on the
# same GPU in one run. Tokens are random bytes on both sides (the step does not depend on them).
# Prints a markdown table, each row as its run ends. Goal: Tandem >= 1.0x torch.compile's tokens/s.
#   bench/run_gpt_cuda.sh [steps=20]   (BENCH=path to bench_gpt, PYTHON=a python with torch and CUDA,
#                                       PRESET=gpt2, B=8, PRECISION=bf16-mixed, TORCH_COMPILE=0 skips it)
set -uo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-build/bin/bench_gpt}
STEPS=${1:-20}
PY=${PYTHON:-python3}
PRESET=${PRESET:-gpt2} B=${B:-8} PRECISION=${PRECISION:-bf16-mixed}
text=$(mktemp)
trap 'rm -f "$text"' EXIT
head -c $((8 * 1024 * 1024)) /dev/urandom > "$text"
echo "| run | preset | B x T | precision | ms/step | tokens/s | Tandem / this |"
echo "|---|---|---|---|---|---|---|"
row() {  # row NAME JSON TANDEM_JSON
  "$PY" -c "
import json, sys
r, t = json.loads(sys.argv[2]), json.loads(sys.argv[3] or '{}')
ratio = f\"{t['tokens_per_s'] / r['tokens_per_s']:.2f}x\" if t.get('tokens_per_s') else '-'
print(f\"| {sys.argv[1]} | {r['preset']} | {r['B']} x {r['T']} | {r['precision']} | {r['ms_per_step']:.1f} | {r['tokens_per_s']:.0f} | {ratio} |\")
" "$@"
}
failed=0
t=$("$BENCH" fit "$PRESET" "$B" "$STEPS" cuda "$PRECISION" "$text" | tail -1) && row tandem "$t" "$t" || { failed=1; t=''; echo "tandem failed"; }
for mode in eager compile; do
  [ "$mode" = compile ] && [ "${TORCH_COMPILE:-1}" = 0 ] && continue
  args=(cuda "$PRESET" "$B" "$STEPS" "$PRECISION")
  [ "$mode" = compile ] && args+=(compile)
  if p=$("$PY" bench/peers/gpt_torch.py "${args[@]}" | tail -1); then
    row "pytorch $mode" "$p" "$t"
  else
    failed=1
    echo "pytorch $mode failed"
  fi
done
exit $failed
