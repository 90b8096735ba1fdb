#!/usr/bin/env bash
# Quick start: install what is missing, build in Release, run the default comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMPBENCH_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target mpbench
exec build/mpbench run configs/mnist_mlp.json "$@"
