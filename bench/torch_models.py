"""PyTorch twins of scalescope's graph models (models/zoo_resnet.cpp) that torchvision does not
have, named as scalescope's checkpoints name their parameters: the CIFAR ResNet of He et al. and
the GPT-2-style decoder (nanoGPT's module names).
Shared by the interop and training tests (tests/models) and the benchmarks (bench/)."""
import math

import torch
from torch import nn
from torch.nn import functional as F

from gpt_spec import GPTConfig, PRESETS, gpt_param_counts, is_gpt, parse_gpt_spec  # noqa: F401

# How CausalSelfAttention computes: "sdpa" (PyTorch 2.x) or "written out" (1.13).
ATTENTION = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "written out"


class PadShortcut(nn.Module):
    """Option A of He et al.: every second pixel, zero channels before and after."""

    def __init__(self, planes):
        super().__init__()
        self.pad = planes // 4

    def forward(self, x):
        return nn.functional.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = PadShortcut(planes)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class CifarResNet(nn.Module):
    """The CIFAR ResNet of He et al. (2016, section 4.2) as its common PyTorch version names it."""

    def __init__(self, depth, num_classes=10):
        super().__init__()
        blocks = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        in_planes = 16
        for stage, planes in enumerate((16, 32, 64)):
            layers = []
            for b in range(blocks):
                layers.append(BasicBlock(in_planes, planes, 2 if stage > 0 and b == 0 else 1))
                in_planes = planes
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(out.mean(dim=(2, 3)))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: PyTorch's fused F.scaled_dot_product_attention where
    it has one (2.0 on, what its users and nanoGPT run), else written out (1.13: masked softmax
    of the full T x T scores). ATTENTION says which. The mask is made per call rather than kept
    as a buffer so that state_dict holds only parameters, as scalescope's checkpoints do."""

    def __init__(self, c):
        super().__init__()
        self.heads = c.heads
        self.c_attn = nn.Linear(c.d, 3 * c.d)
        self.c_proj = nn.Linear(c.d, c.d)

    def forward(self, x):
        n, t, d = x.shape
        head_dim = d // self.heads
        # [N, T, D] -> [N, H, T, hd] for each of q, k, v: the heads are consecutive slices of D.
        q, k, v = (z.view(n, t, self.heads, head_dim).transpose(1, 2)
                   for z in self.c_attn(x).split(d, dim=2))
        if ATTENTION == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
            y = weights @ v
        return self.c_proj(y.transpose(1, 2).reshape(n, t, d))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.d, 4 * c.d)
        self.c_proj = nn.Linear(4 * c.d, c.d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-norm residual block: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.d, eps=1e-5)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.d, eps=1e-5)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2-style decoder with biases and no dropout: token ids [N, T] (int64, T <= seq) to
    logits [N, T, vocab]. lm_head.weight IS transformer.wte.weight (one tensor): parameters()
    yields it once (the optimizer updates it once, DDP reduces it once) while state_dict() holds
    both names, as scalescope's checkpoints do, so load_state_dict(strict=True) accepts them."""

    def __init__(self, config):
        super().__init__()
        self.config = config if isinstance(config, GPTConfig) else parse_gpt_spec(config)
        c = self.config
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(c.vocab, c.d),
            "wpe": nn.Embedding(c.seq, c.d),
            "h": nn.ModuleList(Block(c) for _ in range(c.layers)),
            "ln_f": nn.LayerNorm(c.d, eps=1e-5),
        })
        self.lm_head = nn.Linear(c.d, c.vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, idx):
        t = idx.shape[1]
        if t > self.config.seq:
            raise ValueError(f"sequence of {t} tokens, longer than the model's {self.config.seq}")
        positions = torch.arange(t, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(positions)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def gpt_loss(logits, labels):
    """Cross-entropy averaged over every token of the batch, scalescope's loss for sequence
    logits: [N, T, V] against next-token labels [N, T]."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
