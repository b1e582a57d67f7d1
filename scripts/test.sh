#!/usr/bin/env bash
# README command (b): set up, build and run the whole test suite.
#   1. Release build with warnings as errors: every test (labels fast, slow, validation).
#   2. ASan+UBSan build with warnings as errors: the fast tests again.
# Validation tests read ../shared (measured data); they skip with a reason when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)

echo "== release build (-Werror)"
cmake --preset ci-release > /dev/null
cmake --build --preset ci-release -j "$jobs"
echo "== release tests (all labels)"
ctest --test-dir build/ci-release --output-on-failure -j "$jobs"

echo "== sanitizer build (ASan+UBSan, -Werror)"
cmake --preset ci-asan > /dev/null
cmake --build --preset ci-asan -j "$jobs"
echo "== sanitizer tests (label fast)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/ci-asan --output-on-failure -L fast -j "$jobs"
