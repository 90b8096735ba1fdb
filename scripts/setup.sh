#!/usr/bin/env bash
# Installs the Debian packages mpbench builds with, only those that are missing (idempotent).
# The CUDA toolkit is optional and not installed here: with /usr/local/cuda present the CUDA
# backend is built too.
set -euo pipefail
pkgs=(cmake g++ make libcli11-dev nlohmann-json3-dev libfmt-dev libopenblas-dev libgtest-dev
      libbenchmark-dev)
# chromium: the `mpbench report` test renders the HTML page headless (and skips without it), so
# failing to install it must not stop the build.
optional=(chromium)
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
  if ((${#want[@]})); then
    echo "setup: installing ${want[*]} (optional)" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${want[@]}" || echo "setup: could not install ${want[*]}; the HTML render test will skip" >&2
  fi
fi
