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
import os
import statistics
import sys
import time

import torch

from bench_common import (CASES, default_binary, glorot, run_scalescope,
                          scalescope_optimizer_args, torch_model, torch_optimizer)


def torch_steps(name, batch, steps, warmup):
    torch.manual_seed(1)
    model, shape, loss_fn, labels = torch_model(name)
    glorot(model)
    opt = torch_optimizer("adam", model.parameters())
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
    run = run_scalescope(binary, ["--model", name, "--batch", str(batch),
                                  "--steps", str(warmup + steps), "--warmup-steps", str(warmup),
                                  "--threads", str(threads), *scalescope_optimizer_args("adam"),
                                  "--data", "synthetic:device", "--no-eval"])
    return [s["step_ms"] for s in run["steps"][warmup:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--binary", default=default_binary())
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
