#!/usr/bin/env python3
"""PyTorch reference for mpbench: the same model, data and training loop, measured the same way.

    scripts/pytorch_reference.py SPEC... --out results.json [--precisions LIST] [--epochs N]
                                 [--device cuda|cpu] [--mpbench BIN] [--data-dir DIR] [--quiet]

For each spec (only model.type "mlp" for now) and each precision mode it builds the MLP from
nn.Linear layers, trains it and writes mpbench's result JSON (schema_version 1) with tool.name
"pytorch", so that `mpbench compare` or a notebook can put the two side by side.

How it mirrors mpbench (train/trainer.cpp):
  * Data: `mpbench data SPEC --out DIR/NAME` writes the exact dataset mpbench trains on, plus the
    resolved spec (every default filled in); this script reads both, so inputs are bit-identical
    and no default is duplicated here.
  * The whole dataset is put on the device up front. Training batches are consecutive slices, no
    shuffling, the last partial batch dropped. warmup_steps steps (on the first batches) run
    first, outside any timing. Each epoch is timed with events around its training steps only;
    evaluation (every eval row, last partial batch included) is timed apart. Per-step times come
    from events recorded between steps.
  * Per-step loss / grad norm / loss scale / skipped flag stay in device tensors and are read
    back after each epoch, so the loop adds no host synchronisation. (A non-fused optimizer
    under GradScaler does synchronise: PyTorch's GradScaler.step checks found_inf on the host.
    Fused optimizers, used on CUDA where available, take found_inf on the device.)
  * Modes: fp32 (TF32 off), tf32 (TF32 matmuls), amp_fp16 (autocast fp16 + GradScaler with the
    spec's loss_scale settings), amp_bf16 (autocast bf16, GradScaler only if loss_scale.amp_bf16).
    Layers in fp32_layers run with autocast disabled on fp32 inputs. The loss is cross-entropy
    on float32 logits. grad_norm is the L2 norm of the unscaled gradients; a step counts as
    skipped when the scaler lowered the scale after it.
  * FLOPs per step = 3 x forward FLOPs x batch, forward FLOPs per sample = sum over the linear
    layers of 2*in*out + out (models/linear.cpp). Peak TFLOP/s from the same datasheet table as
    train/device_specs.cpp.
  * Memory: peak_memory_bytes.tracked = torch.cuda.max_memory_allocated(); .device = the largest
    rise of cudaMemGetInfo's used bytes over a baseline taken before the model is built, sampled
    after build, after the first forward, backward and step, and at the end.

Needs Python 3.10+ and torch; nothing else.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

# torch warns when numpy is absent; this script never needs numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("pytorch_reference.py: PyTorch is not installed (pip install torch)")

MODES = ("fp32", "tf32", "amp_fp16", "amp_bf16")
# train/device_specs.cpp: name, dense TFLOP/s for fp32, tf32, fp16, bf16 (0: none), GB/s.
DATASHEETS = [
    ("T4", 8.1, 0, 65, 0, 320), ("A10", 31.2, 62.5, 125, 125, 600),
    ("L4", 30.3, 60, 121, 121, 300), ("L40S", 91.6, 183, 362, 362, 864),
    ("A100-SXM4-80GB", 19.5, 156, 312, 312, 2039), ("A100-PCIE-80GB", 19.5, 156, 312, 312, 1935),
    ("A100", 19.5, 156, 312, 312, 1555), ("H100 PCIe", 51, 378, 756, 756, 2000),
    ("H100 NVL", 60, 418, 835, 835, 3900), ("H100", 67, 494.7, 989.4, 989.4, 3350),
    ("H200", 67, 494.7, 989.4, 989.4, 4800),
]
MEM_CATEGORIES = ("weights", "master_weights", "gradients", "optimizer_state", "activations",
                  "workspace", "data")


class BadInput(Exception):
    """Exit code 2, as mpbench's BadInput."""


def log(args, msg):
    if not args.quiet:
        print(f"pytorch_reference: {msg}", file=sys.stderr, flush=True)


# ---- spec and data ----------------------------------------------------------------------------

