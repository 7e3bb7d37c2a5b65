"""PyTorch anchor runner: trains a scalescope model with PyTorch and prints the anchor JSON.

Usage: PYTHON bench/anchors/torch_runner.py [the arguments of anchor_common.add_runner_arguments]
(PYTHON: bench/anchors/.venv/bin/python for PyPI's PyTorch 2.x, or /usr/bin/python3 for
Debian's PyTorch 1.13; Debian's may lack the `safetensors` package, so checkpoints are then
read with a small reader here.)

What it runs: the PyTorch twin of the model (bench_common.torch_model: nn.Sequential, NCHW
for the CNN, whose channels-last batches are permuted), from --weights (a scalescope
checkpoint, load_state_dict(strict=True)) or torch.manual_seed(--seed) + Glorot-uniform weights
with zero biases; the optimizer of anchor_common.OPTIMIZERS (Adam with scalescope's betas and
epsilon, or SGD with momentum).
A gpt spec (--model gpt:preset=mini) runs bench/torch_models.py's GPT on int64 token windows of
the spec's sequence length (synthetic, or text:FILE in file order), loss torch_models.gpt_loss;
its tied lm_head/wte weight is one parameter, so DDP all-reduces it once, as scalescope does.
  --replicas 1: one process, torch.set_num_threads(--threads).
  --replicas N: N processes (torch.multiprocessing spawn), each with --threads/N threads,
    wrapped in DistributedDataParallel over gloo on 127.0.0.1 (GLOO_SOCKET_IFNAME=lo) with
    DDP's default buckets, 25 MiB with a 1 MiB first one, as scalescope's defaults. DDP
    broadcasts rank 0's weights at construction and rebuilds its buckets in gradient order
    after step 1 (checks.bucket_bytes: the rebuilt sizes).

How it times: every batch is converted to tensors before the loop; after a barrier each step
is timed with time.perf_counter from zero_grad(set_to_none=True) through forward, loss,
backward (with DDP's bucketed all-reduce), optimizer step and loss.item(). steps[i].ms is rank
0's time, steps[i].loss the mean of the ranks' losses; checks carry every rank's times and the
slowest rank's time per step. After training the ranks' weights are compared bit for bit with
rank 0's (broadcast), and with --allreduce-bytes each size is all-reduced (sum, float32, gloo)
twice untimed and then --allreduce-repeats times, each after a barrier; rank 0's times are
reported.

Errors end the run with a non-zero status and one line on standard error; a failing rank ends
the others (mp.spawn terminates them), and gloo operations time out after RANK_TIMEOUT.
"""
import argparse
import datetime
import json
import logging
import os
import socket
import struct
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

import anchor_common  # puts bench/ on sys.path
from bench_common import glorot, torch_model, torch_optimizer

RANK_TIMEOUT = datetime.timedelta(seconds=300)  # process-group start and every gloo operation


class RankFailed(Exception):
    """A DDP rank's failure, already one line."""


def one_line(error):
    if isinstance(error, RankFailed):
        return str(error)
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_safetensors(path):
    """{name: float32 array} of a safetensors file (8-byte little-endian header length, JSON
    header, raw little-endian data), for Pythons without the `safetensors` package."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    tensors = {}
    for name, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if entry["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {entry['dtype']}, expected F32")
        begin, end = entry["data_offsets"]
        flat = np.frombuffer(data, dtype="<f4", count=(end - begin) // 4, offset=8 + n + begin)
        tensors[name] = flat.reshape(entry["shape"]).astype(np.float32)
    return tensors


def read_checkpoint(path):
    try:
        return anchor_common.read_weights(path)
    except ImportError:
        return read_safetensors(path)


def build_model(args):
    """(model, loss function, whether inputs are images) with the run's initial weights."""
    torch.manual_seed(args.seed)
    model, shape, loss_fn, _ = torch_model(args.model)
    if args.weights:
        state = {k: torch.from_numpy(np.array(v, dtype=np.float32))
                 for k, v in read_checkpoint(args.weights).items()}
        model.load_state_dict(state, strict=True)
    else:
        glorot(model)
    return model, loss_fn, len(shape) == 3


