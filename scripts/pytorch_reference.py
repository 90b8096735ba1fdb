#!/usr/bin/env python3
"""PyTorch reference for mpbench: the same model, data and training loop, measured the same way.

    scripts/pytorch_reference.py SPEC... --out results.json [--precisions LIST] [--epochs N]
                                 [--device cuda|cpu] [--mpbench BIN] [--data-dir DIR]
                                 [--attention plain|sdpa] [--profile-steps N] [--quiet]
    scripts/pytorch_reference.py SPEC... --params-only [--mpbench BIN]

--params-only builds each spec's model on the CPU without data or training and prints, as JSON,
its parameter count and training FLOPs per step beside those `mpbench inspect` reports; exit 1
if any differ.

For each spec and each precision mode it builds the same model as mpbench from stock torch.nn
modules, trains it and writes mpbench's result JSON (schema_version 1) with tool.name "pytorch",
so that `mpbench compare` or a notebook can put the two side by side. Families (model.type):
  * mlp: nn.Linear layers fc1..fcN (ReLU, tanh-GELU or none: the spec's activation) and head.
  * resnet_bottleneck: ResNet-50 v1.5 bottleneck blocks block1..blockN (nn.Conv2d without bias,
    nn.BatchNorm2d eps 1e-5 momentum 0.1, the stride on the 3x3 conv, a 1x1 conv + BN shortcut
    when the shape changes), then head = global average pooling + nn.Linear. Model and inputs
    in channels_last memory format: mpbench's NHWC pixel rows (n, H*W*C) are viewed as
    (n, H, W, C) and permuted to NCHW shape, which is channels_last without a copy. Batchnorm
    uses batch statistics in training and running statistics in evaluation, as mpbench does.
  * transformer: embedding (token + learned position), pre-LN layers layer1..layerN
    (x + proj(MHA(LN1(x))) with a fused QKV nn.Linear, then x + Linear(GELU-tanh(Linear(LN2(x))))),
    head = final LayerNorm + nn.Linear over the vocabulary (with tie_embeddings, as GPT-2, no bias
    and the token table as its weight), a label at every position; the loss
    is the mean over all batch x seq_len positions and accuracy counts every position. Attention
    is by default written out (QK^T GEMM, softmax in fp32 with the optional causal mask, PV GEMM)
    because that is mpbench's math, probabilities materialised and rounded to the mode's dtype
    before the PV GEMM; --attention sdpa uses F.scaled_dot_product_attention instead (fused
    flash / memory-efficient kernels: what a PyTorch user would run, with other numerics and far
    less activation memory).
Layer names are mpbench's, so fp32_layers pins the same layers.

How it mirrors mpbench (train/trainer.cpp):
  * Data: `mpbench data SPEC --out DIR/NAME` writes the exact dataset mpbench trains on, plus the
    resolved spec (every default filled in); this script reads both, so inputs are bit-identical
    and no default is duplicated here.
  * Initial parameters: by default (--init mpbench) `mpbench data --params` writes the weights
    mpbench's run starts from and every mode here starts from the same (a convolution's
    transposed from mpbench's (K, R, S, C)), so that the two tools' losses can be compared step
    by step; --init pytorch keeps PyTorch's own default init, seeded with the data seed.
  * The whole dataset is put on the device up front. Training batches are consecutive slices, no
    shuffling (as `mpbench run` without --seeds; a seeded run's shuffled batches and own
    initial weights have no counterpart here), the last partial batch dropped. warmup_steps steps (on the first batches) run
    first, outside any timing. Each epoch is timed with events around its training steps only;
    evaluation (every eval row, last partial batch included) is timed apart. Per-step times come
    from events recorded between steps. host_load records whether something else took the
    process's CPUs over the epochs (its threads' time waiting for a CPU, a hypervisor's steal),
    as mpbench's run does (a busy machine slows a run steadily; `mpbench report` notes it).
  * Per-step loss / grad norm / loss scale / skipped flag stay in device tensors and are read
    back after each epoch, so the loop adds no host synchronisation. (A non-fused optimizer
    under GradScaler does synchronise: PyTorch's GradScaler.step checks found_inf on the host.
    Fused optimizers, used on CUDA where available, take found_inf on the device.)
  * Modes: fp32 (TF32 off), tf32 (TF32 matmuls), amp_fp16 (autocast fp16 + GradScaler with the
    spec's loss_scale settings), amp_bf16 (autocast bf16, GradScaler only if loss_scale.amp_bf16),
    amp_fp8 (below). Layers in fp32_layers run with autocast disabled on fp32 inputs (the
    embedding never runs under autocast: its output is fp32 in every mode). The loss is
    cross-entropy on float32 logits. grad_norm is the L2 norm of the unscaled gradients; a step
    counts as skipped when the scaler lowered the scale after it.
  * amp_fp8 runs only when the spec's precisions or --precisions list it, as in mpbench. It is
    amp_bf16 without GradScaler, except that the Linear layers mpbench runs in FP8 (the MLP's
    fc1..fcN and head, the transformer's qkv, proj, fc1, fc2 and head, ResNet's head; none in
    fp32_layers; in_features and out_features multiples of 16, as mpbench's fp8_gemm_fits) run
    Transformer Engine's recipe, DelayedScaling with Format.HYBRID (E4M3 forward, E5M2
    gradients) and the spec's fp8 block (amax_history_len, amax_compute, margin; TE's defaults
    1024, max, 0 for a resolved spec written before mpbench had it), in one of two ways (--fp8;
    auto: te on CUDA where transformer_engine imports, else torch), named in the run's
    pytorch.fp8.impl:
    - "transformer_engine" (--fp8 te): te.Linear layers (same sizes, bias, names and copied
      initial weights), each forward also under te.fp8_autocast (te.autocast in newer TE). The
      tied head stays a bf16 nn.Linear (te.Linear cannot share the token table's weight), listed
      in pytorch.fp8.bf16_layers, and the last partial eval batch is padded to a multiple of 8
      rows with copies of its last sample, their logits dropped. CUDA only.
    - "torch._scaled_mm" (--fp8 torch): this script's Fp8Linear, mpbench's FP8 Linear in eager
      PyTorch (the same parameters, the tied head included: casts with saturation, one
      torch._scaled_mm per GEMM, the scales updated after each step on the device), which also
      runs on a CPU whose torch has _scaled_mm there (2.15 has). From mpbench's initial weights
      its losses and scales are mpbench's reference's for the first steps. Its time is eager
      PyTorch's, with separate amax, cast and transpose kernels where TE fuses them; the run
      gets mpbench's fp8_scaling series (the first and last FP8 layer's x, w, dy).
    Where the chosen way cannot run, the row has status "unsupported", every reason that holds
    in status_detail ("transformer_engine is not installed", "FP8 needs a CUDA device ...",
    "FP8 needs compute capability 8.9+, this device is 8.0", "torch ... has no
    torch._scaled_mm"), and no numbers: the row mpbench writes on such a card.
  * FLOPs per step = (3 x forward FLOPs - the input gradient the first layer never computes)
    x batch, counted as mpbench's LayerInfo counts them: GEMMs and convolutions only (see the
    *_flops functions below; a Linear is 2*in*out, its bias, pooling, norms and adds nothing).
    --params-only holds the count to mpbench's. Peak TFLOP/s from the same datasheet table as
    train/device_specs.cpp.
  * Memory: peak_memory_bytes.tracked = torch.cuda.max_memory_allocated(); .device = the largest
    rise of cudaMemGetInfo's used bytes over a baseline taken before the model is built, sampled
    after build, after the first forward, backward and step, and at the end.

  * --profile-steps N: after the measured epochs, N more steps run under torch.profiler and the
    run gets a "profile" block: the kernels / ops by self device time per step (self CPU time
    on the CPU), to set beside `mpbench profile SPEC --json` when a row is slower than PyTorch.
    These steps are outside every figure above. CUPTI is torn down after each profile
    (TEARDOWN_CUPTI=1 unless set), so that a profiled mode does not slow the modes timed after it.

Needs Python 3.10+ and torch; amp_fp8 needs torch 2.1+ (torch._scaled_mm) or transformer_engine
(optional: without either that mode's rows are "unsupported").
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import math
import os
import re
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

from script_io import BadInput, check_output, run_main, write_output

# torch warns when numpy is absent; this script never needs numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
# --profile-steps profiles each mode after its timed epochs, before the next mode is timed: a
# profiler that leaves CUPTI attached when it stops slows every later launch (torch issue 144455;
# Kineto tears it down only when TEARDOWN_CUPTI=1, the default only in newer releases). Set
# before torch is imported; the user's own setting stands.
os.environ.setdefault("TEARDOWN_CUPTI", "1")
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("pytorch_reference.py: PyTorch is not installed (pip install torch)")

MODES = ("fp32", "tf32", "amp_fp16", "amp_bf16", "amp_fp8")
# train/device_specs.cpp: name, dense TFLOP/s for fp32, tf32, fp16, bf16, fp8 (0: none), GB/s.
DATASHEETS = [
    ("T4", 8.1, 0, 65, 0, 0, 320), ("A10", 31.2, 62.5, 125, 125, 0, 600),
    ("L4", 30.3, 60, 121, 121, 242.5, 300), ("L40S", 91.6, 183, 362, 362, 733, 864),
    ("A100-SXM4-80GB", 19.5, 156, 312, 312, 0, 2039),
    ("A100 80GB PCIe", 19.5, 156, 312, 312, 0, 1935),
    ("A100", 19.5, 156, 312, 312, 0, 1555), ("H100 PCIe", 51, 378, 756, 756, 1513, 2000),
    ("H100 NVL", 60, 418, 835, 835, 1671, 3900), ("H100", 67, 494.7, 989.4, 989.4, 1979, 3350),
    ("H200 NVL", 60, 418, 835, 835, 1671, 4800), ("H200", 67, 494.7, 989.4, 989.4, 1979, 4800),
    ("GH200", 67, 494.7, 989.4, 989.4, 1979, 4000),
]
# The compute capability each mode's tensor cores need (fp32 uses none); amp_fp8's is also the
# one it needs to run at all (FP8 tensor cores: Ada and Hopper), as in kernels/core.cpp.
TENSOR_CORE_CC = {"tf32": (8, 0), "amp_fp16": (7, 0), "amp_bf16": (8, 0), "amp_fp8": (8, 9)}
# Transformer Engine's DelayedScaling defaults, as models/spec.h: only for resolved specs written
# before mpbench had the "fp8" block (newer ones carry every value).
FP8_DEFAULTS = {"amax_history_len": 1024, "amax_compute": "max", "margin": 0}
MEM_CATEGORIES = ("weights", "master_weights", "gradients", "optimizer_state", "activations",
                  "workspace", "data")


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
    if family not in FAMILIES:
        raise BadInput(f"{path}: model.type: expected one of {', '.join(map(json.dumps, FAMILIES))}"
                       f", got {json.dumps(family)}")


def export_data(spec_path, mpbench, data_dir, index):
    """Runs `mpbench data`; returns the resolved spec dict, {name: tensor} on the host, the data's
    description, labels per sample and, with --init mpbench, mpbench's initial parameters."""
    prefix = os.path.join(data_dir, f"spec{index}")
    cmd = [mpbench, "data", spec_path, "--out", prefix, "--quiet"]
    if ARGS.init == "mpbench":
        cmd.append("--params")
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
    lps = meta.get("labels_per_sample", 1)
    xdt = {"float32": torch.float32, "int32": torch.int32}.get(meta.get("x_dtype", "float32"))
    if xdt is None:
        raise BadInput(f"{spec_path}: `mpbench data` wrote x_dtype {meta['x_dtype']!r}")
    # Labels stay flat, (n * labels_per_sample): batch b's are rows [b*B*lps, (b+1)*B*lps).
    shapes = {"train_x": ((n_tr, dim), xdt), "train_y": ((n_tr * lps,), torch.int32),
              "eval_x": ((n_ev, dim), xdt), "eval_y": ((n_ev * lps,), torch.int32)}
    data = {}
    for key, (shape, dtype) in shapes.items():
        path = os.path.join(data_dir, meta["files"][key])
        count = math.prod(shape)
        t = torch.from_file(path, shared=False, size=count, dtype=dtype)  # little-endian hosts
        data[key] = t.reshape(shape)
    # cross_entropy wants int64 targets; token ids stay int32 (nn.Embedding takes them), the
    # bytes mpbench holds.
    data["train_y"] = data["train_y"].long()
    data["eval_y"] = data["eval_y"].long()
    spec = meta["resolved_spec"]
    if spec["model"]["type"] == "resnet_bottleneck":
        # mpbench's pixels are NHWC rows (n, H*W*C); the same bytes viewed as (n, C, H, W) with
        # channels_last strides, so the convolutions read them in the layout mpbench uses.
        m = spec["model"]
        hw, c = m["image_size"], m["in_channels"]
        for key in ("train_x", "eval_x"):
            data[key] = data[key].reshape(-1, hw, hw, c).permute(0, 3, 1, 2)
    init = read_initial_params(meta, data_dir, spec_path) if ARGS.init == "mpbench" else None
    return spec, data, meta["description"], lps, init