def read_family(path):
    try:
        with open(path) as f:
            raw = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: cannot read spec: {e.strerror}")
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}:{e.colno}: JSON syntax error: {e.msg}")
    family = raw.get("model", {}).get("type") if isinstance(raw, dict) else None
    if family != "mlp":
        raise BadInput(f"{path}: model.type: only \"mlp\" is built by the PyTorch reference so "
                       f"far, got {json.dumps(family)}")


def export_data(spec_path, mpbench, data_dir, index):
    """Runs `mpbench data`; returns (resolved spec dict, {name: tensor}) on the host."""
    prefix = os.path.join(data_dir, f"spec{index}")
    cmd = [mpbench, "data", spec_path, "--out", prefix, "--quiet"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise BadInput(f"--mpbench {mpbench}: cannot run: {e.strerror}")
    if proc.returncode != 0:
        msg = proc.stderr.strip() or f"exit code {proc.returncode}"
        raise BadInput(f"{spec_path}: `mpbench data` failed: {msg}")
    with open(prefix + ".json") as f:
        meta = json.load(f)
    n_tr, n_ev, dim = meta["train_size"], meta["eval_size"], meta["sample_dim"]
    shapes = {"train_x": ((n_tr, dim), torch.float32), "train_y": ((n_tr,), torch.int32),
              "eval_x": ((n_ev, dim), torch.float32), "eval_y": ((n_ev,), torch.int32)}
    data = {}
    for key, (shape, dtype) in shapes.items():
        path = os.path.join(data_dir, meta["files"][key])
        count = math.prod(shape)
        t = torch.from_file(path, shared=False, size=count, dtype=dtype)  # little-endian hosts
        data[key] = t.reshape(shape)
    data["train_y"] = data["train_y"].long()
    data["eval_y"] = data["eval_y"].long()
    return meta["resolved_spec"], data, meta["description"]


# ---- model ------------------------------------------------------------------------------------

class Mlp(nn.Module):
    """fc1..fcN (hidden, with the activation) then head; names match mpbench's mlp_layer_names."""

    def __init__(self, m, fp32_layers, device_type):
        super().__init__()
        dims = [m["input_dim"], *m["hidden"], m["num_classes"]]
        names = [f"fc{i + 1}" for i in range(len(m["hidden"]))] + ["head"]
        self.layers = nn.ModuleDict(
            {n: nn.Linear(dims[i], dims[i + 1]) for i, n in enumerate(names)})
        self.gelu = m.get("activation", "relu") == "gelu"
        self.fp32 = set(fp32_layers)
        self.device_type = device_type

    def forward(self, x):
        for name, layer in self.layers.items():
            if name in self.fp32:
                with torch.autocast(self.device_type, enabled=False):
                    x = layer(x.float())
            else:
                x = layer(x)
            if name != "head":
                x = F.gelu(x, approximate="tanh") if self.gelu else F.relu(x)
        return x

    def forward_flops_per_sample(self):
        return sum(2.0 * l.in_features * l.out_features + l.out_features
                   for l in self.layers.values())


def set_matmul_mode(mode):
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def make_optimizer(o, params, device_type):
    """Returns (optimizer, fused?); fused kernels where this torch supports them on the device."""
    if o["type"] == "sgd":
        cls, kw = torch.optim.SGD, dict(lr=o["lr"], momentum=o["momentum"],
                                        nesterov=o["nesterov"], weight_decay=o["weight_decay"])
    elif o["type"] in ("adam", "adamw"):
        cls = torch.optim.Adam if o["type"] == "adam" else torch.optim.AdamW
        kw = dict(lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                  weight_decay=o["weight_decay"])
    else:
        raise BadInput(f"unknown optimizer type {o['type']!r}")
    if device_type == "cuda":
        try:
            return cls(params, fused=True, **kw), True
        except (TypeError, RuntimeError, ValueError):
            pass
    return cls(params, **kw), False


def tensor_bytes(ts):
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


# ---- one run ----------------------------------------------------------------------------------

class Timer:
    """CUDA events on the GPU, perf_counter on the CPU; elapsed() in ms."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.ev = torch.cuda.Event(enable_timing=True) if cuda else None
        self.t = None

    def record(self):
        if self.cuda:
            self.ev.record()
        else:
            self.t = time.perf_counter()
        return self

    def elapsed(self, later):
        if self.cuda:
            later.ev.synchronize()
            return self.ev.elapsed_time(later.ev)
        return (later.t - self.t) * 1000.0


def empty_run(spec, mode, device, train_size):
    return {
        "model": spec["name"], "family": spec["model"]["type"], "precision": mode,
        "device": device.type, "status": "ok", "status_detail": "", "cuda_graphs": False,
        "batch_size": spec["train"]["batch_size"], "train_samples": train_size,
        "warmup_steps": spec["train"]["warmup_steps"], "epochs": [],
        "epoch_time_ms": time_stats([]), "samples_per_second": 0.0, "flops_per_step": 0.0,
        "tflops": 0.0, "peak_tflops": 0.0, "percent_of_peak": 0.0,
        "peak_memory_bytes": {"tracked": 0, "device": None, "device_baseline": None,
                              "by_category": {c: None for c in MEM_CATEGORIES}},
        "final_accuracy": 0.0, "final_loss": 0.0, "skipped_steps": 0, "final_loss_scale": 1.0,
        "loss_scaling": False,
        "steps": {"loss": [], "grad_norm": [], "loss_scale": [], "skipped": [], "time_ms": []},
        "pytorch": {},
    }


def time_stats(xs):
    if not xs:
        return {"median": 0.0, "mean": 0.0, "stddev": 0.0, "cv": 0.0, "min": 0.0, "max": 0.0}
    mean = statistics.fmean(xs)
    sd = statistics.stdev(xs) if len(xs) >= 2 else 0.0
    return {"median": statistics.median(xs), "mean": mean, "stddev": sd,
            "cv": sd / mean if mean else 0.0, "min": min(xs), "max": max(xs)}


def train_mode(spec, host_data, mode, device, r):
    """Fills run dict r; raises on OOM or failure (the caller turns those into a status)."""
    cuda = device.type == "cuda"
    tr, ls = spec["train"], spec["loss_scale"]
    batch, warmup, epochs = tr["batch_size"], tr["warmup_steps"], tr["epochs"]
    mem = r["peak_memory_bytes"]

    def sample_memory():
        if cuda:
            torch.cuda.synchronize()
            free, total = torch.cuda.mem_get_info()
            mem["device"] = max(mem["device"], total - free - mem["device_baseline"])

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        free, total = torch.cuda.mem_get_info()
        mem["device_baseline"], mem["device"] = total - free, 0

    set_matmul_mode(mode)
    amp_dtype = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}.get(mode)
    if amp_dtype is torch.float16 and not cuda:
        # Probe before the run: some CPU builds reject fp16 autocast (or lack fp16 matmuls).
        with torch.autocast("cpu", dtype=torch.float16):
            nn.Linear(2, 2)(torch.ones(1, 2))
    scaling = bool(ls["amp_fp16"]) if mode == "amp_fp16" else (
        bool(ls["amp_bf16"]) if mode == "amp_bf16" else False)
    r["loss_scaling"] = scaling

    torch.manual_seed(spec["data"]["seed"])  # same init for every mode and device
    model = Mlp(spec["model"], spec["fp32_layers"], device.type).to(device)
    params = list(model.parameters())
    opt, fused = make_optimizer(tr["optimizer"], params, device.type)
    scaler_kw = dict(init_scale=ls["init"], growth_factor=ls["growth_factor"],
                     backoff_factor=ls["backoff_factor"], growth_interval=ls["growth_interval"],
                     enabled=scaling)
    if hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler(device.type, **scaler_kw)
    else:  # torch < 2.3: CUDA only
        scaler = torch.cuda.amp.GradScaler(**scaler_kw)
    d = {k: v.to(device) for k, v in host_data.items()}
    r["pytorch"] = {"fused_optimizer": fused, "grad_scaler": scaling,
                    "autocast_dtype": str(amp_dtype).replace("torch.", "") if amp_dtype else None,
                    "tracked_memory": "torch.cuda.max_memory_allocated" if cuda
                    else "sum of the categories (no allocator statistics on the CPU)"}
    sample_memory()

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=amp_dtype)

    steps_per_epoch = d["train_y"].numel() // batch
    if steps_per_epoch == 0:
        raise BadInput(f"{spec['name']}: batch size larger than the training set")
    total = warmup + epochs * steps_per_epoch
    series = {k: torch.zeros(total, device=device) for k in ("loss", "norm", "scale", "skip")}
    one = torch.ones((), device=device)
    r["flops_per_step"] = 3.0 * model.forward_flops_per_sample() * batch

    def scale_tensor():
        s = getattr(scaler, "_scale", None)  # the device tensor; get_scale() would sync
        return s if scaling and s is not None else one

    def step(b, g, first):
        xb = d["train_x"][b * batch:(b + 1) * batch]
        yb = d["train_y"][b * batch:(b + 1) * batch]
        opt.zero_grad(set_to_none=True)
        with autocast():
            logits = model(xb)
        loss = F.cross_entropy(logits.float(), yb)
        if first:
            sample_memory()
        scaler.scale(loss).backward()
        if first:
            sample_memory()
        if scaling:
            scaler.unscale_(opt)
        grads = [p.grad for p in params]
        per_param = (torch._foreach_norm(grads) if hasattr(torch, "_foreach_norm")
                     else [torch.linalg.vector_norm(g) for g in grads])
        norm = torch.linalg.vector_norm(torch.stack(per_param))
        scale_before = scale_tensor().detach().clone()
        scaler.step(opt)
        scaler.update()
        series["loss"][g].copy_(loss.detach())
        series["norm"][g].copy_(norm)
        series["scale"][g].copy_(scale_before)
        if scaling:
            series["skip"][g].copy_((scale_tensor() < scale_before).float())
        if first:
            sample_memory()

    @torch.no_grad()
    def evaluate():
        n = d["eval_y"].numel()
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device, dtype=torch.long)
        for s in range(0, n, batch):
            x, y = d["eval_x"][s:s + batch], d["eval_y"][s:s + batch]
            with autocast():
                logits = model(x)
            logits = logits.float()
            loss_sum += F.cross_entropy(logits, y, reduction="sum")
            correct += (logits.argmax(dim=1) == y).sum()
        return loss_sum, correct, n

    g = 0
    for i in range(warmup):  # on the first batches, outside every timing
        step(i % steps_per_epoch, g, g == 0)
        g += 1
    step_ms = [math.nan] * total
    for ep in range(epochs):
        first = g
        marks = [Timer(cuda) for _ in range(steps_per_epoch + 1)]
        marks[0].record()
        for b in range(steps_per_epoch):
            step(b, g, g == 0)
            g += 1
            marks[b + 1].record()
        time_ms = marks[0].elapsed(marks[-1])
        for b in range(steps_per_epoch):
            step_ms[first + b] = marks[b].elapsed(marks[b + 1])
        t0 = Timer(cuda).record()
        loss_sum, correct, n = evaluate()
        t1 = Timer(cuda).record()
        eval_ms = t0.elapsed(t1)
        train_loss = series["loss"][first:g].double().mean().item()
        e = {"time_ms": time_ms, "eval_time_ms": eval_ms, "train_loss": train_loss,
             "eval_loss": loss_sum.item() / n, "eval_accuracy": correct.item() / n,
             "steps": steps_per_epoch}
        r["epochs"].append(e)
        log(ARGS, f"{spec['name']} {mode} epoch {ep + 1}/{epochs}: {time_ms:.2f} ms, "
                  f"loss {train_loss:.4f}, eval acc {100 * e['eval_accuracy']:.2f}%")
        if not (math.isfinite(train_loss) and math.isfinite(e["eval_loss"])):
            r["status"], r["status_detail"] = "diverged", f"loss became non-finite in epoch {ep + 1}"
            break
    sample_memory()

    host = {k: v[:g].tolist() for k, v in series.items()}
    r["steps"] = {"loss": host["loss"], "grad_norm": host["norm"], "loss_scale": host["scale"],
                  "skipped": [scaling and s != 0 for s in host["skip"]], "time_ms": step_ms[:g]}
    r["skipped_steps"] = sum(r["steps"]["skipped"])
    r["final_loss_scale"] = scale_tensor().item()
    r["epoch_time_ms"] = time_stats([e["time_ms"] for e in r["epochs"]])
    if r["epochs"]:
        r["final_accuracy"] = r["epochs"][-1]["eval_accuracy"]
        r["final_loss"] = r["epochs"][-1]["eval_loss"]
    med = r["epoch_time_ms"]["median"]
    if med > 0:
        secs = med / 1000.0
        r["samples_per_second"] = steps_per_epoch * batch / secs
        r["tflops"] = r["flops_per_step"] * steps_per_epoch / secs / 1e12
    if cuda:
        sheet = find_datasheet(torch.cuda.get_device_name(device))
        if sheet:
            r["peak_tflops"] = peak_tflops(sheet, mode)
            r["percent_of_peak"] = 100.0 * r["tflops"] / r["peak_tflops"]

    cats = mem["by_category"]
    cats["weights"] = tensor_bytes(params)
    cats["gradients"] = tensor_bytes(p.grad for p in params)
    cats["optimizer_state"] = tensor_bytes(
        t for st in opt.state.values() for t in st.values())
    cats["data"] = tensor_bytes(d.values()) + tensor_bytes(series.values())
    mem["tracked"] = (torch.cuda.max_memory_allocated(device) if cuda
                      else sum(v for v in cats.values() if v))


def find_datasheet(name):
    best = None
    for row in DATASHEETS:
        if row[0] in name and (best is None or len(row[0]) > len(best[0])):
            best = row
    return best


def peak_tflops(sheet, mode):
    v = sheet[1 + MODES.index(mode)]
    return v if v > 0 else sheet[1]


def run_mode(spec, data, mode, device):
    r = empty_run(spec, mode, device, data["train_y"].numel())
    oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    try:
        train_mode(spec, data, mode, device, r)
    except BadInput:
        raise
    except oom as e:
        r["status"], r["status_detail"] = "oom", str(e).splitlines()[0]
    except Exception as e:  # one broken mode must not lose the others' results
        traceback.print_exc()
        r["status"], r["status_detail"] = "failed", f"{type(e).__name__}: {e}".splitlines()[0]
    finally:
        gc.collect()
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if r["status"] in ("oom", "failed"):
        r["epochs"], r["epoch_time_ms"] = [], time_stats([])
    return r


# ---- output -----------------------------------------------------------------------------------

def f32(v):
    """Shortest decimal that round-trips the float32 (as mpbench's num_f); None if not finite."""
    if v is None or not math.isfinite(v):
        return None
    packed = struct.pack("<f", v)
    for digits in range(1, 10):
        s = float(f"{v:.{digits}g}")
        if struct.pack("<f", s) == packed:
            return s
    return v


def finite(obj):
    """JSON has no NaN or infinity: write null, as mpbench does."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: (finite(v) if k != "steps" else v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite(v) for v in obj]
    return obj


def env_json(device):
    cpu_name = "unknown"
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_name = line.split(":", 1)[1].strip()
                    break
    env = {"device": device.type}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        driver = None
        with contextlib.suppress(Exception):
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=20)
            driver = out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
        sheet = find_datasheet(p.name)
        env["gpu"] = {
            "name": p.name, "compute_capability": f"{p.major}.{p.minor}",
            "memory_bytes": p.total_memory, "sm_count": p.multi_processor_count,
            "driver_version": driver, "cuda_runtime_version": torch.version.cuda,
            "cublas_version": None,
            "cudnn_version": str(torch.backends.cudnn.version()),
            "modes": {m: {"tensor_cores": p.major >= (7 if m == "amp_fp16" else 8) and m != "fp32",
                          "peak_tflops": peak_tflops(sheet, m) if sheet else None}
                      for m in MODES},
            "memory_bandwidth_gbps": sheet[5] if sheet else None,
        }
    env["cpu"] = {"name": cpu_name, "threads": os.cpu_count()}
    env["torch"] = {"version": torch.__version__, "threads": torch.get_num_threads()}
    return env


def write_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def console_table(runs):
    head = f"{'model':<12} {'mode':<9} {'epoch ms':>16} {'samples/s':>12} {'peak mem':>11} " \
           f"{'accuracy':>9} {'loss':>7} {'speedup':>8} {'skipped':>7} {'scale':>7}"
    lines = [head, "-" * len(head)]
    base = {r["model"]: r["epoch_time_ms"]["median"] for r in runs
            if r["precision"] == "fp32" and r["status"] == "ok"}
    for r in runs:
        if r["status"] not in ("ok", "diverged"):
            lines.append(f"{r['model']:<12} {r['precision']:<9} {r['status']}: "
                         f"{r['status_detail']}")
            continue
        t = r["epoch_time_ms"]
        m = r["peak_memory_bytes"]["tracked"] / 2 ** 20
        sp = (f"{base[r['model']] / t['median']:.2f}x" if r["model"] in base and t["median"]
              else "-")
        scale = f"{r['final_loss_scale']:.0f}" if r["loss_scaling"] else "-"
        lines.append(f"{r['model']:<12} {r['precision']:<9} "
                     f"{t['median']:>9.3f} ±{100 * t['cv']:>4.1f}% {r['samples_per_second']:>12,.0f} "
                     f"{m:>7.1f} MiB {100 * r['final_accuracy']:>8.2f}% {r['final_loss']:>7.4f} "
                     f"{sp:>8} {r['skipped_steps']:>7} {scale:>7}")
    return "\n".join(lines)


# ---- main -------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="+", metavar="SPEC")
    ap.add_argument("--out", required=True, help="result JSON (mpbench schema_version 1)")
    ap.add_argument("--precisions", help="comma-separated modes (default: each spec's)")
    ap.add_argument("--epochs", type=int, help="override the specs' epochs")
    ap.add_argument("--device", choices=("cuda", "cpu"),
                    default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--mpbench", default=os.environ.get("MPBENCH", "build/mpbench"),
                    help="the mpbench binary (default: $MPBENCH or build/mpbench)")
    ap.add_argument("--data-dir", help="keep the exported datasets here (default: a temp dir)")
    ap.add_argument("--quiet", "-q", action="store_true")
    return ap.parse_args(argv)


def main(argv):
    global ARGS
    args = ARGS = parse_args(argv)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        raise BadInput(f"--out {args.out}: directory {out_dir} does not exist")
    modes = None
    if args.precisions:
        modes = [m.strip() for m in args.precisions.split(",")]
        for m in modes:
            if m not in MODES:
                raise BadInput(f"--precisions: unknown mode '{m}' (expected {', '.join(MODES)})")
    if args.epochs is not None and args.epochs < 1:
        raise BadInput(f"--epochs {args.epochs}: expected a positive integer")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: torch.cuda.is_available() is False")
    for path in args.specs:
        read_family(path)  # every spec checked before anything runs

    if args.data_dir:
        os.makedirs(args.data_dir, exist_ok=True)
    tmp = None if args.data_dir else tempfile.TemporaryDirectory(prefix="mpbench_data_")
    data_dir = args.data_dir or tmp.name
    report = {"schema_version": 1,
              "tool": {"name": "pytorch", "version": torch.__version__, "git": None},
              "env": env_json(device), "specs": [], "runs": []}
    try:
        for i, path in enumerate(args.specs):
            spec, data, desc = export_data(path, args.mpbench, data_dir, i)
            if modes:
                spec["precisions"] = modes
            if args.epochs:
                spec["train"]["epochs"] = args.epochs
            report["specs"].append(spec)
            log(args, f"{spec['name']}: {desc}")
            for mode in spec["precisions"]:
                log(args, f"{spec['name']} {mode} on {device.type}")
                r = run_mode(spec, data, mode, device)
                report["runs"].append(r)
            del data
            gc.collect()
    finally:
        if tmp:
            tmp.cleanup()

    for r in report["runs"]:
        r["steps"] = {k: v if k == "skipped" else [f32(x) for x in v]
                      for k, v in r["steps"].items()}
    write_atomic(args.out, json.dumps(finite(report), indent=2, allow_nan=False) + "\n")
    print(console_table(report["runs"]))
    log(args, f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"pytorch_reference: {e}", file=sys.stderr)
        sys.exit(2)
