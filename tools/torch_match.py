#!/usr/bin/env python3
"""torch_match.py - does tunebench compute the same numbers as PyTorch?

Reads an export of bench:export_model (initial parameters, one batch, the
logits, gradients and loss of a training-mode forward, and the parameters
and loss after one optimizer step), builds the same model in PyTorch with
those initial weights, runs the same step in float32, and prints one
PASS/FAIL line per quantity with its relative error and the tolerance.
Exit status 1 when any quantity is off, 2 when the export cannot be used.

Outside CI: it needs PyTorch (a multi-GB download), e.g.
    python3 -m venv /work/torch-venv && /work/torch-venv/bin/pip install torch numpy
    bazel run //bench:export_model -- --model=small_cnn --out=/tmp/tm_small
    /work/torch-venv/bin/python tools/torch_match.py /tmp/tm_small
ResNet-50 (torchvision's bias=False convolutions) and GPT-2 at reduced sizes
(tools/torch_match.sh runs every model so):
    bazel run //bench:export_model -- --model=resnet50 --image-size=64 \\
        --batch-size=4 --out=/tmp/tm_resnet
    bazel run //bench:export_model -- --model=gpt2 --layers=2 --context=64 \\
        --batch-size=2 --out=/tmp/tm_gpt2

The models are written here, independently of tunebench's description:
  small_cnn, wide_cnn, transformer  as lib/nn/model.c's tb_spec_* describe them;
  resnet50  torchvision's resnet50 (v1.5: stride in the 3x3 convolution);
  gpt2      nanoGPT's GPT: token + position embedding, pre-norm blocks with
            c_attn Linear(d, 3d) (q, k, v rows in that order), causal
            attention, tanh GELU MLP, final LayerNorm, lm_head tied to wte,
            no dropout.
Weights map by order: the export lists tensors in tunebench's flat-buffer
order; each model here registers its parameters in that order, and every
tensor must have the export's element count and, where the export gives a
shape of rank > 1, that shape. Layouts need no conversion: tunebench's
conv weights are KCRS = PyTorch's (out, in, kh, kw), linear weights
(out, in) as nn.Linear's, and the exporter writes NCHW order even for a
--channels-last model.

Relative errors: a tensor's is max|tunebench - torch| / max|torch| (over the
tensor; per parameter tensor for gradients and parameters, the worst one
printed), a scalar's |tunebench - torch| / |torch|. Gradient tensors that
are zero in exact arithmetic (a convolution's bias right before batch norm)
hold only rounding noise on both sides; they are compared against the
largest gradient of the model instead of their own, and the line says how
many there were and what their own error is.

The step is the trainer's recipe by default: torch.optim.SGD with momentum
and weight decay (dampening 0, no Nesterov), which on its first step sets
the momentum buffer to the gradient, so momentum does not change this one
step; AdamW when the export says so.

The verdict is tunebench against PyTorch in float32 at the tolerance (1e-4
unless --tol). Beside it, unless --no-float64, the same step runs in float64
and each line says how far tunebench and PyTorch's own float32 are from it:
where PyTorch's float32 itself is further than the tolerance, a failing line
says it is ill-conditioned (the verdict stays FAIL). --sensitivity adds a
float64 run from initial parameters perturbed by 1e-7 (relative): how far
each quantity moves in exact arithmetic for a perturbation of float32's
rounding size; more than the tolerance marks a failing line ill-conditioned
too (a ReLU input within rounding of zero flips with the perturbation, as it
may with either implementation's rounding).
Measured (CPU backend, seed 0, the trainer's SGD recipe: momentum 0.9, weight
decay 5e-4, lr 0.05, for ResNet-50 0.1 x batch / 256): the small CNN, wide
CNN, transformer and GPT-2 (2 layers, context 64) pass everything within
3e-6. ResNet-50 (64x64, batch 4) passes logits and loss (6e-5, where PyTorch
float32 is 5e-5 from float64), but from stage 2 on its gradients are
ill-conditioned: a 1e-7 perturbation moves them by 1e-2 (7 blocks) to 4e-2
(all 16) in float64, and the gradients, the updated parameters and the
second forward fail 1e-4 (PyTorch's own float32 too, at 16 blocks). Cut
after its first 4 bottlenecks (--resnet-blocks=4) it passes everything
within 5e-6.
"""
import argparse
import json
import math
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # no PyTorch: say how to get it
    sys.exit("torch_match.py needs PyTorch and numpy (%s): pip install torch numpy" % e)