def read_initial_params(meta, data_dir, spec_path):
    """{name: fp32 tensor in mpbench's layout} from `mpbench data --params`."""
    p = meta.get("params")
    if not p or not p.get("tensors"):
        raise BadInput(f"{spec_path}: `mpbench data --params` wrote no parameters (an mpbench "
                       "older than --init mpbench? use --init pytorch)")
    size = lambda t: math.prod(t["shape"])
    total = max(t["offset"] + size(t) for t in p["tensors"])
    flat = torch.from_file(os.path.join(data_dir, p["file"]), shared=False, size=total,
                           dtype=torch.float32)
    return {t["name"]: flat[t["offset"]:t["offset"] + size(t)].reshape(t["shape"])
            for t in p["tensors"]}


def torch_param_name(model, name):
    """mpbench's parameter name as this script's: the layer (a key of model.layers, "." written
    "_" in staged ResNets), then the few names that differ (LayerNorm gamma/beta, the ResNet
    shortcut, the attention's projections, the embedding tables); None when no layer has it."""
    parts = name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        layer = "_".join(parts[:k])
        if layer in model.layers:
            rest = ".".join(parts[k:])
            break
    else:
        return None
    rest = re.sub(r"(^|\.)gamma$", r"\1weight", re.sub(r"(^|\.)beta$", r"\1bias", rest))
    for old, new in (("shortcut.conv.", "down.0."), ("shortcut.bn.", "down.1."),
                     ("qkv.", "attn.qkv."), ("proj.", "attn.proj.")):
        if rest.startswith(old):
            rest = new + rest[len(old):]
    rest = {"token": "tok.weight", "position": "pos.weight"}.get(rest, rest)
    return f"layers.{layer}.{rest}"


def load_mpbench_init(model, init, spec_path):
    """Copies mpbench's initial parameters into model: every parameter of model gets exactly one,
    of its shape (a convolution's from mpbench's (K, R, S, C) to (K, C, R, S))."""
    params = dict(model.named_parameters())  # a tied weight once, under its first name
    done = set()
    with torch.no_grad():
        for name, value in init.items():
            key = torch_param_name(model, name)
            if key not in params:
                raise BadInput(f"{spec_path}: mpbench's parameter {name} has no counterpart "
                               f"here (looked for {key})")
            if value.dim() == 4:
                value = value.permute(0, 3, 1, 2)
            if tuple(value.shape) != tuple(params[key].shape):
                raise BadInput(f"{spec_path}: mpbench's {name} is {tuple(value.shape)}, {key} "
                               f"here {tuple(params[key].shape)}")
            params[key].copy_(value)
            done.add(key)
    missing = sorted(set(params) - done)
    if missing:
        raise BadInput(f"{spec_path}: mpbench's parameters leave {', '.join(missing)} "
                       "uninitialised")


# ---- model ------------------------------------------------------------------------------------

# Forward FLOPs per sample, counted as mpbench's LayerInfo counts them (models/*.cpp), so that
# both tools' tflops divide the same work by their own times.

def linear_flops(n_in, n_out):  # models/linear.cpp: the GEMM's, not the bias's adds
    return 2.0 * n_in * n_out


def conv_flops(cin, cout, k, out_size):  # models/resnet.cpp: 2 * P * Q * K * R * S * C
    return 2.0 * cin * cout * k * k * out_size * out_size


def resnet_block_flops(cin, width, cout, stride, size):
    """The block's convolutions only (batchnorm, add and ReLU are not counted)."""
    out = (size + 2 - 3) // stride + 1
    f = conv_flops(cin, width, 1, size) + conv_flops(width, width, 3, out) + \
        conv_flops(width, cout, 1, out)
    if stride != 1 or cin != cout:
        f += conv_flops(cin, cout, 1, out)
    return f


def transformer_flops(m):
    """models/transformer.cpp: GEMMs only (no embedding, LayerNorm, softmax, biases, adds);
    attention counts only the unmasked scores when causal, s(s+1)/2 of the s^2."""
    d, s, ffn, v = m["d_model"], m["seq_len"], m["ffn_dim"], m["vocab_size"]
    attention = 2.0 * (s + 1) * d if m["causal"] else 4.0 * s * d  # QK^T and PV, per query
    layer = s * (2.0 * (4.0 * d * d + 2.0 * d * ffn) + attention)
    return m["layers"] * layer + s * 2.0 * d * v


