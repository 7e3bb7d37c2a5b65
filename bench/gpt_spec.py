"""scalescope's `gpt:` model specs, parameter counts and FLOPs, in plain Python.

No third-party imports: the side-by-side driver (bench/anchors/side_by_side.py) runs under any
Python and needs a spec's sequence length, vocabulary and FLOPs without PyTorch; the PyTorch
module itself is bench/torch_models.py's GPT.

Spec: `gpt:layers=L,d=D,heads=H,seq=S,vocab=V` or `gpt:preset=NAME[,key=value...]`. Explicit
keys override the preset's values; without a preset the missing keys come from `micro`. This is
the contract the C++ side (models/zoo) implements, so a mismatch here shows up as a failed
strict checkpoint load rather than as silently different models.
"""
from collections import namedtuple

GPTConfig = namedtuple("GPTConfig", "layers d heads seq vocab")

PRESETS = {
    "micro": GPTConfig(layers=2, d=128, heads=4, seq=64, vocab=256),
    "mini": GPTConfig(layers=4, d=256, heads=4, seq=128, vocab=256),
    # GPT-2 small: 124,439,808 parameters with the embedding counted once (tied to lm_head).
    "small": GPTConfig(layers=12, d=768, heads=12, seq=1024, vocab=50257),
}
DEFAULT_PRESET = "micro"


def is_gpt(spec):
    return spec == "gpt" or spec.startswith("gpt:")


def parse_gpt_spec(spec):
    """The GPTConfig of a `gpt:` spec; ValueError naming the problem otherwise."""
    if not is_gpt(spec):
        raise ValueError(f"{spec!r} is not a gpt spec")
    pairs = {}
    body = spec.partition(":")[2]
    for item in filter(None, body.split(",")):
        key, eq, value = item.partition("=")
        if not eq or key in pairs:
            raise ValueError(f"{spec!r}: expected distinct key=value pairs, got {item!r}")
        pairs[key] = value
    preset = pairs.pop("preset", DEFAULT_PRESET)
    if preset not in PRESETS:
        raise ValueError(f"{spec!r}: unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    values = PRESETS[preset]._asdict()
    for key, value in pairs.items():
        if key not in values:
            raise ValueError(f"{spec!r}: unknown key {key!r} (known: preset, "
                             f"{', '.join(GPTConfig._fields)})")
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{spec!r}: {key}={value!r} must be a positive integer")
        values[key] = int(value)
    config = GPTConfig(**values)
    if config.d % config.heads:
        raise ValueError(f"{spec!r}: d={config.d} is not a multiple of heads={config.heads}")
    return config


def gpt_param_counts(c):
    """(all parameters with the tied embedding counted once, position embedding's share)."""
    d = c.d
    block = (2 * 2 * d            # ln_1, ln_2: weight and bias
             + d * 3 * d + 3 * d  # attn.c_attn
             + d * d + d          # attn.c_proj
             + d * 4 * d + 4 * d  # mlp.c_fc
             + 4 * d * d + d)     # mlp.c_proj
    total = c.vocab * d + c.seq * d + c.layers * block + 2 * d  # wte (= lm_head), wpe, ln_f
    return total, c.seq * d


def gpt_flops_per_token(c):
    """Forward + backward FLOPs per token, nanoGPT's estimate_mfu (PaLM appendix B): 6N for the
    matrix multiplies (2 forward, 4 backward per parameter) plus 12·L·H·hd·S for attention's
    two S×S products. N counts every parameter once except the position embedding, as nanoGPT
    does: wte stays in because, tied to lm_head, it is a [D, V] matmul per token, while wpe is
    a lookup. Element-wise work (layer norm, GELU, softmax) is left out, as there."""
    total, position = gpt_param_counts(c)
    head_dim = c.d // c.heads
    return 6 * (total - position) + 12 * c.layers * c.heads * head_dim * c.seq


def gpt_flops_per_step(spec_or_config, global_batch):
    """Forward + backward FLOPs of one training step over `global_batch` sequences of the
    model's full length (seq tokens each); divide by the step time for FLOP/s and by the
    machine's peak for the fraction of it."""
    c = spec_or_config if isinstance(spec_or_config, GPTConfig) else parse_gpt_spec(
        spec_or_config)
    return gpt_flops_per_token(c) * global_batch * c.seq
