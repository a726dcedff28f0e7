#!/usr/bin/env bash
# The main job: installs what is missing (with the dataset packages), builds, and runs `tandem
# fit`: the MLP on Fashion-MNIST on the auto-selected accelerator, with a progress bar and a final
# metrics table. Arguments go to `tandem fit`, e.g.
#   scripts/run.sh --model=cnn --trainer.max_epochs=15
#   scripts/run.sh --model=gpt-nano --data=text     (the King James Bible's bytes; then a sample)
# With a GPT model, `tandem generate` prints 300 sampled bytes from the run's last checkpoint.
# The synthetic-data example needs no dataset: build/bin/train_synthetic.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --data
scripts/build.sh
BIN="${TANDEM_BUILD_DIR:-build}"/bin
case " $* " in
  *" --model=gpt"*) ;;
  *) exec "$BIN"/tandem fit "$@" ;;
esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$BIN"/tandem fit "$@" | tee "$log"
dir=$(sed -n 's/^logs and checkpoints: //p' "$log" | tail -1)
ckpt=$(ls -t "$dir"/checkpoints/*.safetensors 2>/dev/null | head -1 || true)
if [ -z "$ckpt" ]; then
  echo "run.sh: no checkpoint under $dir/checkpoints to sample from" >&2
  exit 1
fi
echo "--- sample (tandem generate --ckpt_path=$ckpt) ---"
"$BIN"/tandem generate --ckpt_path="$ckpt" --max_new_tokens=300
