#!/usr/bin/env python3
"""The regression gate's false-alarm rate and detection power, measured (issue 26).

Pairs of `mpbench run` on the same specs, one after the other, each pair judged by
`mpbench compare BASELINE CURRENT` at the default thresholds:

  identical  nothing changed between the two runs: exit 1 is a false alarm;
  slowdown   the current run shares core 0 with a busy process at nice --hog-nice (both runs
             are pinned to core 0, so the only difference is the neighbour; at nice 5 the
             scheduler's weights leave mpbench 1024/(1024+335) of the core, a 1.33x slowdown).
             Before compare left runs flagged busy out of time, exit 1 was a detection, this
             neighbour standing in for a regression; now the gate leaves such runs out, and
             exit 1 says that slowed runs went unflagged.
  regression the current run's GEMMs take a slower kernel of the reference's OpenBLAS
             (OPENBLAS_CORETYPE=--regress-core, Sandybridge by default: tiny_resnet's fp32
             epochs 1.2x on a Zen 5), a regression of the code without a neighbour; compare
             names the blas_core difference and still judges: exit 1 is a detection.

  bench/gate_noise.py --mpbench build/mpbench --pairs 20 --repeat 5
      [--mode identical|slowdown|regression]
      [--label NAME] [--configs configs/tiny_mlp.json configs/tiny_resnet.json] [--epochs N]
      [--pin]

--pin runs the identical pairs pinned to core 0 as well (a slowdown's always are).

--repeat 1 gives runs without `--repeat` (one run a side), as the gate took them before it judged
time between repetitions; pass an older mpbench with --mpbench to measure that gate. Prints one
line per pair and the rate at the end; a speed is never asserted. Needs Linux (taskset).

--baselines K (K > 1): the baseline side is K files, made once at the start in K processes (a
baseline remade K times on the runner, README's recipe) and given as --baseline each; every
pair is then one current run judged against them.

Each pair's line and the summary also count the current runs flagged busy (run_flags' busy:
their threads waited for CPUs that something else held, from host_load), the flag that tells a
steady neighbour from a regression where the verdict cannot.

--interleave K (K > 1): each trial is K pairs run in turn (base 1, current 1, current 2, base 2,
base 3, ...: every other pair current first, unless --order ab), as a job that builds both
commits and runs them alternately (README), judged twice: `compare
--paired` (each pair's ratio) and unpaired (the same files, each side pooled). --pairs is then
the number of trials.

--scale-current F judges copies of the current files whose epoch times are F times theirs: a
regression of known size on the noise the runs really had (1.15: 15% slower), so that one set of
kept runs gives the false-alarm rate (F = 1) and the power at each F (with --rejudge).

--device and --precisions are run's (default: the reference, every mode).

--keep DIR keeps each pair's files (DIR/<mode>-<i>-base.json, -cur.json); --rejudge DIR judges
such kept pairs again without running anything (another mpbench, other compare options given
after --, e.g. -- --time-threshold 10%), so that two gates are compared on the same runs;
--without-host-load judges copies of the files without their runs' host_load and busy flags:
the gate as it was before it left busy runs out.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run_mpbench(args, out, pin, extra_env=None):
    cmd = ["taskset", "-c", "0"] if pin else []
    cmd += [args.mpbench, "run", *args.configs, "--device", args.device, "--quiet", "--json", out]
    if args.precisions:
        cmd += ["--precisions", args.precisions]
    if args.repeat > 1:
        cmd += ["--repeat", str(args.repeat)]
    if args.epochs:
        cmd += ["--epochs", str(args.epochs)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", **(extra_env or {}))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)


def busy_runs(path):
    """(runs flagged busy, runs, the most CPU time one's threads waited for) of a result file."""
    try:
        runs = json.load(open(path)).get("runs", [])
    except (OSError, ValueError):
        return 0, 0, 0.0
    flagged = [r for r in runs if "busy" in (r.get("flags") or [])]
    most = max(((r.get("host_load") or {}).get("waited_cpus") or 0.0 for r in runs), default=0.0)
    return len(flagged), len(runs), most


def strip_host_load(path, folder):
    """A copy of a result file in `folder` without its runs' host_load and busy flags."""
    if not os.path.exists(path) or os.path.dirname(path) == folder:
        return path
    doc = json.load(open(path))
    for r in doc.get("runs", []):
        r.pop("host_load", None)
        if r.get("flags"):
            r["flags"] = [f for f in r["flags"] if f != "busy"]
    out = os.path.join(folder, os.path.basename(path))
    with open(out, "w") as f:
        json.dump(doc, f)
    return out


def scale_times(path, folder, factor):
    """A copy of a result file in `folder` whose epoch times are `factor` times theirs."""
    if factor == 1.0 or not os.path.exists(path):
        return path
    doc = json.load(open(path))
    for r in doc.get("runs", []):
        for e in r.get("epochs", []):
            e["time_ms"] *= factor
    out = os.path.join(folder, "scaled-" + os.path.basename(path))
    with open(out, "w") as f:
        json.dump(doc, f)
    return out


def what_counted(args):
    """What an exit 1 is in this measurement."""
    if args.scale_current != 1.0:
        return f"current x{args.scale_current:g}: detections"
    return {"identical": "false alarms", "slowdown": "slowdowns judged regressions",
            "regression": "detections"}[args.mode]


def judge(args, sides, d):
    """`mpbench compare` of `sides` (its file arguments and options): (exit code, the rows'
    verdicts, their time ratios)."""
    cmp = os.path.join(d, "cmp.json")
    rc = subprocess.run([args.mpbench, "compare", *sides, "--json", cmp, *args.compare_args],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    rows = json.load(open(cmp))["rows"] if os.path.exists(cmp) else []
    if os.path.exists(cmp):
        os.remove(cmp)
    return (rc, [r["verdict"] for r in rows],
            [r["time_ratio"]["ratio"] for r in rows if r.get("time_ratio")])


def interleaved_trial(args, stem, d):
    """One trial of --interleave K: K pairs run in turn (or read back with --rejudge), judged
    paired and unpaired; (exit codes, row verdicts of each, ratios of each) or None where the
    trial was not kept."""
    bases = [f"{stem}-base-{k + 1}.json" for k in range(args.interleave)]
    curs = [f"{stem}-cur-{k + 1}.json" for k in range(args.interleave)]
    if args.rejudge:
        if not all(os.path.exists(x) for x in bases + curs):
            return None
    else:
        if args.warmup:  # a run whose result is dropped: the machine settles under load first
            run_mpbench(args, os.path.join(d, "warmup.json"), args.pin)
        for k, (b, c) in enumerate(zip(bases, curs)):
            cur_env = {"OPENBLAS_CORETYPE": args.regress_core} if args.mode == "regression" \
                else None
            # abba: every other pair runs its current first, so that what the second run of two
            # meets (a warmer or a throttled machine) lands on both sides alike.
            if args.order == "abba" and k % 2 == 1:
                run_mpbench(args, c, args.pin, cur_env)
                run_mpbench(args, b, args.pin)
            else:
                run_mpbench(args, b, args.pin)
                run_mpbench(args, c, args.pin, cur_env)
    if args.without_host_load:
        bases = [strip_host_load(x, d) for x in bases]
        curs = [strip_host_load(x, d) for x in curs]
    curs = [scale_times(x, d, args.scale_current) for x in curs]
    sides = [x for b in bases for x in ("--baseline", b)] + \
        [x for c in curs for x in ("--current", c)]
    return {"paired": judge(args, sides + ["--paired"], d), "unpaired": judge(args, sides, d)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mpbench", required=True)
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--epochs", type=int, default=0, help="override the specs' epochs")
    p.add_argument("--mode", choices=("identical", "slowdown", "regression"), default="identical")
    p.add_argument("--regress-core", default="Sandybridge",
                   help="regression: the current runs' OPENBLAS_CORETYPE")
    p.add_argument("--label", default="")
    p.add_argument("--hog-nice", type=int, default=5)
    p.add_argument("--pin", action="store_true",
                   help="identical: pin every run to core 0 too, as README's CI recipe for a "
                        "small shared runner (slowdown runs are always pinned)")
    p.add_argument("--baselines", type=int, default=1)
    p.add_argument("--keep", help="keep each pair's result files in this folder")
    p.add_argument("--rejudge", help="judge the pairs kept in this folder again; run nothing")
    p.add_argument("--without-host-load", action="store_true",
                   help="judge copies without host_load: the gate before busy runs were left out")
    p.add_argument("--interleave", type=int, default=0,
                   help="K pairs a trial, run in turn, judged paired and unpaired")
    p.add_argument("--order", choices=("ab", "abba"), default="abba",
                   help="interleave: each pair base first (ab), or every other pair current "
                        "first (abba, README's recipe)")
    p.add_argument("--warmup", action="store_true",
                   help="interleave: one run before each trial's pairs, its result dropped")
    p.add_argument("--scale-current", type=float, default=1.0,
                   help="judge the current files' epoch times times this factor")
    p.add_argument("--device", default="reference")
    p.add_argument("--precisions", default="")
    p.add_argument("compare_args", nargs="*", help="extra `mpbench compare` options, after --")
    p.add_argument("--configs", nargs="+",
                   default=["configs/tiny_mlp.json", "configs/tiny_resnet.json"])
    args = p.parse_args()

    fails = 0
    verdicts = {}
    busy_total = [0, 0]
    keep = args.keep or args.rejudge
    if keep:
        os.makedirs(keep, exist_ok=True)
    if args.interleave > 1:
        with tempfile.TemporaryDirectory() as d:
            tally = {"paired": [0, {}], "unpaired": [0, {}]}
            trials = 0
            for i in range(args.pairs):
                res = interleaved_trial(args, os.path.join(keep or d, f"{args.mode}-{i + 1}"), d)
                if res is None:
                    break
                trials += 1
                line = []
                for how, (rc, verdicts_, ratios) in res.items():
                    tally[how][0] += rc == 1
                    for v in verdicts_:
                        tally[how][1][v] = tally[how][1].get(v, 0) + 1
                    line.append(f"{how} exit {rc} " + " ".join(f"{x:.3f}" for x in ratios))
                print(f"trial {i + 1:2d}: " + "; ".join(line), flush=True)
        for how, (fails_, verdicts_) in tally.items():
            print(f"{args.label or args.mpbench} {args.mode} interleaved {args.interleave} pairs "
                  f"{'(rejudged)' if args.rejudge else f'--repeat {args.repeat}'}, {how}: {what_counted(args)} {fails_}/{trials} trials exit 1; row "
                  f"verdicts {verdicts_}")
        return
    with tempfile.TemporaryDirectory() as d:
        shared = []
        for k in range(args.baselines if args.baselines > 1 and not args.rejudge else 0):
            shared.append(os.path.join(keep or d, f"{args.mode}-baseline-{k + 1}.json"))
            run_mpbench(args, shared[-1], args.mode == "slowdown" or args.pin)
        if args.rejudge and args.baselines > 1:
            shared = [os.path.join(keep, f"{args.mode}-baseline-{k + 1}.json")
                      for k in range(args.baselines)]
        for i in range(args.pairs):
            stem = os.path.join(keep or d, f"{args.mode}-{i + 1}")
            base, cur = stem + "-base.json", stem + "-cur.json"
            if args.rejudge:
                if not os.path.exists(cur) or not (shared or os.path.exists(base)):
                    break
            else:
                pin = args.mode == "slowdown" or args.pin
                if not shared:
                    run_mpbench(args, base, pin)
                hog = None
                if args.mode == "slowdown":
                    hog = subprocess.Popen(["taskset", "-c", "0", "nice", "-n",
                                            str(args.hog_nice), sys.executable, "-c",
                                            "while True: pass"])
                    time.sleep(0.2)
                try:
                    run_mpbench(args, cur, pin, {"OPENBLAS_CORETYPE": args.regress_core}
                                if args.mode == "regression" else None)
                finally:
                    if hog:
                        hog.kill()
                        hog.wait()
            flagged, runs, most = busy_runs(cur)
            if args.without_host_load:
                shared, base, cur = ([strip_host_load(x, d) for x in shared],
                                     strip_host_load(base, d), strip_host_load(cur, d))
            cur = scale_times(cur, d, args.scale_current)
            sides = [x for b in shared for x in ("--baseline", b)] + [cur] if shared else [base, cur]
            rc, row_verdicts, ratios = judge(args, sides, d)
            for v in row_verdicts:
                verdicts[v] = verdicts.get(v, 0) + 1
            fails += rc == 1
            busy_total[0] += flagged
            busy_total[1] += runs
            print(f"pair {i + 1:2d}: exit {rc}, time ratios "
                  + " ".join(f"{x:.3f}" for x in ratios)
                  + f"; busy {flagged}/{runs} (waited up to {most:.2f} CPUs)", flush=True)
    print(f"{args.label or args.mpbench} {args.mode} --repeat {args.repeat} "
          f"baselines {max(args.baselines, 1)}: {what_counted(args)} "
          f"{fails}/{args.pairs} pairs exit 1; row verdicts {verdicts}; current runs flagged "
          f"busy {busy_total[0]}/{busy_total[1]}")


if __name__ == "__main__":
    main()
