#!/usr/bin/env bash
# The one prepared script for a GPU machine (DESIGN.md "Working with a GPU"):
#   scripts/device_check.sh OUTDIR
#   scripts/device_check.sh --source-hash   prints the source hash a carried build is held to
#   scripts/device_check.sh --gpu-tests     prints the GPU test binaries a build must have
# 1. Picks the build to test: the portable one carried in .devcarry/ (made by
#    scripts/prepare_device_carry.sh) if its recorded source hash is this tree's and it runs here,
#    else MPBENCH_CHECK_BIN, else a build for the card found (with .deps/ for the header-only and
#    test dependencies such a machine lacks). A stale carry is refused, and the log says so: it
#    would test old code.
# 2. Runs its steps in order of value, each under its own time limit and never past the budget:
#    a. the GPU tests (and the kernel parity tests under memcheck, with MPBENCH_CHECK_SANITIZE=1);
#    b. one config per model family (the first of mnist_mlp, resnet50_conv2, gpt2_small_layer,
#       tiny_mlp, tiny_resnet, bert_base_layer, tiny_transformer of that family among the configs,
#       else the family's first): `mpbench run` in all its modes (plus amp_fp8 for the MLP and
#       transformer configs: no spec's defaults include it), then at once the PyTorch reference on
#       the same config and modes, where this machine has PyTorch, and `mpbench profile` of it
#       (where the time goes, for the rows slower than PyTorch); for the first ResNet config,
#       `mpbench run` again with its pointwise convolutions on cuDNN (MPBENCH_CUDNN_POINTWISE=1)
#       instead of cuBLASLt, the A/B of kernels/cuda/conv.cu's choice; `mpbench profile` of the
#       whole resnet50 (when among the configs);
#    c. `mpbench maxbatch` (fp32 and amp_bf16 under 16 GiB) of resnet50_conv2 and
#       bert_base_layer, `mpbench explain` (fp32, tf32, amp_bf16) of resnet50_conv2 and
#       gpt2_small_layer, when they are among the configs;
#    d. the rest: the other configs the same way (their profiles later; resnet50's run followed
#       by one with the convolution algorithms ranked by timing, MPBENCH_CUDNN_FIND=1, instead of
#       cuDNN's heuristic), the --cuda-graphs rerun of each config, `mpbench profile` of the
#       others.
# 3. Merges each step's output into OUTDIR as soon as it ends (written whole, then renamed; the
#    step's own files stay in a scratch folder outside OUTDIR) and rewrites summary.txt, so that a
#    call cut off at any moment leaves what it did in at most 8 files (the device tool returns 8):
#      device_check.log  summary.txt  gpu_tests.log  runs.txt (mpbench's text output)
#      mpbench_results.json  pytorch.json  profiles.json  (each keyed by the step's file name;
#      scripts/unpack_device_results.py splits them)  side_by_side.md
#    The summary says which steps ran and how they ended, which were skipped for want of time and
#    which were not reached; it is printed last, on SIGTERM and SIGINT too (also when they stop
#    the build or the carry's check: those run in the background, so a signal is taken at once).
# A step starts only when its minimum (a few seconds to 20 s, by kind) fits in what is left of the
# budget minus a reserve for the merge and the summary; then it runs under min(its limit, what is
# left). A step that does not fit is skipped, not started. The PyTorch reference's limit is at
# least 3x the seconds mpbench's run of the config took (on the H200 PyTorch's gpt2_small, 74 s
# in mpbench, was cut at a fixed 120 s). Exit status: 0 once the steps are done,
# whatever they gave (the summary says), 3 without a build to test, 143 or 130 on SIGTERM or SIGINT.
#
# Environment knobs (README "On a GPU machine" splits the work over two calls with them):
#   MPBENCH_CHECK_BUDGET   seconds for the whole script, build included (default 420; the device
#                          tool allows 600 a command)
#   MPBENCH_CHECK_RESERVE  seconds kept back for the final merge and summary (default 10)
#   MPBENCH_CHECK_CONFIGS  the spec files to run (default: configs/*.json), space-separated
#   MPBENCH_CHECK_DONE     summary.txt files of earlier calls: the steps they finished are not run
#                          again (those ok; those FAILED too, unless the build's source differs)
#   MPBENCH_CHECK_FIRST    the configs to run first (default: one per family, as in 2b), a subset
#                          of the configs
#   MPBENCH_CHECK_EPOCHS   N: `mpbench run` and the PyTorch reference train N epochs (default: the
#                          specs' own)
#   MPBENCH_CHECK_TESTS    0 skips the GPU test binaries
#   MPBENCH_CHECK_PYTORCH  0 skips the PyTorch reference (default: run where `import torch` works)
#   MPBENCH_CHECK_GRAPHS   0 skips the --cuda-graphs rerun of each config
#   MPBENCH_CHECK_PROFILE  0 skips `mpbench profile` of each config (and PyTorch's profiled steps)
#   MPBENCH_CHECK_MAXBATCH 0 skips `mpbench maxbatch`
#   MPBENCH_CHECK_EXPLAIN  0 skips `mpbench explain`
#   MPBENCH_CHECK_AB       0 skips the A/B runs of 2b (pointwise convolutions on cuDNN, timed
#                          ranking)
#   MPBENCH_CHECK_SANITIZE 1 reruns the kernel parity tests under compute-sanitizer memcheck
#   MPBENCH_CHECK_DEVICE   cpu runs the configs on the CPU: a dry run of this script's plumbing on
#                          a machine without a GPU (default cuda); the GPU tests still run there
#                          and skip
#   MPBENCH_CHECK_CARRY    the carried build's folder (default .devcarry; a missing one: none)
#   MPBENCH_CHECK_BIN      a build folder (its mpbench, gpu_test_* in it or in its tests/) used
#                          instead of building here when no carried build fits, e.g. build-test
#                          on a machine without a GPU
#   MPBENCH_CHECK_BUILD    0 never builds here: without a fitting carry or MPBENCH_CHECK_BIN, exit 3
#   MPBENCH_CHECK_FAKE_STEP_S  N, for tests of this script: a step that sleeps N s right after the
#                          first configs, deaf to SIGTERM, to try the budget and a kill on a
#                          machine without a GPU
set -uo pipefail

