"""Causal attention alone, scalescope's CPU kernel against PyTorch 2.x's fused SDPA, each inside
its own training step of the same GPT (issue 39: attention at >= 1.2x PyTorch's SDPA on CPU).

Usage: python3 bench/anchors/attention_side_by_side.py [--cases gpt:preset=mini:16,...]
       [--rounds 3] [--threads 2] [--steps 8] [--warmup 5] [--binary build/scalescope]
       [--with-sgemm]

Each round runs both systems one after the other (the order reversed every other round), one
process each, on one device of --threads threads, Adam, synthetic tokens:
  scalescope  train --profile-layers: the mean forward and backward ms per measured step of its
              CausalSelfAttention layers (its fused kernel, the heads read from and written to
              the [N, S, D] rows in place), per layer.
  torch       bench/torch_models.py's GPT under torch.profiler for --steps steps after --warmup:
              the self time of aten::_scaled_dot_product_flash_attention_for_cpu and of its
              backward per step, per layer. The heads' transposes and the copy of the output
              back to [N, S, D] around SDPA are not counted, which favours PyTorch.
  scalescope-sgemm  (with --with-sgemm) scalescope with SCALESCOPE_ATTENTION_PRODUCTS=sgemm: its
              fp32 products as oneDNN's sgemm instead of in AVX-512 registers, for a before
              and after in the same rounds.
Both also give their median step (PyTorch's under the profiler). Prints a Markdown table: per
case the medians over rounds, ms per attention layer and step.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from anchor_settings import HERE, OPTIMIZERS, parse_gpt_spec, venv_python
from side_by_side import scalescope_args

SDPA = "aten::_scaled_dot_product_flash_attention_for_cpu"
SDPA_BACKWARD = SDPA + "_backward"


def scalescope_round(args, spec, batch, products="tiles"):
    env = dict(os.environ, SCALESCOPE_ATTENTION_PRODUCTS=products)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        subprocess.run(scalescope_args(args, spec, batch, 1) + ["--profile-layers", "-o", out],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        with open(out) as f:
            run = json.load(f)
    layers = [l for l in run["layer_profile"] if "CausalSelfAttention" in l["layer_name"]]
    return {"forward": sum(l["forward_ms"] for l in layers) / len(layers),
            "backward": sum(l["backward_ms"] for l in layers) / len(layers),
            "step": run["summary"]["step_ms_median"]}


def torch_child(args):
    """Runs in the anchors' virtual environment: one case, its figures as JSON on stdout."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    sys.path.insert(0, os.path.dirname(HERE))
    from torch_models import ATTENTION, GPT, gpt_loss
    if ATTENTION != "sdpa":
        sys.exit(f"PyTorch {torch.__version__} has no scaled_dot_product_attention")
    spec, batch = args.torch_child, args.batch
    config = parse_gpt_spec(spec)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = GPT(spec)
    adam = OPTIMIZERS["adam"]
    opt = torch.optim.Adam(model.parameters(), lr=adam["lr"], betas=(adam["beta1"], adam["beta2"]),
                           eps=adam["eps"])
    x = torch.randint(0, config.vocab, (batch, config.seq))
    y = torch.randint(0, config.vocab, (batch, config.seq))
    times = []

    def step():
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        gpt_loss(model(x), y).backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)

    for _ in range(args.warmup):
        step()
    times.clear()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
    self_ms = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()}
    per_layer = args.steps * config.layers
    print(json.dumps({"forward": self_ms[SDPA] / per_layer,
                      "backward": self_ms[SDPA_BACKWARD] / per_layer,
                      "step": statistics.median(times), "torch": torch.__version__}))


def torch_round(args, spec, batch):
    out = subprocess.run([venv_python(args.venv), os.path.abspath(__file__), "--torch-child",
                          spec, "--batch", str(batch), "--threads", str(args.threads),
                          "--steps", str(args.steps), "--warmup", str(args.warmup)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def gpt_cases(text):
    """argparse type of --cases: SPEC:BATCH,... of gpt specs and positive batches."""
    cases = []
    for case in text.split(","):
        spec, _, batch = case.rpartition(":")
        try:
            parse_gpt_spec(spec)
            if not batch.isdigit() or int(batch) < 1:
                raise ValueError(f"the batch {batch!r} is not a positive integer")
        except ValueError as e:
            raise argparse.ArgumentTypeError(
                f"{case!r}: expected a gpt spec and a batch, as gpt:preset=mini:16 ({e})") from None
        cases.append((spec, int(batch)))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=gpt_cases, default="gpt:preset=mini:16,gpt:preset=micro:32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "..", "build", "scalescope"))
    ap.add_argument("--venv")
    ap.add_argument("--with-sgemm", action="store_true",
                    help="also run scalescope with its attention's products as oneDNN's sgemm")
    ap.add_argument("--torch-child", help=argparse.SUPPRESS)
    # What side_by_side.scalescope_args reads besides the above: Adam, fp32.
    ap.set_defaults(optimizer="adam", precision="fp32")
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_child:
        return torch_child(args)
    print("| case | system | attention forward ms | backward ms | fwd + bwd ms | step ms |"
          " SDPA ÷ system (attention) |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for spec, batch in args.cases:
        case = f"{spec}:{batch}"
        systems = ["scalescope", "torch"] + (["scalescope-sgemm"] if args.with_sgemm else [])
        runs = {system: [] for system in systems}
        rounds = {"scalescope": scalescope_round, "torch": torch_round,
                  "scalescope-sgemm": lambda *a: scalescope_round(*a, products="sgemm")}
        for r in range(args.rounds):
            for system in systems if r % 2 == 0 else systems[::-1]:
                runs[system].append(rounds[system](args, spec, batch))
                print(f"round {r + 1}/{args.rounds} {case} {system}: {runs[system][-1]}",
                      file=sys.stderr)
        medians = {s: {k: statistics.median(x[k] for x in v) for k in ("forward", "backward",
                                                                      "step")}
                   for s, v in runs.items()}
        both = {s: m["forward"] + m["backward"] for s, m in medians.items()}
        for system, m in medians.items():
            ratio = f"{both['torch'] / both[system]:.2f}" if system != "torch" else ""
            print(f"| {case} | {system} | {m['forward']:.3f} | {m['backward']:.3f} |"
                  f" {both[system]:.3f} | {m['step']:.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", None) or ""
        sys.exit(f"attention_side_by_side.py: {e} {detail.strip()[-500:]}".strip())
