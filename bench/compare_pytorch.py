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

With --device cuda both run on GPU 0 (PyTorch eager with cudnn.benchmark, TF32 as scalescope's
default: allowed for matrix products and convolutions) on the GPU cases: cifar-cnn at batch 64
and 512, mlp-41m at 256 and 2048, torchvision's ResNet-50 at 64 and 128, GPT-2 small at 8 (its
attention PyTorch's fused scaled_dot_product_attention where PyTorch has it); beside the step
times, each one's peak device memory: PyTorch's max_memory_allocated over the whole run and
over its measured steps alone (the warm-up's holds cudnn.benchmark's trial workspaces),
scalescope's peak_memory_bytes. --cases NAME:BATCH,... picks cases.

--precision bf16|fp16 runs scalescope with that --precision and PyTorch's step under
torch.autocast in that type (fp16 with torch.amp.GradScaler, as its users run it); fp32 is
strict fp32 on both, tf32 (the GPU default) TF32 on both.

Usage: bench/compare_pytorch.py [--device cpu|cuda] [--threads N] [--rounds R] [--steps S]
       [--cases NAME:BATCH,...] [--precision P] [--binary build/scalescope]
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
from torch_models import ATTENTION, is_gpt as is_tokens


GPU_CASES = [("cifar-cnn", 64), ("cifar-cnn", 512), ("mlp-41m", 256), ("mlp-41m", 2048),
             ("resnet:depth=50", 64), ("resnet:depth=50", 128), ("gpt:preset=small", 8)]
GIB = 2.0 ** 30


AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def torch_steps(name, batch, steps, warmup, device, precision):
    torch.manual_seed(1)
    model, shape, loss_fn, labels = torch_model(name)
    glorot(model)
    model.to(device)
    opt = torch_optimizer("adam", model.parameters())
    x = torch.randn(batch, *shape, device=device) if not is_tokens(name) else \
        labels(batch).to(device)
    y = labels(batch).to(device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    dtype = AUTOCAST.get(precision)
    scaler = torch.amp.GradScaler(device) if precision == "fp16" else None
    times = []
    warm_peak = 0
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        loss.item()  # waits for the step, as scalescope's loss read does
        t1 = time.perf_counter()
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
        elif i == warmup - 1 and device == "cuda":
            # The warm-up's peak holds cudnn.benchmark's trial workspaces; the steps' own is
            # reported beside the whole run's.
            warm_peak = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
    peaks = None
    if device == "cuda":
        steps_peak = torch.cuda.max_memory_allocated()
        peaks = (max(warm_peak, steps_peak), steps_peak)
    del model, opt, x, y
    return times, peaks


def scalescope_steps(binary, name, batch, steps, warmup, threads, device, precision):
    where = ["--devices", "cuda:1"] if device == "cuda" else ["--threads", str(threads)]
    if precision:
        where += ["--precision", precision]
    run = run_scalescope(binary, ["--model", name, "--batch", str(batch),
                                  "--steps", str(warmup + steps), "--warmup-steps", str(warmup),
                                  *where, *scalescope_optimizer_args("adam"),
                                  "--data", "synthetic:device", "--no-eval"])
    peaks = run["summary"].get("peak_memory_bytes") or [None]
    return [s["step_ms"] for s in run["steps"][warmup:]], peaks[0]


def parse_cases(text):
    cases = []
    for item in text.split(","):
        name, _, batch = item.rpartition(":")
        if not name or not batch.isdigit():
            sys.exit(f"--cases: '{item}' is not NAME:BATCH (e.g. resnet:depth=50:64)")
        cases.append((name, int(batch)))
    return cases


def gib(value):
    return f"{value / GIB:.2f}" if value else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--binary", default=default_binary())
    ap.add_argument("--cases", help="NAME:BATCH,... instead of the device's default cases")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16", "fp16"],
                    help="both sides' precision (default: tf32 on GPUs, fp32 on CPUs)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cases = CASES
    where = f"{args.threads} thread(s)"
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("--device cuda: this PyTorch sees no GPU")
        tf32 = args.precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True  # scalescope also picks conv algorithms once
        cases = GPU_CASES
        where = torch.cuda.get_device_name(0)
    if args.cases:
        cases = parse_cases(args.cases)
    if args.precision == "tf32" and args.device == "cpu":
        sys.exit("--precision tf32: TF32 is a format of GPU tensor cores")
    print(f"PyTorch {torch.__version__} (attention: {ATTENTION}), {where}, "
          f"precision {args.precision or 'default'}, "
          f"{args.rounds} rounds x {args.steps} steps (+{args.warmup} warm-up)")
    print(f"{'model':<16} {'batch':>5} {'pytorch ms':>11} {'scalescope ms':>14} {'ratio':>6}"
          f" {'pytorch GiB':>12} {'scalescope GiB':>15} {'ratio':>6} {'pytorch steps GiB':>18}")
    for name, batch in cases:
        ours, theirs, their_peak, their_steps_peak, our_peak = [], [], 0, 0, 0
        for _ in range(args.rounds):
            times, peaks = torch_steps(name, batch, args.steps, args.warmup, args.device,
                                       args.precision)
            theirs += times
            if peaks:
                their_peak = max(their_peak, peaks[0])
                their_steps_peak = max(their_steps_peak, peaks[1])
            times, peak = scalescope_steps(args.binary, name, batch, args.steps, args.warmup,
                                           args.threads, args.device, args.precision)
            ours += times
            our_peak = max(our_peak, peak or 0)
        t, o = statistics.median(theirs), statistics.median(ours)
        memory_ratio = f"{our_peak / their_peak:>6.2f}" if our_peak and their_peak else "     -"
        print(f"{name:<16} {batch:>5} {t:>11.2f} {o:>14.2f} {o / t:>6.2f}"
              f" {gib(their_peak):>12} {gib(our_peak):>15} {memory_ratio}"
              f" {gib(their_steps_peak):>18}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
