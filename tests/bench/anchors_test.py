#!/usr/bin/python3
"""Training equivalence of scalescope with the anchor systems (bench/anchors/).

usage: anchors_test.py SCALESCOPE

From the same initial weights (a scalescope checkpoint, converted by each runner: Keras's HWIO
and [in, out] kernels, PyTorch's own layout) and the same batches (a CIFAR-10 binary file read
in file order: scalescope --no-shuffle --no-normalize), the per-step losses of 30 Adam steps of
cifar-cnn at per-replica batch 64 agree to 1e-3 relative between scalescope and
  - Keras model.fit under MirroredStrategy, on 1 and 2 logical devices,
  - Keras under MultiWorkerMirroredStrategy, 2 worker processes,
  - PyTorch 2.x, one process and DDP over gloo with 2 processes,
and each anchor's run is what it claims: TensorFlow built N replicas, and the 2-process runs end
with bit-identical weights on every worker.

Learning rates: 1e-4 for every anchor, and also Adam's default 1e-3 for PyTorch on one process.
At 1e-3 Adam amplifies float32 rounding of its own update: Keras computes the same update
arranged differently (m += (g - m)(1 - b1), lr folded with both bias corrections), and PyTorch
given exactly that arrangement, all else equal, drifts from stock PyTorch by 1.2e-3 (batch 64)
and 1.0e-2 (batch 128) relative in 30 steps on this data, the same figures Keras shows against
scalescope; at 1e-4 the two arrangements agree to 8e-5 (docs/performance.md, "Anchors"). DDP at
1e-3 did agree to 5.5e-4 while scalescope's dense forward summed in the order of PyTorch's GEMM;
its matmul forward sums in another, a rounding apart at first (1e-7 relative), and Adam grows
that to 3e-4 by step 17 and 6e-3 by step 21, where at 1e-4 the runs stay within 2e-5.

Skips (exit 77) when bench/anchors/setup.sh's virtual environment is absent or lacks a package.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ANCHORS = os.path.join(HERE, "..", "..", "bench", "anchors")
sys.path.insert(0, ANCHORS)
from anchor_settings import venv_python  # noqa: E402

SKIP = 77
STEPS = 30
BATCH = 64
TOLERANCE = 1e-3


def in_venv():
    """Runs this script under the anchors' Python (numpy and the runners' packages)."""
    python = venv_python()
    if not os.access(python, os.X_OK):
        print(f"SKIPPED: {python} is missing; run bench/anchors/setup.sh to create it")
        sys.exit(SKIP)
    if os.path.realpath(sys.prefix) != os.path.realpath(os.path.dirname(os.path.dirname(python))):
        os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


def require_packages():
    """Skips, naming them, where the environment lacks packages the runners import: a partial
    setup (setup.sh installs them all) is not a failure of scalescope."""
    import importlib.util
    missing = [p for p in ("numpy", "torch", "tensorflow", "tf_keras")
               if importlib.util.find_spec(p) is None]
    if missing:
        print(f"SKIPPED: {sys.executable} has no {', '.join(missing)}; "
              "run bench/anchors/setup.sh to install them")
        sys.exit(SKIP)


def scalescope_losses(binary, tmp, data, weights, n, lr):
    out = os.path.join(tmp, f"scalescope{n}.json")
    subprocess.run([binary, "train", "--model", "cifar-cnn", "--devices", f"cpu:{n}",
                    "--threads", "1", "--batch", str(BATCH), "--steps", str(STEPS),
                    "--warmup-steps", "0", "--data", f"cifar10:{data}", "--no-shuffle",
                    "--no-normalize", "--no-eval", "--load", weights, "--lr", repr(lr),
                    "-q", "-o", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return [s["loss"] for s in json.load(f)["steps"]]


def anchor(system, tmp, data, weights, n, lr):
    runner = "torch_runner.py" if system == "torch" else "keras_runner.py"
    extra = [] if system == "torch" else [
        "--strategy", "multiworker" if system == "keras-mw" else "mirrored"]
    out = os.path.join(tmp, f"{system}{n}.json")
    subprocess.run([sys.executable, os.path.join(ANCHORS, runner), "--model", "cifar-cnn",
                    "--replicas", str(n), "--batch", str(BATCH), "--steps", str(STEPS),
                    "--warmup", "0", "--threads", "2", "--data", f"cifar10:{data}",
                    "--weights", weights, "--lr", repr(lr), "--json", out, *extra],
                   check=True, stdout=subprocess.DEVNULL, timeout=900)
    with open(out) as f:
        return json.load(f)


def compare(name, ours, result, failures):
    theirs = [s["loss"] for s in result["steps"]]
    if len(theirs) != len(ours):
        failures.append(f"{name}: {len(theirs)} losses, scalescope has {len(ours)}")
        return
    worst = max(abs(a - b) / abs(b) for a, b in zip(theirs, ours))
    print(f"{name} ({result['system']}): worst relative loss difference {worst:.2e} over "
          f"{len(ours)} steps; losses {ours[0]:.4f} -> {ours[-1]:.4f}")
    if not worst <= TOLERANCE:
        failures.append(f"{name}: losses differ by {worst:.2e} relative (> {TOLERANCE:g})")


def check_claims(name, system, n, checks, failures):
    """TensorFlow built N replicas; multi-process runs end with identical weights everywhere."""
    if system.startswith("keras") and checks.get("replicas_built") != n:
        built = checks.get("replicas_built")
        failures.append(f"{name}: TensorFlow built {built} replicas, not {n}")
    if n > 1 and checks.get("replicas_identical") is not True:
        failures.append(f"{name}: the workers' weights are not identical: {checks}")


def main():
    in_venv()
    require_packages()
    import anchor_common  # noqa: E402 (numpy: only inside the virtual environment)
    binary = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "cifar")
        anchor_common.write_cifar10(data, 2 * BATCH * STEPS, seed=3)
        weights = os.path.join(tmp, "init.safetensors")
        subprocess.run([binary, "train", "--model", "cifar-cnn", "--steps", "1", "--batch", "8",
                        "--optimizer", "sgd", "--lr", "0", "--seed", "5", "--no-eval", "-q",
                        "--save", weights], check=True, stdout=subprocess.DEVNULL)
        # Weights only: with its optimizer state beside it, --load would resume that state.
        os.remove(os.path.join(tmp, "init.optim.safetensors"))
        for n, lr in ((1, 1e-3), (1, 1e-4), (2, 1e-4)):
            ours = scalescope_losses(binary, tmp, data, weights, n, lr)
            if ours[-1] >= ours[0]:
                failures.append(f"scalescope N={n}: the loss did not fall "
                                f"({ours[0]} -> {ours[-1]})")
            systems = ["torch"]
            if lr <= 1e-4:
                systems += ["keras"] + (["keras-mw"] if n > 1 else [])
            for system in systems:
                name = f"{system} N={n} lr {lr:g}"
                result = anchor(system, tmp, data, weights, n, lr)
                compare(name, ours, result, failures)
                check_claims(name, system, n, result["checks"], failures)
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