# ---------------------------------------------------------------- models

class ConvBN(nn.Module):
    """conv r x r (pad r // 2) + BN (+ ReLU)."""

    def __init__(self, cin, cout, r, stride, bias, relu=True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, r, stride, r // 2, bias=bias)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = relu

    def forward(self, x):
        x = self.bn(self.conv(x))
        return F.relu(x) if self.relu else x


class ResBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus the identity, then ReLU."""

    def __init__(self, c, r, bias):
        super().__init__()
        self.a = ConvBN(c, c, r, 1, bias)
        self.b = ConvBN(c, c, r, 1, bias, relu=False)

    def forward(self, x):
        return F.relu(self.b(self.a(x)) + x)


def conv_out(h, r, stride, pad):
    return (h + 2 * pad - r) // stride + 1


def gelu_of(man):
    return nn.GELU(approximate="tanh" if man["gelu"] == "tanh" else "none")


class SmallCNN(nn.Module):
    """tb_spec_small_cnn: conv3x3(16) BN ReLU, maxpool 2, res(16),
    conv3x3/2(32) BN ReLU, res(32), linear(64) on the flattened map, GELU,
    linear(classes)."""

    def __init__(self, man):
        super().__init__()
        c, h, _ = man["input"]["shape"][1:]
        bias = man["conv_bias"]
        h = conv_out(h, 2, 2, 0)
        h = conv_out(h, 3, 2, 1)
        self.body = nn.Sequential(
            ConvBN(c, 16, 3, 1, bias), nn.MaxPool2d(2, 2), ResBlock(16, 3, bias),
            ConvBN(16, 32, 3, 2, bias), ResBlock(32, 3, bias), nn.Flatten(),
            nn.Linear(32 * h * h, 64), gelu_of(man), nn.Linear(64, man["classes"]))

    def forward(self, x):
        return self.body(x)


class WideCNN(nn.Module):
    """tb_spec_wide_cnn (dropout 0)."""

    def __init__(self, man):
        super().__init__()
        c = man["input"]["shape"][1]
        bias = man["conv_bias"]
        self.body = nn.Sequential(
            ConvBN(c, 32, 3, 1, bias), ResBlock(32, 3, bias), nn.AvgPool2d(2, 2),
            ConvBN(32, 64, 3, 1, bias), ResBlock(64, 3, bias),
            ConvBN(64, 128, 3, 2, bias), ResBlock(128, 3, bias),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(128, 128), gelu_of(man), nn.Linear(128, man["classes"]))

    def forward(self, x):
        return self.body(x)


class TokenTransformer(nn.Module):
    """tb_spec_transformer: each image row a token; token linear 64, one
    pre-norm block (4 heads, MLP 128, non-causal), LN, mean over tokens,
    linear(classes)."""

    def __init__(self, man):
        super().__init__()
        w = man["input"]["shape"][3]
        d = 64
        self.embed = nn.Linear(w, d)
        self.ln1 = nn.LayerNorm(d)
        self.mha = nn.MultiheadAttention(d, 4, bias=True, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 128)
        self.gelu = gelu_of(man)
        self.fc2 = nn.Linear(128, d)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, man["classes"])

    def forward(self, x):
        x = self.embed(x[:, 0])                          # (N, T, d)
        h = self.ln1(x)
        x = x + self.mha(h, h, h, need_weights=False)[0]
        x = x + self.fc2(self.gelu(self.fc1(self.ln2(x))))
        return self.head(self.ln(x).mean(dim=1))


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (ResNet v1.5: the stride in conv2)."""

    def __init__(self, cin, width, stride, bias):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=bias)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=bias)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=bias)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=bias),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        s = x if self.downsample is None else self.downsample(x)
        return F.relu(y + s)


class ResNet50(nn.Module):
    """torchvision.models.resnet50's architecture (bias=False unless the
    export has conv_bias)."""

    def __init__(self, man):
        super().__init__()
        bias = man["conv_bias"]
        self.conv1 = nn.Conv2d(man["input"]["shape"][1], 64, 7, 2, 3, bias=bias)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1, bias))
                cin = width * 4
        # the export's first resnet_blocks bottlenecks (--resnet-blocks; all 16 by default)
        layers = layers[:man.get("resnet_blocks", len(layers))]
        cin = layers[-1].bn3.num_features
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, man["classes"])

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class GPTBlock(nn.Module):
    """nanoGPT's Block: x + attn(ln_1(x)), x + mlp(ln_2(x))."""

    def __init__(self, d, heads, mlp, gelu):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, mlp)
        self.gelu = gelu
        self.mlp_proj = nn.Linear(mlp, d)

    def attn(self, x):
        n, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(n, t, d)
        return self.attn_proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))


