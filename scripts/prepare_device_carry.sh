#!/usr/bin/env bash
# Prepares what a GPU machine without Debian -dev packages needs, in two ignored folders that the
# device tool carries along:
#   .devcarry/  a portable build (static libstdc++/OpenBLAS, sm_90 + PTX) of mpbench and the GPU
#               tests, as bins.tar.xz, and source.txt: the source it was built from (the hash of
#               `scripts/device_check.sh --source-hash`, the commit), which device_check.sh holds
#               the tree it meets to, so that a stale carry is rebuilt there, not tested
#   .deps/      headers, static libs and CMake configs of CLI11, nlohmann-json, fmt, GoogleTest,
#               so that scripts/device_check.sh can build there when the carried binaries do not run
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${MPBENCH_DEVICE_ARCH:-90}
build=build-device
# The hash before and after the build: sources edited meanwhile would give a build of neither.
src=$(scripts/device_check.sh --source-hash)
# MPI off: the GPU machine has no OpenMPI for the binary to load (and one GPU to run it on); oneDNN
# off: Debian's is a shared library only (with libgomp), which that machine lacks.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPBENCH_CUDA=ON -DMPBENCH_PORTABLE=ON \
  -DMPBENCH_BUILD_BENCH=OFF -DMPBENCH_MPI=OFF -DMPBENCH_ONEDNN=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
# The GPU tests by their sources (any generator), each of which must come out of the build: a
# binary left over from an older build would be carried under the fresh source hash.
mapfile -t tests < <(scripts/device_check.sh --gpu-tests)
[ "${#tests[@]}" -gt 0 ] || { echo "prepare_device_carry: no GPU tests found" >&2; exit 1; }
for t in "${tests[@]}"; do rm -f "$build/tests/$t"; done
cmake --build "$build" -j"$(nproc)" --target mpbench "${tests[@]}"
# Static OpenBLAS makes each binary ~30 MB, mostly the same bytes: one xz stream whose window
# spans them all stores those once (7.1 MB for the 7 against 23.6 with xz's default 8 MiB window;
# a device call may send 64 MiB in all). Unpacking needs the window's 256 MiB of memory.
stage=$(mktemp -d)
cp "$build"/mpbench "$stage"/
for t in "${tests[@]}"; do
  if [ ! -x "$build/tests/$t" ]; then
    rm -rf "$stage"
    echo "prepare_device_carry: the build made no $build/tests/$t" >&2
    exit 1
  fi
  cp "$build/tests/$t" "$stage"/
done
strip "$stage"/* 2>/dev/null || true
# Each binary may need only what a GPU machine has: the CUDA libraries (the toolkit's or PyTorch's
# pip packages) and glibc. Anything else (libdnnl, libgomp, libfmt, libopenblas) would make the
# carry fail there and the script fall back to a build.
for f in "$stage"/*; do
  extra=$(readelf -d "$f" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' |
    grep -Ev '^(libcublasLt\.so|libcublas\.so|libcudnn\.so|libcudart\.so|libm\.so|libc\.so|libpthread\.so|libdl\.so|librt\.so|ld-linux)' || true)
  if [ -n "$extra" ]; then
    rm -rf "$stage"
    echo "prepare_device_carry: $(basename "$f") needs libraries a GPU machine may lack:" $extra >&2
    exit 1
  fi
done
rm -rf .devcarry && mkdir -p .devcarry
if [ "$(scripts/device_check.sh --source-hash)" != "$src" ]; then
  rm -rf "$stage"
  echo "prepare_device_carry: the sources changed during the build; run it again" >&2
  exit 1
fi
tar -cf - -C "$stage" . | xz -T1 -9 --lzma2=preset=9,dict=256MiB >.devcarry/bins.tar.xz
rm -rf "$stage"
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain -- app train models kernels tests CMakeLists.txt 2>/dev/null)" ] &&
  commit+=" (with uncommitted changes)"
printf 'sha256 %s\ncommit %s\nbuilt %s\narch sm_%s\n' "$src" "$commit" "$(date -u +%FT%TZ)" "$arch" \
  >.devcarry/source.txt

rm -rf .deps && mkdir -p .deps/usr/include .deps/usr/lib/x86_64-linux-gnu/cmake .deps/usr/share/cmake
cp -r /usr/include/CLI /usr/include/nlohmann /usr/include/fmt /usr/include/gtest /usr/include/gmock \
  .deps/usr/include/
cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json .deps/usr/share/cmake/
cp -r /usr/lib/x86_64-linux-gnu/cmake/fmt /usr/lib/x86_64-linux-gnu/cmake/GTest \
  .deps/usr/lib/x86_64-linux-gnu/cmake/
cp -a /usr/lib/x86_64-linux-gnu/libfmt.so* /usr/lib/x86_64-linux-gnu/libgtest*.a \
  /usr/lib/x86_64-linux-gnu/libgmock*.a .deps/usr/lib/x86_64-linux-gnu/
# OpenBLAS for a build there (the portable one links it statically): 58 MB as it is, 5 MB in xz.
tar -cJhf .deps/openblas.tar.xz -C / usr/include/x86_64-linux-gnu/openblas-pthread \
  usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >> .git/info/exclude
du -sh .devcarry .deps
# A device call sends the tree (tracked files and untracked ones git does not ignore) with the
# carried folders, 64 MiB in all, or it is refused: say how near this is (results/ grows).
tree=$(git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null |
  awk '{ s += $1 } END { print s + 0 }')
carried=$(du -sb .devcarry .deps | awk '{ s += $1 } END { print s }')
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "a device call with this carry sends $(mib $((tree + carried))) MiB of the 64 it may:" \
  "the tree $(mib "$tree"), .devcarry and .deps $(mib "$carried")"
if (( tree + carried > 64 * 1048576 )); then
  echo "prepare_device_carry: over the device tool's 64 MiB: the call would be refused" >&2
  exit 1
fi
