#!/usr/bin/env bash
# Installs the Debian packages mpbench builds with, only those that are missing (idempotent).
# The CUDA toolkit is optional and not installed here: with /usr/local/cuda present the CUDA
# backend is built too.
set -euo pipefail
# libdnnl-dev: oneDNN, the native CPU backend (`--device cpu`); CMake builds without it when it
# is missing, but the tests of that backend need it. ocl-icd-opencl-dev: Debian's oneDNN package
# config requires OpenCL's headers (libdnnl-dev only recommends them, and --no-install-recommends
# leaves them out).
# libopenmpi-dev and openmpi-bin (mpirun): data parallel across ranks, and its tests.
pkgs=(cmake g++ make libcli11-dev nlohmann-json3-dev libfmt-dev libopenblas-dev libgtest-dev
      libbenchmark-dev libdnnl-dev ocl-icd-opencl-dev libopenmpi-dev openmpi-bin)
# Wanted, not needed, so failing to install them must not stop the build. chromium: the
# `mpbench report` test renders the HTML page headless (and skips without it). clang and
# libclang-rt-14-dev (the ASan, UBSan and libFuzzer runtimes): scripts/test.sh's sanitizer and
# fuzzing build (skipped without them). python3-torch (Debian's, CPU only, for /usr/bin/python3):
# the tests that run scripts/pytorch_reference.py against mpbench (skipped without it).
optional=(chromium clang libclang-rt-14-dev python3-torch)
missing() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
need=($(missing "${pkgs[@]}"))
want=($(missing "${optional[@]}"))
if ((${#need[@]} + ${#want[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  if ((${#need[@]})); then
    echo "setup: installing ${need[*]}" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
  fi
  # One at a time: a package this distribution lacks must not keep the others out.
  for p in "${want[@]}"; do
    echo "setup: installing $p (optional)" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$p" ||
      echo "setup: could not install $p; what needs it is skipped" >&2
  done
fi
