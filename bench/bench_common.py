"""What the PyTorch comparisons in bench/ share: the PyTorch definitions of scalescope's
models, the optimizer settings matching scalescope's defaults (anchors/anchor_settings.py,
shared with the anchors), and running scalescope.

The models here are the PyTorch twins of scalescope's model zoo (models/zoo.cpp): same
layers, Glorot-uniform weights and zero biases, same loss.
"""
import json
import os
import subprocess
import tempfile

import torch
from torch import nn

from anchors.anchor_settings import CASES, OPTIMIZERS, scalescope_optimizer_args  # noqa: F401
from torch_models import GPT, CifarResNet, gpt_loss, is_gpt


def torch_optimizer(kind, params, settings=None):
    """PyTorch's optimizer with anchor_settings.OPTIMIZERS[kind] (or `settings`): scalescope's
    defaults, spelled out so that both tools get the same settings explicitly."""
    o = settings or OPTIMIZERS[kind]
    if kind == "adam":
        return torch.optim.Adam(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
    return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"])


def torch_model(name):
    """Returns (model, sample shape, loss function, labels(n) -> label tensor). A `gpt:` spec's
    sample is `seq` token ids (int64 for PyTorch; scalescope feeds them as float32) and its
    labels are `seq` next-token ids per sample."""
    if is_gpt(name):
        m = GPT(name)
        c = m.config
        return m, (c.seq,), gpt_loss, lambda n: torch.randint(0, c.vocab, (n, c.seq))
    if name == "cifar-cnn":
        m = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(8 * 8 * 64, 64), nn.ReLU(), nn.Linear(64, 10))
        return m, (3, 32, 32), nn.CrossEntropyLoss(), lambda n: torch.randint(0, 10, (n,))
    if name == "mlp-41m":
        m = nn.Sequential(
            nn.Linear(8000, 4000), nn.Tanh(), nn.Linear(4000, 2000), nn.ReLU(),
            nn.Linear(2000, 500), nn.ReLU(), nn.Linear(500, 300), nn.ReLU(),
            nn.Linear(300, 1), nn.Sigmoid())
        return m, (8000,), nn.BCELoss(), lambda n: torch.randint(0, 2, (n, 1)).float()
    if name.startswith("resnet:depth="):  # torchvision's, as its users train it
        import torchvision
        depth = int(name.partition("=")[2])
        m = getattr(torchvision.models, f"resnet{depth}")(num_classes=1000)
        return m, (3, 224, 224), nn.CrossEntropyLoss(), lambda n: torch.randint(0, 1000, (n,))
    if name.startswith("cifar-resnet:depth="):
        m = CifarResNet(int(name.partition("=")[2]))
        return m, (3, 32, 32), nn.CrossEntropyLoss(), lambda n: torch.randint(0, 10, (n,))
    raise ValueError(name)


def glorot(model):
    """Glorot-uniform weights, zero biases for every Linear and Conv2d. In the GPT this also
    draws lm_head's weight, which is the tied token embedding; the position embedding and the
    layer norms keep PyTorch's defaults (N(0, 1), ones and zeros)."""
    for mod in model.modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(mod.weight)
            if mod.bias is not None:  # the ResNets' convolutions have none
                nn.init.zeros_(mod.bias)


def default_binary():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "scalescope")


def run_scalescope(binary, args):
    """Runs `binary train ARGS -q -o FILE` and returns the run JSON (reports/run_report.cpp)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        subprocess.run([binary, "train", *args, "-q", "-o", out], check=True,
                       stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)
