#!/usr/bin/env bash
# The one prepared script for a GPU machine (DESIGN.md "Working with a GPU"):
#   scripts/device_check.sh OUTDIR
# 1. uses the portable build carried in .devcarry/ if it runs here, else builds for the card found
#    (with .deps/ for the header-only and test dependencies such a machine lacks);
# 2. runs the GPU tests; 3. runs every config in configs/ in all its modes on the GPU, plus
#    amp_fp8 for the MLP and transformer configs (it is in no spec's defaults), and once more
#    with --cuda-graphs; the PyTorch reference runs the same modes; 4. writes logs and result
#    JSONs to OUTDIR; prints a summary last.
# Meant to finish in well under 8 minutes on an H200.
#
# Environment knobs, for splitting the work over two calls when device time is short:
#   MPBENCH_CHECK_BUDGET   seconds for the whole script (default 420)
#   MPBENCH_CHECK_CONFIGS  the spec files to run (default: configs/*.json), space-separated
#   MPBENCH_CHECK_TESTS    0 skips the GPU test binaries
#   MPBENCH_CHECK_GRAPHS   0 skips the --cuda-graphs rerun of each config
#   MPBENCH_CHECK_PROFILE  0 skips `mpbench profile` of each config (and PyTorch's profiled steps)
#   MPBENCH_CHECK_MAXBATCH 0 skips `mpbench maxbatch` (fp32 and amp_bf16 under 16 GiB) of
#                          resnet50_conv2 and bert_base_layer, when they are among the configs
#   MPBENCH_CHECK_EXPLAIN  0 skips `mpbench explain` (fp32, tf32, amp_bf16) of resnet50_conv2 and
#                          gpt2_small_layer, when they are among the configs
#   MPBENCH_CHECK_SANITIZE 1 reruns the kernel parity tests under compute-sanitizer memcheck
#   MPBENCH_CHECK_DEVICE   cpu runs the configs on the CPU: a dry run of this script's plumbing on
#                          a machine without a GPU (default cuda)
set -uo pipefail
out=${1:?usage: scripts/device_check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
log="$out/device_check.log"
: >"$log"
say() { echo "[device_check] $*" | tee -a "$log"; }
t0=$(date +%s)
# Every step gets at most its own limit and never more than what is left of the whole budget
# (MPBENCH_CHECK_BUDGET seconds, default 420), so the summary is always printed.
deadline=$(( t0 + ${MPBENCH_CHECK_BUDGET:-420} ))
limit() { local left=$(( deadline - $(date +%s) - 15 )); (( left < 5 )) && left=5; (( left < $1 )) && echo "$left" || echo "$1"; }

dev=${MPBENCH_CHECK_DEVICE:-cuda}
say "gpu: $(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
cc=${cc:-90}

# CUDA libraries: the toolkit's, else those of the pip packages PyTorch brings.
libs=/usr/local/cuda/lib64
py_libs=$(python3 - <<'PY' 2>/dev/null
import importlib, os
dirs = []
for m in ("nvidia.cublas", "nvidia.cudnn", "nvidia.cuda_runtime", "nvidia.cu13"):
    try:
        mod = importlib.import_module(m)
        for p in getattr(mod, "__path__", []):
            for sub in ("lib", "lib64"):
                if os.path.isdir(os.path.join(p, sub)): dirs.append(os.path.join(p, sub))
    except Exception:
        pass
print(":".join(dirs))
PY
)
export LD_LIBRARY_PATH="$libs${py_libs:+:$py_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MPBENCH_SOURCE_DIR="$root"

bin=""
carried=/tmp/mpbench-carried
rm -rf "$carried" && mkdir -p "$carried"
[ -f .devcarry/bins.tar.xz ] && tar -xJf .devcarry/bins.tar.xz -C "$carried" 2>>"$log"
if [ -x "$carried/mpbench" ] && "$carried/mpbench" --version >>"$log" 2>&1; then
  bin="$carried"
  say "using the carried build: $("$carried/mpbench" --version)"
else
  say "carried build missing or not runnable here; building for sm_$cc"
  ldd "$carried/mpbench" >>"$log" 2>&1 || true
  build=/tmp/mpbench-build
  prefix=""
  [ -d .deps/usr ] && prefix="-DCMAKE_PREFIX_PATH=$root/.deps/usr"
  gen=""; command -v ninja >/dev/null && gen="-G Ninja"
  if cmake -S . -B "$build" $gen -DCMAKE_BUILD_TYPE=Release -DMPBENCH_CUDA=ON \
      -DMPBENCH_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES="$cc" $prefix >>"$log" 2>&1 &&
     cmake --build "$build" -j"$(nproc)" >>"$log" 2>&1; then
    mkdir -p "$build/carry"
    cp "$build/mpbench" "$build/carry/"
    find "$build/tests" -maxdepth 1 -type f -name 'gpu_test_*' -perm -u+x -exec cp {} "$build/carry/" \;
    bin="$build/carry"
    say "built in $(( $(date +%s) - t0 )) s"
  else
    say "BUILD FAILED (see device_check.log)"
    tail -40 "$log"
    exit 3
  fi
fi

"$bin/mpbench" devices >"$out/devices.txt" 2>&1

# GPU tests, each binary with a time limit.
tests_summary=""
for t in "$bin"/gpu_test_*; do
  [ -x "$t" ] || continue
  [ "${MPBENCH_CHECK_TESTS:-1}" = 0 ] && break
  name=$(basename "$t")
  timeout "$(limit 200)" "$t" --gtest_color=no >"$out/$name.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$out/$name.log")
  failed=$(grep -c '^\[  FAILED  \].*(' "$out/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \]' "$out/$name.log")
  tests_summary+=$(printf '%-28s rc=%-3s passed=%-4s failed=%-4s skipped=%s' "$name" "$rc" "$passed" "$failed" "$skipped")$'\n'
  grep -E '^\[  FAILED  \]|Failure|error' "$out/$name.log" | head -30 >>"$log"
done
# Optionally the kernel parity tests again under compute-sanitizer's memcheck (out-of-bounds
# and misaligned accesses in kernels that ran clean), without the cases that take long under it.
if [ "${MPBENCH_CHECK_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for name in gpu_test_cuda_parity gpu_test_family_ops_parity gpu_test_conv_parity; do
    [ -x "$bin/$name" ] || continue
    timeout "$(limit 150)" compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/$name" \
      --gtest_color=no \
      --gtest_filter=-*OutOfMemory*:FamilyOpsParity.AttentionSoftmax:FamilyOpsParity.BatchNormResNetShapes \
      >"$out/gpu_test_memcheck_$name.log" 2>&1
    rc=$?
    tests_summary+=$(printf '%-28s memcheck rc=%s: %s' "$name" "$rc" \
      "$(grep -m1 'ERROR SUMMARY' "$out/gpu_test_memcheck_$name.log" || echo 'no summary')")$'\n'
  done
fi
cat "$out"/gpu_test_*.log > "$out/gpu_tests.log" 2>/dev/null && rm -f "$out"/gpu_test_*.log

# The --precisions of a config's runs: its own modes plus amp_fp8 for the families whose Linear
# layers mpbench runs in FP8 (mlp, transformer), since no spec's defaults include it; nothing
# (the spec's modes) for the others. mpbench and PyTorch both get it, so their rows pair up.
modes_of() {
  python3 - "$1" <<'PY' 2>>"$log"
import json, sys
spec = json.load(open(sys.argv[1]))
if spec["model"]["type"] in ("mlp", "transformer"):
    modes = spec.get("precisions") or ["fp32", "tf32", "amp_fp16", "amp_bf16"]
    print("--precisions " + ",".join(dict.fromkeys(modes + ["amp_fp8"])))
PY
}

# Every shipped config in all its modes, eager and with CUDA graphs.
runs_summary=""
configs=${MPBENCH_CHECK_CONFIGS:-$(ls configs/*.json)}
variants="eager graphs"
[ "${MPBENCH_CHECK_GRAPHS:-1}" = 0 ] && variants="eager"
for cfg in $configs; do
  name=$(basename "$cfg" .json)
  modes=$(modes_of "$cfg")
  for variant in $variants; do
    extra=""
    [ "$variant" = graphs ] && extra="--cuda-graphs"
    start=$(date +%s)
    timeout "$(limit 120)" "$bin/mpbench" run "$cfg" --device "$dev" --quiet $extra $modes \
      --json "$out/${name}_${variant}.json" >"$out/${name}_${variant}.txt" 2>&1
    rc=$?
    runs_summary+="== $name ($variant): rc=$rc, $(( $(date +%s) - start )) s"$'\n'
    runs_summary+=$(cat "$out/${name}_${variant}.txt")$'\n'
  done
done
cat "$out"/*_eager.txt "$out"/*_graphs.txt >"$out/runs.txt" 2>/dev/null
rm -f "$out"/*_eager.txt "$out"/*_graphs.txt

# The PyTorch reference on the same specs, where this machine has PyTorch: one process per
# config, so that a config cut off by the time limit loses only its own runs. It comes before the
# profiles: the side-by-side table is worth more than they are.
have_torch=0
if [ -f scripts/pytorch_reference.py ] && python3 -c 'import torch' 2>/dev/null; then
  have_torch=1
  for cfg in $configs; do
    name=$(basename "$cfg" .json)
    start=$(date +%s)
    PYTHONUNBUFFERED=1 timeout "$(limit 120)" python3 scripts/pytorch_reference.py "$cfg" \
      --device "$dev" --mpbench "$bin/mpbench" --data-dir /tmp/mpbench-data $(modes_of "$cfg") \
      --out "$out/pytorch_${name}.json" \
      --profile-steps "$([ "${MPBENCH_CHECK_PROFILE:-1}" = 0 ] && echo 0 || echo 5)" \
      >>"$out/pytorch.txt" 2>&1
    say "pytorch $name: rc=$?, $(( $(date +%s) - start )) s"
    rm -rf /tmp/mpbench-data  # the exported dataset (8 GB for resnet50_conv3)
  done
  cat "$out/pytorch.txt" >>"$log" && rm -f "$out/pytorch.txt"
fi

# Where each config's step time goes, op by op (`mpbench profile`), for the rows slower than
# PyTorch: a few steps per mode, every op timed with events.
if [ "${MPBENCH_CHECK_PROFILE:-1}" != 0 ]; then
  for cfg in $configs; do
    name=$(basename "$cfg" .json)
    start=$(date +%s)
    timeout "$(limit 60)" "$bin/mpbench" profile "$cfg" --device "$dev" --quiet --steps 5 --top 15 \
      --json "$out/profile_${name}.json" >>"$out/profiles.txt" 2>&1
    say "profile $name: rc=$?, $(( $(date +%s) - start )) s"
  done
fi

# The largest batch per mode under a 16 GB card's memory, for the two configs the memory issue
# names; the tracked training memory is checked against the device-wide peak there too.
if [ "${MPBENCH_CHECK_MAXBATCH:-1}" != 0 ]; then
  for cfg in $configs; do
    name=$(basename "$cfg" .json)
    case "$name" in resnet50_conv2 | bert_base_layer) ;; *) continue ;; esac
    start=$(date +%s)
    timeout "$(limit 90)" "$bin/mpbench" maxbatch "$cfg" --device "$dev" --precisions fp32,amp_bf16 \
      --memory-limit 16GiB --multiple 8 --json "$out/maxbatch_${name}.json" \
      >>"$out/runs.txt" 2>&1
    say "maxbatch $name: rc=$?, $(( $(date +%s) - start )) s"
  done
fi

# Why each mode helped or didn't (`mpbench explain`): on a card in the datasheet table it gives
# the Amdahl bound beside the measured speedup, which the CPU cannot.
if [ "${MPBENCH_CHECK_EXPLAIN:-1}" != 0 ]; then
  for cfg in $configs; do
    name=$(basename "$cfg" .json)
    case "$name" in resnet50_conv2 | gpt2_small_layer) ;; *) continue ;; esac
    start=$(date +%s)
    timeout "$(limit 60)" "$bin/mpbench" explain "$cfg" --device "$dev" --precisions fp32,tf32,amp_bf16 \
      --steps 5 --quiet --json "$out/explain_${name}.json" >>"$out/profiles.txt" 2>&1
    say "explain $name: rc=$?, $(( $(date +%s) - start )) s"
  done
fi

# mpbench and PyTorch side by side, with where the time goes for the rows where mpbench is slower.
side=""
shopt -s nullglob
mpb_files=("$out"/*_eager.json "$out"/*_graphs.json)
pt_files=("$out"/pytorch_*.json)
prof_files=("$out"/profile_*.json)
shopt -u nullglob
if (( ${#pt_files[@]} && ${#mpb_files[@]} )); then
  profs=(); (( ${#prof_files[@]} )) && profs=(--profiles "${prof_files[@]}")
  python3 scripts/side_by_side.py --mpbench "${mpb_files[@]}" --pytorch "${pt_files[@]}" \
    "${profs[@]}" --md "$out/side_by_side.md" >/dev/null 2>>"$log"
  side=$(sed '/^## Where the time goes/,$d' "$out/side_by_side.md" 2>/dev/null)
elif [ "$have_torch" = 0 ]; then
  say "no PyTorch on this machine: no side-by-side"
fi

# The tool returns at most 8 files: the JSONs of each kind go into one, keyed by file name
# (scripts/unpack_device_results.py splits them again).
python3 - "$out" <<'PY' 2>>"$log"
import json, os, sys, glob
out = sys.argv[1]
for merged_name, patterns in (("mpbench_results.json",
                               ("*_eager.json", "*_graphs.json", "maxbatch_*.json")),
                              ("pytorch.json", ("pytorch_*.json",)),
                              ("profiles.json", ("profile_*.json", "explain_*.json"))):
    merged = {}
    for p in sorted(f for pat in patterns for f in glob.glob(os.path.join(out, pat))):
        merged[os.path.basename(p)] = json.load(open(p))
        os.remove(p)
    if merged:
        json.dump(merged, open(os.path.join(out, merged_name), "w"))
PY
cat "$out/devices.txt" >>"$log"

{
  echo
  echo "================ device_check summary ($(( $(date +%s) - t0 )) s) ================"
  cat "$out/devices.txt"
  echo "GPU tests:"
  printf '%s' "$tests_summary"
  echo
  printf '%s' "$runs_summary"
  [ -n "$side" ] && printf '\nmpbench vs PyTorch:\n%s\n' "$side"
} | tee -a "$log"
rm -f "$out/devices.txt"