class GPT2(nn.Module):
    """nanoGPT's GPT without dropout; lm_head tied to wte."""

    def __init__(self, man):
        super().__init__()
        g = man["gpt2"]
        d = g["dim"]
        self.wte = nn.Embedding(g["vocab"], d)
        self.wpe = nn.Embedding(g["context"], d)
        self.blocks = nn.ModuleList(GPTBlock(d, g["heads"], g["mlp"], gelu_of(man))
                                    for _ in range(g["layers"]))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return F.linear(self.ln_f(x), self.wte.weight)   # tied head


MODELS = {"small_cnn": SmallCNN, "wide_cnn": WideCNN, "transformer": TokenTransformer,
          "resnet50": ResNet50, "gpt2": GPT2}


# ---------------------------------------------------------------- the export

class ExportError(Exception):
    pass


def load(d, name, dtype, shape):
    path = os.path.join(d, name)
    a = np.fromfile(path, dtype=dtype)
    want = int(np.prod(shape))
    if a.size != want:
        raise ExportError("%s: %d values, the manifest says %s" % (path, a.size, list(shape)))
    return a.reshape(shape)


def load_params(model, man, flat):
    """Copies the flat buffer into the model's parameters, by order and shape."""
    ps = list(model.parameters())
    if len(ps) != len(man["params"]):
        raise ExportError("the export has %d parameter tensors, the PyTorch %s %d"
                          % (len(man["params"]), man["model"], len(ps)))
    with torch.no_grad():
        for p, e in zip(ps, man["params"]):
            shape = tuple(e["shape"])
            if e["numel"] != p.numel() or (len(shape) > 1 and shape != tuple(p.shape)):
                raise ExportError("%s: export shape %s (%d values), PyTorch %s"
                                  % (e["name"], list(shape), e["numel"], list(p.shape)))
            v = flat[e["offset"]:e["offset"] + e["numel"]]
            p.copy_(torch.from_numpy(v.copy()).view(p.shape))
    return ps


def make_optimizer(params, man):
    o = man["optimizer"]
    if o["kind"] == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"],
                               weight_decay=o["weight_decay"])
    if o["kind"] == "adamw":
        return torch.optim.AdamW(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]),
                                 eps=o["eps"], weight_decay=o["weight_decay"])
    raise ExportError("optimizer %s: only sgd and adamw" % o["kind"])


# ---------------------------------------------------------------- PyTorch's step

def torch_step(man, p0, x_np, labels, dtype):
    """The exported step in PyTorch at dtype: logits and loss of a
    training-mode forward, the gradients, the parameters after one optimizer
    step, and the second forward's logits and loss (float64 numpy arrays;
    flat ones in the export's order)."""
    torch.manual_seed(0)
    model = MODELS[man["model"]](man).to(dtype)
    params = load_params(model, man, p0)
    model.train()  # batch statistics, as tunebench's training-mode forward
    x = torch.from_numpy(x_np.astype(np.int64) if x_np.dtype.kind == "i" else x_np.copy())
    x = x if x_np.dtype.kind == "i" else x.to(dtype)
    y = torch.from_numpy(labels.astype(np.int64)).reshape(-1)
    opt = make_optimizer(params, man)

    def flat(ts):
        return np.concatenate([t.detach().double().numpy().ravel() for t in ts])

    def forward():
        logits = model(x)
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)

    opt.zero_grad(set_to_none=True)
    logits, loss = forward()
    loss.backward()
    out = {"logits": logits.detach().double().numpy(), "loss": loss.item(),
           "grads": flat(p.grad for p in params)}
    opt.step()
    out["params"] = flat(params)
    with torch.no_grad():
        logits, loss = forward()
    out["logits1"], out["loss1"] = logits.double().numpy(), loss.item()
    return out


# ---------------------------------------------------------------- comparing

def rel_tensor(ours, ref, scale=None):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    den = np.abs(ref).max() if scale is None else scale
    diff = np.abs(ours - ref).max()
    return float(diff / den) if den > 0 else (0.0 if diff == 0 else math.inf)


