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
Logs and text (device_check.log, summary.txt, gpu_tests.log, runs.txt) are copied; where --to
holds another file of that name already (another call's, from this unpack or an earlier one),
under the name suffixed _2, _3, ... that is free, so that no call's log replaces another's.
Then side_by_side.md is remade over every run in --to, this unpack's and any an earlier one
left there. Standard library only.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

from script_io import BadInput, ScriptError, read_json_object, run_main, write_output

HERE = os.path.dirname(os.path.abspath(__file__))
MERGED = ("mpbench_results.json", "pytorch.json", "profiles.json")


def documents(path):
    """(file name, document) of a merged file; a name is a plain .json name, so that nothing is
    written outside --to."""
    out = []
    for fname, doc in read_json_object(path).items():
        if (os.path.basename(fname) != fname or fname.startswith(".") or
                not fname.endswith(".json")):
            raise BadInput(f"{path}: {fname!r} is not a plain .json file name")
        if not isinstance(doc, dict):
            raise BadInput(f"{path}: {fname}: expected a JSON object, got {type(doc).__name__}")
        out.append((fname, doc))
    return out


def free_name(to, path):
    """Where log `path` goes in `to`: its name, else the first of name_2, name_3, ... not taken;
    None where one of those holds the same bytes already."""
    stem, ext = os.path.splitext(os.path.basename(path))
    with open(path, "rb") as f:
        content = f.read()
    for k in range(1, 1000):
        dest = os.path.join(to, f"{stem}{ext}" if k == 1 else f"{stem}_{k}{ext}")
        if not os.path.exists(dest):
            return dest
        with open(dest, "rb") as f:
            if f.read() == content:
                return None
    raise ScriptError(f"{to}: {stem}{ext} and 998 more of its name taken")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sources", nargs="+", metavar="FROM_DIR")
    ap.add_argument("--to", required=True, help="results folder, e.g. results/h200")
    a = ap.parse_args()
    logs = []
    for src in a.sources:
        if not os.path.isdir(src):
            raise BadInput(f"{src}: not a directory")
        logs.append(sorted(glob.glob(os.path.join(src, "*.log")) +
                           glob.glob(os.path.join(src, "*.txt"))))
    # Every merged file read and checked before anything is written.
    docs = [[d for name in MERGED if os.path.exists(os.path.join(src, name))
             for d in documents(os.path.join(src, name))] for src in a.sources]
    if not any(docs) and not any(logs):
        raise BadInput(f"nothing to unpack in {', '.join(a.sources)} (no {', '.join(MERGED)}, "
                       "*.log or *.txt)")
    if os.path.exists(a.to) and not os.path.isdir(a.to):
        raise BadInput(f"--to {a.to}: not a directory")
    try:
        os.makedirs(a.to, exist_ok=True)
    except OSError as e:
        raise BadInput(f"--to {a.to}: {e.strerror}")

    written = []
    for i, src in enumerate(a.sources):
        for fname, doc in docs[i]:
            write_output(os.path.join(a.to, fname), json.dumps(doc, indent=2) + "\n")
            written.append(fname)
        for path in logs[i]:
            dest = free_name(a.to, path)
            if dest is None:
                continue  # there already, as it is (an unpack again, or --to the source)
            try:
                shutil.copyfile(path, dest)
            except OSError as e:
                raise ScriptError(f"{dest}: cannot write: {e.strerror}")
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
        # side_by_side.py says what went wrong in its one line.
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            err = ScriptError(done.stderr.strip() or f"side_by_side.py exited {done.returncode}")
            err.code = done.returncode
            raise err
        written.append("side_by_side.md")
    for w in written:
        print(os.path.join(a.to, w))
    return 0


if __name__ == "__main__":
    run_main("unpack_device_results", main)