def pinned(module, name, x):
    """Runs module; a layer named in fp32_layers runs with autocast off on fp32 inputs."""
    if name in module.fp32:
        with torch.autocast(module.device_type, enabled=False):
            return module.layers[name](x.float())
    return module.layers[name](x)


class Mlp(nn.Module):
    """fc1..fcN (hidden, with the activation) then head; names match mpbench's mlp_layer_names."""

    def __init__(self, m, fp32_layers, device_type, attention=None):
        super().__init__()
        dims = [m["input_dim"], *m["hidden"], m["num_classes"]]
        names = [f"fc{i + 1}" for i in range(len(m["hidden"]))] + ["head"]
        self.layers = nn.ModuleDict(
            {n: nn.Linear(dims[i], dims[i + 1]) for i, n in enumerate(names)})
        self.activation = {"relu": F.relu, "gelu": lambda x: F.gelu(x, approximate="tanh"),
                           "none": lambda x: x}[m.get("activation", "relu")]
        self.fp32 = set(fp32_layers)
        self.device_type = device_type

    def forward(self, x):
        for name in self.layers:
            x = pinned(self, name, x)
            if name != "head":
                x = self.activation(x)
        return x

    def forward_flops_per_sample(self):
        return sum(linear_flops(l.in_features, l.out_features) for l in self.layers.values())

    def first_input_flops_per_sample(self):  # the input gradient the first layer never computes
        first = next(iter(self.layers.values()))
        return 2.0 * first.in_features * first.out_features


class Bottleneck(nn.Module):
    """ResNet-50 v1.5 bottleneck: 1x1 -> BN -> ReLU -> 3x3 (stride) -> BN -> ReLU -> 1x1 -> BN,
    plus the shortcut (1x1 conv with the stride + BN when the shape changes), add, ReLU."""

    def __init__(self, cin, width, cout, stride, size):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width, eps=1e-5, momentum=0.1)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width, eps=1e-5, momentum=0.1)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                      nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1))
        self.cin, self.width, self.cout, self.stride, self.size = cin, width, cout, stride, size
        self.out_size = (size + 2 - 3) // stride + 1

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        # In place, as torchvision's Bottleneck adds: the sum keeps y's dtype. `y + x` would
        # promote a first block's fp32 input (no stem, no projection) and with it the rest of
        # the stage to fp32 under autocast, where mpbench keeps the compute dtype.
        y += self.down(x) if self.down is not None else x
        return F.relu(y)

    def forward_flops(self):
        return resnet_block_flops(self.cin, self.width, self.cout, self.stride, self.size)

    def input_flops(self):  # the convolutions that read the block's input: conv1, the shortcut's
        down = conv_flops(self.cin, self.cout, 1, self.out_size) if self.down is not None else 0
        return conv_flops(self.cin, self.width, 1, self.size) + down


class GlobalAvgPool(nn.Module):
    """(n, C, H, W) -> (n, C), in the input's dtype."""

    def forward(self, x):
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


class Stem(nn.Module):
    """The ImageNet stem: 7x7 stride-2 conv -> BN -> ReLU -> 3x3 stride-2 max pool."""

    def __init__(self, cin, cout, size):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.cin, self.cout = cin, cout
        self.conv_size = (size - 1) // 2 + 1
        self.out_size = (self.conv_size - 1) // 2 + 1

    def forward(self, x):
        return F.max_pool2d(F.relu(self.bn(self.conv(x))), 3, stride=2, padding=1)

    def forward_flops(self):
        return conv_flops(self.cin, self.cout, 7, self.conv_size)


class Resnet(nn.Module):
    """[stem,] the blocks, pool, head (names as models/resnet.h: block1..blockN, or
    stageS.blockB with "stages", "." written "_" in the module dict); inputs (n, C, H, W) in
    channels_last memory format."""

    def __init__(self, m, fp32_layers, device_type, attention=None):
        super().__init__()
        layers, cin, size = {}, m["in_channels"], m["image_size"]
        if m.get("stem", "none") == "imagenet":
            stem = Stem(cin, m.get("stem_channels", 64), size)
            layers["stem"] = stem
            cin, size = stem.cout, stem.out_size
        staged = "stages" in m
        stages = m["stages"] if staged else [
            {k: m[k] for k in ("blocks", "width", "out_channels")} | {"stride": m.get("stride", 1)}]
        for s, st in enumerate(stages):
            for i in range(st["blocks"]):
                stride = st.get("stride", 1) if i == 0 else 1
                b = Bottleneck(cin, st["width"], st["out_channels"], stride, size)
                layers[f"stage{s + 1}_block{i + 1}" if staged else f"block{i + 1}"] = b
                cin, size = st["out_channels"], b.out_size
        layers["pool"] = GlobalAvgPool()
        layers["head"] = nn.Linear(cin, m["num_classes"])
        self.layers = nn.ModuleDict(layers)
        self.fp32 = {name.replace(".", "_") for name in fp32_layers}
        self.device_type = device_type

    def forward(self, x):
        for name in self.layers:
            x = pinned(self, name, x)
        return x

    def first_input_flops_per_sample(self):  # the input gradient the first layer never computes
        first = next(iter(self.layers.values()))
        return first.forward_flops() if isinstance(first, Stem) else first.input_flops()

    def forward_flops_per_sample(self):
        f = sum(b.forward_flops() for b in self.layers.values()
                if isinstance(b, (Bottleneck, Stem)))
        head = self.layers["head"]
        return f + linear_flops(head.in_features, head.out_features)


