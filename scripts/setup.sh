#!/usr/bin/env bash
# Installs the Debian packages mpbench builds with, only those that are missing (idempotent).
# The CUDA toolkit is optional and not installed here: with /usr/local/cuda present the CUDA
# backend is built too.
set -euo pipefail
# chromium: the `mpbench report` test renders the HTML page headless (it skips without it).
pkgs=(cmake g++ make libcli11-dev nlohmann-json3-dev libfmt-dev libopenblas-dev libgtest-dev
      libbenchmark-dev chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
