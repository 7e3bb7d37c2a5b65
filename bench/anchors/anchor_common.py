"""What the anchor runners (keras_runner.py, torch_runner.py) and the side-by-side driver share.

An anchor is another system training the same model on the same batches with the same thread
budget. Every runner takes the arguments of add_runner_arguments() and prints one JSON object
(result()):

  {"system": "tensorflow 2.21.0 MirroredStrategy", "versions": {...}, "model": "cifar-cnn",
   "replicas": 2, "batch": 64, "threads": 2, "optimizer": "adam", "warmup": 5,
   "steps": [{"ms": 31.2, "loss": 2.31}, ...],       # every step, warm-up included
   "checks": {"replicas_built": 2, "replicas_identical": true, ...},
   "allreduce": [{"bytes": 1129000, "ms": [..]}, ...]}   # only with --allreduce-bytes

A step's "ms" is the wall time of one whole training step (forward, loss, backward with the
gradient all-reduce, optimizer), ended by reading the loss as scalescope's step is; its
"loss" is the mean over the replicas of each replica's mean loss on its per-replica batch
(equal batches, so the loss of the global batch), taken before the step's update.

Data (--data): "synthetic" (default) gives every replica one batch of its own, generated once
from --seed and reused by every step, so that no system measures its input pipeline (scalescope:
--data synthetic:device; for gpt models random token windows). "cifar10:DIR" reads a CIFAR-10
binary directory in file order, as scalescope's `--data cifar10:DIR --no-shuffle
--no-normalize` does: step k takes samples [k·G, (k+1)·G) of the epoch (G = batch × replicas)
and replica r its slice [r·B, (r+1)·B). "text:FILE" (gpt models) reads the byte-token windows
of scalescope's `--data text:FILE --no-shuffle` (text_windows) in the same order.

Weights (--weights FILE): a scalescope checkpoint (safetensors, PyTorch's nn.Sequential names and
layouts; see models/checkpoint.h). Without it each system draws Glorot-uniform weights with zero
biases, as scalescope does.
"""
import argparse
import json
import os
import sys

import numpy as np

from anchor_settings import (CASES, CIFAR_RECORD, CIFAR_SIDE, DEFAULT_VENV, HERE,  # noqa: F401
                             MODELS, OPTIMIZERS, is_gpt, parse_gpt_spec, runner_model, stats,
                             venv_python)


def add_runner_arguments(ap):
    ap.add_argument("--model", type=runner_model, default="cifar-cnn",
                    help=f"{', '.join(sorted(MODELS))} or a gpt: spec (gpt:preset=mini)")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64, help="samples per replica and step")
    ap.add_argument("--steps", type=int, default=30, help="measured steps after the warm-up")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of the whole run, shared by the replicas")
    ap.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adam")
    ap.add_argument("--lr", type=float, help="learning rate (default: the optimizer's in "
                    "anchor_settings.OPTIMIZERS, scalescope's)")
    ap.add_argument("--data", default="synthetic",
                    help="synthetic, cifar10:DIR or (gpt) text:FILE, files in file order")
    ap.add_argument("--weights", help="initial weights: a scalescope checkpoint")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--allreduce-bytes", type=int, nargs="*", default=[],
                    help="after training, time an all-reduce of float32 buffers of these sizes")
    ap.add_argument("--allreduce-repeats", type=int, default=20)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: autocast (convolutions and matmuls in bf16, the rest fp32)")
    ap.add_argument("--json", help="write the result here instead of standard output")
    return ap


def check_runner_arguments(args):
    """Refuses what no runner can do, naming the argument."""
    problems = []
    if args.replicas < 1:
        problems.append(f"--replicas {args.replicas} must be at least 1")
    if args.batch < 1 or args.steps < 1 or args.warmup < 0:
        problems.append("--batch and --steps must be positive and --warmup not negative")
    if args.threads < args.replicas or args.threads % args.replicas:
        problems.append(f"--threads {args.threads} must be a multiple of --replicas "
                        f"{args.replicas} (every replica gets the same share)")
    if args.lr is not None and not args.lr > 0:
        problems.append(f"--lr {args.lr} must be positive")
    if args.data != "synthetic" and not args.data.startswith(("cifar10:", "text:")):
        problems.append(f"--data {args.data!r}: expected synthetic, cifar10:DIR or text:FILE")
    if args.data.startswith("cifar10:") and args.model != "cifar-cnn":
        problems.append(f"--data cifar10: needs --model cifar-cnn, not {args.model}")
    if args.data.startswith("text:") and not is_gpt(args.model):
        problems.append(f"--data text: needs a gpt model, not {args.model}")
    if problems:
        sys.exit("; ".join(problems))


def optimizer_settings(args):
    """OPTIMIZERS[--optimizer] with --lr applied."""
    settings = dict(OPTIMIZERS[args.optimizer])
    if args.lr is not None:
        settings["lr"] = args.lr
    return settings


def synthetic_batches(model, replicas, batch, seed):
    """One (x, y) per replica, channels-last float32 inputs and labels (int64 classes, or float32
    0/1 for the binary model); for a gpt model int64 token windows [batch, seq] of a random
    token stream and the next token of each as labels."""
    rng = np.random.default_rng(seed)
    if is_gpt(model):
        c = parse_gpt_spec(model)
        streams = (rng.integers(0, c.vocab, (batch, c.seq + 1)) for _ in range(replicas))
        return [(s[:, :-1].copy(), s[:, 1:].copy()) for s in streams]
    shape, classes = MODELS[model]
    out = []
    for _ in range(replicas):
        x = rng.standard_normal((batch, *shape), dtype=np.float32)
        if classes == 1:
            y = rng.integers(0, 2, (batch, 1)).astype(np.float32)
        else:
            y = rng.integers(0, classes, (batch,)).astype(np.int64)
        out.append((x, y))
    return out


