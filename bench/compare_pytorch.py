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

With --device cuda both run on GPU 0 (PyTorch eager, TF32 as scalescope's default: allowed
for matrix products and convolutions) on the GPU cases the GPU issue asks for: cifar-cnn at
batch 64 and 512, mlp-41m at 256 and 2048.

Usage: bench/compare_pytorch.py [--device cpu|cuda] [--threads N] [--rounds R] [--steps S]
       [--binary build/scalescope]
Needs PyTorch (Debian's python3-torch for CPU: run with /usr/bin/python3).
"""
import argparse
import os
import statistics
import sys
import time

import torch

from bench_common import (CASES, default_binary, glorot, run_scalescope,
                          scalescope_optimizer_args, torch_model, torch_optimizer)


GPU_CASES = [("cifar-cnn", 64), ("cifar-cnn", 512), ("mlp-41m", 256), ("mlp-41m", 2048)]


def torch_steps(name, batch, steps, warmup, device):
    torch.manual_seed(1)
    model, shape, loss_fn, labels = torch_model(name)
    glorot(model)
    model.to(device)
    opt = torch_optimizer("adam", model.parameters())
    x = torch.randn(batch, *shape, device=device)
    y = labels(batch).to(device)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()  # waits for the step, as scalescope's loss read does
        t1 = time.perf_counter()
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    return times


def scalescope_steps(binary, name, batch, steps, warmup, threads, device):
    where = ["--devices", "cuda:1"] if device == "cuda" else ["--threads", str(threads)]
    run = run_scalescope(binary, ["--model", name, "--batch", str(batch),
                                  "--steps", str(warmup + steps), "--warmup-steps", str(warmup),
                                  *where, *scalescope_optimizer_args("adam"),
                                  "--data", "synthetic:device", "--no-eval"])
    return [s["step_ms"] for s in run["steps"][warmup:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--binary", default=default_binary())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cases = CASES
    where = f"{args.threads} thread(s)"
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("--device cuda: this PyTorch sees no GPU")
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True  # scalescope also picks conv algorithms once
        cases = GPU_CASES
        where = torch.cuda.get_device_name(0)
    print(f"PyTorch {torch.__version__}, {where}, "
          f"{args.rounds} rounds x {args.steps} steps (+{args.warmup} warm-up)")
    print(f"{'model':<10} {'batch':>5} {'pytorch ms':>11} {'scalescope ms':>14} {'ratio':>6}")
    for name, batch in cases:
        ours, theirs = [], []
        for _ in range(args.rounds):
            theirs += torch_steps(name, batch, args.steps, args.warmup, args.device)
            ours += scalescope_steps(args.binary, name, batch, args.steps, args.warmup,
                                     args.threads, args.device)
        t, o = statistics.median(theirs), statistics.median(ours)
        print(f"{name:<10} {batch:>5} {t:>11.2f} {o:>14.2f} {o / t:>6.2f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
