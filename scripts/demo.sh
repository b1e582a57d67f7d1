#!/usr/bin/env bash
# README command (a): set up, build (release) and run orrery's main job on its built-in defaults.
# Extra arguments are passed to `orrery demo` (e.g. --out DIR, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release > /dev/null
cmake --build --preset release --target orrery
./build/release/orrery demo "$@"
