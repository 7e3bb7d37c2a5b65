"""Writes PyTorch profiler traces of a small DDP job on CPU (Gloo), one Chrome trace per rank:
the inputs of `scalescope analyze` (and of HTA) that tests/data/traces holds, trimmed.

Usage: bench/traces/.venv/bin/python bench/traces/ddp_trace.py OUT_DIR [--ranks N] [--steps K]
       [--batch B] [--threads T]

What it runs: a CNN (two 3x3 convolutions of 16 and 32 channels, max pooling, a dense layer of
64 and one of 10) on synthetic 32x32x3 images through a DataLoader (no worker processes, so
its __next__ runs on the training thread, where the profiler sees it), SGD with momentum,
wrapped in DistributedDataParallel over Gloo on 127.0.0.1 with N processes (N = 1 too: DDP
of one rank, so the one-rank trace has the same ops). torch.profiler with schedule
wait=1, warmup=1, active=K: the trace holds K ProfilerStep#i ranges, exported per rank with
export_chrome_trace to OUT_DIR/rank-R.pt.trace.json (the name carries the rank; the trace's
distributedInfo does too). Each rank runs T threads (default: the usable cores / N).
"""
import argparse
import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, schedule

TIMEOUT = datetime.timedelta(seconds=120)


def model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10))


def loader(rank, batch, steps):
    g = torch.Generator().manual_seed(rank)
    n = batch * steps
    data = torch.utils.data.TensorDataset(torch.randn(n, 3, 32, 32, generator=g),
                                          torch.randint(0, 10, (n,), generator=g))
    return torch.utils.data.DataLoader(data, batch_size=batch, shuffle=False, num_workers=0)


def run(rank, args, port):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.ranks, timeout=TIMEOUT)
    torch.manual_seed(0)
    ddp = DistributedDataParallel(model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    total = 2 + args.steps  # the profiler's wait and warm-up steps, then the active ones
    out = os.path.join(args.out, f"rank-{rank}.pt.trace.json")
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=args.steps),
                 on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
        for x, y in loader(rank, args.batch, total):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            loss.item()
            prof.step()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()
    if args.threads <= 0:
        args.threads = max(1, len(os.sched_getaffinity(0)) // args.ranks)
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(run, args=(args, free_port()), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
