"""What the training-equivalence tests against PyTorch share: torch_training_test.py (the CIFAR
ResNet, batch norm) and gpt_training_test.py (the GPT decoder).

Both train the same way on both sides: from one scalescope checkpoint (loaded into the PyTorch
twin with strict=True), on the same batches in file order, N replicas emulated in one PyTorch
process exactly as DDP trains them (see torch_train), and compare the per-step losses and the
final --save checkpoint with PyTorch's final state.

Importing this module ends the process with SKIP (77, ctest's SKIP_RETURN_CODE) and a message
when torch or numpy is missing, so that every test importing it skips alike.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77

try:
    import numpy as np  # noqa: F401 (re-exported for the tests)
    import torch
except ImportError as e:
    print(f"SKIPPED: PyTorch or numpy is not importable by {sys.executable}: {e}")
    sys.exit(SKIP)

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "anchors"))
import anchor_common  # noqa: E402,F401 (re-exported: data files and file-order batches)
from torch_interop import read_safetensors  # noqa: E402

LOSS_TOLERANCE = 1e-3  # relative, per step
# Any final weight or running statistic: the largest difference as a fraction of the largest
# change training made to that tensor.
WEIGHT_TOLERANCE = 0.1


def initial_checkpoint(binary, tmp, model):
    """scalescope's own initial weights of `model`, saved after one step at lr 0 (seed 5)."""
    weights = os.path.join(tmp, "init.safetensors")
    subprocess.run([binary, "train", "--model", model, "--steps", "1", "--batch", "8",
                    "--optimizer", "sgd", "--lr", "0", "--seed", "5", "--no-eval", "-q",
                    "--save", weights], check=True, stdout=subprocess.DEVNULL, timeout=120)
    # Weights only: with its optimizer state beside it, --load would resume that state.
    os.remove(os.path.join(tmp, "init.optim.safetensors"))
    return weights


def bf16_refusal(binary):
    """Why `binary`'s CPU devices compute no bf16 here ("" where they do), as `devices` says: a
    CPU without AVX-512 has no oneDNN 2.6 bf16 kernels, and the bf16 halves of the tests say
    they are left out instead of failing on the refusal."""
    devices = json.loads(subprocess.run([binary, "devices", "--json"], check=True, timeout=60,
                                        capture_output=True, text=True).stdout)
    return devices["cpu"]["precisions"]["refused"].get("bf16", "")


def scalescope_train(binary, tmp, run, n, data_args):
    """scalescope's per-step losses and final checkpoint: `run` has model, batch (per replica),
    steps, lr, momentum and weights (the initial checkpoint); file-order data, 1 thread each."""
    out = os.path.join(tmp, f"scalescope{n}.json")
    saved = os.path.join(tmp, f"final{n}.safetensors")
    subprocess.run([binary, "train", "--model", run["model"], "--devices", f"cpu:{n}",
                    "--threads", "1", "--batch", str(run["batch"]), "--steps", str(run["steps"]),
                    "--warmup-steps", "0", *data_args, "--no-shuffle", "--no-eval",
                    "--optimizer", "sgd", "--lr", repr(run["lr"]),
                    "--momentum", repr(run["momentum"]), "--weight-decay", "0",
                    "--load", run["weights"], "--save", saved, "-q", "-o", out],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    with open(out) as f:
        steps = json.load(f)["steps"]
    return [s["loss"] for s in steps], saved


def load_checkpoint(model, path, spec):
    """Loads a scalescope checkpoint of `spec` into `model` with strict=True; returns model."""
    state, metadata = read_safetensors(path)
    if metadata.get("scalescope_model") != spec:
        raise SystemExit(f"{path}: unexpected metadata {metadata}")
    model.load_state_dict(state, strict=True)
    return model


def buffers(model):
    return {k: v.clone() for k, v in model.named_buffers()}


def torch_train(model, batch_of, loss_fn, n, run, bf16=False):
    """PyTorch's per-step losses, training `model` in place as DDP over n replicas would:
    each replica's batch (batch_of(step, r) -> (inputs, labels)) goes through the model on its
    own, the loss is the mean of the replicas' mean losses (so its gradient is DDP's average),
    one SGD step follows. Buffers (batch norm's running statistics) end as replica 0's: DDP
    broadcasts replica 0's before each forward. scalescope's step loss is the same mean
    (harness/trainer/results.cpp). bf16: each forward and loss under CPU autocast to bf16."""
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=run["lr"], momentum=run["momentum"],
                                weight_decay=0.0)
    losses = []
    for step in range(run["steps"]):
        optimizer.zero_grad()
        kept = buffers(model)
        replica_losses = []
        for r in range(n):
            inputs, labels = batch_of(step, r)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                replica_losses.append(loss_fn(model(inputs), labels))
            if r == 0:
                kept = buffers(model)
        loss = torch.stack(replica_losses).mean()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(kept[name])
        losses.append(loss.item())
    return losses


