#!/usr/bin/python3
"""Single-replica step time of scalescope vs PyTorch, measured side by side in one run.

Both train the same model (same layers, initialisation scheme, loss and optimizer) on the
same batch size with the same number of threads. What is compared is the training step
proper -- forward, loss, backward, optimizer -- on data already in memory: PyTorch's steps
reuse one pre-generated batch, and scalescope runs with `--data synthetic:device` (one batch
generated once and kept on the device), so neither pays for input and no pipeline worker
competes with the compute threads for the cores.

The two run in alternation (PyTorch, scalescope, PyTorch, ...) for --rounds rounds so that
drift of the machine affects both alike; the reported figure is the median over all measured
steps of all rounds.

Usage: bench/compare_pytorch.py [--threads N] [--rounds R] [--steps S] [--binary build/scalescope]
Needs Debian's python3-torch (run with /usr/bin/python3).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

CASES = [  # (model, batch)
    ("cifar-cnn", 64),
    ("mlp-41m", 32),
]


def torch_model(name):
    if name == "cifar-cnn":
        m = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(8 * 8 * 64, 64), nn.ReLU(), nn.Linear(64, 10))
        return m, (3, 32, 32), nn.CrossEntropyLoss(), lambda n: torch.randint(0, 10, (n,))
    if name == "mlp-41m":
        m = nn.Sequential(
            nn.Linear(8000, 4000), nn.Tanh(), nn.Linear(4000, 2000), nn.ReLU(),
            nn.Linear(2000, 500), nn.ReLU(), nn.Linear(500, 300), nn.ReLU(),
            nn.Linear(300, 1), nn.Sigmoid())
        return m, (8000,), nn.BCELoss(), lambda n: torch.randint(0, 2, (n, 1)).float()
    raise ValueError(name)


def glorot(model):
    for mod in model.modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(mod.weight)
            nn.init.zeros_(mod.bias)


def torch_steps(name, batch, steps, warmup):
    torch.manual_seed(1)
    model, shape, loss_fn, labels = torch_model(name)
    glorot(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    x = torch.randn(batch, *shape)
    y = labels(batch)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        t1 = time.perf_counter()
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    return times


def scalescope_steps(binary, name, batch, steps, warmup, threads):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        subprocess.run([binary, "train", "--model", name, "--batch", str(batch),
                        "--steps", str(warmup + steps), "--warmup-steps", str(warmup),
                        "--threads", str(threads), "--optimizer", "adam", "--data",
                        "synthetic:device", "--no-eval", "-q", "-o", out],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            run = json.load(f)
    return [s["step_ms"] for s in run["steps"][warmup:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                     "scalescope"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__}, {args.threads} thread(s), "
          f"{args.rounds} rounds x {args.steps} steps (+{args.warmup} warm-up)")
    print(f"{'model':<10} {'batch':>5} {'pytorch ms':>11} {'scalescope ms':>14} {'ratio':>6}")
    for name, batch in CASES:
        ours, theirs = [], []
        for _ in range(args.rounds):
            theirs += torch_steps(name, batch, args.steps, args.warmup)
            ours += scalescope_steps(args.binary, name, batch, args.steps, args.warmup,
                                     args.threads)
        t, o = statistics.median(theirs), statistics.median(ours)
        print(f"{name:<10} {batch:>5} {t:>11.2f} {o:>14.2f} {o / t:>6.2f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
