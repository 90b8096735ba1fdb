#!/usr/bin/env bash
# Installs what is missing, builds everything (CUDA parts too when the toolkit is there) and runs
# the whole suite through CTest. GPU tests skip on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${MPBENCH_BUILD_DIR:-build-test}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release ${MPBENCH_CMAKE_ARGS:-}
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
