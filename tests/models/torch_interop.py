#!/usr/bin/python3
"""PyTorch side of the checkpoint interop test (tests/models/torch_interop_test.cpp).

usage: torch_interop.py MODEL WEIGHTS IO NEW_WEIGHTS NEW_IO [TRAIN_TOLERANCE]

  MODEL        the scalescope model spec ("cifar-cnn", "cnn:width=2", "dense-100", "mlp:scale=0.01",
               "cifar-resnet:depth=20", "resnet:depth=18,image=64", "resnet:depth=18,classes=10",
               "gpt:preset=micro"; classes=K is torchvision's num_classes)
  WEIGHTS      a checkpoint written by scalescope's save_checkpoint
  IO           safetensors with "input" (NHWC for images; for gpt token ids as float32 [N, S],
               integers in [0, vocab)) and "output" (for gpt logits [N, S, vocab]), scalescope's
               forward in training mode, and for models with batch norm "output_eval", its
               forward in evaluation mode (after the training forward)
  NEW_WEIGHTS  written here: the weights after one SGD step taken by PyTorch
  NEW_IO       written here: "output", PyTorch's forward of the same input with NEW_WEIGHTS
  TRAIN_TOLERANCE  the largest difference allowed in training mode (default TOLERANCE): batch
               norm over few values per channel (ResNet-50's last stage on a 1x1 image, batch 4)
               divides by a tiny variance, so fp32 rounding grows there (PyTorch's own fp32
               differs from its fp64 by 3e-3); evaluation mode keeps TOLERANCE

Builds the equivalent PyTorch model (torchvision's for "resnet"), loads WEIGHTS with load_state_dict(strict=True), checks
that PyTorch's forward matches scalescope's, then changes every weight and writes it back for
scalescope to load. Exits non-zero with a message on any mismatch.

GPT checkpoints hold lm_head.weight and transformer.wte.weight, one tensor in both models (tied):
they must be equal in WEIGHTS (load_state_dict would silently keep whichever it copies last),
and NEW_WEIGHTS has both, equal, since PyTorch's state_dict lists a shared tensor under each name.

No `safetensors` package is needed: the format (8-byte little-endian header length, a JSON
header, raw little-endian data) is read and written here with struct, json and torch.
"""
import json
import os
import struct
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from torch_models import GPT, CifarResNet, is_gpt, parse_gpt_spec  # noqa: E402

TOLERANCE = 1e-4


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    metadata = header.pop("__metadata__", {}) or {}
    base = 8 + n
    tensors = {}
    for name, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if entry["dtype"] != "F32":
            raise SystemExit(f"{path}: tensor {name} has dtype {entry['dtype']}, expected F32")
        begin, end = entry["data_offsets"]
        shape = entry["shape"]
        if end == begin:
            tensors[name] = torch.zeros(shape, dtype=torch.float32)
            continue
        # bytearray: frombuffer wants a writable buffer; clone so the tensor owns its memory.
        buf = bytearray(data[base + begin : base + end])
        tensors[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(shape).clone()
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs = []
    offset = 0
    for name, t in tensors.items():
        blob = t.detach().to(torch.float32).contiguous().cpu().numpy().tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def dense(state, index):
    out_features, in_features = state[f"{index}.weight"].shape
    return nn.Linear(in_features, out_features)


def conv(state, index):
    out_channels, in_channels, kernel, _ = state[f"{index}.weight"].shape
    # Keras "same" padding with a stride of 1 and an odd kernel is symmetric.
    return nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2)


def spec_params(model):
    """The key=value pairs of a model spec ("resnet:depth=18,image=64" → depth, image)."""
    if ":" not in model:
        return {}
    return dict(kv.split("=") for kv in model.split(":", 1)[1].split(","))


def torchvision_resnet(model):
    """torchvision's ImageNet ResNet; the image size needs nothing (adaptive average pool)."""
    import torchvision  # only here: the other families need no torchvision

    params = spec_params(model)
    if float(params.get("width", "1")) != 1.0:
        raise SystemExit(f"torch_interop.py: torchvision has no equivalent of '{model}' (width)")
    depth = int(params.get("depth", "50"))
    classes = int(params.get("classes", "1000"))
    return getattr(torchvision.models, f"resnet{depth}")(weights=None, num_classes=classes)


