#!/usr/bin/env python3
"""Side-by-side Markdown table of mpbench and PyTorch result files (both mpbench's JSON schema).

    scripts/side_by_side.py --mpbench A.json [B.json ...] --pytorch P.json
                            [--profiles PROF.json ...] [--md OUT.md]

Per model and precision: step time both ways (median epoch time / steps per epoch), their ratio
(mpbench / PyTorch: below 1 means mpbench is faster), each tool's speedup over its own fp32, peak
memory both ways (mpbench: tracked allocator peak; PyTorch: max_memory_allocated), final accuracy.
A step time measured on a busy machine (the run's flags hold "busy": its threads waited for CPUs
that something else held, host_load) reads "(busy)" after it, and a line under the table says
it is unreliable.
A run without a time (oom, failed, diverged, or unsupported: amp_fp8 on a card below compute
capability 8.9, or without Transformer Engine or torch._scaled_mm) shows its status in its tool's
step column and gets no ratio or speedup. A line under the table names how PyTorch's timed
amp_fp8 rows ran (pytorch.fp8.impl): on torch._scaled_mm, eager, they are not Transformer
Engine's times.

With --profiles (`mpbench profile --json` files, or device_check's merged profiles.json) a second
section takes apart every eager row where mpbench is slower: mpbench's time per step by op and
its top ops, beside PyTorch's top kernels from the run's "profile" block
(`scripts/pytorch_reference.py --profile-steps N`).
Standard library only.
"""
import argparse
import numbers

from script_io import BadInput, check_output, read_json_object, run_main, write_output


def check(obj, where, fields):
    """Each (key, types, required) of obj has one of types (a missing optional key or a null
    passes), so that the table never trips over another tool's or a hand-edited file."""
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for key, types, required in fields:
        v = obj.get(key)
        if v is None and not required:
            continue
        if not isinstance(v, types) or isinstance(v, bool) and bool not in types:
            want = " or ".join(t.__name__ for t in types)
            raise BadInput(f"{where}.{key}: expected {want}, got {json_type(v)}")
    return obj


def json_type(v):
    if v is None or isinstance(v, bool):
        return "null" if v is None else "bool"
    return "number" if isinstance(v, numbers.Number) else type(v).__name__


NUM = (numbers.Real,)


def check_run(r, where):
    check(r, where, [("model", (str,), True), ("precision", (str,), True),
                     ("status", (str,), False), ("cuda_graphs", (bool,), False),
                     ("epochs", (list,), False), ("epoch_time_ms", (dict,), False),
                     ("peak_memory_bytes", (dict,), False), ("final_accuracy", NUM, False),
                     ("profile", (dict,), False), ("flags", (list,), False)])
    for i, e in enumerate(r.get("epochs") or []):
        check(e, f"{where}.epochs[{i}]", [("steps", NUM, False)])
    check(r.get("epoch_time_ms") or {}, f"{where}.epoch_time_ms", [("median", NUM, False)])
    check(r.get("peak_memory_bytes") or {}, f"{where}.peak_memory_bytes",
          [("tracked", NUM, False)])
    prof = r.get("profile") or {}
    check(prof, f"{where}.profile", [("entries", (list,), False),
                                     ("total_ms_per_step", NUM, False)])
    for i, e in enumerate(prof.get("entries") or []):
        check(e, f"{where}.profile.entries[{i}]", [("name", (str,), True),
                                                   ("calls_per_step", NUM, True),
                                                   ("ms_per_step", NUM, True)])


def check_profile(p, where):
    check(p, where, [("precision", (str,), False), ("status", (str,), False),
                     ("ops", (list,), False), ("step_time_ms", NUM, False),
                     ("ceilings", (dict,), False)])
    for i, o in enumerate(p.get("ops") or []):
        check(o, f"{where}.ops[{i}]", [("op", (str,), True), ("ms_per_step", NUM, True),
                                       ("scope", (str,), True), ("detail", (str,), True),
                                       ("flops_per_step", NUM, False),
                                       ("bytes_per_step", NUM, False),
                                       ("peak_tflops", NUM, False)])
    check(p.get("ceilings") or {}, f"{where}.ceilings",
          [("peak_tflops", NUM, False), ("memory_gbps", NUM, False)])