def make_optimizer(args, params):
    return torch_optimizer(args.optimizer, params, anchor_common.optimizer_settings(args))


def rank_batches(args, rank, images):
    """This rank's (x, y) tensors for every step, converted once (synthetic data: one batch)."""
    batch_of = anchor_common.load_batches(args)
    converted = {}
    out = []
    for step in range(args.warmup + args.steps):
        x, y = batch_of(step, rank)
        key = (id(x), id(y))
        if key not in converted:
            tx = torch.from_numpy(np.array(x))
            if images:
                tx = tx.permute(0, 3, 1, 2).contiguous()
            converted[key] = (tx, torch.from_numpy(np.array(y)))
        out.append(converted[key])
    return out


def train(step_model, opt, loss_fn, batches, precision="fp32"):
    """Runs every step; returns (ms per step, loss per step). bf16: the forward and the loss
    under CPU autocast, as PyTorch's mixed-precision recipe has it (backward outside)."""
    times, losses = [], []
    for x, y in batches:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_fn(step_model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        times.append((time.perf_counter() - t0) * 1e3)
    return times, losses


def flat_weights(model):
    with torch.no_grad():
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def compare_with_rank0(model):
    """Broadcasts rank 0's weights; this rank's bitwise equality, max |difference| and float64
    checksum."""
    mine = flat_weights(model)
    ref = mine.clone()
    dist.broadcast(ref, 0)
    return {"identical": bool(torch.equal(mine, ref)),
            "max_abs_diff": float((mine - ref).abs().max()),
            "checksum": float(mine.double().sum())}


def ddp_bucket_bytes(ddp):
    """DDP's rebuilt bucket sizes in bytes (private logging API; None where unavailable)."""
    try:
        rebuilt = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes")
        return [int(b) for b in str(rebuilt).split(",")] if rebuilt else None
    except Exception:  # noqa: BLE001 - a private API; its absence must not fail the run
        return None


def time_allreduce(sizes, repeats):
    """[{"bytes", "ms"}]: sum all-reduce of float32 buffers, 2 untimed calls then `repeats`
    timed ones, each after a barrier."""
    out = []
    for size in sizes:
        buf = torch.ones(size // 4, dtype=torch.float32)
        for _ in range(2):
            dist.all_reduce(buf)
        ms = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            ms.append((time.perf_counter() - t0) * 1e3)
        out.append({"bytes": size, "ms": ms})
    return out


def run_single(args):
    torch.set_num_threads(args.threads)
    model, loss_fn, images = build_model(args)
    batches = rank_batches(args, 0, images)
    opt = make_optimizer(args, model.parameters())
    times, losses = train(model, opt, loss_fn, batches, args.precision)
    return [{"ms": times, "loss": losses, "identical": True, "max_abs_diff": 0.0,
             "checksum": float(flat_weights(model).double().sum()), "bucket_bytes": None,
             "allreduce": []}]


def ddp_rank_record(rank, args, port):
    """One DDP rank's training and checks."""
    world = args.replicas
    torch.set_num_threads(args.threads // world)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=RANK_TIMEOUT)
    model, loss_fn, images = build_model(args)
    batches = rank_batches(args, rank, images)
    # DDP's defaults: 25 MiB buckets, the first one 1 MiB. Not bucket_cap_mb=25: PyTorch 2.x
    # then makes the first bucket 25 MiB too (it keeps 1 MiB only when the cap is left unset).
    ddp = DistributedDataParallel(model)
    opt = make_optimizer(args, ddp.parameters())
    dist.barrier()  # start together; inside the loop only DDP's all-reduce synchronises
    times, losses = train(ddp, opt, loss_fn, batches, args.precision)
    record = {"ms": times, "loss": losses, **compare_with_rank0(model),
              "bucket_bytes": ddp_bucket_bytes(ddp),
              "allreduce": time_allreduce(args.allreduce_bytes, args.allreduce_repeats)}
    dist.barrier()
    dist.destroy_process_group()
    return record


def ddp_rank(rank, args, port, out_dir):
    """mp.spawn's target: writes rank{rank}.json, or rank{rank}.error (one line) and exits 1."""
    try:
        record = ddp_rank_record(rank, args, port)
    except BaseException as e:  # noqa: BLE001 - reported to the parent as one line
        with open(os.path.join(out_dir, f"rank{rank}.error"), "w") as f:
            f.write(f"rank {rank}: {one_line(e)}")
        os._exit(1)  # at once: the other ranks may wait on this one in gloo
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)


def run_ddp(args):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    # mp.spawn logs each rank it terminates after a failure; the run's one line says enough.
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            mp.spawn(ddp_rank, nprocs=args.replicas, join=True, args=(args, free_port(), tmp))
        except Exception as e:  # noqa: BLE001 - prefer the rank's own message
            # The first rank to fail names the cause; the others then fail in gloo.
            errors = sorted((os.path.join(tmp, n) for n in os.listdir(tmp)
                             if n.endswith(".error")), key=os.path.getmtime)
            if not errors:
                raise RankFailed(f"a DDP rank failed: {one_line(e)}") from None
            with open(errors[0]) as f:
                raise RankFailed(f.read()) from None
        records = []
        for rank in range(args.replicas):
            with open(os.path.join(tmp, f"rank{rank}.json")) as f:
                records.append(json.load(f))
    return records


def summarize(args, records):
    """(steps, checks, allreduce) of the anchor result from the ranks' records."""
    n = len(records)
    steps = [{"ms": records[0]["ms"][i], "loss": sum(r["loss"][i] for r in records) / n}
             for i in range(len(records[0]["ms"]))]
    checks = {
        "world_size": n,
        "threads_per_replica": args.threads // n,
        "weights": "checkpoint" if args.weights else "glorot",
        "replicas_identical": all(r["identical"] for r in records),
        "max_abs_diff": max(r["max_abs_diff"] for r in records),
        "weights_checksum": [r["checksum"] for r in records],
        "bucket_bytes": records[0]["bucket_bytes"],
        "first_bucket_bytes": getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", None) if n > 1
        else None,
        "rank_ms": [r["ms"] for r in records],
        "slowest_ms": [max(r["ms"][i] for r in records) for i in range(len(steps))],
    }
    return steps, checks, records[0]["allreduce"]


def parse_arguments():
    ap = anchor_common.add_runner_arguments(argparse.ArgumentParser(
        description=__doc__.splitlines()[0]))
    args = ap.parse_args()
    anchor_common.check_runner_arguments(args)
    if any(s < 4 or s % 4 for s in args.allreduce_bytes) or args.allreduce_repeats < 1:
        sys.exit("--allreduce-bytes must be positive multiples of 4 (float32 buffers) and "
                 "--allreduce-repeats at least 1")
    if args.weights and not os.path.isfile(args.weights):
        sys.exit(f"--weights {args.weights}: no such file")
    return args


def main():
    args = parse_arguments()
    try:
        records = run_ddp(args) if args.replicas > 1 else run_single(args)
    except Exception as e:  # noqa: BLE001 - one line, non-zero exit
        sys.exit(f"torch_runner: {one_line(e)}")
    steps, checks, allreduce = summarize(args, records)
    if not checks["replicas_identical"]:
        print(f"torch_runner: warning: the ranks' weights differ after training "
              f"(max |difference| {checks['max_abs_diff']:g})", file=sys.stderr)
    kind = "DDP" if args.replicas > 1 else "single process"
    versions = {"torch": torch.__version__, "numpy": np.__version__,
                "mkldnn": torch.backends.mkldnn.is_available()}
    anchor_common.emit(args, anchor_common.result(
        args, f"pytorch {torch.__version__} {kind}", versions, steps, checks, allreduce))


if __name__ == "__main__":
    main()