def rel_scalar(ours, ref):
    return abs(ours - ref) / abs(ref) if ref != 0 else (0.0 if ours == ref else math.inf)


def rel_per_tensor(man, ours, ref, floored=()):
    """Worst per-tensor relative error of two flat buffers, and its tensor;
    tensors in floored are measured against the largest value of ref."""
    worst, name = -1.0, ""
    gmax = float(np.abs(ref).max())
    for e in man["params"]:
        a, b = e["offset"], e["offset"] + e["numel"]
        err = rel_tensor(ours[a:b], ref[a:b], gmax if e["name"] in floored else None)
        if err > worst:
            worst, name = err, e["name"]
    return worst, name


def noise_tensors(man, grads, floor):
    """Names of gradient tensors below floor x the largest gradient: zero in
    exact arithmetic (a bias right before batch norm), rounding noise here."""
    gmax = float(np.abs(grads).max())
    return {e["name"] for e in man["params"]
            if np.abs(grads[e["offset"]:e["offset"] + e["numel"]]).max() < floor * gmax}


class Report:
    def __init__(self, tol):
        self.tol, self.failed, self.lines, self.ill = tol, 0, 0, 0

    def line(self, what, err, note, f64=None, moved=None):
        """f64: (tunebench vs float64, torch float32 vs float64); moved: how far
        float64 moves under --sensitivity's perturbation; either may be None."""
        ok = err <= self.tol
        self.failed += not ok
        self.lines += 1
        text = "%s  %-8s max rel err %.3e  (tol %.0e)  %s" % (
            "PASS" if ok else "FAIL", what, err, self.tol, note)
        why = []
        if f64 is not None:
            text += "\n      %-8s vs torch float64: tunebench %.3e, torch float32 %.3e" % (
                "", f64[0], f64[1])
            if f64[1] > self.tol:
                why.append("PyTorch's float32 itself is off by more than the tolerance")
        if moved is not None:
            text += "; perturbed float64 moves %.1e" % moved
            if moved > self.tol:
                why.append("a 1e-7 perturbation moves float64 by more than the tolerance")
        if not ok and why:
            self.ill += 1
            text += "\n      %-8s ill-conditioned: %s" % ("", "; ".join(why))
        print(text)


QUANTITIES = (("logits", "training-mode forward"), ("loss", ""), ("grads", ""),
              ("params", "after one step"), ("logits1", "after the step, same batch"),
              ("loss1", "after the step"))


def compare_flat(man, key, note, tb, t32, t64):
    """Gradients or parameters: the worst parameter tensor."""
    floored = noise_tensors(man, (t64 or t32)["grads"], 1e-6) if key == "grads" else ()
    fn = lambda a, b: rel_per_tensor(man, a[key], b[key], floored)[0]
    err, name = rel_per_tensor(man, tb[key], t32[key], floored)
    text = "worst of %d tensors: %s; whole vector %.1e" % (
        len(man["params"]), name, rel_tensor(tb[key], t32[key]))
    if note:
        text += "; " + note
    if floored:
        own, _ = rel_per_tensor(man, tb[key], t32[key])
        text += ("\n      %d tensor(s) zero in exact arithmetic (below 1e-6 x the largest "
                 "gradient) measured against the largest gradient; against their own "
                 "largest: %.1e" % (len(floored), own))
    return fn, err, text


def compare(rep, man, tb, t32, t64, moved):
    """One line per quantity: tunebench against torch float32, both against
    torch float64 when t64 is there, and how far a perturbed float64 run
    moves when moved (errors by quantity) is there."""
    for key, note in QUANTITIES:
        if key in ("loss", "loss1"):
            fn = lambda a, b: rel_scalar(a[key], b[key])
            err = fn(tb, t32)
            text = "%stunebench %.8f, torch %.8f" % (note + ": " if note else "", tb[key],
                                                     t32[key])
        elif key in ("grads", "params"):
            fn, err, text = compare_flat(man, key, note, tb, t32, t64)
        else:
            fn = lambda a, b: rel_tensor(a[key], b[key])
            err = fn(tb, t32)
            text = "%d values, %s" % (t32[key].size, note)
        rep.line(key, err, text, None if t64 is None else (fn(tb, t64), fn(t32, t64)),
                 None if moved is None else moved[key])


