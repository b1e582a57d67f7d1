#!/usr/bin/env bash
# Installs orrery's build and test dependencies from Debian 12 packages, only those missing.
# Uses sudo when not root. Safe to run repeatedly.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config python3
  libfmt-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # decentralized pillar: gzip'd data files (zlib), the data sets it trains on (Fashion-MNIST IDX files;
  # scikit-learn ships the digits CSV), NumPy for the bench/numpy_pushpull.py comparison
  zlib1g-dev dataset-fashion-mnist python3-sklearn python3-numpy
  # the MPI runtime of the decentralized algorithms (gossip run --runtime mpi under mpirun)
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all dependencies present"
fi