class Attention(nn.Module):
    """Multi-head self-attention with a fused QKV projection (q, k, v = thirds of its output,
    heads contiguous in each). "plain": the scores GEMM with 1/sqrt(Dh) as its alpha (baddbmm,
    as mpbench, so fp16 scores stay small), stored in the GEMM's dtype, the softmax in fp32 with
    the causal mask, the probabilities back in the GEMM's dtype for P v; "sdpa":
    F.scaled_dot_product_attention (fused flash / memory-efficient kernels where available)."""

    def __init__(self, d, heads, causal, impl):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads, self.causal, self.impl = heads, causal, impl

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)  # 3 x (b, h, s, dh)
        if self.impl == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            q3, k3 = q.reshape(b * h, s, d // h), k.reshape(b * h, s, d // h)
            # beta=0: the input is ignored (NaNs in it included); one broadcast element, so no
            # extra (S, S) buffer.
            scores = torch.baddbmm(q3.new_zeros(1, 1, 1), q3, k3.transpose(1, 2), beta=0.0,
                                   alpha=1.0 / math.sqrt(d // h))
            scores = scores.float()
            if self.causal:
                mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
            probs = torch.softmax(scores, dim=-1).to(v.dtype)  # v: the GEMMs' dtype
            y = torch.matmul(probs.view(b, h, s, s), v)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class TransformerLayer(nn.Module):
    """Pre-LN: x + proj(MHA(LN1(x))), then x + FFN(LN2(x)) with a tanh-GELU."""

    def __init__(self, d, heads, ffn, causal, impl):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = Attention(d, heads, causal, impl)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Embedding(nn.Module):
    """Token + learned position embedding, both N(0, 0.02) (GPT-2 / BERT, as mpbench)."""

    def __init__(self, vocab, seq_len, d):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq_len, d)
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def forward(self, tokens):
        return self.tok(tokens) + self.pos.weight[:tokens.shape[1]]


class Transformer(nn.Module):
    """embedding, layer1..layerN, final_norm, head (names as models/transformer.h); logits
    (n * seq_len, vocab): a label at every position."""

    def __init__(self, m, fp32_layers, device_type, attention="plain"):
        super().__init__()
        d = m["d_model"]
        layers = {"embedding": Embedding(m["vocab_size"], m["seq_len"], d)}
        for i in range(m["layers"]):
            layers[f"layer{i + 1}"] = TransformerLayer(d, m["heads"], m["ffn_dim"], m["causal"],
                                                       attention)
        layers["final_norm"] = nn.LayerNorm(d, eps=1e-5)
        tied = m.get("tie_embeddings", False)
        layers["head"] = nn.Linear(d, m["vocab_size"], bias=not tied)
        if tied:  # GPT-2: the head's weight is the token table
            layers["head"].weight = layers["embedding"].tok.weight
        self.layers = nn.ModuleDict(layers)
        self.m = m
        self.fp32 = set(fp32_layers)
        self.device_type = device_type

    def forward(self, tokens):
        x = tokens
        for name in self.layers:
            x = self.layers[name](x) if name == "embedding" else pinned(self, name, x)
        return x.reshape(-1, x.shape[-1])

    def forward_flops_per_sample(self):
        return transformer_flops(self.m)

    def first_input_flops_per_sample(self):  # the embedding: no GEMM
        return 0.0


FAMILIES = {"mlp": Mlp, "resnet_bottleneck": Resnet, "transformer": Transformer}


@functools.cache
def transformer_engine():
    """(transformer_engine.pytorch, its recipe module), or (None, why not): imported once, and
    only when amp_fp8 is asked for, so the other modes never depend on it."""
    try:
        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe
    except Exception as e:  # noqa: BLE001 - also an install that fails to load (CUDA libraries)
        if isinstance(e, ModuleNotFoundError) and e.name == "transformer_engine":
            return None, "transformer_engine is not installed"
        why = f"transformer_engine cannot be imported: {type(e).__name__}: {e}"
        return None, why.split("\n")[0]
    return (te, recipe), None


def te_version():
    """The installed Transformer Engine's version (the package's, which transformer_engine.pytorch
    need not carry), or None."""
    with contextlib.suppress(Exception):
        import transformer_engine
        return getattr(transformer_engine, "__version__", None)
    return None


def fp8_impl(device):
    """Which amp_fp8 this run uses (--fp8): "te" (Transformer Engine's te.Linear) or "torch"
    (Fp8Linear below, on torch._scaled_mm). auto: TE where it imports and the device is CUDA
    (TE has no CPU path), else torch."""
    if ARGS.fp8 != "auto":
        return ARGS.fp8
    return "te" if device.type == "cuda" and transformer_engine()[0] is not None else "torch"


def scaled_mm(*args, **kw):
    """torch._scaled_mm's product (torch 2.1-2.4 returned it with an amax, as a tuple)."""
    out = torch._scaled_mm(*args, **kw)
    return out[0] if isinstance(out, tuple) else out


@functools.cache
def scaled_mm_unsupported(device_type):
    """Why torch._scaled_mm cannot run here (None if it can): a 16x16 product of E4M3 and E5M2
    operands with a bf16 bias, as Fp8Linear's GEMMs take them."""
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return f"torch {torch.__version__} has no torch._scaled_mm (FP8 GEMMs: torch 2.1+)"
    try:
        a = torch.ones(16, 16, device=device_type).to(torch.float8_e4m3fn)
        g = torch.ones(16, 16, device=device_type).to(torch.float8_e5m2)
        one = torch.ones((), device=device_type)
        scaled_mm(g, a.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                  bias=torch.zeros(16, device=device_type, dtype=torch.bfloat16))
    except Exception as e:  # noqa: BLE001 - whatever this build refuses, said in the row
        why = f"torch {torch.__version__}'s torch._scaled_mm fails on {device_type}: {e}"
        return why.split("\n")[0]
    return None


def fp8_unsupported(device):
    """Why amp_fp8 cannot run on this device with this install (every reason that holds), or
    None. With Transformer Engine it needs a CUDA device of compute capability 8.9+; with torch
    (Fp8Linear) a torch whose _scaled_mm runs on the device, and on CUDA the same 8.9+."""
    reasons = []
    if fp8_impl(device) == "te":
        te, why = transformer_engine()
        if te is None:
            reasons.append(why)
        if device.type != "cuda":
            reasons.append("FP8 needs a CUDA device (Transformer Engine has no CPU path)")
    if device.type == "cuda":
        cc = torch.cuda.get_device_capability(device)
        need = TENSOR_CORE_CC["amp_fp8"]
        if cc < need:
            reasons.append(f"FP8 needs compute capability {need[0]}.{need[1]}+, this device is "
                           f"{cc[0]}.{cc[1]}")
    if not reasons and fp8_impl(device) == "torch":
        why = scaled_mm_unsupported(device.type)
        if why:
            reasons.append(why)
    return "; ".join(reasons) or None


def swap_fp8_linears(model, make, tied_ok):
    """amp_fp8: every nn.Linear that mpbench runs in FP8 becomes make(name, linear), a module
    with the same parameters (or copies), names and sizes. mpbench's rule: a Linear not in
    fp32_layers whose in_features and out_features are multiples of 16 (fp8_gemm_fits); a weight
    tied to the token table too where tied_ok. Returns (FP8 layer names, {layer kept as a bf16
    nn.Linear: why})."""
    uses = {}  # a weight registered in two modules is tied (GPT-2's head and token table)
    for m in model.modules():
        for p in m.parameters(recurse=False):
            uses[id(p)] = uses.get(id(p), 0) + 1
    fp8, kept = [], {}
    for top, layer in model.layers.items():
        if top in model.fp32:
            continue  # pinned: a plain nn.Linear run with autocast off (pinned())
        for sub, lin in list(layer.named_modules()):
            if not isinstance(lin, nn.Linear):
                continue
            name = f"{top}.{sub}" if sub else top
            if uses[id(lin.weight)] > 1 and not tied_ok:
                # te.Linear owns its weight parameter and documents no way to take another
                # module's, so the tied head stays a bf16 F.linear on the token table.
                kept[name] = "weight tied to the token table"
                continue
            if lin.in_features % 16 or lin.out_features % 16:
                # TE's FP8 GEMM asserts out % 8 and in % 16 on the weight (out, in); mpbench's
                # FP8 Linears need both in 16s (fp8_gemm_fits): the same layers run FP8 in both.
                kept[name] = (f"weight {lin.out_features}x{lin.in_features}: FP8 GEMMs here need "
                              "out_features and in_features in multiples of 16")
                continue
            new = make(name, lin)
            parent, _, attr = sub.rpartition(".")
            if sub:
                setattr(layer.get_submodule(parent) if parent else layer, attr, new)
            else:
                model.layers[top] = new
            fp8.append(name)
    return fp8, kept


def te_linear(te, device):
    """make() for swap_fp8_linears: a te.Linear with the same sizes and bias, and copies of the
    fp32 weights, so every mode starts from the same init."""
    def make(name, lin):
        new = te.Linear(lin.in_features, lin.out_features, bias=lin.bias is not None,
                        params_dtype=torch.float32, device=device)
        with torch.no_grad():
            new.weight.copy_(lin.weight)
            if lin.bias is not None:
                new.bias.copy_(lin.bias)
        return new
    return make


def te_fp8_autocast(te, recipe_mod, f):
    """A function returning TE's FP8 autocast context for one forward: HYBRID (E4M3 forward,
    E5M2 gradients), delayed scaling with the fp8 block's values f."""
    recipe = recipe_mod.DelayedScaling(fp8_format=recipe_mod.Format.HYBRID,
                                       amax_history_len=f["amax_history_len"],
                                       amax_compute_algo=f["amax_compute"], margin=f["margin"])
    if hasattr(te, "autocast"):  # newer TE's name for fp8_autocast (which then warns)
        return lambda: te.autocast(enabled=True, recipe=recipe)
    return lambda: te.fp8_autocast(enabled=True, fp8_recipe=recipe)


class Fp8Scales:
    """amp_fp8 without Transformer Engine: the delayed-scaling state of a model's FP8 tensors
    (TE's DelayedScaling recipe, as mpbench's models/fp8_scaling.h and kernels/fp8.h hold it),
    per format an amax history (amax_history_len, tensors) and each tensor's scale and inverse,
    all on the device. A cast in training records max|x| (NaN passed over) into the newest slot,
    slot 0; update(), after each optimizer step, takes the amax from the whole history ("max") or
    slot 0 ("most_recent"), rolls the history (slot 0 to the end, slot 0 at 0 again) and sets
    scale = fp8_max * 2^-margin / amax (at most FLT_MAX), leaving history and scale as they were
    for a tensor whose step saw an amax of 0 and the scale for a non-finite amax. Scales sit 16
    bytes apart, as mpbench's kSlot: cuBLASLt reads them through pointers. Each update also
    records every tensor's amax_used (the amax it scaled by, 0 for none) and scale for the run's
    fp8_scaling series."""

    STRIDE = 4
    DTYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
    # mpbench's fp8_clip_threshold: the format's largest value plus half its step.
    CLIP = {"e4m3": 464.0, "e5m2": 61440.0}

    def __init__(self, f, device):
        self.f, self.device = f, device
        self.count = {fmt: 0 for fmt in self.DTYPES}
        self.names = []  # (name, format, index in the format), in declaration order

    def declare(self, name, fmt):
        self.names.append((name, fmt, self.count[fmt]))
        self.count[fmt] += 1
        return self.count[fmt] - 1

    def allocate(self, steps):
        n, dev = self.count, self.device
        self.history = {k: torch.zeros(self.f["amax_history_len"], n[k], device=dev) for k in n}
        self.scale = {k: torch.ones(n[k] * self.STRIDE, device=dev) for k in n}
        self.scale_inv = {k: torch.ones(n[k] * self.STRIDE, device=dev) for k in n}
        self.series = {k: (torch.zeros(steps, n[k], device=dev),
                           torch.zeros(steps, n[k], device=dev)) for k in n}

    def inv(self, fmt, i):
        return self.scale_inv[fmt][i * self.STRIDE]

    def cast(self, t, fmt, i, record):
        """t (any float dtype) as FP8: round(t * scale), saturated to the format's largest finite
        value, NaN kept, as mpbench's cast_to_fp8 (torch's own cast overflows to NaN or inf); row
        major, as _scaled_mm's first operand must be (a gradient can come strided)."""
        t = t.float().contiguous()
        if record:  # NaNs passed over element by element, as mpbench's fmaxf
            a = t.abs().nan_to_num_(nan=0.0, posinf=math.inf).amax()
            slot = self.history[fmt][0, i]
            slot.copy_(torch.maximum(slot, a))
        dtype = getattr(torch, self.DTYPES[fmt])
        big = torch.finfo(dtype).max
        return (t * self.scale[fmt][i * self.STRIDE]).clamp(-big, big).to(dtype)

    @torch.no_grad()
    def update(self, step):
        for fmt, h in self.history.items():
            if h.shape[1] == 0:
                continue
            newest = h[0].clone()
            amax = newest if self.f["amax_compute"] == "most_recent" else h.amax(dim=0)
            seen = newest != 0
            zero = torch.zeros_like(newest)[None]
            rolled = torch.cat([zero, h[2:], newest[None]]) if h.shape[0] > 1 else zero
            h.copy_(torch.where(seen, rolled, h))
            dtype = getattr(torch, self.DTYPES[fmt])
            top = torch.finfo(dtype).max * 2.0 ** -self.f["margin"]
            # Tensor by tensor: torch computes a number over a tensor as the tensor's
            # reciprocal times the number, one rounding more than mpbench's division.
            fresh = torch.full_like(amax, top).div(amax).clamp(max=torch.finfo(torch.float32).max)
            scale = self.scale[fmt].view(-1, self.STRIDE)[:, 0]
            scale.copy_(torch.where(seen & torch.isfinite(amax), fresh, scale))
            self.scale_inv[fmt].view(-1, self.STRIDE)[:, 0].copy_(torch.ones_like(scale).div(scale))
            self.series[fmt][0][step].copy_(torch.where(seen, amax, 0.0))
            self.series[fmt][1][step].copy_(scale)

    def series_json(self, steps):
        """The run's fp8_scaling, as mpbench's Run::read_back_fp8_series writes it: the first and
        the last FP8 layer's tensors (x, w, dy each), their amax_used and scale after each of
        the first `steps` steps and the steps where the amax cast with the scale of its step
        would have clipped (fp8_clipped_steps)."""
        host = {k: (a[:steps].T.tolist(), sc[:steps].T.tolist())
                for k, (a, sc) in self.series.items()}
        out, most_recent = [], self.f["amax_compute"] == "most_recent"
        picked = self.names if len(self.names) <= 6 else self.names[:3] + self.names[-3:]
        for name, fmt, i in picked:
            amax, scale = host[fmt][0][i], host[fmt][1][i]
            clipped = sum(1 for k in range(steps)
                          if (most_recent or k == 0 or amax[k] > amax[k - 1])
                          and amax[k] * (1.0 if k == 0 else scale[k - 1]) > self.CLIP[fmt])
            out.append({"tensor": name, "format": f"fp8_{fmt}", "amax": amax, "scale": scale,
                        "clipped_steps": clipped})
        return out


class _Fp8LinearFn(torch.autograd.Function):
    """y = x W^T + b as mpbench's FP8 Linear (models/linear.cpp): x (rounded to bf16 first) and
    the fp32 master W cast to E4M3, one torch._scaled_mm with a bf16 bias and a bf16 output; the
    backward casts dy to E5M2 and takes dW = dy^T x (bf16, as autocast's) and dx = dy W from the
    FP8 copies, the bias gradient as fp32 column sums of dy rounded to bf16. No fast
    accumulation (mpbench's cuBLASLt GEMMs leave CUBLASLT_MATMUL_DESC_FAST_ACCUM off)."""

    @staticmethod
    def forward(ctx, x, w, b, mod, record):
        s = mod.scales
        with torch.autocast(x.device.type, enabled=False):
            x8 = s.cast(x.to(torch.bfloat16), "e4m3", mod.ix, record)
            w8 = s.cast(w, "e4m3", mod.iw, record)
            y = scaled_mm(x8, w8.t(), scale_a=s.inv("e4m3", mod.ix),
                          scale_b=s.inv("e4m3", mod.iw),
                          bias=None if b is None else b.to(torch.bfloat16),
                          out_dtype=torch.bfloat16)
        if record:  # the transposed copies the backward's GEMMs read, as TE keeps them
            ctx.save_for_backward(x8.t().contiguous(), w8.t().contiguous())
        ctx.mod, ctx.x_dtype, ctx.has_bias = mod, x.dtype, b is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        mod = ctx.mod
        s = mod.scales
        x8t, w8t = ctx.saved_tensors
        with torch.autocast(dy.device.type, enabled=False):
            dyb = dy.to(torch.bfloat16)
            dy8 = s.cast(dyb, "e5m2", mod.idy, True)
            dw = scaled_mm(dy8.t().contiguous(), x8t.t(), scale_a=s.inv("e5m2", mod.idy),
                           scale_b=s.inv("e4m3", mod.ix), out_dtype=torch.bfloat16)
            dx = None
            if ctx.needs_input_grad[0]:
                dx = scaled_mm(dy8, w8t.t(), scale_a=s.inv("e5m2", mod.idy),
                               scale_b=s.inv("e4m3", mod.iw),
                               out_dtype=torch.bfloat16).to(ctx.x_dtype)
            db = dyb.float().sum(0).to(torch.bfloat16).float() if ctx.has_bias else None
        return dx, dw.float(), db, None, None


class Fp8Linear(nn.Module):
    """An nn.Linear's parameters (the same tensors: a tied weight stays tied) run as mpbench runs
    an FP8 Linear (_Fp8LinearFn), and take the bf16 GEMM where mpbench's does (Linear::runs_fp8):
    in every call when the training batch's rows (train_rows) are no multiple of 16, else in a
    call of more rows or of rows no multiple of 16 (an evaluation's last batch)."""

    def __init__(self, name, lin, scales, train_rows):
        super().__init__()
        self.fp8_rows = train_rows if train_rows % 16 == 0 else 0
        self.in_features, self.out_features = lin.in_features, lin.out_features
        self.weight, self.bias = lin.weight, lin.bias
        self.scales = scales
        self.ix, self.iw = scales.declare(f"{name}.x", "e4m3"), scales.declare(f"{name}.w", "e4m3")
        self.idy = scales.declare(f"{name}.dy", "e5m2")

    def forward(self, x):
        rows = x.numel() // x.shape[-1]
        if not self.fp8_rows or rows > self.fp8_rows or rows % 16:
            return F.linear(x, self.weight, self.bias)  # under autocast: bf16
        record = self.training and torch.is_grad_enabled()
        y = _Fp8LinearFn.apply(x.reshape(rows, x.shape[-1]), self.weight, self.bias, self,
                               record)
        return y.view(*x.shape[:-1], self.out_features)


def set_matmul_mode(mode):
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    # Split-K partial sums of fp16/bf16 GEMMs added in fp32, as mpbench adds them
    # (kernels/cuda/device_context.cu); PyTorch's default allows adding them in 16 bits.
    # An older torch lacks the bf16 flag; its cuBLAS module asserts on an unknown name.
    for dt in ("fp16", "bf16"):
        try:
            setattr(torch.backends.cuda.matmul, f"allow_{dt}_reduced_precision_reduction", False)
        except (AttributeError, AssertionError):
            pass
    # Heuristic convolution algorithms, as mpbench chooses them (kernels/cuda/conv.cu).
    torch.backends.cudnn.benchmark = False


def make_optimizer(o, params, device_type):
    """Returns (optimizer, fused?); fused kernels where this torch supports them on the device."""
    if o["type"] == "sgd":
        cls, kw = torch.optim.SGD, dict(lr=o["lr"], momentum=o["momentum"],
                                        nesterov=o["nesterov"], weight_decay=o["weight_decay"])
    elif o["type"] in ("adam", "adamw"):
        # mpbench's "adam" takes no weight decay (its spec refuses one), and with decay 0
        # Adam and AdamW agree.
        cls = torch.optim.AdamW
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
        "tflops": 0.0, "peak_tflops": None, "percent_of_peak": None,
        "peak_memory_bytes": {"tracked": 0, "device": None, "device_baseline": None,
                              "by_category": {c: None for c in MEM_CATEGORIES}},
        "final_accuracy": 0.0, "final_loss": 0.0, "skipped_steps": 0, "final_loss_scale": None,
        "loss_scaling": False, "flags": [],
        "steps": {"loss": [], "grad_norm": [], "loss_scale": [], "skipped": [], "time_ms": []},
        "pytorch": {},
    }


def epoch_train_loss(losses, skip):
    """mpbench's rule (train/trainer.cpp, epoch_train_loss): the mean of an epoch's step losses,
    leaving out a step the scaler skipped with a non-finite loss (it changed no weight); none
    left is NaN (diverged)."""
    losses = losses.double()
    kept = losses[~((skip != 0) & ~torch.isfinite(losses))]
    return kept.mean().item() if kept.numel() else math.nan


class HostLoad:
    """Whether something else took this process's CPUs from begin() to end(), as mpbench's run
    records it (host_load, kernels/host_load.h): each thread's time waiting for a CPU (the
    scheduler's run delay, /proc/self/task/*/schedstat) and a hypervisor's steal of the CPUs its
    threads may use (/proc/stat; a second at least, its counters move in 10 ms ticks)."""
    MIN_SECONDS, MIN_STEAL_SECONDS, BUSY_SHARE = 0.1, 1.0, 0.05

    def __init__(self):
        self.start = self.stop = None

    @staticmethod
    def read():
        """({thread: (run s, wait s)}, CPUs found, their steal seconds), or None."""
        threads = {}
        try:
            for t in os.listdir("/proc/self/task"):
                with contextlib.suppress(OSError, ValueError):
                    with open(f"/proc/self/task/{t}/schedstat", encoding="ascii") as f:
                        run, wait, _ = (int(x) for x in f.read().split()[:3])
                    threads[t] = (run * 1e-9, wait * 1e-9)
        except OSError:
            return None
        if not threads:
            return None
        steal, found = 0, 0
        with contextlib.suppress(OSError, ValueError):
            cpus = set()  # any thread's: OMP_PROC_BIND binds each to one CPU of the process's
            for t in threads:
                with contextlib.suppress(OSError):
                    cpus |= os.sched_getaffinity(int(t))
            cpus = cpus or os.sched_getaffinity(0)
            with open("/proc/stat", encoding="ascii") as f:
                for line in f:
                    w = line.split()
                    if (w and w[0].startswith("cpu") and w[0][3:].isdigit()
                            and int(w[0][3:]) in cpus and len(w) >= 9):
                        steal += int(w[8])
                        found += 1
            steal /= os.sysconf("SC_CLK_TCK")
        return threads, found, steal

    def begin(self):
        if self.start is None:
            t0 = time.monotonic()  # before the reads, as mpbench's: a switch lengthens the span
            if (r := self.read()) is not None:
                self.start = (*r, t0)

    def end(self):
        if (r := self.read()) is not None:
            self.stop = (*r, time.monotonic())

    @staticmethod
    def taken_cpus(h):
        """mpbench's HostLoad::taken_cpus: of the threads' wait, what something else held the
        CPUs for; threads more than the CPUs wait for each other too."""
        if h["cpus"] <= 0:
            return h["waited_cpus"]
        return min(h["waited_cpus"], max(0.0, h["cpus"] - h["own_cpus"]))

    @classmethod
    def busy(cls, h):
        """mpbench's HostLoad::busy: something else held the CPUs 5% of the time the threads
        could have run (a thread each, up to the CPUs), or a hypervisor took 5% of the CPUs'
        (where known)."""
        steal = h.get("steal_cpus")
        usable = max(1, min(h["threads"], h["cpus"]) if h["cpus"] > 0 else h["threads"])
        return (cls.taken_cpus(h) >= cls.BUSY_SHARE * usable
                or (h["cpus"] > 0 and steal is not None and steal >= cls.BUSY_SHARE * h["cpus"]))

    def result(self, threads):
        a, b = self.start, self.stop
        if a is None or b is None or b[3] - a[3] < self.MIN_SECONDS:
            return None
        wall = b[3] - a[3]
        run = sum(max(0.0, r - a[0].get(t, (0.0, 0.0))[0]) for t, (r, _) in b[0].items())
        wait = sum(max(0.0, w - a[0].get(t, (0.0, 0.0))[1]) for t, (_, w) in b[0].items())
        steal = ((b[2] - a[2]) / wall if b[1] and b[1] == a[1] and wall >= self.MIN_STEAL_SECONDS
                 else None)
        return {"cpus": b[1], "threads": max(1, threads), "seconds": wall, "own_cpus": run / wall,
                "waited_cpus": wait / wall, "steal_cpus": steal}


def time_stats(xs):
    if not xs:
        return {"median": 0.0, "mean": 0.0, "stddev": 0.0, "cv": 0.0, "min": 0.0, "max": 0.0}
    mean = statistics.fmean(xs)
    if len(xs) < 2:  # one epoch has no spread: null, as mpbench writes it
        return {"median": xs[0], "mean": mean, "stddev": None, "cv": None, "min": xs[0],
                "max": xs[0]}
    sd = statistics.stdev(xs)
    return {"median": statistics.median(xs), "mean": mean, "stddev": sd,
            "cv": sd / mean if mean else 0.0, "min": min(xs), "max": max(xs)}


def train_mode(spec, host_data, lps, mode, device, r, init):
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
    amp_dtype = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16,
                 "amp_fp8": torch.bfloat16}.get(mode)
    if amp_dtype is torch.float16 and not cuda:
        # Probe before the run: some CPU builds reject fp16 autocast (or lack fp16 matmuls).
        with torch.autocast("cpu", dtype=torch.float16):
            nn.Linear(2, 2)(torch.ones(1, 2))
    scaling = bool(ls["amp_fp16"]) if mode == "amp_fp16" else (
        bool(ls["amp_bf16"]) if mode == "amp_bf16" else False)
    r["loss_scaling"] = scaling

    torch.manual_seed(spec["data"]["seed"])  # same init for every mode and device
    family = FAMILIES[spec["model"]["type"]]
    model = family(spec["model"], spec["fp32_layers"], device.type, ARGS.attention).to(device)
    if init is not None:  # --init mpbench: the weights mpbench starts from
        load_mpbench_init(model, init, spec.get("name", "spec"))
    if family is Resnet:
        model = model.to(memory_format=torch.channels_last)
    fp8 = None  # amp_fp8 on TE: the function that opens its FP8 autocast
    fp8_scales = None  # amp_fp8 on torch: Fp8Linear's scales, updated after each step
    if mode == "amp_fp8":
        fp8_values = FP8_DEFAULTS | (spec.get("fp8") or {})
        if fp8_impl(device) == "te":
            te, recipe_mod = transformer_engine()[0]  # run_mode checked that it imports
            fp8_layers, bf16_layers = swap_fp8_linears(model, te_linear(te, device), False)
            fp8 = te_fp8_autocast(te, recipe_mod, fp8_values)
        else:
            fp8_scales = Fp8Scales(fp8_values, device)
            fp8_layers, bf16_layers = swap_fp8_linears(
                model, lambda name, lin: Fp8Linear(name, lin, fp8_scales, batch * lps), True)
    model.train()
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
    if family is Resnet:
        d = {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v
             for k, v in d.items()}
    r["pytorch"] = {"fused_optimizer": fused, "grad_scaler": scaling,
                    "params": sum(p.numel() for p in params), "init": ARGS.init,
                    "autocast_dtype": str(amp_dtype).replace("torch.", "") if amp_dtype else None,
                    "tracked_memory": "torch.cuda.max_memory_allocated" if cuda
                    else "sum of the categories (no allocator statistics on the CPU)"}
    if family is Transformer:
        r["pytorch"]["attention"] = ARGS.attention
    if mode == "amp_fp8":
        on_te = fp8_scales is None
        r["pytorch"]["fp8"] = {"impl": "transformer_engine" if on_te else "torch._scaled_mm",
                               "transformer_engine": te_version() if on_te else None,
                               "format": "HYBRID", **fp8_values, "fp8_layers": fp8_layers,
                               "bf16_layers": bf16_layers}
    if family is Resnet:
        r["pytorch"]["memory_format"] = "channels_last"
    sample_memory()

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        if fp8 is None:
            return torch.autocast(device.type, dtype=amp_dtype)
        # bf16 autocast for everything else, TE's FP8 for its te.Linear layers inside it.
        stack = contextlib.ExitStack()
        stack.enter_context(torch.autocast(device.type, dtype=amp_dtype))
        stack.enter_context(fp8())
        return stack

    steps_per_epoch = d["train_x"].shape[0] // batch
    if steps_per_epoch == 0:
        raise BadInput(f"{spec['name']}: batch size larger than the training set")
    total = warmup + epochs * steps_per_epoch
    series = {k: torch.zeros(total, device=device) for k in ("loss", "norm", "scale", "skip")}
    if fp8_scales is not None:
        fp8_scales.allocate(total)
    one = torch.ones((), device=device)
    r["flops_per_step"] = training_flops_per_sample(model) * batch

    def scale_tensor():
        s = getattr(scaler, "_scale", None)  # the device tensor; get_scale() would sync
        return s if scaling and s is not None else one

    def step(b, g, first):
        xb = d["train_x"][b * batch:(b + 1) * batch]
        yb = d["train_y"][b * batch * lps:(b + 1) * batch * lps]
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
        if fp8_scales is not None:
            fp8_scales.update(g)
        series["loss"][g].copy_(loss.detach())
        series["norm"][g].copy_(norm)
        series["scale"][g].copy_(scale_before)
        if scaling:
            series["skip"][g].copy_((scale_tensor() < scale_before).float())
        if first:
            sample_memory()

    @torch.no_grad()
    def evaluate():
        n = d["eval_x"].shape[0]
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device, dtype=torch.long)
        model.eval()  # batchnorm on its running statistics, as mpbench's evaluation
        for s in range(0, n, batch):
            x, y = d["eval_x"][s:s + batch], d["eval_y"][s * lps:(s + batch) * lps]
            if fp8 and x.shape[0] % 8:
                # TE's FP8 GEMMs want rows in multiples of 8: the last partial batch is padded
                # with copies of its last sample, which raise no amax, and their logits dropped.
                pad = x[-1:].expand(8 - x.shape[0] % 8, *x.shape[1:])
                x = torch.cat([x, pad])
            with autocast():
                logits = model(x)
            logits = logits[:y.shape[0]].float()
            loss_sum += F.cross_entropy(logits, y, reduction="sum")
            correct += (logits.argmax(dim=1) == y).sum()
        model.train()
        return loss_sum, correct, n * lps  # loss and accuracy over every predicted label

    g = 0
    for i in range(warmup):  # on the first batches, outside every timing
        step(i % steps_per_epoch, g, g == 0)
        g += 1
    step_ms = [math.nan] * total
    load = HostLoad()  # over the epochs, their evaluations included, as mpbench's
    load.begin()
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
        train_loss = epoch_train_loss(series["loss"][first:g], series["skip"][first:g])
        e = {"time_ms": time_ms, "eval_time_ms": eval_ms, "train_loss": train_loss,
             "eval_loss": loss_sum.item() / n, "eval_accuracy": correct.item() / n,
             "steps": steps_per_epoch}
        r["epochs"].append(e)
        log(ARGS, f"{spec['name']} {mode} epoch {ep + 1}/{epochs}: {time_ms:.2f} ms, "
                  f"loss {train_loss:.4f}, eval acc {100 * e['eval_accuracy']:.2f}%")
        if not (math.isfinite(train_loss) and math.isfinite(e["eval_loss"])):
            r["status"], r["status_detail"] = "diverged", f"loss became non-finite in epoch {ep + 1}"
            break
    load.end()
    sample_memory()

    host = {k: v[:g].tolist() for k, v in series.items()}
    if fp8_scales is not None and g:
        r["fp8_scaling"] = fp8_scales.series_json(g)
    # Before the profiled steps, which update it; null without loss scaling, as mpbench writes.
    r["final_loss_scale"] = scale_tensor().item() if r["loss_scaling"] else None
    if ARGS.profile_steps and r["status"] == "ok":
        # After the series were read back: these steps overwrite the last slot, nothing else.
        # The run's figures are complete by now, so a profiler that fails (no CUPTI, say) costs
        # the profile only.
        try:
            r["profile"] = profile_ops(lambda i: step(i % steps_per_epoch, g - 1, False),
                                       ARGS.profile_steps, cuda)
        except Exception as e:  # noqa: BLE001 - any profiler failure, reported in the file
            r["profile"] = {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
            log(ARGS, f"{spec['name']} {mode}: torch.profiler failed: {r['profile']['error']}")
    r["steps"] = {"loss": host["loss"], "grad_norm": host["norm"], "loss_scale": host["scale"],
                  "skipped": [scaling and s != 0 for s in host["skip"]], "time_ms": step_ms[:g]}
    r["skipped_steps"] = sum(r["steps"]["skipped"])
    if (h := load.result(1 if cuda else torch.get_num_threads())) is not None:
        r["host_load"] = h
        if HostLoad.busy(h):  # as mpbench's flags say it (side_by_side.py reads them)
            r["flags"].append("busy")
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
        if sheet and peak_tflops(sheet, mode) > 0:  # 0: the card has no such tensor cores
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


def profile_ops(run_step, n, cuda):
    """Runs n steps under torch.profiler; returns the entries with self device time (kernels,
    memcpys) per step, largest first, or self CPU time per op on the CPU. Self times do not
    double count, so the entries add up to the step's busy time."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for i in range(n):
            run_step(i)
        if cuda:
            torch.cuda.synchronize()

    def self_us(e):
        if not cuda:
            return e.self_cpu_time_total
        for attr in ("self_device_time_total", "self_cuda_time_total"):  # newer, older torch
            if hasattr(e, attr):
                return getattr(e, attr)
        return 0.0

    def counted(e):
        # On CUDA a CPU op (aten::mm) is given its kernels' time as well as the kernels' own
        # entries: only the device entries (kernels, memcpys, memsets) are summed, as torch's
        # own table does. A record_function range (Optimizer.step#AdamW.step) also appears as a
        # device-side user annotation spanning its kernels: counting it counts them twice.
        return not cuda or (e.device_type != torch.autograd.DeviceType.CPU
                            and not getattr(e, "is_user_annotation", False))

    rows = [{"name": e.key, "calls_per_step": e.count / n, "ms_per_step": self_us(e) / 1000.0 / n}
            for e in prof.key_averages() if counted(e) and self_us(e) > 0]
    rows.sort(key=lambda x: -x["ms_per_step"])
    return {"steps": n, "basis": "self device time" if cuda else "self CPU time",
            "total_ms_per_step": sum(x["ms_per_step"] for x in rows), "entries": rows[:60]}


def find_datasheet(name):
    """The row whose name is a whole word of the device's, the longest (as device_specs.cpp):
    "L4" is not in "NVIDIA L40", nor "A10" in "NVIDIA A10G"."""
    best = None
    for row in DATASHEETS:
        word = re.search(r"(?<![A-Za-z0-9])" + re.escape(row[0]) + r"(?![A-Za-z0-9])", name)
        if word and (best is None or len(row[0]) > len(best[0])):
            best = row
    return best


def peak_tflops(sheet, mode):
    """The mode's datasheet rate, as train/device_specs.cpp's peak_tflops: fp32's for a mode the
    card has no tensor cores for, except amp_fp8, which does not run there (0)."""
    v = sheet[1 + MODES.index(mode)]
    return v if v > 0 or mode == "amp_fp8" else sheet[1]


def run_mode(spec, data, lps, mode, device, init):
    r = empty_run(spec, mode, device, data["train_x"].shape[0])
    why = fp8_unsupported(device) if mode == "amp_fp8" else None
    if why:  # a result, as mpbench's row on a card below 8.9: no numbers, the reason
        r["status"], r["status_detail"] = "unsupported", why
        log(ARGS, f"{spec['name']} {mode}: unsupported: {why}")
        return r
    oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    try:
        train_mode(spec, data, lps, mode, device, r, init)
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
            # After a sticky device error these raise again: the row already says what failed.
            with contextlib.suppress(Exception):
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


# What a finished run measured. A run that did not finish (oom, diverged, failed, unsupported)
# has none: null, as mpbench writes, not 0 or the last epoch's figures (its epochs and per-step
# series say how far it got).
RESULT_FIELDS = ("epoch_time_ms", "samples_per_second", "flops_per_step", "tflops", "peak_tflops",
                 "percent_of_peak", "final_accuracy", "final_loss")


def results_or_null(r):
    return r if r["status"] == "ok" else dict(r, **{k: None for k in RESULT_FIELDS})


def finite(obj):
    """JSON has no NaN or infinity: write null, as mpbench does."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: (finite(v) if k != "steps" else v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite(v) for v in obj]
    return obj


def lib_version(v):
    """cuDNN 9's integer version as "major.minor.patch" (91900 -> "9.19.0"); None unknown."""
    return None if not v else f"{v // 10000}.{(v // 100) % 100}.{v % 100}"


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
        # The CUDA driver API's version ("13.0"), as mpbench records it (cudaDriverGetVersion),
        # not the kernel module's (nvidia-smi's "580.159.04"): report --md prints both side by side.
        driver = None
        with contextlib.suppress(Exception):
            import ctypes
            v = ctypes.c_int(0)
            if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v)) == 0:
                driver = f"{v.value // 1000}.{(v.value % 1000) // 10}"
        sheet = find_datasheet(p.name)
        env["gpu"] = {
            "name": p.name, "compute_capability": f"{p.major}.{p.minor}",
            "memory_bytes": p.total_memory, "sm_count": p.multi_processor_count,
            "driver_version": driver, "cuda_runtime_version": torch.version.cuda,
            "cublas_version": None,
            # "9.19.0" from 91900, as mpbench writes cuDNN 9's (major * 10000 + minor * 100 + patch).
            "cudnn_version": lib_version(torch.backends.cudnn.version()),
            "modes": {m: {"tensor_cores": m in TENSOR_CORE_CC and
                                          (p.major, p.minor) >= TENSOR_CORE_CC[m],
                          # null where the card has no such rate (FP8 before Ada), as mpbench
                          "peak_tflops": (peak_tflops(sheet, m) or None) if sheet else None}
                      for m in MODES},
            "memory_bandwidth_gbps": sheet[-1] if sheet else None,
        }
    env["cpu"] = {"name": cpu_name, "threads": os.cpu_count()}
    env["torch"] = {"version": torch.__version__, "threads": torch.get_num_threads()}
    return env


