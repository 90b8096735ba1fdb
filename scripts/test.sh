#!/usr/bin/env bash
# Installs what is missing, builds everything (CUDA parts too when the toolkit is there) and runs
# the whole suite through CTest. GPU tests skip on machines without a GPU.
# Then, when clang++ and its sanitizer runtimes are there, a second, CPU-only build in build-san
# with AddressSanitizer + UndefinedBehaviorSanitizer and the libFuzzer targets runs the CPU suite
# and each fuzzer for 45 s (README "Testing"). MPBENCH_SKIP_SANITIZE=1 skips it.
# Arguments are passed to both ctest runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${MPBENCH_BUILD_DIR:-build-test}
# The CUDA code is built for the GPU that is here ("native"), or, without one, only to show that
# it compiles: one architecture, the oldest of the default list (no kernel depends on
# __CUDA_ARCH__), in a quarter of the time of all five. Always passed, so that a build directory
# configured on one kind of machine is right on the other. MPBENCH_CMAKE_ARGS can still set it.
archs=()
if [[ "${MPBENCH_CMAKE_ARGS:-}" != *CMAKE_CUDA_ARCHITECTURES* ]]; then
  if nvidia-smi -L >/dev/null 2>&1; then
    archs=(-DCMAKE_CUDA_ARCHITECTURES=native)
  else
    archs=(-DCMAKE_CUDA_ARCHITECTURES=75-real)
  fi
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${archs[@]}" ${MPBENCH_CMAKE_ARGS:-}
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"

if [ -n "${MPBENCH_SKIP_SANITIZE:-}" ]; then
  echo "test: sanitizer build skipped (MPBENCH_SKIP_SANITIZE is set)" >&2
  exit 0
fi
# clang without libclang-rt-14-dev compiles but cannot link a sanitized program.
if ! command -v clang++ >/dev/null ||
  ! echo 'int main() {}' | clang++ -fsanitize=address,undefined,fuzzer-no-link -x c++ - \
    -o /dev/null 2>/dev/null; then
  echo "test: sanitizer build skipped: no clang++ with sanitizer runtimes (scripts/setup.sh)" >&2
  exit 0
fi
san=${MPBENCH_SANITIZE_BUILD_DIR:-build-san}
# Without oneDNN: this build tests what a build without the native CPU backend does (--device cpu
# refused, auto falls back to the reference), and the native backend's parity tests, which spend
# their time in the reference's loops, run once, in the Release build. Without MPI, likewise (an
# MPI launch refused); OpenMPI's own allocations would read as leaks to LeakSanitizer.
CC=clang CXX=clang++ cmake -S . -B "$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMPBENCH_SANITIZE=ON -DMPBENCH_CUDA=OFF -DMPBENCH_BUILD_BENCH=OFF -DMPBENCH_ONEDNN=OFF \
  -DMPBENCH_MPI=OFF
cmake --build "$san" -j"$(nproc)"
ctest --test-dir "$san" --output-on-failure -j"$(nproc)" -L 'cpu|fuzz' "$@"
