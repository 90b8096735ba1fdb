#!/usr/bin/env python3
"""Unpacks what scripts/device_check.sh wrote into OUTDIR (as fetched back from a GPU machine)
into a results folder such as results/h200/, in the layout results/README.md describes.

    scripts/unpack_device_results.py FROM_DIR [FROM_DIR ...] --to results/h200

device_check.sh merges files because the device tool returns at most 8: mpbench_results.json
(every `mpbench run --json` and `mpbench maxbatch --json`), pytorch.json (every
pytorch_reference.py --out) and profiles.json (every `mpbench profile --json` and
`mpbench explain --json`), each keyed by file name. They are split back into
<config>_eager.json / <config>_graphs.json / <config>_cudnn_pointwise.json and
<config>_cudnn_find.json (the A/B runs: pointwise convolutions on cuDNN, algorithms ranked by
timing), maxbatch_<config>.json, pytorch_<config>.json,
profile_<config>.json and explain_<config>.json. device_check.sh rewrites them whole after every
step, so a call cut off at its limit still brings back files that parse.
Logs and text (device_check.log, summary.txt, gpu_tests.log, runs.txt) are copied, the later
call's name suffixed with its index when two calls wrote the same file. Then side_by_side.md is
remade over everything that was unpacked. Standard library only.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"unpack_device_results: {path}: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sources", nargs="+", metavar="FROM_DIR")
    ap.add_argument("--to", required=True, help="results folder, e.g. results/h200")
    a = ap.parse_args()
    for src in a.sources:
        if not os.path.isdir(src):
            sys.exit(f"unpack_device_results: {src}: not a directory")
    os.makedirs(a.to, exist_ok=True)

    written = []
    for i, src in enumerate(a.sources):
        for name in ("mpbench_results.json", "pytorch.json", "profiles.json"):
            path = os.path.join(src, name)
            if not os.path.exists(path):
                continue
            for fname, doc in load(path).items():
                write_json(os.path.join(a.to, fname), doc)
                written.append(fname)
        for path in sorted(glob.glob(os.path.join(src, "*.log")) +
                           glob.glob(os.path.join(src, "*.txt"))):
            base = os.path.basename(path)
            dest = os.path.join(a.to, base)
            if i > 0 and os.path.exists(dest):
                stem, ext = os.path.splitext(base)
                dest = os.path.join(a.to, f"{stem}_{i + 1}{ext}")
            shutil.copyfile(path, dest)
            written.append(os.path.basename(dest))

    runs = sorted(glob.glob(os.path.join(a.to, "*_eager.json")) +
                  glob.glob(os.path.join(a.to, "*_graphs.json")))
    pytorch = sorted(glob.glob(os.path.join(a.to, "pytorch_*.json")))
    profiles = sorted(glob.glob(os.path.join(a.to, "profile_*.json")))
    if runs and pytorch:
        cmd = [sys.executable, os.path.join(HERE, "side_by_side.py"), "--mpbench", *runs,
               "--pytorch", *pytorch, "--md", os.path.join(a.to, "side_by_side.md")]
        if profiles:
            cmd += ["--profiles", *profiles]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        written.append("side_by_side.md")
    for w in written:
        print(os.path.join(a.to, w))
    return 0


if __name__ == "__main__":
    sys.exit(main())