def console_table(runs):
    w = max([12] + [len(r["model"]) for r in runs])
    head = f"{'model':<{w}} {'mode':<9} {'epoch ms':>16} {'samples/s':>12} {'peak mem':>11} " \
           f"{'accuracy':>9} {'loss':>7} {'speedup':>8} {'skipped':>7} {'scale':>7}"
    lines = [head, "-" * len(head)]
    base = {r["model"]: r["epoch_time_ms"]["median"] for r in runs
            if r["precision"] == "fp32" and r["status"] == "ok"}
    for r in runs:
        if r["status"] != "ok":
            lines.append(f"{r['model']:<{w}} {r['precision']:<9} {r['status']}: "
                         f"{r['status_detail']}")
            continue
        t = r["epoch_time_ms"]
        m = r["peak_memory_bytes"]["tracked"] / 2 ** 20
        sp = (f"{base[r['model']] / t['median']:.2f}x" if r["model"] in base and t["median"]
              else "-")
        scale = f"{r['final_loss_scale']:.0f}" if r["loss_scaling"] else "-"
        spread = f"±{100 * t['cv']:>4.1f}%" if t["cv"] is not None else "±  n/a"
        lines.append(f"{r['model']:<{w}} {r['precision']:<9} "
                     f"{t['median']:>9.3f} {spread} {r['samples_per_second']:>12,.0f} "
                     f"{m:>7.1f} MiB {100 * r['final_accuracy']:>8.2f}% {r['final_loss']:>7.4f} "
                     f"{sp:>8} {r['skipped_steps']:>7} {scale:>7}")
    return "\n".join(lines)


