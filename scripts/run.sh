#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the default model on the default
# accelerator. Until the Trainer and `tandem fit` land, this is the synthetic-data example
# (an MLP learning a random teacher network); arguments go to the program.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec "${TANDEM_BUILD_DIR:-build}"/bin/train_synthetic "$@"
