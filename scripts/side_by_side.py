#!/usr/bin/env python3
"""Side-by-side Markdown table of mpbench and PyTorch result files (both mpbench's JSON schema).

    scripts/side_by_side.py --mpbench A.json [B.json ...] --pytorch P.json [--md OUT.md]

Per model and precision: step time both ways (median epoch time / steps per epoch), their ratio
(mpbench / PyTorch: below 1 means mpbench is faster), each tool's speedup over its own fp32, peak
memory both ways (mpbench: tracked allocator peak; PyTorch: max_memory_allocated), final accuracy.
Standard library only.
"""
import argparse
import json
import os
import sys


def load_runs(paths):
    runs = {}
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"side_by_side: {path}: {e}")
        if doc.get("schema_version") != 1:
            sys.exit(f"side_by_side: {path}: schema_version: expected 1")
        for r in doc.get("runs", []):
            key = (r["model"], r["precision"])
            if r.get("cuda_graphs"):
                key = (r["model"], r["precision"] + "+graphs")
            runs[key] = r
    return runs


def step_ms(run):
    if run.get("status") != "ok" or not run.get("epochs"):
        return None
    steps = run["epochs"][0].get("steps") or 0
    median = (run.get("epoch_time_ms") or {}).get("median")
    return median / steps if steps and median else None


def fmt(v, spec, none="—"):
    return none if v is None else format(v, spec)


def mib(b):
    return None if b is None else b / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpbench", nargs="+", required=True)
    ap.add_argument("--pytorch", nargs="+", required=True)
    ap.add_argument("--md")
    a = ap.parse_args()
    mp, pt = load_runs(a.mpbench), load_runs(a.pytorch)
    lines = ["| model | precision | mpbench step ms | PyTorch step ms | ratio | mpbench speedup | "
             "PyTorch speedup | mpbench peak MiB | PyTorch peak MiB | mpbench acc | PyTorch acc |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (model, prec) in sorted(mp, key=lambda k: (k[0], k[1])):
        m = mp[(model, prec)]
        p = pt.get((model, prec.replace("+graphs", "")))
        ms, ps = step_ms(m), step_ms(p) if p else None
        m32 = step_ms(mp.get((model, "fp32+graphs" if "+graphs" in prec else "fp32"), {}))
        p32 = step_ms(pt.get((model, "fp32"), {}))
        ratio = ms / ps if ms and ps else None
        msp = m32 / ms if m32 and ms else None
        psp = p32 / ps if p32 and ps else None
        mmem = mib((m.get("peak_memory_bytes") or {}).get("tracked"))
        pmem = mib((p.get("peak_memory_bytes") or {}).get("tracked")) if p else None
        macc = m.get("final_accuracy") if m.get("status") == "ok" else None
        pacc = p.get("final_accuracy") if p and p.get("status") == "ok" else None
        status = "" if m.get("status") == "ok" else f" ({m.get('status')})"
        lines.append(
            f"| {model} | {prec}{status} | {fmt(ms, '.3f')} | {fmt(ps, '.3f')} | {fmt(ratio, '.2f')} | "
            f"{fmt(msp, '.2f')}x | {fmt(psp, '.2f')}x | {fmt(mmem, '.1f')} | {fmt(pmem, '.1f')} | "
            f"{fmt(macc and 100 * macc, '.2f')} | {fmt(pacc and 100 * pacc, '.2f')} |")
    text = "\n".join(lines) + "\n"
    if a.md:
        tmp = a.md + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, a.md)
    print(text, end="")


if __name__ == "__main__":
    main()
