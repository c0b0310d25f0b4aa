#!/usr/bin/env python3
"""torch_step.py - PyTorch's training-step throughput on the workloads tunebench
times (ResNet-50 v1.5 on synthetic images, GPT-2 small on synthetic tokens,
tunebench's small CNN on synthetic 1x28x28 images), so
that tools/gpu_check.sh can put tunebench's number beside PyTorch's on the same
machine.

    python3 tools/torch_step.py --device=cuda --model=resnet50 --image-size=224 \
        --batch-size=32 --steps=20 --warmup=5
    python3 tools/torch_step.py --device=cpu --model=gpt2 --context=128 --layers=2 \
        --batch-size=2 --steps=3 --warmup=1

Prints one CSV row per model (header first): the median step time after the
warm-up steps, timed with torch.cuda.synchronize() around each step (host
clock), and images/s or tokens/s from it. Plain fp32, SGD with momentum,
PyTorch's defaults otherwise (cudnn.benchmark off), except TF32: --tf32=0
(the default) turns it off for cuDNN and matrix products, as tunebench's
--cudnn-tf32=false has it (PyTorch's own default, and tunebench's on CUDA
since 2026-11-30, lets cuDNN convolutions use TF32 on Ampere and later:
tools/gpu_check.sh passes --cudnn-tf32=false to tunebench's side), and
--tf32=1 allows it for both (tunebench's --tf32 --cudnn-tf32=true). ResNet-50 comes from torchvision
when it is installed, else from the plain definition below (same layers).

tools/vs_torch_resnet.sh compares the four ResNet-50 combinations of
--channels-last and --amp=bf16 with tunebench's.

Options for bench:vs_torch (bench/cmd/vs_torch.c), which drives one long-lived
process per configuration so that start-up is never timed:
    --channels-last[=1]    model and images in torch.channels_last (ResNet-50)
    --threads=N            torch.set_num_threads(N) (CPU; 0: PyTorch's default)
    --amp=bf16             forward and loss under torch.autocast(bfloat16)
    --vocab=N              GPT-2's vocabulary (default 50257)
    --serve                build the model, print "ready", then read commands
                           from stdin: "run K" runs K steps and prints the
                           seconds they took on one line; "quit" (or EOF) ends

Tested by the kit's CPU rehearsal (tools/gpu_check.sh --device=cpu --quick)
where PyTorch is installed; not part of the Bazel tests.
"""
import argparse
import statistics
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--model", default="resnet50,gpt2",
                   help="comma-separated: resnet50, gpt2, small_cnn")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12, help="GPT-2 blocks (12 = GPT-2 small)")
    p.add_argument("--batch-size", type=int, default=0,
                   help="0 = tunebench's default (32 for resnet50 and small_cnn, 4 for gpt2)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--header", type=int, default=1, help="print the CSV header")
    p.add_argument("--channels-last", type=int, nargs="?", const=1, default=0,
                   help="model and images in torch.channels_last (resnet50); "
                   "--channels-last alone or =1")
    p.add_argument("--threads", type=int, default=0,
                   help="> 0: torch.set_num_threads(N) (CPU); 0 = PyTorch's default")
    p.add_argument("--amp", default="off", choices=["off", "bf16"], help="autocast dtype")
    p.add_argument("--vocab", type=int, default=50257, help="GPT-2's vocabulary")
    p.add_argument("--tf32", type=int, default=0, choices=[0, 1],
                   help="1: allow TF32 in cuDNN and matrix products (CUDA); 0: neither")
    p.add_argument("--serve", action="store_true",
                   help='read "run K" / "quit" commands from stdin (bench:vs_torch)')
    a = p.parse_args(argv)
    for name in a.model.split(","):
        if name not in ("resnet50", "gpt2", "small_cnn"):
            p.error("unknown model %r: use resnet50, gpt2 and/or small_cnn" % name)
    if a.steps < 1 or a.warmup < 0 or a.batch_size < 0:
        p.error("--steps must be >= 1, --warmup and --batch-size >= 0")
    return a


def resnet50(torch, nn):
    """ResNet-50 v1.5 (stride in the 3x3), torchvision's layers, 1000 classes."""
    try:
        import torchvision
        return torchvision.models.resnet50(), "torchvision"
    except Exception:  # no torchvision, or one built for another torch
        pass

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(True), nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                           nn.BatchNorm2d(cout))
            self.relu = nn.ReLU(True)

        def forward(self, x):
            s = x if self.short is None else self.short(x)
            return self.relu(self.body(x) + s)

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers), "plain definition"


