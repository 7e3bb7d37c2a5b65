#!/usr/bin/python3
"""Training equivalence of scalescope with PyTorch: a ResNet with batch norm in training mode.

usage: torch_training_test.py SCALESCOPE

From the same initial weights (a scalescope checkpoint, loaded into torch_interop.py's
CifarResNet with strict=True) and the same batches (a CIFAR-10 binary file read in file order:
scalescope --no-shuffle --no-normalize, i.e. bytes / 255, channels last, step k of N replicas
at per-replica batch B taking samples [k·N·B, (k+1)·N·B) and replica r its slice [r·B, (r+1)·B)),
the per-step losses of 20 steps of SGD with momentum 0.9 (lr 0.005, no weight decay) of
cifar-resnet:depth=8 at per-replica batch 16 agree with PyTorch's to 1e-3 relative, on 1 and 2
replicas, the loss falls, and the final checkpoint (--save) loads into the PyTorch model and
agrees with PyTorch's final weights and running statistics.

The learning rate is small on purpose. With batch norm over 16 samples, training amplifies
float32 rounding: at lr 0.05 PyTorch in float32 and PyTorch in float64 (same weights, same
batches) drift apart by 7e-3 (N=2) to 8e-3 (N=1) relative within 20 steps, and scalescope by as
much from either; at lr 0.01 by up to 6e-4 over three data/weight seeds, too close to 1e-3 for a
test that other CPUs (other FMA widths, other summation orders) must pass. At lr 0.005 the
float32/float64 gap stays at or below 1.3e-4 over those seeds, and scalescope's gap to PyTorch
float32 likewise, while the loss still falls from 2.55 to 2.05 here.

2 replicas are emulated in one PyTorch process exactly as DDP without SyncBatchNorm trains: each
replica's half goes through the model in training mode on its own (batch norm normalizes with
that half's statistics), the loss is the mean of the halves' mean losses (so the gradient is
DDP's average of the replicas' gradients), and one optimizer step follows. The running
statistics are replica 0's: DDP (and scalescope) broadcast replica 0's buffers before each
forward, so only the first half's batches move the ones that are kept and saved. scalescope's
step loss on N replicas is the mean of the replicas' mean losses (harness/trainer/results.cpp).

Uses the system's Python with Debian's PyTorch and numpy; skips (exit 77) when torch is absent.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIPPED: PyTorch or numpy is not importable by {sys.executable}: {e}")
    sys.exit(SKIP)

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "anchors"))
import anchor_common  # noqa: E402 (write_cifar10, read_cifar10_train, file_order_batch)
from torch_interop import CifarResNet, read_safetensors  # noqa: E402

MODEL = "cifar-resnet:depth=8"
DEPTH = 8
BATCH = 16  # per replica
STEPS = 20
LR = 0.005
MOMENTUM = 0.9
LOSS_TOLERANCE = 1e-3  # relative, per step
# Any final weight or running statistic: the largest difference as a fraction of the largest
# change training made to that tensor.
WEIGHT_TOLERANCE = 0.1


def run_scalescope(binary, tmp, data, weights, n):
    out = os.path.join(tmp, f"scalescope{n}.json")
    saved = os.path.join(tmp, f"final{n}.safetensors")
    subprocess.run([binary, "train", "--model", MODEL, "--devices", f"cpu:{n}",
                    "--threads", "1", "--batch", str(BATCH), "--steps", str(STEPS),
                    "--warmup-steps", "0", "--data", f"cifar10:{data}", "--no-shuffle",
                    "--no-normalize", "--no-eval", "--optimizer", "sgd", "--lr", repr(LR),
                    "--momentum", repr(MOMENTUM), "--weight-decay", "0", "--load", weights,
                    "--save", saved, "-q", "-o", out],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    with open(out) as f:
        steps = json.load(f)["steps"]
    return [s["loss"] for s in steps], saved


def load_model(weights):
    state, metadata = read_safetensors(weights)
    if metadata.get("scalescope_model") != MODEL:
        raise SystemExit(f"{weights}: unexpected metadata {metadata}")
    model = CifarResNet(DEPTH)
    model.load_state_dict(state, strict=True)
    return model


def buffers(model):
    return {k: v.clone() for k, v in model.named_buffers()}


def torch_run(weights, x, y, n):
    """PyTorch's per-step losses and final model: n replicas as DDP would train them."""
    model = load_model(weights)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=0.0)
    losses = []
    for step in range(STEPS):
        optimizer.zero_grad()
        kept = buffers(model)  # replica 0's running statistics, broadcast before the forward
        replica_losses = []
        for r in range(n):
            xs, ys = anchor_common.file_order_batch(x, y, step, r, BATCH, n)
            inputs = torch.from_numpy(np.ascontiguousarray(xs.transpose(0, 3, 1, 2)))  # NHWC->NCHW
            logits = model(inputs)
            replica_losses.append(torch.nn.functional.cross_entropy(logits, torch.from_numpy(ys)))
            if r == 0:
                kept = buffers(model)
        loss = torch.stack(replica_losses).mean()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(kept[name])
        losses.append(loss.item())
    return losses, model