# The hash of what goes into the build, path and content of each file, so that a carried build
# can be matched to the tree it meets. The device machine's copy of the tree may have no .git:
# there the files are found on disk, here git lists the same ones (tracked and untracked, not
# ignored: what the device tool copies). A git that will not run on this tree (one owned by
# another user: "dubious ownership") hashes nothing: the files on disk are taken then too.
source_hash() {
  local parts=(app train models kernels tests CMakeLists.txt)
  if [ -e .git ] && command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -z -co --exclude-standard -- "${parts[@]}"
  else
    find "${parts[@]}" -type f -print0 2>/dev/null
  fi | LC_ALL=C sort -zu | xargs -0 -r sha256sum -- 2>/dev/null | sha256sum | cut -d' ' -f1
}
# The GPU test binaries (tests/CMakeLists.txt names them gpu_<file>): what a build for the card
# must hold, and the carry too.
gpu_tests() {
  local f
  for f in tests/gpu/*/test_*.cpp; do echo "gpu_$(basename "$f" .cpp)"; done
}
if [ "${1:-}" = --source-hash ] || [ "${1:-}" = --gpu-tests ]; then
  cd "$(dirname "$0")/.." || exit 2
  if [ "$1" = --source-hash ]; then source_hash; else gpu_tests; fi
  exit
fi

out=${1:?usage: scripts/device_check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Knob paths may be relative to the caller's directory or to the repository root.
abs_dir() { if [ -n "$1" ] && [ -d "$1" ]; then (cd "$1" && pwd); else echo "$1"; fi; }
bin_knob=$(abs_dir "${MPBENCH_CHECK_BIN:-}")
carry=$(abs_dir "${MPBENCH_CHECK_CARRY:-}")
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
carry=${carry:-$root/.devcarry}
[ -n "$bin_knob" ] && bin_knob=$(abs_dir "$bin_knob")
log="$out/device_check.log"
exec 3>&1 4>&2  # the script's output, which on_signal restores
: >"$log"
say() { echo "[device_check] $*" | tee -a "$log"; }
t0=$(date +%s)
budget=${MPBENCH_CHECK_BUDGET:-420}
reserve=${MPBENCH_CHECK_RESERVE:-10}
deadline=$(( t0 + budget ))
grace=5  # a step that ignores SIGTERM at its limit gets SIGKILL this much later
# Seconds a step may still take: the budget's rest less the reserve and the kill grace.
left() { echo $(( deadline - $(date +%s) - reserve - grace )); }

# Per-step files live outside OUTDIR. A merged file is written whole elsewhere and renamed into
# OUTDIR, which is atomic only within one filesystem: where the scratch folder is on another, the
# temporaries go into a folder beside OUTDIR, and only where none can be made there on OUTDIR's
# filesystem into OUTDIR itself (a dot file, there for the moment of the write: a kill in that
# moment would leave a ninth file, which could push a result out of the eight the device tool
# brings back).
scratch=$(mktemp -d "${TMPDIR:-/tmp}/device_check.XXXXXX")
tmpd=$scratch
if [ "$(stat -c %d "$scratch")" != "$(stat -c %d "$out")" ]; then
  tmpd=$(mktemp -d "$(dirname "$out")/.device_check_tmp.XXXXXX" 2>/dev/null) || tmpd=$out
  # OUTDIR may be a mount point of its own, off its parent's filesystem too.
  if [ "$(stat -c %d "$tmpd")" != "$(stat -c %d "$out")" ]; then
    rmdir "$tmpd"
    tmpd=$out
  fi
fi
trap 'rm -rf "$scratch"; [ "$tmpd" = "$out" ] || rm -rf "$tmpd"' EXIT
# What the summary reads, set before anything that a signal may interrupt.
s_kind=() s_arg=() s_label=() s_limit=() s_need=() s_status=() s_secs=()
off=""         # what the knobs or the machine leave out, for the summary
build_note=""  # the build under test
build_src=""   # its source hash's first 12 digits, where it is a carry that records one
phase=" before the steps began"  # for the summary of a signal that comes before them
step_pid=""    # the running step (or the setup's command), which a signal stops
# Commands (the setup's, the steps) run in the background and are waited for, so that a signal
# stops them at once: bash runs a trap only after a foreground command ends. started sets
# step_pid, which the signal handler stops; finished waits for it and returns its code.
started() {
  "$@" 3>&- 4>&- &
  step_pid=$!
}
finished() {
  wait "$step_pid"
  local rc=$?
  step_pid=""
  return "$rc"
}
waited() { started "$@" && finished; }

# ---- merging as the run goes --------------------------------------------------------------------
# JSON files into one merged file in OUTDIR, keyed by file name: the merged file is read, the new
# entries added, and the whole written to a temporary and renamed over it, so it is never half
# written and no input is lost before the file holding it exists.
merge_json() {
  local merged=$1; shift
  python3 - "$out/$merged" "$tmpd" "$@" <<'PY' 2>>"$log"
import json, os, sys
merged_path, tmpdir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    with open(merged_path) as f:
        merged = json.load(f)
except FileNotFoundError:
    merged = {}
added = 0
for path in files:
    if not os.path.exists(path):  # the step wrote none
        continue
    try:
        with open(path) as f:
            merged[os.path.basename(path)] = json.load(f)
        added += 1
    except ValueError as e:  # a step cut while writing it
        print(f"device_check: {os.path.basename(path)} not merged: {e}", file=sys.stderr)
if not added:
    sys.exit(0)
tmp = os.path.join(tmpdir, "." + os.path.basename(merged_path) + ".part")
with open(tmp, "w") as f:
    json.dump(merged, f)
os.replace(tmp, merged_path)
PY
}
# A text file written whole elsewhere, moved into OUTDIR in one rename.
put() { cp "$1" "$tmpd/.$2.part" && mv -f "$tmpd/.$2.part" "$out/$2"; }

# mpbench and PyTorch side by side, with where the time goes for the rows where mpbench is slower.
side_by_side() {
  shopt -s nullglob
  local mpb=("$scratch"/*_eager.json "$scratch"/*_graphs.json) pt=("$scratch"/pytorch_*.json)
  local prof=("$scratch"/profile_*.json)
  shopt -u nullglob
  (( ${#pt[@]} && ${#mpb[@]} )) || return 0
  local profs=(); (( ${#prof[@]} )) && profs=(--profiles "${prof[@]}")
  python3 scripts/side_by_side.py --mpbench "${mpb[@]}" --pytorch "${pt[@]}" \
    ${profs[@]+"${profs[@]}"} --md "$scratch/side_by_side.md" >/dev/null 2>>"$log" &&
    put "$scratch/side_by_side.md" side_by_side.md
}

tests_summary=""
state="in progress"
write_summary() {
  local f="$scratch/summary.txt" i n_ok=0 n_bad=0 n_run=0 n_skip=0 n_left=0 n_prev=0 todo=""
  {
    echo "============ device_check summary: $state, $(( $(date +%s) - t0 )) s of the" \
      "$budget s budget ============"
    echo "build: $build_note"
    cat "$scratch/devices.txt" 2>/dev/null
    if [ -n "$tests_summary" ]; then echo "GPU tests:"; printf '%s' "$tests_summary"; fi
    echo
    cat "$scratch/runs_summary.txt" 2>/dev/null
    if [ -f "$scratch/side_by_side.md" ]; then
      printf '\nmpbench vs PyTorch:\n'
      sed '/^## Where the time goes/,$d' "$scratch/side_by_side.md"
    fi
    echo
    echo "Steps, in the order planned (status, seconds, step):"
    for i in "${!s_kind[@]}"; do
      printf '  %-40s %5s  %s\n' "${s_status[i]}" "${s_secs[i]}" "${s_label[i]}"
      case "${s_status[i]}" in
        ok*) n_ok=$(( n_ok + 1 )) ;;
        running*) n_run=$(( n_run + 1 )) ;;
        SKIPPED*) n_skip=$(( n_skip + 1 )) ;;
        done*) n_prev=$(( n_prev + 1 )) ;;
        "not reached"*) n_left=$(( n_left + 1 )) ;;
        *) n_bad=$(( n_bad + 1 )) ;;
      esac
      # The configs with a step still to do, for a next call.
      case "${s_kind[i]}:${s_status[i]}" in
        fake:* | test:* | memcheck:* | *:ok* | *:FAILED* | *:done*) ;;
        *) case " $todo " in *" ${s_arg[i]} "*) ;; *) todo+=" ${s_arg[i]}" ;; esac ;;
      esac
    done
    echo "Steps: $n_ok ok, $n_bad failed, cut or interrupted, $n_run running, $n_skip skipped for" \
      "want of time, $n_left not reached."
    (( n_prev > 0 )) && echo "Steps done in an earlier call (MPBENCH_CHECK_DONE), not run again:" \
      "$n_prev."
    [ -n "$off" ] && echo "Left out:$off"
    [ -n "$todo" ] && echo "Configs with steps left: MPBENCH_CHECK_CONFIGS=\"${todo# }\""
  } >"$f"
  put "$f" summary.txt
}

# ---- the steps ----------------------------------------------------------------------------------
# Sets cmd (the step's command) and o (where its output goes, in the scratch folder).
prepare() {
  local kind=$1 a=$2 name extra=()
  name=$(name_of "$a")
  local epochs=(); [ -n "${MPBENCH_CHECK_EPOCHS:-}" ] && epochs=(--epochs "$MPBENCH_CHECK_EPOCHS")
  o="$scratch/$kind.$name.txt"
  case $kind in
    test)
      o="$scratch/$name.log"
      cmd=("$a" --gtest_color=no) ;;
    memcheck)
      o="$scratch/gpu_test_memcheck_$name.log"
      # Without the cases that take long under it.
      local slow=FamilyOpsParity.AttentionSoftmax:FamilyOpsParity.BatchNormResNetShapes
      cmd=("$sanitizer" --tool memcheck --error-exitcode 9 "$a" --gtest_color=no
           "--gtest_filter=-*OutOfMemory*:$slow") ;;
    run | graphs | cudnn_pointwise | cudnn_find)
      local variant=eager runner=()
      [ "$kind" != run ] && variant=$kind
      [ "$kind" = graphs ] && extra=(--cuda-graphs)
      [ "$kind" = cudnn_pointwise ] && runner=(env MPBENCH_CUDNN_POINTWISE=1)
      [ "$kind" = cudnn_find ] && runner=(env MPBENCH_CUDNN_FIND=1)
      cmd=(${runner[@]+"${runner[@]}"} "$bin/mpbench" run "$a" --device "$mdev" --quiet
           ${extra[@]+"${extra[@]}"} ${modes[$a]:-}
           ${epochs[@]+"${epochs[@]}"} --json "$scratch/${name}_$variant.json") ;;
    pytorch)
      # The exported dataset (8 GB for resnet50_conv3) goes after each config.
      cmd=(env PYTHONUNBUFFERED=1 python3 scripts/pytorch_reference.py "$a" --device "$dev"
           --mpbench "$bin/mpbench" --data-dir "$scratch/data" ${modes[$a]:-}
           ${epochs[@]+"${epochs[@]}"} --out "$scratch/pytorch_$name.json"
           --profile-steps "$([ "${MPBENCH_CHECK_PROFILE:-1}" = 0 ] && echo 0 || echo 5)") ;;
    profile)
      cmd=("$bin/mpbench" profile "$a" --device "$mdev" --quiet --steps 5 --top 15
           --json "$scratch/profile_$name.json") ;;
    maxbatch)
      cmd=("$bin/mpbench" maxbatch "$a" --device "$mdev" --precisions fp32,amp_bf16
           --memory-limit 16GiB --multiple 8 --json "$scratch/maxbatch_$name.json") ;;
    explain)
      cmd=("$bin/mpbench" explain "$a" --device "$mdev" --precisions fp32,tf32,amp_bf16 --steps 5
           --quiet --json "$scratch/explain_$name.json") ;;
    fake)
      # Deaf to SIGTERM, as a hung CUDA call can be: only the limit's SIGKILL ends it.
      o="$scratch/fake.txt"
      cmd=(bash -c 'trap "" TERM; exec sleep "$0"' "$a") ;;
  esac
}
# Merges what step i left (its JSON first: the most valuable) and says how it ended.
finish_step() {
  local i=$1 rc=$2 kind=${s_kind[$1]} a=${s_arg[$1]} name
  name=$(name_of "$a")
  case $kind in
    test | memcheck)
      local passed failed skipped
      passed=$(grep -c '^\[       OK \]' "$o")
      # Each test's own line, which ends in its time: not gtest's closing list of them.
      failed=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$o")
      skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$o")
      if [ "$kind" = test ]; then
        tests_summary+=$(printf '%-28s rc=%-3s passed=%-4s failed=%-4s skipped=%s' "$name" "$rc" \
          "$passed" "$failed" "$skipped")$'\n'
      else
        tests_summary+=$(printf '%-28s memcheck rc=%s: %s' "$name" "$rc" \
          "$(grep -m1 'ERROR SUMMARY' "$o" || echo 'no summary')")$'\n'
      fi
      # And what a test prints for the log to settle (CudaParity.Fp8GemmWithScalesFourBytesApart).
      grep -E '^\[  FAILED  \]|Failure|error|^\[ FP8 scales' "$o" | head -30 >>"$log"
      cat "$o" >>"$out/gpu_tests.log" ;;
    run | graphs | cudnn_pointwise | cudnn_find)
      local variant=eager; [ "$kind" != run ] && variant=$kind
      merge_json mpbench_results.json "$scratch/${name}_$variant.json"
      { echo "== $name ($variant): rc=$rc, ${s_secs[i]} s"; cat "$o"; } \
        >>"$scratch/runs_summary.txt"
      { echo "== mpbench run $name ($variant): rc=$rc"; cat "$o"; } >>"$out/runs.txt" ;;
    pytorch)
      merge_json pytorch.json "$scratch/pytorch_$name.json"
      rm -rf "$scratch/data"
      cat "$o" >>"$log"
      side_by_side ;;
    profile | explain)
      merge_json profiles.json "$scratch/${kind}_$name.json"
      { echo "== mpbench $kind $name: rc=$rc"; cat "$o"; } >>"$out/runs.txt"
      [ "$kind" = profile ] && side_by_side ;;
    maxbatch)
      merge_json mpbench_results.json "$scratch/maxbatch_$name.json"
      { echo "== mpbench maxbatch $name: rc=$rc"; cat "$o"; } >>"$out/runs.txt" ;;
  esac
  return 0
}

# SIGTERM or SIGINT (the device tool's limit, or a hand): stop the step, keep what it wrote, and
# print the summary all the same.
cur=-1
on_signal() {
  trap '' TERM INT
  # The script's own output, not that of a setup command's redirection it may interrupt.
  exec 1>&3 2>&4
  if [ -n "${step_pid:-}" ]; then
    kill -TERM "$step_pid" 2>/dev/null
    wait "$step_pid" 2>/dev/null
    if (( cur >= 0 )); then
      s_status[cur]="INTERRUPTED by SIG$1"
      s_secs[cur]=$(( $(date +%s) - step_t0 ))
      finish_step "$cur" 143
    fi
  fi
  state="interrupted by SIG$1$phase"
  say "interrupted by SIG$1"
  side_by_side
  write_summary
  tee -a "$log" <"$out/summary.txt"
  [ "$1" = INT ] && exit 130
  exit 143
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

dev=${MPBENCH_CHECK_DEVICE:-cuda}
cc=90
if command -v nvidia-smi >/dev/null; then
  say "gpu: $(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version \
    --format=csv,noheader 2>&1 | head -1)"
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
  cc=${cc:-90}
else
  say "gpu: no nvidia-smi on this machine"
fi

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
# PyTorch's own first: where both are there, both tools then run the same cuBLAS and cuDNN (and
# PyTorch does not meet an older cuDNN of the toolkit's before its own).
export LD_LIBRARY_PATH="${py_libs:+$py_libs:}$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MPBENCH_SOURCE_DIR="$root"

# ---- the build to test --------------------------------------------------------------------------
bin=""
if [ -f "$carry/bins.tar.xz" ]; then
  want=$(awk '$1 == "sha256" { print $2 }' "$carry/source.txt" 2>/dev/null)
  built_from=$(awk '$1 == "commit" { $1 = ""; print substr($0, 2) }' "$carry/source.txt" \
    2>/dev/null)
  have=$(source_hash)
  if [ -z "$want" ]; then
    say "carried build records no source ($carry/source.txt): not used, it may be old code"
  elif [ "$want" != "$have" ]; then
    say "carried build is STALE: built from ${built_from:-?} with source hash ${want:0:12}, this" \
      "tree hashes ${have:0:12}: not used (scripts/prepare_device_carry.sh makes a fresh one)"
  else
    mkdir -p "$scratch/carried"
    tar -xJf "$carry/bins.tar.xz" -C "$scratch/carried" 2>>"$log"
    if [ -x "$scratch/carried/mpbench" ] &&
       waited timeout 30 "$scratch/carried/mpbench" --version >>"$log" 2>&1; then
      bin="$scratch/carried"
      build_src=${want:0:12}
      build_note="carried build of ${built_from:-?} (source ${want:0:12}, matches this tree):"
      build_note+=" $("$bin/mpbench" --version)"
    else
      say "carried build does not run here"
      ldd "$scratch/carried/mpbench" >>"$log" 2>&1 || true
    fi
  fi
fi
if [ -z "$bin" ] && [ -n "$bin_knob" ]; then
  if [ -x "$bin_knob/mpbench" ]; then
    bin=$bin_knob
    build_note="MPBENCH_CHECK_BIN=$bin_knob instead of building: $("$bin/mpbench" --version 2>&1)"
  else
    say "MPBENCH_CHECK_BIN=$bin_knob has no executable mpbench"
  fi
fi
if [ -z "$bin" ] && [ "${MPBENCH_CHECK_BUILD:-1}" = 0 ]; then
  say "no build to test and MPBENCH_CHECK_BUILD=0: stopping"
  echo "device_check: no build to test (MPBENCH_CHECK_BUILD=0): nothing tested" >"$out/summary.txt"
  exit 3
fi
if [ -z "$bin" ]; then
  say "building from source for sm_$cc"
  build=/tmp/mpbench-build
  # As the carried build is made (prepare_device_carry.sh): portable, no MPI, no oneDNN, with
  # .deps/ for what such a machine lacks (OpenBLAS from its archive there).
  args=(-DCMAKE_BUILD_TYPE=Release -DMPBENCH_CUDA=ON -DMPBENCH_PORTABLE=ON -DMPBENCH_BUILD_BENCH=OFF
        -DMPBENCH_MPI=OFF -DMPBENCH_ONEDNN=OFF -DCMAKE_CUDA_ARCHITECTURES="$cc")
  [ -d .deps/usr ] && args+=(-DCMAKE_PREFIX_PATH="$root/.deps/usr")
  if [ -f .deps/openblas.tar.xz ]; then
    mkdir -p "$scratch/openblas" && tar -xJf .deps/openblas.tar.xz -C "$scratch/openblas"
    blas=$scratch/openblas/usr
    args+=(-DCBLAS_INCLUDE_DIR="$blas/include/x86_64-linux-gnu/openblas-pthread"
           -DOPENBLAS_LIBRARY="$blas/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a")
  fi
  # cuDNN from PyTorch's pip package where the toolkit has none: without it no convolution runs.
  if [ ! -f /usr/local/cuda/include/cudnn.h ]; then
    cudnn_dir=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
    cudnn_lib=$(ls "$cudnn_dir"/lib/libcudnn.so* 2>/dev/null | head -1)
    if [ -f "$cudnn_dir/include/cudnn.h" ] && [ -n "$cudnn_lib" ]; then
      args+=(-DCUDNN_INCLUDE_DIR="$cudnn_dir/include" -DCUDNN_LIBRARY="$cudnn_lib")
    fi
  fi
  command -v ninja >/dev/null && args+=(-G Ninja)
  # mpbench and the GPU test binaries only.
  mapfile -t targets < <(gpu_tests)
  targets=(mpbench "${targets[@]}")
  phase=" in the build"
  if waited timeout -k "$grace" "$(( $(left) > 1 ? $(left) : 1 ))" \
       cmake -S . -B "$build" "${args[@]}" >>"$log" 2>&1 &&
     waited timeout -k "$grace" "$(( $(left) > 1 ? $(left) : 1 ))" \
       cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >>"$log" 2>&1; then
    phase=" before the steps began"
    if grep -q '^CUDNN_LIBRARY:FILEPATH=.*NOTFOUND' "$build/CMakeCache.txt"; then
      say "WARNING: built without cuDNN (not in the toolkit nor in PyTorch's packages):" \
        "every convolution will fail"
    fi
    mkdir -p "$build/carry"
    cp "$build/mpbench" "$build/carry/"
    find "$build/tests" -maxdepth 1 -type f -name 'gpu_test_*' -perm -u+x \
      -exec cp {} "$build/carry/" \;
    bin="$build/carry"
    build_note="built here for sm_$cc in $(( $(date +%s) - t0 )) s: $("$bin/mpbench" --version)"
  else
    say "BUILD FAILED or cut at the budget (see device_check.log)"
    echo "device_check: BUILD FAILED or cut at the budget: nothing tested" >"$out/summary.txt"
    tail -40 "$log"
    exit 3
  fi
fi
say "testing the $build_note"
# The GPU tests that run the CLI run this mpbench, not the path of the build they came from.
export MPBENCH_TEST_EXE="$bin/mpbench"

waited timeout 30 "$bin/mpbench" devices >"$scratch/devices.txt" 2>&1
cat "$scratch/devices.txt" >>"$log"
# mpbench's device: the GPU; on a dry run on the CPU, its native backend, or the reference where
# this build has none (the sanitizer build). PyTorch's stays $dev.
mdev=$dev
if [ "$dev" = cpu ] && grep -q "native backend: none" "$scratch/devices.txt"; then
  mdev=reference
fi

# ---- the plan -----------------------------------------------------------------------------------
name_of() { basename "$1" .json; }
# Each config once, by its path from the tree's root (MPBENCH_CHECK_FIRST may spell it otherwise)
# and by name: a second config of a name (configs/cpu/mnist_mlp.json beside configs/mnist_mlp.json)
# would write the first one's result files, so it is left out, and said.
canon() { realpath -m --relative-to=. "$1"; }
declare -A config_of_name
configs="" dropped=""
for cfg in ${MPBENCH_CHECK_CONFIGS:-$(ls configs/*.json)}; do
  cfg=$(canon "$cfg")
  n=$(name_of "$cfg")
  if [ -n "${config_of_name[$n]:-}" ]; then
    [ "${config_of_name[$n]}" = "$cfg" ] || dropped+=" $cfg (${config_of_name[$n]} has its name);"
    continue
  fi
  config_of_name[$n]=$cfg
  configs+=" $cfg"
done
# Each config's model type and the --precisions of its runs: its own modes plus amp_fp8 for the
# families whose Linear layers mpbench runs in FP8 (mlp, transformer), since no spec's defaults
# include it; nothing (the spec's modes) for the others. mpbench and PyTorch both get it, so their
# rows pair up.
declare -A family modes
while IFS=$'\t' read -r cfg type m; do
  family[$cfg]=$type
  modes[$cfg]=$m
done < <(python3 - $configs <<'PY' 2>>"$log"
import json, sys
for path in sys.argv[1:]:
    try:  # one config that cannot be read costs its own steps only (mpbench says why)
        spec = json.load(open(path))
        kind, modes = spec["model"]["type"], ""
    except Exception as e:  # noqa: BLE001
        print(f"[device_check] {path}: cannot read: {type(e).__name__}: {e}", file=sys.stderr)
        print(f"{path}\t?\t")
        continue
    if kind in ("mlp", "transformer"):
        own = spec.get("precisions") or ["fp32", "tf32", "amp_fp16", "amp_bf16"]
        modes = "--precisions " + ",".join(dict.fromkeys(own + ["amp_fp8"]))
    print(f"{path}\t{kind}\t{modes}")
PY
)
# One config per family first: the preferred ones in the order of the list, then the first config
# of each family that has none of them.
if [ -n "${MPBENCH_CHECK_FIRST:-}" ]; then
  first=""
  for cfg in $MPBENCH_CHECK_FIRST; do  # a subset of the configs, or said
    cfg=$(canon "$cfg")
    case " $configs " in
      *" $cfg "*) first+=" $cfg" ;;
      *) dropped+=" $cfg (MPBENCH_CHECK_FIRST: not among the configs);" ;;
    esac
  done
else
  first="" taken=" "
  for pref in mnist_mlp resnet50_conv2 gpt2_small_layer tiny_mlp tiny_resnet bert_base_layer \
              tiny_transformer; do
    for cfg in $configs; do
      [ "$(name_of "$cfg")" = "$pref" ] || continue
      case "$taken" in *" ${family[$cfg]:-?} "*) continue ;; esac
      first+=" $cfg" taken+="${family[$cfg]:-?} "
    done
  done
  for cfg in $configs; do
    case "$taken" in *" ${family[$cfg]:-?} "*) continue ;; esac
    first+=" $cfg" taken+="${family[$cfg]:-?} "
  done
fi
first=$(echo $first)
rest=$(for cfg in $configs; do
  case " $first " in *" $cfg "*) ;; *) echo "$cfg" ;; esac
done)
ordered="$first $rest"

have_torch=0
if [ "${MPBENCH_CHECK_PYTORCH:-1}" != 0 ] && [ -f scripts/pytorch_reference.py ] &&
   python3 -c 'import torch' 2>/dev/null; then
  have_torch=1
fi
off+=$dropped
for cfg in $configs; do
  [ "${family[$cfg]:-?}" = "?" ] && off+=" $cfg unreadable (device_check.log);"
done
[ "$have_torch" = 0 ] && off+=" PyTorch reference (no torch here, or MPBENCH_CHECK_PYTORCH=0);"
# A step: kind, config (or test binary), label, limit and minimum in seconds. Minimums: what a
# step needs to be worth starting.
declare -A run_secs  # each config's `mpbench run` seconds, which its PyTorch step's limit follows
add() {
  s_kind+=("$1"); s_arg+=("$2"); s_label+=("$3"); s_limit+=("$4"); s_need+=("$5")
  s_status+=("not reached"); s_secs+=("")
}
if [ "${MPBENCH_CHECK_TESTS:-1}" != 0 ]; then
  for t in "$bin"/gpu_test_* "$bin"/tests/gpu_test_*; do
    [ -f "$t" ] && [ -x "$t" ] && add test "$t" "test $(basename "$t")" 200 20
  done
  # A build without some of them (a carry or MPBENCH_CHECK_BIN made before they existed) would
  # leave them out in silence.
  missing=""
  for name in $(gpu_tests); do
    [ -x "$bin/$name" ] || [ -x "$bin/tests/$name" ] || missing+=" $name"
  done
  [ -n "$missing" ] && off+=" GPU tests not in $bin:$missing;"
  # The kernel parity tests again under compute-sanitizer's memcheck (out-of-bounds and
  # misaligned accesses in kernels that ran clean).
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ "${MPBENCH_CHECK_SANITIZE:-0}" = 1 ] && [ -z "$sanitizer" ]; then
    off+=" memcheck (no compute-sanitizer here);"
  fi
  if [ "${MPBENCH_CHECK_SANITIZE:-0}" = 1 ] && [ -n "$sanitizer" ]; then
    for name in gpu_test_cuda_parity gpu_test_family_ops_parity gpu_test_conv_parity; do
      for t in "$bin/$name" "$bin/tests/$name"; do
        [ -x "$t" ] && add memcheck "$t" "memcheck $name" 150 30 && break
      done
    done
  fi
else
  off+=" GPU tests (MPBENCH_CHECK_TESTS=0);"
fi
add_pair() {
  add run "$1" "run $(name_of "$1") eager" 120 10
  [ "$have_torch" = 1 ] && add pytorch "$1" "pytorch $(name_of "$1")" 120 15
  # Whether cuDNN's heuristic picks slow algorithms for the whole ResNet-50: its run again with
  # them ranked by timing (MPBENCH_CUDNN_FIND=1), right after the eager one.
  if [ "${MPBENCH_CHECK_AB:-1}" != 0 ] && [ "$(name_of "$1")" = resnet50 ]; then
    add cudnn_find "$1" "run $(name_of "$1") cudnn find" 120 10
  fi
  return 0
}
add_profile() {
  [ "${MPBENCH_CHECK_PROFILE:-1}" != 0 ] && add profile "$1" "profile $(name_of "$1")" 60 5
  return 0
}
for cfg in $first; do
  add_pair "$cfg"
  add_profile "$cfg"
done
# The pointwise convolutions' other path, beside the run above in the same call.
if [ "${MPBENCH_CHECK_AB:-1}" != 0 ]; then
  for cfg in $first; do
    [ "${family[$cfg]:-}" = resnet_bottleneck ] || continue
    add cudnn_pointwise "$cfg" "run $(name_of "$cfg") cudnn pointwise" 120 10
    break
  done
else
  off+=" A/B runs (MPBENCH_CHECK_AB=0);"
fi
# The whole ResNet-50's profile early: it was 1.36-1.39x PyTorch on the H200 where its stages
# were 1.1-1.3x, so the stem (7x7 conv on 3 channels, max pool) is the first suspect, and only
# the whole network's profile shows it.
early_profiles=""
if [ "${MPBENCH_CHECK_PROFILE:-1}" != 0 ]; then
  for cfg in $rest; do
    [ "$(name_of "$cfg")" = resnet50 ] || continue
    add_profile "$cfg"
    early_profiles+=" $cfg"
  done
fi
# Then what has run on no GPU yet before more configs: the largest batch per mode under a 16 GB
# card's memory, for the two configs the memory issue names (the tracked training memory is
# checked against the device-wide peak there too), and explain.
if [ "${MPBENCH_CHECK_MAXBATCH:-1}" != 0 ]; then
  for cfg in $ordered; do
    case "$(name_of "$cfg")" in
      resnet50_conv2 | bert_base_layer) add maxbatch "$cfg" "maxbatch $(name_of "$cfg")" 90 10 ;;
    esac
  done
else
  off+=" maxbatch (MPBENCH_CHECK_MAXBATCH=0);"
fi
# Why each mode helped or didn't: on a card in the datasheet table explain gives the Amdahl
# bound beside the measured speedup, which the CPU cannot.
if [ "${MPBENCH_CHECK_EXPLAIN:-1}" != 0 ]; then
  for cfg in $ordered; do
    case "$(name_of "$cfg")" in
      resnet50_conv2 | gpt2_small_layer) add explain "$cfg" "explain $(name_of "$cfg")" 60 5 ;;
    esac
  done
else
  off+=" explain (MPBENCH_CHECK_EXPLAIN=0);"
fi
fake=${MPBENCH_CHECK_FAKE_STEP_S:-0}
(( fake > 0 )) && add fake "$fake" "fake step (sleep $fake s)" $(( fake + 5 )) 1
for cfg in $rest; do add_pair "$cfg"; done
if [ "${MPBENCH_CHECK_GRAPHS:-1}" != 0 ]; then
  for cfg in $ordered; do add graphs "$cfg" "run $(name_of "$cfg") graphs" 120 10; done
else
  off+=" --cuda-graphs reruns (MPBENCH_CHECK_GRAPHS=0);"
fi
# Where each other config's step time goes, op by op, for the rows slower than PyTorch.
if [ "${MPBENCH_CHECK_PROFILE:-1}" != 0 ]; then
  for cfg in $rest; do
    case " $early_profiles " in *" $cfg "*) ;; *) add_profile "$cfg" ;; esac
  done
else
  off+=" profiles (MPBENCH_CHECK_PROFILE=0);"
fi
# Steps an earlier call finished (MPBENCH_CHECK_DONE: its summary.txt, or several) are not run
# again: those that ended ok, and those that FAILED when the build is the same one (same source
# hash; another build, a fix between the calls, runs them again). Cut, interrupted, skipped and
# unreached steps run.
n_done=0
for f in ${MPBENCH_CHECK_DONE:-}; do
  if [ ! -r "$f" ] || ! grep -q '^Steps, in the order planned' "$f"; then
    off+=" MPBENCH_CHECK_DONE $f (no device_check summary);"
    continue
  fi
  then_src=$(sed -n 's/^build: .*(source \([0-9a-f]\{12\}\).*/\1/p' "$f" | head -1)
  same_build=1
  if [ -n "$then_src" ] && [ "$then_src" != "${build_src:-?}" ]; then
    same_build=0
    say "$f: another build (source $then_src, this one ${build_src:-not a carry}): its failed" \
      "steps run again"
  fi
  re='^  (done earlier \()?(ok|FAILED rc=[0-9]+)\)? +([0-9]+)  (.+)$'
  while IFS= read -r line; do
    [[ $line =~ $re ]] || continue
    how=${BASH_REMATCH[2]} secs=${BASH_REMATCH[3]} label=${BASH_REMATCH[4]}
    [ "$how" != ok ] && [ "$same_build" = 0 ] && continue
    for i in "${!s_label[@]}"; do
      [ "${s_label[i]}" = "$label" ] && [ "${s_status[i]}" = "not reached" ] || continue
      s_status[i]="done earlier ($how)" s_secs[i]=$secs n_done=$(( n_done + 1 ))
      [ "${s_kind[i]}" = run ] && run_secs[${s_arg[i]}]=$secs
    done
  done <"$f"
done
(( n_done > 0 )) && say "$n_done steps done in an earlier call (MPBENCH_CHECK_DONE): not run again"
say "plan: ${#s_kind[@]} steps in $budget s, the first $first"
printf '[device_check] the steps:%s\n' "$(printf ' %s,' ${s_label[@]+"${s_label[@]}"})" >>"$log"


phase=""
write_summary
for i in "${!s_kind[@]}"; do
  case ${s_status[i]} in done*) continue ;; esac
  room=$(left)
  if (( room < s_need[i] )); then
    s_status[i]="SKIPPED (${room} s left, needs ${s_need[i]})"
    # In the log, not on the screen: the summary names them all, and the screen's tail is what
    # the device tool brings back.
    echo "[device_check] skipped ${s_label[i]}: ${room} s left of the budget, it needs" \
      "at least ${s_need[i]}" >>"$log"
    write_summary
    continue
  fi
  lim=${s_limit[i]}
  if [ "${s_kind[i]}" = pytorch ] && [ -n "${run_secs[${s_arg[i]}]:-}" ] &&
     (( 3 * run_secs[${s_arg[i]}] > lim )); then
    lim=$(( 3 * run_secs[${s_arg[i]}] ))
  fi
  (( room < lim )) && lim=$room
  prepare "${s_kind[i]}" "${s_arg[i]}"
  step_t0=$(date +%s)
  started timeout -k "$grace" "$lim" "${cmd[@]}" >"$o" 2>&1 </dev/null
  cur=$i
  s_status[i]="running (limit $lim s)"
  echo "[device_check] started ${s_label[i]}, limit $lim s" >>"$log"
  # Only now: a signal that follows the summary's "running" finds the step's pid to stop.
  write_summary
  finished
  rc=$?
  s_secs[i]=$(( $(date +%s) - step_t0 ))
  case $rc in
    0) s_status[i]="ok" ;;
    124 | 137) s_status[i]="CUT at its $lim s limit" ;;
    *) s_status[i]="FAILED rc=$rc" ;;
  esac
  say "${s_label[i]}: ${s_status[i]}, ${s_secs[i]} s"
  [ "${s_kind[i]}" = run ] && run_secs[${s_arg[i]}]=${s_secs[i]}
  finish_step "$i" "$rc"
  write_summary
done
cur=-1

state="finished"
side_by_side
write_summary
tee -a "$log" <"$out/summary.txt"