# ---- main -------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="+", metavar="SPEC")
    ap.add_argument("--out", help="result JSON (mpbench schema_version 1); required unless "
                                   "--params-only. Rewritten whole after every mode, so that a "
                                   "run cut off (a time limit, Ctrl-C) keeps the modes it "
                                   "finished in place of what the file held")
    ap.add_argument("--params-only", action="store_true",
                    help="print each model's parameter count and training FLOPs per step beside "
                         "mpbench's and exit (1 if any differ)")
    ap.add_argument("--precisions", help="comma-separated modes (default: each spec's)")
    ap.add_argument("--epochs", type=int, help="override the specs' epochs")
    ap.add_argument("--device", choices=("cuda", "cpu"),
                    default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--mpbench", default=os.environ.get("MPBENCH", "build/mpbench"),
                    help="the mpbench binary (default: $MPBENCH or build/mpbench)")
    ap.add_argument("--data-dir", help="keep the exported datasets here (default: a temp dir)")
    ap.add_argument("--attention", choices=("plain", "sdpa"), default="plain",
                    help="transformer attention: plain GEMMs + fp32 softmax, as mpbench computes "
                         "it (default), or F.scaled_dot_product_attention")
    ap.add_argument("--profile-steps", type=int, default=0, metavar="N",
                    help="after each mode's epochs, profile N more steps with torch.profiler "
                         "(the run's \"profile\" block: time per kernel per step)")
    ap.add_argument("--threads", type=int, default=0, metavar="N",
                    help="CPU threads (torch.set_num_threads); default 0: PyTorch's own choice, "
                         "one per physical core, as mpbench's --device cpu")
    ap.add_argument("--fp8", choices=("auto", "te", "torch"), default="auto",
                    help="amp_fp8's implementation: Transformer Engine's te.Linear (te), or "
                         "torch._scaled_mm with TE's delayed-scaling recipe in this script "
                         "(torch: on the CPU too); default auto: te on CUDA where "
                         "transformer_engine imports, else torch")
    ap.add_argument("--init", choices=("mpbench", "pytorch"), default="mpbench",
                    help="initial parameters: mpbench's own (`mpbench data --params`: both tools "
                         "start from the same weights; default), or PyTorch's default init "
                         "seeded with the data seed")
    ap.add_argument("--quiet", "-q", action="store_true")
    return ap.parse_args(argv)


