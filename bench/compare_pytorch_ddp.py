#!/usr/bin/python3
"""Data-parallel step time of scalescope vs PyTorch DDP, side by side in one run.

scalescope runs `train --devices cpu:N --threads T` (N replica threads in one process, oneDNN
kernels, gradients all-reduced with Gloo over loopback TCP in buckets during backward).
PyTorch runs N processes (torch.multiprocessing spawn) of T thread(s) each, wrapped in
DistributedDataParallel with the gloo backend over 127.0.0.1 (GLOO_SOCKET_IFNAME=lo) and
DDP's defaults: bucket_cap_mb 25 and a first bucket of 1 MiB, the same as scalescope's
defaults (--bucket-cap-mb 25 --first-bucket-mb 1, passed explicitly). DDP runs its first step
with one bucket and then rebuilds them in gradient order (so --warmup is at least 2); the
script prints both tools' bucket sizes, which should agree.

Both train the same model (bench_common: same layers, Glorot-uniform initialisation, loss)
with the same optimizer, given explicitly to both (default: scalescope's own default, Adam
lr 1e-3, betas 0.9/0.999, eps 1e-7), on data resident in memory: scalescope with
`--data synthetic:device` (one batch per replica, generated once), PyTorch with one
pre-generated batch per rank reused by every step. So neither measures input.

A PyTorch step is the full training step -- zero_grad, forward, loss, backward (during which
DDP all-reduces the gradient buckets), optimizer step -- ended by reading the loss
(`loss.item()`), as scalescope's step ends by reading its loss; nothing else synchronises
the ranks inside the loop. The step time compared is rank 0's wall time per step after the
warm-up steps (scalescope: the run file's steps[i].replicas[0].step_ms); the slowest
replica's per-step time (scalescope's own group figure, steps[i].step_ms; for PyTorch the
larger of the ranks' own times) is printed below the table and in the JSON. After the timed
loop the DDP ranks' weights are compared (scalescope checks its replicas itself).

The tools alternate for --rounds rounds per case, the order flipping every round (AB, BA,
AB, ...), so that drift of the machine affects both alike; the figures are median, p10 and
p90 over all measured steps of all rounds. As a cheap correctness check the loss (the mean of
the replicas' losses, every step including warm-up) must trend down in every round of both:
its least-squares slope over the steps is negative. (Not "last below first": Adam's first
update overshoots, so over a few steps the loss can end above its first value.)

Usage: /usr/bin/python3 bench/compare_pytorch_ddp.py [--rounds 3] [--steps 30] [--warmup 10]
           [--json FILE] [--models cifar-cnn,mlp-41m]
Needs Debian's python3-torch (run with /usr/bin/python3).
"""
import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from bench_common import (CASES, OPTIMIZERS, default_binary, glorot, optimizer_description,
                          run_scalescope, scalescope_optimizer_args, stats, torch_model,
                          torch_optimizer)

BUCKET_CAP_MB = 25  # DDP's default, and scalescope's
FIRST_BUCKET_MB = 1  # DDP's default (dist._DEFAULT_FIRST_BUCKET_BYTES), and scalescope's


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(rank, world, port, threads, name, batch, steps, warmup, optimizer, out_dir):
    """One DDP rank: trains warmup + steps steps, writes its step times and losses."""
    torch.set_num_threads(threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    torch.manual_seed(1)  # the same initial weights on every rank (DDP broadcasts rank 0's)
    model, shape, loss_fn, labels = torch_model(name)
    glorot(model)
    ddp = DistributedDataParallel(model)  # defaults: bucket_cap_mb=25, first bucket 1 MiB
    opt = torch_optimizer(optimizer, ddp.parameters())
    torch.manual_seed(1000 + rank)  # each rank its own batch, generated once
    x = torch.randn(batch, *shape)
    y = labels(batch)
    times, losses = [], []
    dist.barrier()  # start together; the loop itself synchronises only through DDP's all-reduce
    for _ in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        times.append((time.perf_counter() - t0) * 1e3)
    # After the timing: DDP kept the replicas identical (as scalescope checks its own).
    with torch.no_grad():
        checksum = torch.stack([p.double().sum() for p in ddp.parameters()]).sum().reshape(1)
    gathered = [torch.zeros_like(checksum) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    try:  # DDP's buckets in bytes, rebuilt after step 1 in gradient order (step 1 has one)
        rebuilt = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes")
        buckets = [int(b) for b in rebuilt.split(",")] if rebuilt else None
    except Exception:  # a private API: its absence must not fail the measurement
        buckets = None
    ref = float(gathered[0])
    identical = all(abs(float(g) - ref) <= 1e-9 * abs(ref) for g in gathered)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"step_ms": times, "loss": losses, "replicas_identical": identical,
                   "bucket_bytes": buckets}, f)
    dist.destroy_process_group()