def load_runs(paths):
    """(model, precision) -> the run of that key; a key that several files hold (rounds of the
    same measurement, run in turn with the other tool's) -> the run of median step time."""
    rounds = {}
    for path in paths:
        doc = read_json_object(path)
        if doc.get("schema_version") != 1:
            raise BadInput(f"{path}: schema_version: expected 1")
        runs = doc.get("runs", [])
        if not isinstance(runs, list):
            raise BadInput(f"{path}: runs: expected an array")
        for i, r in enumerate(runs):
            check_run(r, f"{path}: runs[{i}]")
            key = (r["model"], r["precision"])
            if r.get("cuda_graphs"):
                key = (r["model"], r["precision"] + "+graphs")
            rounds.setdefault(key, []).append(r)
    runs = {}
    for key, rs in rounds.items():
        timed = sorted((r for r in rs if step_ms(r)), key=step_ms)
        runs[key] = timed[(len(timed) - 1) // 2] if timed else rs[-1]
    return runs, max((len(rs) for rs in rounds.values()), default=0)


def load_profiles(paths):
    """(model, precision) -> profile entry of `mpbench profile --json`; a file is one profile
    document or a {file name: document} map of them (device_check's profiles.json)."""
    out = {}
    for path in paths or []:
        doc = read_json_object(path)
        docs = [(path, doc)] if "profiles" in doc else [(f"{path}: {k}", d)
                                                         for k, d in doc.items()]
        for where, d in docs:
            check(d, where, [("spec", (dict,), False), ("profiles", (list,), False)])
            name = (d.get("spec") or {}).get("name")
            for i, p in enumerate(d.get("profiles") or []):
                check_profile(p, f"{where}: profiles[{i}]")
                out[(name, p.get("precision"))] = p
    return out


def by_op(profile):
    totals = {}
    for o in profile.get("ops", []):
        totals[o["op"]] = totals.get(o["op"], 0.0) + o["ms_per_step"]
    return sorted(totals.items(), key=lambda kv: -kv[1])


def where_time_goes(model, prec, m_prof, p_run, top=8):
    """Markdown lines for one slower row: mpbench by op and top ops, PyTorch's top kernels."""
    lines = [f"### {model} {prec}", ""]
    if m_prof and m_prof.get("status") == "ok":
        total = sum(o["ms_per_step"] for o in m_prof.get("ops", []))
        lines.append(f"mpbench (`mpbench profile`, {m_prof.get('profiled_steps')} steps): step "
                     f"{m_prof.get('step_time_ms', 0):.3f} ms, ops {total:.3f} ms")
        lines += ["", "| mpbench op | ms/step | share |", "|---|---:|---:|"]
        for op, ms in by_op(m_prof)[:top]:
            lines.append(f"| {op} | {ms:.3f} | {100 * ms / total if total else 0:.1f}% |")
        # The ceilings, when mpbench knew them: a GEMM's or convolution's own peak TFLOP/s (the
        # dtype it computes in; else the mode's) and the memory bandwidth, for an "of peak"
        # share per op.
        ceil = m_prof.get("ceilings") or {}
        peak, bw = ceil.get("peak_tflops") or 0, ceil.get("memory_gbps") or 0
        lines += ["", "| mpbench scope | op | shape | ms/step | TFLOP/s | GB/s | of peak |",
                  "|---|---|---|---:|---:|---:|---:|"]
        for o in sorted(m_prof.get("ops", []), key=lambda o: -o["ms_per_step"])[:top]:
            ms, fl, by = o["ms_per_step"], o.get("flops_per_step") or 0, o.get("bytes_per_step") or 0
            tf = f"{fl / (ms * 1e9):.3g}" if fl and ms else ""
            gb = f"{by / (ms * 1e6):.3g}" if by and ms else ""
            share = ""
            op_peak = o.get("peak_tflops") or peak
            if fl and ms and op_peak:
                share = f"{100 * fl / (ms * 1e9) / op_peak:.1f}%"
            elif by and ms and bw:
                share = f"{100 * by / (ms * 1e6) / bw:.1f}%"
            lines.append(f"| {o['scope']} | {o['op']} | {o['detail']} | {ms:.3f} | {tf} | {gb} "
                         f"| {share} |")
    else:
        lines.append("mpbench: no profile for this row")
    prof = (p_run or {}).get("profile")
    lines.append("")
    if prof and "error" in prof:
        lines.append(f"PyTorch: torch.profiler failed: {prof['error']}")
    elif prof:
        lines.append(f"PyTorch (torch.profiler, {prof.get('steps')} steps, {prof.get('basis')}): "
                     f"{prof.get('total_ms_per_step', 0):.3f} ms per step")
        lines += ["", "| PyTorch kernel / op | calls | ms/step |", "|---|---:|---:|"]
        for e in prof.get("entries", [])[:top]:
            name = e["name"] if len(e["name"]) <= 90 else e["name"][:87] + "..."
            lines.append(f"| `{name.replace('|', '/')}` | {e['calls_per_step']:g} | "
                         f"{e['ms_per_step']:.3f} |")
    else:
        lines.append("PyTorch: no profile for this row (--profile-steps)")
    return lines + [""]


def step_ms(run):
    if run.get("status") != "ok" or not run.get("epochs"):
        return None
    steps = run["epochs"][0].get("steps") or 0
    median = (run.get("epoch_time_ms") or {}).get("median")
    return median / steps if steps and median else None


def busy(run):
    return bool(run) and "busy" in (run.get("flags") or [])


def step_cell(run):
    """The step time, or why there is none: the run's status (oom, failed, diverged, or
    unsupported: a mode the device cannot run); — when that tool has no such row. A time
    measured on a busy machine says so."""
    ms = step_ms(run) if run else None
    if ms is None and run and run.get("status") != "ok":
        return run.get("status", "—")
    return fmt(ms, ".3f") + (" (busy)" if ms is not None and busy(run) else "")


def fmt(v, spec, none="—", suffix=""):
    return none if v is None else format(v, spec) + suffix


def fp8_impl(run):
    """How pytorch_reference.py ran an amp_fp8 row (its pytorch.fp8.impl), or None."""
    block = run.get("pytorch")
    fp8 = block.get("fp8") if isinstance(block, dict) else None
    impl = fp8.get("impl") if isinstance(fp8, dict) else None
    return impl if isinstance(impl, str) else None


def mib(b):
    return b / 2**20 if b else None  # 0: nothing was measured (an unsupported mode)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpbench", nargs="+", required=True)
    ap.add_argument("--pytorch", nargs="+", required=True)
    ap.add_argument("--profiles", nargs="+")
    ap.add_argument("--md")
    a = ap.parse_args()
    inputs = a.mpbench + a.pytorch + (a.profiles or [])
    if a.md:  # before any work: never over an input
        check_output(a.md, inputs)
    (mp, mp_rounds), (pt, pt_rounds) = load_runs(a.mpbench), load_runs(a.pytorch)
    profiles = load_profiles(a.profiles)
    slower = []
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
        if ratio and ratio > 1 and "+graphs" not in prec:
            slower.append((model, prec, p))
        lines.append(
            f"| {model} | {prec} | {step_cell(m)} | {step_cell(p)} | {fmt(ratio, '.2f')} | "
            f"{fmt(msp, '.2f', suffix='x')} | {fmt(psp, '.2f', suffix='x')} | "
            f"{fmt(mmem, '.1f')} | {fmt(pmem, '.1f')} | "
            f"{fmt(macc and 100 * macc, '.2f')} | {fmt(pacc and 100 * pacc, '.2f')} |")
    if any(prec == "amp_fp8" and step_ms(r) and fp8_impl(r) == "torch._scaled_mm"
           for (_, prec), r in pt.items()):
        lines += ["", "PyTorch's amp_fp8: torch._scaled_mm in eager PyTorch with Transformer "
                  "Engine's delayed scaling (scripts/pytorch_reference.py's Fp8Linear), not "
                  "Transformer Engine: its casts, amaxes and transposes are separate kernels "
                  "where TE fuses them."]
    if any(busy(r) and step_ms(r) for runs in (mp, pt) for r in runs.values()):
        lines += ["", "(busy): measured while the run's threads waited for CPUs that something "
                  "else held (its host_load): that time, and the ratio and speedups from it, are "
                  "unreliable."]
    if max(mp_rounds, pt_rounds) > 1:
        lines += ["", f"Step times: the median over {mp_rounds} mpbench and {pt_rounds} PyTorch "
                  "rounds (each row's run of median step time; ratios and speedups from those)."]
    if a.profiles and slower:
        lines += ["", "## Where the time goes where mpbench is slower", ""]
        for model, prec, p in slower:
            lines += where_time_goes(model, prec, profiles.get((model, prec)), p)
    text = "\n".join(lines) + "\n"
    if a.md:
        write_output(a.md, text, inputs)
    print(text, end="")
    return 0


if __name__ == "__main__":
    run_main("side_by_side", main)