def compare_losses(name, ours, theirs, failures):
    if len(ours) != STEPS or len(theirs) != STEPS:
        failures.append(f"{name}: {len(ours)} scalescope and {len(theirs)} PyTorch losses, "
                        f"expected {STEPS}")
        return
    diffs = [abs(a - b) / abs(b) for a, b in zip(ours, theirs)]
    worst = max(diffs)
    at = diffs.index(worst) + 1
    print(f"{name}: worst relative loss difference {worst:.2e} (step {at}) over {STEPS} steps; "
          f"scalescope {ours[0]:.4f} -> {ours[-1]:.4f}, PyTorch {theirs[0]:.4f} -> "
          f"{theirs[-1]:.4f}")
    if not worst <= LOSS_TOLERANCE:
        failures.append(f"{name}: losses differ by {worst:.2e} relative at step {at} "
                        f"(> {LOSS_TOLERANCE:g})")
    if not ours[-1] < ours[0]:
        failures.append(f"{name}: scalescope's loss did not fall ({ours[0]} -> {ours[-1]})")
    if not theirs[-1] < theirs[0]:
        failures.append(f"{name}: PyTorch's loss did not fall ({theirs[0]} -> {theirs[-1]})")


def compare_weights(name, saved, model, initial, failures):
    """The final checkpoint against PyTorch's final state, each tensor's largest difference as a
    fraction of the largest change training made to it (float32 rounding alone gives up to 3.3%
    here, the same as PyTorch float32 against float64)."""
    try:
        ours = load_model(saved).state_dict()
    except (RuntimeError, SystemExit) as e:
        failures.append(f"{name}: the final checkpoint does not load into PyTorch: {e}")
        return
    theirs = model.state_dict()
    worst, where, worst_abs = 0.0, None, 0.0
    for key, t in theirs.items():
        if key.endswith("num_batches_tracked"):
            if ours[key].item() != t.item():
                failures.append(f"{name}: {key} is {ours[key].item()}, PyTorch's {t.item()}")
            continue
        d = (ours[key].double() - t.double()).abs().max().item()
        moved = (t.double() - initial[key].double()).abs().max().item()
        fraction = d / moved if moved > 0 else (0.0 if d == 0 else float("inf"))
        worst_abs = max(worst_abs, d)
        if where is None or fraction > worst:
            worst, where = fraction, key
    print(f"{name}: final weights and running statistics differ by at most {worst_abs:.2e}; "
          f"worst relative to training's change: {worst:.2e} ({where})")
    if not worst <= WEIGHT_TOLERANCE:
        failures.append(f"{name}: final {where} differs from PyTorch's by {worst:.2e} of "
                        f"training's change to it (> {WEIGHT_TOLERANCE:g})")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    binary = sys.argv[1]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "cifar")
        anchor_common.write_cifar10(data, 2 * BATCH * STEPS, seed=3)
        x, y = anchor_common.read_cifar10_train(data)
        weights = os.path.join(tmp, "init.safetensors")
        subprocess.run([binary, "train", "--model", MODEL, "--steps", "1", "--batch", "8",
                        "--optimizer", "sgd", "--lr", "0", "--seed", "5", "--no-eval", "-q",
                        "--save", weights], check=True, stdout=subprocess.DEVNULL, timeout=120)
        # Weights only: with its optimizer state beside it, --load would resume that state.
        os.remove(os.path.join(tmp, "init.optim.safetensors"))
        for n in (1, 2):
            name = f"{MODEL} N={n}"
            ours, saved = run_scalescope(binary, tmp, data, weights, n)
            theirs, model = torch_run(weights, x, y, n)
            compare_losses(name, ours, theirs, failures)
            compare_weights(name, saved, model, load_model(weights).state_dict(), failures)
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
