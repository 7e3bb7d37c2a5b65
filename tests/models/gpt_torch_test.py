#!/usr/bin/python3
"""The PyTorch side of the GPT family on its own, without scalescope: what the training and
interop tests and the benchmarks build on, so that a failure there points at scalescope.

  - bench/gpt_spec.py: spec parsing, presets, parameter count (GPT-2 small: 124,439,808 with the
    tied embedding once), nanoGPT's FLOPs per token;
  - bench/torch_models.py's GPT: the contract's parameter names, the tied lm_head (one tensor,
    two state_dict names, no buffers), causality, and its attention against PyTorch's own
    nn.MultiheadAttention (an implementation written independently of ours);
  - anchor_common's byte-token windows of `--data text:` and their file-order batches, and the
    synthetic token batches of the benchmarks;
  - torch_interop.py's protocol on GPT checkpoints (both tied names written back, equal; tied
    names that differ and non-integer tokens refused) and, unchanged, on the older families,
    with scalescope's side played by PyTorch in float64;
  - gpt_training_test.py skipping (77) without its text or with a binary that has no gpt
    models, and failing for any other error of the binary;
  - torch_runner.py training a GPT for the side-by-side benchmark.

usage: gpt_torch_test.py [unittest options]   (exit 77 when torch or numpy is missing)
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from training_common import SKIP, anchor_common, np, torch  # noqa: E402 (exits 77 without)
from torch_interop import read_safetensors, write_safetensors  # noqa: E402
from bench_common import torch_model  # noqa: E402 (bench/ is on the path via torch_interop)
from gpt_spec import (GPTConfig, gpt_flops_per_step, gpt_flops_per_token,  # noqa: E402
                      gpt_param_counts, parse_gpt_spec)
from torch_models import GPT, CifarResNet, gpt_loss  # noqa: E402

ROOT = os.path.join(HERE, "..", "..")
TINY = "gpt:layers=2,d=32,heads=4,seq=16,vocab=300"


def contract_names(layers):
    """The state_dict keys the C++ side's checkpoints use, in the contract's order."""
    names = ["transformer.wte.weight", "transformer.wpe.weight"]
    for i in range(layers):
        for part in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"):
            names += [f"transformer.h.{i}.{part}.weight", f"transformer.h.{i}.{part}.bias"]
    return names + ["transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight"]


class SpecTest(unittest.TestCase):
    def test_presets_and_overrides(self):
        self.assertEqual(parse_gpt_spec("gpt:preset=micro"), GPTConfig(2, 128, 4, 64, 256))
        self.assertEqual(parse_gpt_spec("gpt:preset=mini"), GPTConfig(4, 256, 4, 128, 256))
        self.assertEqual(parse_gpt_spec("gpt:preset=small"), GPTConfig(12, 768, 12, 1024, 50257))
        self.assertEqual(parse_gpt_spec("gpt"), parse_gpt_spec("gpt:preset=micro"))
        # Explicit keys override the preset; without one the rest come from micro.
        self.assertEqual(parse_gpt_spec("gpt:preset=small,layers=2,seq=128"),
                         GPTConfig(2, 768, 12, 128, 50257))
        self.assertEqual(parse_gpt_spec("gpt:d=64,heads=2"), GPTConfig(2, 64, 2, 64, 256))

    def test_errors(self):
        for bad in ("gpt:preset=huge", "gpt:depth=3", "gpt:d=100,heads=3", "gpt:layers=0",
                    "gpt:layers=x", "gpt:layers=2,layers=3", "gpt:layers", "cifar-cnn"):
            with self.assertRaises(ValueError, msg=bad):
                parse_gpt_spec(bad)

    def test_gpt2_small_size_and_flops(self):
        c = parse_gpt_spec("gpt:preset=small")
        self.assertEqual(gpt_param_counts(c), (124439808, 1024 * 768))
        # nanoGPT: 6 × (parameters less wpe) + 12·L·H·hd·S per token.
        per_token = 6 * (124439808 - 786432) + 12 * 12 * 12 * 64 * 1024
        self.assertEqual(gpt_flops_per_token(c), per_token)
        self.assertEqual(gpt_flops_per_step("gpt:preset=small", 8), per_token * 8 * 1024)


class ModuleTest(unittest.TestCase):
    def test_gpt2_small_parameters(self):
        model = GPT("gpt:preset=small")
        self.assertEqual(sum(p.numel() for p in model.parameters()), 124439808)
        self.assertEqual(list(model.state_dict()), contract_names(12))

    def test_names_tied_and_no_buffers(self):
        model = GPT(TINY)
        state = model.state_dict()
        self.assertEqual(list(state), contract_names(2))
        self.assertIs(model.lm_head.weight, model.transformer.wte.weight)
        self.assertEqual(state["lm_head.weight"].data_ptr(),
                         state["transformer.wte.weight"].data_ptr())
        self.assertEqual(len(list(model.parameters())), len(state) - 1)  # tied: listed once
        self.assertEqual(list(model.buffers()), [])
        model.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)

    def test_shapes_and_causality(self):
        torch.manual_seed(1)
        model = GPT(TINY).double()
        c = model.config
        idx = torch.randint(0, c.vocab, (3, c.seq))
        logits = model(idx)
        self.assertEqual(tuple(logits.shape), (3, c.seq, c.vocab))
        changed = idx.clone()
        changed[:, 9] = (changed[:, 9] + 1) % c.vocab
        after = model(changed)
        self.assertTrue(torch.equal(after[:, :9], logits[:, :9]))  # the past cannot see it
        self.assertFalse(torch.allclose(after[:, 9:], logits[:, 9:]))
        self.assertEqual(tuple(model(idx[:, :5]).shape), (3, 5, c.vocab))  # shorter is fine
        with self.assertRaises(ValueError):
            model(torch.zeros(1, c.seq + 1, dtype=torch.long))

    def test_attention_matches_multihead_attention(self):
        """Our hand-written attention against nn.MultiheadAttention given the same projections
        (c_attn's q, k, v rows are its in_proj, c_proj its out_proj) and a causal mask."""
        torch.manual_seed(2)
        c = parse_gpt_spec(TINY)
        ours = GPT(c).transformer.h[0].attn.double()
        mha = torch.nn.MultiheadAttention(c.d, c.heads, batch_first=True).double()
        with torch.no_grad():
            mha.in_proj_weight.copy_(ours.c_attn.weight)
            mha.in_proj_bias.copy_(ours.c_attn.bias)
            mha.out_proj.weight.copy_(ours.c_proj.weight)
            mha.out_proj.bias.copy_(ours.c_proj.bias)
        x = torch.randn(2, c.seq, c.d, dtype=torch.float64)
        future = torch.ones(c.seq, c.seq, dtype=torch.bool).triu(1)
        expected, _ = mha(x, x, x, attn_mask=future, need_weights=False)
        self.assertLess((ours(x) - expected).abs().max().item(), 1e-12)

    def test_loss_of_uniform_logits(self):
        logits = torch.zeros(2, 5, 300)
        labels = torch.randint(0, 300, (2, 5))
        self.assertAlmostEqual(gpt_loss(logits, labels).item(), math.log(300), places=5)

    def test_torch_model_entry(self):
        model, shape, loss_fn, labels = torch_model("gpt:preset=mini")
        self.assertIsInstance(model, GPT)
        self.assertEqual(shape, (128,))
        self.assertIs(loss_fn, gpt_loss)
        self.assertEqual(tuple(labels(3).shape), (3, 128))


class DataTest(unittest.TestCase):
    def test_text_windows(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.txt")
            data = (np.arange(1000) % 251).astype(np.uint8)
            data.tofile(path)
            x, y, held_out = anchor_common.text_windows(path, 16)
            windows = 999 // 16  # 62: the last byte is only ever a label
            self.assertEqual((x.shape, y.shape, held_out), ((windows, 16), (windows, 16), 6))
            self.assertEqual(x.dtype, np.int64)
            for k in (0, 1, windows - 1):
                self.assertTrue(np.array_equal(x[k], data[k * 16:k * 16 + 16]))
                self.assertTrue(np.array_equal(y[k], data[k * 16 + 1:k * 16 + 17]))
            xt, yt = anchor_common.read_text_train(path, 16)
            self.assertTrue(np.array_equal(xt, x[:windows - 6]) and len(yt) == windows - 6)
            # Few windows: still one held out.
            data[:40].tofile(path)
            self.assertEqual(anchor_common.text_windows(path, 16)[2], 1)

    def test_gpl3_split_and_batches(self):
        path = "/usr/share/common-licenses/GPL-3"
        if not os.path.isfile(path):
            self.skipTest(f"{path} is missing")
        x, y, held_out = anchor_common.text_windows(path, 64)
        self.assertEqual((len(x), held_out), ((os.path.getsize(path) - 1) // 64, len(x) // 10))
        xt, yt = anchor_common.read_text_train(path, 64)
        # Step 3 of 2 replicas at batch 8: windows [48, 64), replica 1 [56, 64).
        xs, ys = anchor_common.file_order_batch(xt, yt, 3, 1, 8, 2)
        self.assertTrue(np.array_equal(xs, xt[56:64]) and np.array_equal(ys, yt[56:64]))
        with open(path, "rb") as f:
            self.assertEqual(bytes(xs[0].astype(np.uint8)), f.read()[56 * 64:57 * 64])

    def test_synthetic_tokens(self):
        batches = anchor_common.synthetic_batches(TINY, 2, 3, seed=1)
        self.assertEqual(len(batches), 2)
        x, y = batches[1]
        self.assertEqual((x.shape, y.shape, x.dtype, y.dtype), ((3, 16), (3, 16), np.int64,
                                                                np.int64))
        self.assertTrue(np.array_equal(x[:, 1:], y[:, :-1]))  # labels are the next tokens
        self.assertTrue(0 <= x.min() and max(x.max(), y.max()) < 300)


def fake_scalescope_io(model, spec, x, tmp):
    """Plays scalescope's side of torch_interop_test.cpp: the checkpoint after a training-mode
    forward, and the forward outputs computed in float64 (another implementation's rounding)."""
    model.double()
    inputs = x.long() if isinstance(model, GPT) else x.double()
    y = model(inputs)
    io = {"input": x.float(), "output": y.float()}
    if list(model.buffers()):
        model.eval()
        io["output_eval"] = model(inputs).float()
        model.train()
    weights = os.path.join(tmp, "model.safetensors")
    write_safetensors(weights, model.float().state_dict(),
                      {"format": "pt", "scalescope_model": spec})
    return weights, io


def run_interop(spec, weights, io, tmp, nhwc=False):
    """Runs torch_interop.py; returns (exit status, output, new weights or None)."""
    io = dict(io)
    if nhwc:
        io["input"] = io["input"].permute(0, 2, 3, 1).contiguous()
    io_path = os.path.join(tmp, "io.safetensors")
    write_safetensors(io_path, io)
    new_w, new_io = os.path.join(tmp, "new.safetensors"), os.path.join(tmp, "new_io.safetensors")
    p = subprocess.run([sys.executable, os.path.join(HERE, "torch_interop.py"), spec, weights,
                        io_path, new_w, new_io], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr, (new_w, new_io) if p.returncode == 0 else None


class InteropTest(unittest.TestCase):
    def round_trip(self, spec, model, x, nhwc=False):
        with tempfile.TemporaryDirectory() as tmp:
            weights, io = fake_scalescope_io(model, spec, x, tmp)
            old, _ = read_safetensors(weights)
            status, out, written = run_interop(spec, weights, io, tmp, nhwc)
            self.assertEqual(status, 0, out)
            new, _ = read_safetensors(written[0])
            self.assertEqual(list(new), list(old))
            for k in new:
                self.assertFalse(torch.equal(new[k], old[k]), k)
            return new, read_safetensors(written[1])[0]["output"]

    def test_gpt(self):
        torch.manual_seed(3)
        for spec in (TINY, "gpt:preset=micro"):
            model = GPT(spec)
            x = torch.randint(0, model.config.vocab, (4, model.config.seq)).float()
            new, output = self.round_trip(spec, model, x)
            self.assertTrue(torch.equal(new["lm_head.weight"], new["transformer.wte.weight"]))
            check = GPT(spec)
            check.load_state_dict(new, strict=True)
            with torch.no_grad():
                self.assertLess((check(x.long()) - output).abs().max().item(), 1e-5)

    def test_older_families(self):
        torch.manual_seed(4)
        self.round_trip("cifar-cnn", torch_model("cifar-cnn")[0], torch.rand(4, 3, 32, 32),
                        nhwc=True)
        self.round_trip("cifar-resnet:depth=8", CifarResNet(8), torch.rand(4, 3, 32, 32),
                        nhwc=True)
        dense = torch.nn.Sequential(torch.nn.Linear(100, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 10))
        self.round_trip("dense-100", dense, torch.rand(4, 100))

    def test_refusals(self):
        torch.manual_seed(5)
        with tempfile.TemporaryDirectory() as tmp:
            model = GPT(TINY)
            x = torch.randint(0, 300, (2, 16)).float()
            weights, io = fake_scalescope_io(model, TINY, x, tmp)
            status, out, _ = run_interop(TINY, weights, dict(io, input=x + 0.5), tmp)
            self.assertNotEqual(status, 0)
            self.assertIn("not token ids", out)
            state, meta = read_safetensors(weights)
            state["lm_head.weight"] = state["lm_head.weight"] + 1e-3
            write_safetensors(weights, state, meta)
            status, out, _ = run_interop(TINY, weights, io, tmp)
            self.assertNotEqual(status, 0)
            self.assertIn("lm_head.weight differs", out)


def write_fake_binary(tmp, stderr, status):
    path = os.path.join(tmp, "scalescope")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho \"{stderr}\" >&2\nexit {status}\n")
    os.chmod(path, 0o755)
    return path


class ScriptsTest(unittest.TestCase):
    def run_test(self, *args):
        return subprocess.run([sys.executable, os.path.join(HERE, "gpt_training_test.py"),
                               *args], capture_output=True, text=True, timeout=120)

    def test_training_test_skips_and_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            # A binary without the gpt family fails the test, as any other failure does.
            old = write_fake_binary(tmp, "scalescope: error: unknown model 'gpt' (known...)", 1)
            p = self.run_test(old, "/usr/share/common-licenses/GPL-3")
            self.assertNotIn(p.returncode, (0, SKIP), p.stdout + p.stderr)
            p = self.run_test(old, os.path.join(tmp, "missing.txt"))
            self.assertEqual(p.returncode, SKIP, p.stdout + p.stderr)
            self.assertIn("does not exist", p.stdout)
            broken = write_fake_binary(tmp, "scalescope: error: something else", 2)
            p = self.run_test(broken, "/usr/share/common-licenses/GPL-3")
            self.assertNotIn(p.returncode, (0, SKIP), p.stdout + p.stderr)

    def test_torch_runner_trains_gpt(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "anchors",
                                                             "torch_runner.py"),
                                "--model", TINY, "--batch", "2", "--steps", "3", "--warmup", "1",
                                "--threads", "1", "--optimizer", "sgd", "--json", out],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                result = json.load(f)
            self.assertEqual((result["model"], len(result["steps"])), (TINY, 4))
            self.assertAlmostEqual(result["steps"][0]["loss"], math.log(300), delta=1.0)


if __name__ == "__main__":
    unittest.main()
