#!/usr/bin/env bash
# The main job: installs what is missing (with the Fashion-MNIST dataset package), builds, and
# runs `tandem fit`: the MLP on Fashion-MNIST on the auto-selected accelerator, with a progress
# bar and a final metrics table. Arguments go to `tandem fit`, e.g.
#   scripts/run.sh --model=cnn --trainer.max_epochs=15
# The synthetic-data example needs no dataset: build/bin/train_synthetic.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --data
scripts/build.sh
exec "${TANDEM_BUILD_DIR:-build}"/bin/tandem fit "$@"