def relative_gaps(ours, theirs):
    return [abs(a - b) / abs(b) for a, b in zip(ours, theirs)]


def compare_losses(name, ours, theirs, steps, failures, tolerance=LOSS_TOLERANCE,
                   theirs_label="PyTorch"):
    """Per-step losses within `tolerance` relative, and falling on both sides; `theirs_label`
    names the second series in messages."""
    if len(ours) != steps or len(theirs) != steps:
        failures.append(f"{name}: {len(ours)} scalescope and {len(theirs)} {theirs_label} "
                        f"losses, expected {steps}")
        return
    diffs = relative_gaps(ours, theirs)
    worst = max(diffs)
    at = diffs.index(worst) + 1
    print(f"{name}: worst relative loss difference {worst:.2e} (step {at}) over {steps} steps; "
          f"scalescope {ours[0]:.4f} -> {ours[-1]:.4f}, {theirs_label} {theirs[0]:.4f} -> "
          f"{theirs[-1]:.4f}")
    if not worst <= tolerance:
        failures.append(f"{name}: losses differ by {worst:.2e} relative at step {at} "
                        f"(> {tolerance:g})")
    if not ours[-1] < ours[0]:
        failures.append(f"{name}: scalescope's loss did not fall ({ours[0]} -> {ours[-1]})")
    if not theirs[-1] < theirs[0]:
        failures.append(f"{name}: {theirs_label}'s loss did not fall ({theirs[0]} -> "
                        f"{theirs[-1]})")


BF16_TOLERANCE = 2e-2  # relative, scalescope bf16 against PyTorch's CPU autocast (issue 38)
BF16_FROM_FP32 = 5e-2


def compare_bf16(model, ours, fp32, theirs, steps, failures):
    """scalescope's bf16 losses against PyTorch autocast's (BF16_TOLERANCE) and against its own
    fp32 (BF16_FROM_FP32), and not equal to fp32's (bf16 ran)."""
    compare_losses(f"{model} bf16 against PyTorch autocast", ours, theirs, steps, failures,
                   tolerance=BF16_TOLERANCE)
    compare_losses(f"{model} bf16 against fp32 (both scalescope)", ours, fp32, steps, failures,
                   tolerance=BF16_FROM_FP32, theirs_label="scalescope fp32")
    if not max(relative_gaps(ours, fp32)) > 1e-5:
        failures.append(f"{model}: --precision bf16 gave fp32's losses (bf16 did not run)")


def state_gap(ours, theirs, initial):
    """(worst fraction, its tensor, worst absolute difference, integer-buffer mismatches): each
    floating tensor's largest difference as a fraction of the largest change training made to
    it; integer buffers (num_batches_tracked) must be equal."""
    worst, where, worst_abs, mismatches = 0.0, None, 0.0, []
    for key, t in theirs.items():
        if not t.is_floating_point():
            if not torch.equal(ours[key], t):
                mismatches.append(f"{key} is {ours[key].tolist()}, PyTorch's {t.tolist()}")
            continue
        d = (ours[key].double() - t.double()).abs().max().item()
        moved = (t.double() - initial[key].double()).abs().max().item()
        fraction = d / moved if moved > 0 else (0.0 if d == 0 else float("inf"))
        worst_abs = max(worst_abs, d)
        if where is None or fraction > worst:
            worst, where = fraction, key
    return worst, where, worst_abs, mismatches


def compare_weights(name, load, saved, model, initial, failures, tolerance=WEIGHT_TOLERANCE):
    """The final checkpoint (load(saved) -> module, strict) against PyTorch's final `model`."""
    try:
        ours = load(saved).state_dict()
    except (RuntimeError, SystemExit) as e:
        failures.append(f"{name}: the final checkpoint does not load into PyTorch: {e}")
        return
    worst, where, worst_abs, mismatches = state_gap(ours, model.state_dict(), initial)
    failures += [f"{name}: {m}" for m in mismatches]
    print(f"{name}: final state differs by at most {worst_abs:.2e}; worst relative to "
          f"training's change: {worst:.2e} ({where})")
    if not worst <= tolerance:
        failures.append(f"{name}: final {where} differs from PyTorch's by {worst:.2e} of "
                        f"training's change to it (> {tolerance:g})")


def finish(failures):
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)
