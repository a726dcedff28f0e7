#!/usr/bin/env bash
# Installs Tandem's build and test dependencies from Debian 12 packages (apt-get), only the
# ones that are missing. The CUDA toolkit is optional: when /usr/local/cuda/bin/nvcc exists
# the CUDA backend is built too. Usage: scripts/install-deps.sh [--bench] [--data] [--slurm]
#   --data   also the dataset packages: Fashion-MNIST and bible-kjv (the King James Bible, --data=text)
#   --bench  also PyTorch and OpenBLAS for the PyTorch twins in bench/peers, matplotlib for
#            bench/scaling_tables.py's plots
#   --slurm  also Slurm (slurmctld, slurmd, clients) and munge for the `slurm` tests (scripts/slurm_cluster.sh)
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config ccache
          libeigen3-dev libgtest-dev libgmock-dev
          nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev zlib1g-dev
          libopenmpi-dev openmpi-bin iproute2)
for arg in "$@"; do
  case "$arg" in
    --data) packages+=(dataset-fashion-mnist bible-kjv) ;;
    --bench) packages+=(python3 python3-torch libopenblas0-pthread python3-matplotlib dataset-fashion-mnist) ;;
    --slurm) packages+=(slurm-wlm munge) ;;
    *) echo "install-deps.sh: unknown option '$arg' (allowed: --data, --bench, --slurm)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "Installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root or sudo to apt-get install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