def sensitivity(man, tb, t64, rel):
    """How far a float64 run moves when the initial parameters are scaled by
    (1 + rel N(0, 1)), element by element, as errors by quantity: the
    conditioning of each quantity at this point, whatever the arithmetic.
    When a perturbation of float32's rounding size moves a quantity by more
    than the tolerance (a ReLU input or a batch-norm variance within
    rounding of its kink), no float32 implementation can be expected to
    match another one to it there."""
    noise = np.random.default_rng(0).standard_normal(tb["params0"].shape)
    p = tb["params0"].astype(np.float64) * (1.0 + rel * noise)
    t = torch_step(man, p, tb["x"], tb["labels"], torch.float64)
    floored = noise_tensors(man, t64["grads"], 1e-6)
    moved = {}
    for key, _ in QUANTITIES:
        if key in ("loss", "loss1"):
            moved[key] = rel_scalar(t[key], t64[key])
        elif key in ("grads", "params"):
            moved[key] = rel_per_tensor(man, t[key], t64[key],
                                        floored if key == "grads" else ())[0]
        else:
            moved[key] = rel_tensor(t[key], t64[key])
    return moved


def load_export(d):
    """The manifest and tunebench's side of every quantity."""
    with open(os.path.join(d, "manifest.json")) as f:
        man = json.load(f)
    if man.get("format") != "tunebench-export 1":
        raise ExportError("%s: not a tunebench export (format %r)" % (d, man.get("format")))
    if man["model"] not in MODELS:
        raise ExportError("model %s: this script builds %s" % (man["model"], ", ".join(MODELS)))
    if man.get("dropout", 0) != 0:
        raise ExportError("dropout %g: PyTorch cannot draw tunebench's masks" % man["dropout"])
    files, numel, inp = man["files"], man["numel"], man["input"]
    tb = {"params0": load(d, files["params0"], "<f4", (numel,)),
          "grads": load(d, files["grads"], "<f4", (numel,)),
          "params": load(d, files["params1"], "<f4", (numel,)),
          "x": load(d, inp["file"], "<i4" if inp["dtype"] == "int32" else "<f4", inp["shape"]),
          "labels": load(d, man["labels"]["file"], "<i4", man["labels"]["shape"]),
          "logits": load(d, files["logits0"], "<f4", man["logits_shape"]),
          "logits1": load(d, files["logits1"], "<f4", man["logits_shape"]),
          "loss": man["loss0"], "loss1": man["loss1"]}
    return man, tb


def run(d, tol, float64, sens):
    man, tb = load_export(d)
    o = man["optimizer"]
    print("model %s: %d parameters in %d tensors, input %s; tunebench on %s (%s); "
          "PyTorch %s in float32%s, %d thread(s)"
          % (man["model"], man["numel"], len(man["params"]), man["input"]["shape"],
             man["backend"], man["device"], torch.__version__,
             " (and float64 as a reference)" if float64 else "", torch.get_num_threads()))
    print("one %s step: lr %g momentum %g weight decay %g" % (o["kind"], o["lr"], o["momentum"],
                                                            o["weight_decay"]))
    if man.get("math", "f32") != "f32":
        print("tunebench ran its GEMMs and convolutions in %s math, not float32" % man["math"])
    t32 = torch_step(man, tb["params0"], tb["x"], tb["labels"], torch.float32)
    t64 = torch_step(man, tb["params0"], tb["x"], tb["labels"], torch.float64) if float64 else None
    moved = sensitivity(man, tb, t64, 1e-7) if sens and t64 is not None else None
    rep = Report(tol)
    compare(rep, man, tb, t32, t64, moved)
    note = ""
    if rep.ill:
        note = " (%d of them ill-conditioned, as said above)" % rep.ill
    print("%s: %d of %d quantities outside %.0e%s" % ("FAIL" if rep.failed else "PASS",
                                                     rep.failed, rep.lines, tol, note))
    return 1 if rep.failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export", help="folder bench:export_model --out wrote")
    ap.add_argument("--tol", type=float, default=1e-4, help="relative tolerance (1e-4)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1)")
    ap.add_argument("--no-float64", dest="float64", action="store_false",
                    help="skip the float64 reference run (it shows how far float32 itself is)")
    ap.add_argument("--sensitivity", action="store_true",
                    help="one more float64 run from initial parameters perturbed by 1e-7 "
                         "(relative): how well conditioned each quantity is")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    try:
        return run(a.export, a.tol, a.float64, a.sensitivity)
    except (ExportError, OSError, KeyError, ValueError) as e:
        print("torch_match: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