def small_cnn(nn):
    """tunebench's small CNN (lib/nn/model.c, tb_spec_small_cnn) as its trainer
    builds it for 1x28x28 images and 10 classes: conv3x3(16) with bias, BN,
    ReLU; maxpool 2; a residual block (conv-BN-ReLU-conv-BN + identity,
    ReLU) of 16; conv3x3 stride 2 (32), BN, ReLU; a residual block of 32;
    linear(64) on the flattened 7x7 map; exact GELU; linear(10)."""
    def conv_bn(cin, cout, stride, relu=True):
        layers = [nn.Conv2d(cin, cout, 3, stride, 1, bias=True), nn.BatchNorm2d(cout)]
        return nn.Sequential(*(layers + [nn.ReLU()] if relu else layers))

    class Res(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.body = nn.Sequential(conv_bn(c, c, 1), conv_bn(c, c, 1, relu=False))

        def forward(self, x):
            return nn.functional.relu(self.body(x) + x)

    return nn.Sequential(conv_bn(1, 16, 1), nn.MaxPool2d(2, 2), Res(16), conv_bn(16, 32, 2),
                         Res(32), nn.Flatten(), nn.Linear(32 * 7 * 7, 64), nn.GELU(),
                         nn.Linear(64, 10)), "plain definition"


def gpt2(torch, nn, context, n_layers, vocab=50257):
    """GPT-2 small: d 768, 12 heads, MLP 3072 (tanh GELU), tied head."""
    d, heads = 768, 12
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (t.view(B, T, heads, d // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layers))
            self.ln_f = nn.LayerNorm(d)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            return self.ln_f(x) @ self.wte.weight.t()

    return GPT2(), "plain definition"


def make_step(torch, model, make_batch, loss_of, device, amp="off"):
    """One training step as a function returning the loss (not synchronized)."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x, y = make_batch()
    dev_type = "cuda" if device.startswith("cuda") else "cpu"

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev_type, dtype=torch.bfloat16, enabled=amp == "bf16"):
            loss = loss_of(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def time_steps(torch, step, device, steps, warmup):
    times = []
    for i in range(warmup + steps):
        sync(torch, device)
        t0 = time.perf_counter()
        loss = step()
        sync(torch, device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    if not torch.isfinite(loss).item():
        raise RuntimeError("the loss is not finite: %s" % loss.item())
    return statistics.median(times)


def serve(torch, step, device):
    """bench:vs_torch's loop: "run K" -> the seconds K steps took."""
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] != "run" or len(cmd) != 2:
            print("error: unknown command %r" % line.strip(), flush=True)
            continue
        sync(torch, device)
        t0 = time.perf_counter()
        for _ in range(int(cmd[1])):
            loss = step()
        sync(torch, device)
        dt = time.perf_counter() - t0
        if not torch.isfinite(loss).item():
            print("error: the loss is not finite", flush=True)
            continue
        print("%.9f" % dt, flush=True)


def run_model(torch, a, name):
    nn, F = torch.nn, torch.nn.functional
    g = torch.Generator(device="cpu").manual_seed(1234)
    if name == "resnet50":
        b = a.batch_size or 32
        model, src = resnet50(torch, nn)
        make = lambda: (torch.randn(b, 3, a.image_size, a.image_size, generator=g).to(a.device),
                        torch.randint(0, 1000, (b,), generator=g).to(a.device))
        loss_of = F.cross_entropy
        size, per_step, unit = a.image_size, b, "images/s"
    elif name == "small_cnn":
        b = a.batch_size or 32
        model, src = small_cnn(nn)
        make = lambda: (torch.randn(b, 1, 28, 28, generator=g).to(a.device),
                        torch.randint(0, 10, (b,), generator=g).to(a.device))
        loss_of = F.cross_entropy
        size, per_step, unit = 28, b, "images/s"
    else:
        b = a.batch_size or 4
        model, src = gpt2(torch, nn, a.context, a.layers, a.vocab)
        make = lambda: (torch.randint(0, a.vocab, (b, a.context), generator=g).to(a.device),
                        torch.randint(0, a.vocab, (b, a.context), generator=g).to(a.device))
        loss_of = lambda logits, y: F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        size, per_step, unit = a.context, b * a.context, "tokens/s"
    model = model.to(a.device).train()
    if a.channels_last and name == "resnet50":
        model = model.to(memory_format=torch.channels_last)
        make_plain = make
        make = lambda: (lambda x, y: (x.contiguous(memory_format=torch.channels_last), y))(
            *make_plain())
    step = make_step(torch, model, make, loss_of, a.device, a.amp)
    if a.serve:
        serve(torch, step, a.device)
        return None
    med = time_steps(torch, step, a.device, a.steps, a.warmup)
    return "%s,%s,%d,%d,%d,%d,%.6f,%.2f,%s,torch %s,%s" % (
        name, a.device, b, size, a.warmup, a.steps, med, per_step / med, unit,
        torch.__version__, src)


def main(argv):
    a = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print("torch_step: PyTorch is not importable (%s): nothing to compare" % e,
              file=sys.stderr)
        return 3
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("torch_step: --device=%s but torch.cuda.is_available() is False (torch %s, "
              "built for CUDA %s)" % (a.device, torch.__version__, torch.version.cuda),
              file=sys.stderr)
        return 2
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.backends.cudnn.allow_tf32 = bool(a.tf32)
    torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32)
    if a.serve:
        run_model(torch, a, a.model.split(",")[0])
        return 0
    if a.header:
        print("model,device,batch,size,warmup,steps,median_step_s,throughput,unit,torch,source")
    for name in a.model.split(","):
        print(run_model(torch, a, name), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
