"""The anchors' settings, importable by any Python (no third-party modules): the side-by-side
driver runs outside the anchors' virtual environment."""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench/: stats_common, gpt_spec
from gpt_spec import is_gpt, parse_gpt_spec  # noqa: E402
from stats_common import stats  # noqa: E402,F401 (re-exported)

DEFAULT_VENV = os.path.join(HERE, ".venv")
CASES = [  # (model, batch per replica) the issue asks for
    ("cifar-cnn", 64),
    ("mlp-41m", 32),
]
# scalescope's defaults (models/kernels.h OptimizerConfig, harness/trainer/options.cpp); SGD's
# update is PyTorch's (no dampening); momentum 0.9 is the bench's choice (scalescope's default
# is 0), passed to every system.
OPTIMIZERS = {
    "adam": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-7},
    "sgd": {"lr": 1e-2, "momentum": 0.9},
}
# name -> (input shape channels-last, classes: 10 = sparse categorical, 1 = sigmoid + BCE)
MODELS = {
    "cifar-cnn": ((32, 32, 3), 10),
    "mlp-41m": ((8000,), 1),
    "cifar-resnet:depth=20": ((32, 32, 3), 10),  # PyTorch only (bench_common.torch_model)
}
# Besides MODELS, any `gpt:` spec (bench/gpt_spec.py): token ids in, next-token labels; PyTorch
# only (bench_common.torch_model), like cifar-resnet.
CIFAR_SIDE = 32
CIFAR_RECORD = 1 + CIFAR_SIDE * CIFAR_SIDE * 3


def scalescope_optimizer_args(kind, settings=None):
    """scalescope train's options for OPTIMIZERS[kind] (or `settings`). Its Adam betas and
    epsilon are not options: its defaults are the ones in OPTIMIZERS."""
    o = settings or OPTIMIZERS[kind]
    args = ["--optimizer", kind, "--lr", repr(o["lr"])]
    if kind == "sgd":
        args += ["--momentum", repr(o["momentum"])]
    return args


def venv_python(venv=None):
    return os.path.join(venv or os.environ.get("SCALESCOPE_ANCHORS_VENV", DEFAULT_VENV),
                        "bin", "python")


def runner_model(name):
    """argparse type of the runners' --model: a MODELS name or a valid gpt spec."""
    if name in MODELS:
        return name
    if is_gpt(name):
        try:
            parse_gpt_spec(name)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return name
    raise argparse.ArgumentTypeError(
        f"{name!r}: expected one of {', '.join(sorted(MODELS))} or a gpt: spec")