def build(model, state):
    """The PyTorch module of a scalescope model; widths are read from the checkpoint."""
    family = model.split(":")[0]
    if is_gpt(model):
        return GPT(model)
    if family == "resnet":
        return torchvision_resnet(model)
    if family in ("cifar-cnn", "cnn"):
        return nn.Sequential(
            conv(state, 0), nn.ReLU(), nn.MaxPool2d(2),
            conv(state, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), dense(state, 7), nn.ReLU(), dense(state, 9))
    if family in ("mlp", "mlp-41m"):
        return nn.Sequential(
            dense(state, 0), nn.Tanh(), dense(state, 2), nn.ReLU(), dense(state, 4), nn.ReLU(),
            dense(state, 6), nn.ReLU(), dense(state, 8), nn.Sigmoid())
    if family == "cifar-resnet":
        params = spec_params(model)
        return CifarResNet(int(params["depth"]), int(params.get("classes", "10")))
    if family == "dense-100":
        return nn.Sequential(dense(state, 0), nn.ReLU(), dense(state, 2))
    raise SystemExit(f"torch_interop.py: no PyTorch equivalent known for model '{model}'")


def check_tied(state):
    """A GPT checkpoint's two names of the tied embedding must hold the same values."""
    a, b = state.get("transformer.wte.weight"), state.get("lm_head.weight")
    if a is not None and b is not None and not torch.equal(a, b):
        raise SystemExit("lm_head.weight differs from transformer.wte.weight (tied: one tensor) "
                         f"by up to {(a - b).abs().max().item():g}")


def model_input(model_name, x):
    """scalescope's input tensor as the PyTorch module takes it: NCHW images, int64 tokens."""
    if is_gpt(model_name):
        tokens = x.long()
        vocab = parse_gpt_spec(model_name).vocab
        if not torch.equal(tokens.float(), x) or tokens.min() < 0 or tokens.max() >= vocab:
            raise SystemExit(f"{model_name}: input is not token ids in [0, {vocab})")
        return tokens
    if x.dim() == 4:
        return x.permute(0, 3, 1, 2).contiguous()  # scalescope NHWC → PyTorch NCHW
    return x


def compare(what, y, expected, tolerance=TOLERANCE):
    diff = (y - expected).abs().max().item()
    print(f"{what}: max |torch - scalescope| = {diff:.3g}")
    if not diff < tolerance:
        raise SystemExit(f"{what}: outputs differ by {diff} (tolerance {tolerance})")


def main(argv):
    if len(argv) not in (6, 7):
        raise SystemExit(__doc__)
    model_name, weights_path, io_path, new_weights_path, new_io_path = argv[1:6]
    train_tolerance = float(argv[6]) if len(argv) == 7 else TOLERANCE
    if sys.byteorder != "little":
        raise SystemExit("safetensors data is little-endian; this host is not")
    torch.manual_seed(0)

    state, metadata = read_safetensors(weights_path)
    if metadata.get("format") != "pt" or metadata.get("scalescope_model") != model_name:
        raise SystemExit(f"{weights_path}: unexpected metadata {metadata}")
    model = build(model_name, state)
    check_tied(state)
    model.load_state_dict(state, strict=True)

    io, _ = read_safetensors(io_path)
    x = model_input(model_name, io["input"])
    if "output_eval" in io:
        # Evaluation first: a training forward here would move the running statistics.
        model.eval()
        with torch.no_grad():
            compare(model_name + " (eval)", model(x), io["output_eval"])
        model.train()
    with torch.no_grad():
        compare(model_name, model(x), io["output"], train_tolerance)

    # Change every weight the way training would: one SGD step on a simple loss.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    optimizer.zero_grad()
    model(x).square().mean().backward()
    optimizer.step()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)  # also moves weights whose gradient was zero (dead ReLUs)
        y_new = model(x)

    # For the GPT both tied names, equal: state_dict lists the shared tensor under each.
    write_safetensors(new_weights_path, model.state_dict(),
                      {"format": "pt", "scalescope_model": model_name})
    write_safetensors(new_io_path, {"output": y_new})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
