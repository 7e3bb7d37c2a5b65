#!/usr/bin/python3
"""A ResNet with the data's number of classes: torchvision's ResNet-18 trained on CIFAR-10.

usage: resnet_classes_test.py SCALESCOPE

On a small CIFAR-10 binary directory (anchor_common.write_cifar10: 10 classes, 100 test records):
- `resnet:depth=18,image=32` (ImageNet's 1000 classes) is refused, and the error names the key
  that fits the data and the spec with it, `resnet:depth=18,image=32,classes=10`;
- that spec trains 3 steps of SGD (batch 8, file order, bytes / 255), evaluates on the test split
  and saves a checkpoint (--save);
- the checkpoint loads into torchvision.models.resnet18(num_classes=10) with strict=True, and
  that module in evaluation mode gives scalescope's test loss and accuracy on the same records.

Skips (exit 77) without torch or numpy (training_common) or without torchvision.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training_common import SKIP, anchor_common, load_checkpoint, np, torch  # noqa: E402

MODEL = "resnet:depth=18,image=32,classes=10"
STEPS = 3
LOSS_TOLERANCE = 1e-3  # relative: float32 forwards in two libraries


def refused_without_classes(binary, data):
    """The 1000-class spec fails on 10-class data, naming classes=K and the spec that fits."""
    run = subprocess.run([binary, "train", "--model", "resnet:depth=18,image=32", "--data",
                          f"cifar10:{data}", "--steps", "1", "--batch", "8", "-q"],
                         capture_output=True, text=True, timeout=120)
    expected = f"with classes=10 it takes them: '{MODEL}'"
    if run.returncode == 0 or expected not in run.stderr:
        return [f"1000-class ResNet on CIFAR-10: exit {run.returncode}, stderr does not say "
                f"\"{expected}\":\n{run.stderr}"]
    print(f"refused as expected: {run.stderr.strip()}")
    return []


def train(binary, tmp, data):
    """scalescope's final evaluation (loss, accuracy) and checkpoint after STEPS steps."""
    out = os.path.join(tmp, "run.json")
    saved = os.path.join(tmp, "resnet18.safetensors")
    subprocess.run([binary, "train", "--model", MODEL, "--data", f"cifar10:{data}",
                    "--no-normalize", "--no-shuffle", "--batch", "8", "--steps", str(STEPS),
                    "--warmup-steps", "0", "--eval-every", str(STEPS), "--optimizer", "sgd",
                    "--lr", "0.01", "--threads", "2", "--save", saved, "-q", "-o", out],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    with open(out) as f:
        evals = json.load(f)["evals"]
    if not evals or evals[-1]["step"] != STEPS:
        raise SystemExit(f"{out}: no evaluation after step {STEPS}: {evals}")
    return evals[-1], saved


def test_split(data):
    """The test records as scalescope reads them with --no-normalize: NCHW for PyTorch."""
    records = np.fromfile(os.path.join(data, "test_batch.bin"), dtype=np.uint8)
    records = records.reshape(-1, anchor_common.CIFAR_RECORD)
    side = anchor_common.CIFAR_SIDE
    x = records[:, 1:].reshape(-1, 3, side, side).astype(np.float32) / np.float32(255.0)
    return torch.from_numpy(x), torch.from_numpy(records[:, 0].astype(np.int64))


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    try:
        import torchvision
    except ImportError as e:
        print(f"SKIPPED: torchvision is not importable by {sys.executable}: {e}")
        return SKIP
    binary = sys.argv[1]
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "cifar")
        anchor_common.write_cifar10(data, 8 * STEPS, seed=3)
        failures = refused_without_classes(binary, data)
        ours, saved = train(binary, tmp, data)
        model = load_checkpoint(torchvision.models.resnet18(weights=None, num_classes=10), saved,
                                MODEL)
        print(f"{saved} loads into torchvision.models.resnet18(num_classes=10), strict=True")
        model.eval()
        x, y = test_split(data)
        with torch.no_grad():
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(dim=1) == y).double().mean().item()
        print(f"test loss: scalescope {ours['loss']:.6f}, torchvision {loss:.6f}; accuracy: "
              f"scalescope {ours['accuracy']:.4f}, torchvision {accuracy:.4f}")
        if abs(loss - ours["loss"]) > LOSS_TOLERANCE * abs(loss):
            failures.append(f"test loss differs: scalescope {ours['loss']}, torchvision {loss}")
        if abs(accuracy - ours["accuracy"]) > 0.011:  # one record of 100, a near tie
            failures.append(f"accuracy differs: scalescope {ours['accuracy']}, "
                            f"torchvision {accuracy}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