def training_flops_per_sample(model):
    """As mpbench's: 3x the forward less the input gradient the first layer never computes."""
    return 3.0 * model.forward_flops_per_sample() - model.first_input_flops_per_sample()


def count_params(specs, mpbench):
    """[{spec, mpbench, pytorch, flops}] for each spec: mpbench's from `inspect --json`, whose
    resolved spec also builds the torch model (on the CPU, in fp32); flops the training FLOPs of a
    step at the spec's batch, each tool's."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="mpbench_params_") as tmp:
        for i, path in enumerate(specs):
            out = os.path.join(tmp, f"inspect{i}.json")
            run = subprocess.run([mpbench, "inspect", path, "--precision", "fp32", "--json", out],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if run.returncode != 0:
                raise BadInput(f"{path}: mpbench inspect failed: {run.stderr.strip()}")
            with open(out) as f:
                doc = json.load(f)
            spec = doc["spec"]
            model = FAMILIES[spec["model"]["type"]](spec["model"], spec.get("fp32_layers", []),
                                                    "cpu")
            # parameters() yields a shared (tied) tensor once.
            entry = doc["entries"][0]
            rows.append({"spec": path, "name": spec["name"], "mpbench": entry["params"],
                         "pytorch": sum(p.numel() for p in model.parameters()),
                         "flops": {"mpbench": entry["training_flops"],
                                   "pytorch": training_flops_per_sample(model)
                                   * entry["batch_size"]}})
            del model
            gc.collect()
    return rows


def main(argv):
    global ARGS
    args = ARGS = parse_args(argv)
    for path in args.specs:
        read_family(path)
    if args.params_only:
        rows = count_params(args.specs, args.mpbench)
        print(json.dumps(rows, indent=2))
        same = all(r["mpbench"] == r["pytorch"] and
                   math.isclose(r["flops"]["mpbench"], r["flops"]["pytorch"], rel_tol=1e-12)
                   for r in rows)
        return 0 if same else 1
    if not args.out:
        raise BadInput("--out: required (the result JSON), unless --params-only")
    check_output(args.out, args.specs)  # before the training, not after it
    if args.data_dir and os.path.exists(args.data_dir) and not os.path.isdir(args.data_dir):
        raise BadInput(f"--data-dir {args.data_dir}: not a directory")
    modes = None
    if args.precisions:
        modes = [m.strip() for m in args.precisions.split(",")]
        for m in modes:
            if m not in MODES:
                raise BadInput(f"--precisions: unknown mode '{m}' (expected {', '.join(MODES)})")
    if args.profile_steps < 0:
        raise BadInput(f"--profile-steps {args.profile_steps}: expected 0 or more")
    if args.epochs is not None and args.epochs < 1:
        raise BadInput(f"--epochs {args.epochs}: expected a positive integer")
    if args.threads < 0:
        raise BadInput(f"--threads {args.threads}: expected 1 or more")
    if args.threads:
        torch.set_num_threads(args.threads)
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
    def write_report():
        out = dict(report, runs=[dict(results_or_null(r),
                                      steps={k: v if k == "skipped" else [f32(x) for x in v]
                                             for k, v in r["steps"].items()})
                                 for r in report["runs"]])
        write_output(args.out, json.dumps(finite(out), indent=2, allow_nan=False) + "\n",
                     args.specs)

    try:
        for i, path in enumerate(args.specs):
            spec, data, desc, lps, init = export_data(path, args.mpbench, data_dir, i)
            if modes:
                spec["precisions"] = modes
            if args.epochs:
                spec["train"]["epochs"] = args.epochs
            report["specs"].append(spec)
            log(args, f"{spec['name']}: {desc}")
            for mode in spec["precisions"]:
                log(args, f"{spec['name']} {mode} on {device.type}")
                r = run_mode(spec, data, lps, mode, device, init)
                report["runs"].append(r)
                # Written after every mode: a run cut off by a time limit keeps what it finished.
                write_report()
            del data
            gc.collect()
    finally:
        if tmp:
            tmp.cleanup()

    write_report()
    print(console_table(report["runs"]))
    log(args, f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    run_main("pytorch_reference", lambda: main(sys.argv[1:]))