def write_cifar10(directory, samples, seed):
    """A CIFAR-10 binary directory of learnable random images: every class has a random mean
    image and each sample is its class's mean plus noise, so a few steps of training follow the
    signal (random labels would make the losses of two systems drift apart with every step's
    rounding). The `samples` training records are spread over data_batch_1..5.bin in order;
    test_batch.bin holds 100 more."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    means = 128 + rng.integers(-80, 81, (10, CIFAR_RECORD - 1))

    def records(n):
        labels = rng.integers(0, 10, n)
        noise = rng.integers(-64, 64, (n, CIFAR_RECORD - 1))
        out = np.empty((n, CIFAR_RECORD), dtype=np.uint8)
        out[:, 0] = labels
        out[:, 1:] = np.clip(means[labels] + noise, 0, 255)
        return out

    train = records(samples)
    for i, part in enumerate(np.array_split(train, 5), start=1):
        part.tofile(os.path.join(directory, f"data_batch_{i}.bin"))
    records(100).tofile(os.path.join(directory, "test_batch.bin"))


def read_cifar10_train(directory):
    """The training split in file order: x [n, 32, 32, 3] float32 in [0, 1], y [n] int64."""
    parts = [np.fromfile(os.path.join(directory, f"data_batch_{i}.bin"), dtype=np.uint8)
             for i in range(1, 6)]
    records = np.concatenate(parts).reshape(-1, CIFAR_RECORD)
    planes = records[:, 1:].reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE)
    x = planes.transpose(0, 2, 3, 1).astype(np.float32) / np.float32(255.0)
    return np.ascontiguousarray(x), records[:, 0].astype(np.int64)


def text_windows(path, seq):
    """scalescope's `--data text:FILE` (byte tokens): (x, y, evaluation windows). Window k is
    bytes [k·S, k·S+S) as input and the next byte of each, [k·S+1, k·S+S+1), as labels, for
    k < W = (size - 1) // S; x and y are int64 [W, S]. The last max(1, W // 10) windows are
    the evaluation split, the rest training."""
    data = np.fromfile(path, dtype=np.uint8).astype(np.int64)
    windows = (len(data) - 1) // seq
    if windows < 2:
        raise ValueError(f"{path}: {len(data)} bytes, too few for two windows of {seq} tokens")
    x = data[:windows * seq].reshape(windows, seq)
    y = data[1:windows * seq + 1].reshape(windows, seq)
    return x, y, max(1, windows // 10)


def read_text_train(path, seq):
    """The training windows of text_windows in file order: x, y int64 [n, seq]."""
    x, y, held_out = text_windows(path, seq)
    return x[:-held_out], y[:-held_out]


def file_order_batch(x, y, step, replica, batch, replicas):
    """The samples replica `replica` reads in step `step` (pipelines/sampler.h without shuffle)."""
    global_batch = batch * replicas
    step %= len(x) // global_batch
    begin = step * global_batch + replica * batch
    return x[begin:begin + batch], y[begin:begin + batch]


def load_batches(args):
    """A function (step, replica) -> (x, y) for the run's --data."""
    if args.data == "synthetic":
        fixed = synthetic_batches(args.model, args.replicas, args.batch, args.seed)
        return lambda step, replica: fixed[replica]
    kind, _, path = args.data.partition(":")
    if kind == "text":
        x, y = read_text_train(path, parse_gpt_spec(args.model).seq)
    else:
        x, y = read_cifar10_train(path)
    if len(x) < args.batch * args.replicas:
        sys.exit(f"--data {args.data}: {len(x)} samples, fewer than one global batch")
    return lambda step, replica: file_order_batch(x, y, step, replica, args.batch, args.replicas)


def read_weights(path):
    """A scalescope checkpoint as {name: float32 array} in file order (PyTorch layout)."""
    from safetensors.numpy import load_file
    return load_file(path)


def keras_kernels(model, weights):
    """The checkpoint's tensors in Keras order and layout: per layer [kernel, bias], conv OIHW ->
    HWIO, dense [out, in] -> [in, out]; the dense layer after Flatten also has its input rows
    reordered from PyTorch's (C, H, W) flattening to Keras's (H, W, C)."""
    names = sorted({k.rsplit(".", 1)[0] for k in weights}, key=int)
    out = []
    for i, layer in enumerate(names):
        w, b = weights[f"{layer}.weight"], weights[f"{layer}.bias"]
        if w.ndim == 4:
            w = w.transpose(2, 3, 1, 0)
        else:
            w = w.T
            if model == "cifar-cnn" and i == 2:  # 64 channels x 8 x 8 after two poolings
                w = w.reshape(64, 8, 8, -1).transpose(1, 2, 0, 3).reshape(64 * 8 * 8, -1)
        out += [np.ascontiguousarray(w), b]
    return out


def result(args, system, versions, steps, checks, allreduce=None):
    return {"system": system, "versions": versions, "model": args.model,
            "replicas": args.replicas, "batch": args.batch, "threads": args.threads,
            "optimizer": args.optimizer, "optimizer_settings": optimizer_settings(args),
            "precision": args.precision, "data": args.data, "warmup": args.warmup,
            "steps": steps, "checks": checks, "allreduce": allreduce or []}


def emit(args, obj):
    text = json.dumps(obj)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    else:
        print(text)