def pytorch_round(world, threads, name, batch, steps, warmup, optimizer):
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(ddp_worker, nprocs=world, join=True,
                 args=(world, free_port(), threads, name, batch, steps, warmup, optimizer, tmp))
        ranks = []
        for r in range(world):
            with open(os.path.join(tmp, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
    n = warmup + steps
    if not ranks[0]["replicas_identical"]:
        raise RuntimeError(f"PyTorch DDP {name}: the ranks' weights differ after training")
    return {
        "rank0_ms": ranks[0]["step_ms"][warmup:],
        "slowest_ms": [max(rk["step_ms"][i] for rk in ranks) for i in range(warmup, n)],
        "loss": [sum(rk["loss"][i] for rk in ranks) / world for i in range(n)],
        "bucket_bytes": ranks[0]["bucket_bytes"],
    }


def scalescope_round(binary, world, threads, name, batch, steps, warmup, optimizer):
    run = run_scalescope(binary, [
        "--model", name, "--devices", f"cpu:{world}", "--threads", str(threads),
        "--batch", str(batch), "--steps", str(warmup + steps), "--warmup-steps", str(warmup),
        *scalescope_optimizer_args(optimizer), "--bucket-cap-mb", str(BUCKET_CAP_MB),
        "--first-bucket-mb", str(FIRST_BUCKET_MB), "--data", "synthetic:device", "--no-eval"])
    measured = run["steps"][warmup:]
    return {
        "rank0_ms": [s["replicas"][0]["step_ms"] for s in measured],
        "slowest_ms": [s["step_ms"] for s in measured],
        "loss": [s["loss"] for s in run["steps"]],
        "bucket_bytes": run["config"]["bucket_bytes"],
    }


def loss_slope(losses):
    """Least-squares slope of the loss over the step index."""
    n = len(losses)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(losses) / n
    return sum((i - mx) * (y - my) for i, y in enumerate(losses)) / \
        sum((i - mx) ** 2 for i in range(n))


def git_describe(path):
    try:
        return subprocess.run(["git", "-C", path, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=2, help="replicas / DDP ranks (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="threads per replica (default 1)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up steps per run (not timed)")
    ap.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adam",
                    help="adam (scalescope's default) or sgd with momentum 0.9")
    ap.add_argument("--models", default=",".join(name for name, _ in CASES),
                    help="comma-separated subset of " + ", ".join(name for name, _ in CASES))
    ap.add_argument("--binary", default=default_binary())
    ap.add_argument("--json", metavar="FILE", help="write the raw step times and losses here")
    args = ap.parse_args()
    known = dict(CASES)
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in known:
            ap.error(f"--models: unknown model {m!r} (known: {', '.join(known)})")
    if args.replicas < 2 or args.threads < 1 or args.rounds < 1 or args.steps < 1 \
            or args.warmup < 2:
        ap.error("needs --replicas >= 2, --warmup >= 2 (DDP rebuilds its buckets after step 1) "
                 "and --threads, --rounds, --steps >= 1")
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        ap.error(f"--binary {binary}: not an executable (build scalescope first)")

    print(f"scalescope {binary} ({git_describe(os.path.dirname(binary))}) vs PyTorch "
          f"{torch.__version__} DDP (gloo); {args.replicas} replicas x {args.threads} thread(s); "
          f"{optimizer_description(args.optimizer)}; {args.rounds} rounds x {args.steps} steps "
          f"(+{args.warmup} warm-up), order alternating per round; {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    results = []
    for name in models:
        batch = known[name]
        case = {"model": name, "batch_per_replica": batch, "scalescope": [], "pytorch_ddp": []}
        for r in range(args.rounds):
            order = ["scalescope", "pytorch_ddp"]
            if r % 2:
                order.reverse()
            for tool in order:
                t0 = time.monotonic()
                if tool == "scalescope":
                    res = scalescope_round(binary, args.replicas, args.threads, name, batch,
                                           args.steps, args.warmup, args.optimizer)
                else:
                    res = pytorch_round(args.replicas, args.threads, name, batch, args.steps,
                                        args.warmup, args.optimizer)
                res["wall_s"] = time.monotonic() - t0
                res["loss_slope"] = loss_slope(res["loss"])
                res["loss_trend_down"] = res["loss_slope"] < 0
                case[tool].append(res)
                print(f"  {name} round {r + 1} {tool:<11}: rank 0 median "
                      f"{stats(res['rank0_ms'])['median']:9.2f} ms, loss {res['loss'][0]:.4f} -> "
                      f"{res['loss'][-1]:.4f}, trend {res['loss_slope']:+.4f}/step"
                      f"{'' if res['loss_trend_down'] else ' NOT DECREASING'}"
                      f" ({res['wall_s']:.0f} s)", flush=True)
        for tool in ("scalescope", "pytorch_ddp"):
            rounds = case[tool]
            case[tool + "_summary"] = {
                "rank0_ms": stats([t for rd in rounds for t in rd["rank0_ms"]]),
                "slowest_ms": stats([t for rd in rounds for t in rd["slowest_ms"]]),
                "loss_trend_down_every_round": all(rd["loss_trend_down"] for rd in rounds),
            }
        results.append(case)

    print()
    print(f"Step time, rank 0, median (p10-p90) over {args.rounds} x {args.steps} steps; "
          f"{args.replicas} replicas x {args.threads} thread(s); ratio = scalescope / PyTorch")
    print()
    print("| model | batch/replica | scalescope ms | p10-p90 | PyTorch DDP ms | p10-p90 | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in results:
        s, p = c["scalescope_summary"]["rank0_ms"], c["pytorch_ddp_summary"]["rank0_ms"]
        print(f"| {c['model']} | {c['batch_per_replica']} | {s['median']:.2f} | "
              f"{s['p10']:.2f}-{s['p90']:.2f} | {p['median']:.2f} | {p['p10']:.2f}-{p['p90']:.2f}"
              f" | {s['median'] / p['median']:.2f} |")
    print()
    for c in results:
        s, p = c["scalescope_summary"], c["pytorch_ddp_summary"]
        print(f"{c['model']}: slowest replica per step, median: scalescope "
              f"{s['slowest_ms']['median']:.2f} ms, PyTorch DDP {p['slowest_ms']['median']:.2f} ms;"
              f" loss trended down in every round: scalescope {s['loss_trend_down_every_round']}, "
              f"PyTorch {p['loss_trend_down_every_round']}")
    for c in results:
        s, p = c["scalescope"][0]["bucket_bytes"], c["pytorch_ddp"][0]["bucket_bytes"]
        print(f"{c['model']}: gradient buckets (bytes, in reduction order): scalescope {s}, "
              f"PyTorch DDP {p if p is not None else 'unknown'}"
              f"{'' if p is None or s == p else '  DIFFERENT'}")
    ok = all(c[t + "_summary"]["loss_trend_down_every_round"] for c in results
             for t in ("scalescope", "pytorch_ddp"))
    if args.json:
        report = {
            "context": {
                "scalescope_binary": binary,
                "scalescope_git": git_describe(os.path.dirname(binary)),
                "pytorch": torch.__version__,
                "replicas": args.replicas, "threads_per_replica": args.threads,
                "optimizer": optimizer_description(args.optimizer),
                "bucket_cap_mb": BUCKET_CAP_MB, "first_bucket_mb": FIRST_BUCKET_MB,
                "rounds": args.rounds, "steps": args.steps, "warmup": args.warmup,
                "cores": os.cpu_count(), "load_average_end": os.getloadavg(),
                "date": datetime.datetime.now().isoformat(timespec="seconds"),
            },
            "cases": results,
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
        print(f"raw numbers: {args.json}")
    if not ok:
        print("error: a loss did not trend down (see the rounds above)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
