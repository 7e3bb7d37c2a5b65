#!/usr/bin/env python3
"""scalescope against the systems its users would pick instead, side by side in one invocation.

For every case (model, per-replica batch) and device count N, every system trains the same
model with the same optimizer on data resident in memory, with the same thread budget (--threads
for the whole run, split evenly over the replicas):

  scalescope     train --devices cpu:N --threads T/N --data synthetic:device (N replica threads,
                 oneDNN kernels, gradients all-reduced in buckets during backward through
                 shared memory between the replica threads)
  scalescope-gloo  the same with --cpu-collectives gloo (Gloo's TCP on loopback, as before the
                 shared-memory collectives; N > 1 only)
  scalescope-unfused  the same with --no-fusion (every activation a pass of its own)
  scalescope-before  the same as scalescope with another build, --before-binary (a change's
                 before and after, side by side in one invocation)
  keras          tf-keras model.fit under tf.distribute.MirroredStrategy over N logical CPU
                 devices in one process (keras_runner.py --strategy mirrored)
  keras-mw       MultiWorkerMirroredStrategy, N worker processes on loopback (N > 1 only)
  torch          PyTorch 2.x: one process for N = 1, DistributedDataParallel over gloo with N
                 processes otherwise (torch_runner.py)
  debian-torch   the same runner under Debian's python3-torch 1.13 (reference BLAS): the old
                 comparison, kept as a footnote; not run unless named in --systems

The systems run in alternation for --rounds rounds, the order reversed every other round, so
that drift of the machine affects all alike. A system's figure is over all measured steps of all
rounds: the median step time with p10-p90, and the throughput (global batch / median step).
Per system the speedup from 1 to N devices is the throughput ratio; per point, scalescope's
throughput over each other system's is "scalescope x".

A step's time is the whole global step: scalescope's step_ms (the slowest replica), the
anchors' rank-0 or whole-process wall time of a step that ends in reading the loss.

With --allreduce, every N > 1 point also times, in the first round, an all-reduce of
scalescope's own gradient buckets (the run report's run.bucket_bytes) in each anchor (its own
collective: TF's cross-replica all-reduce, torch.distributed over gloo), against the time
scalescope attributes to all-reduce per step (the fastest replica's allreduce_ms: the other
waits for it), so the communication itself is compared, not only whole steps.

A run that fails is recorded as failed with its error and the driver goes on; the JSON (--json)
is rewritten after every run, so a stopped invocation keeps what it measured.

Usage: bench/anchors/side_by_side.py [--rounds 3] [--steps 30] [--warmup 5] [--threads 2]
         [--cases cifar-cnn:64,mlp-41m:32] [--devices 1,2] [--systems scalescope,keras,...]
         [--allreduce] [--json FILE] [--markdown FILE] [--binary build/scalescope] [--venv DIR]
         [--before-binary OTHER/scalescope] [--peak-gflops P] [--precision fp32|bf16]
Needs bench/anchors/setup.sh's virtual environment for the anchors (not for scalescope).

GPT cases (e.g. --cases gpt:preset=mini:8 --systems scalescope,debian-torch): both tools train
on synthetic token windows of the spec's full sequence length, and a sample is one sequence.
The table then also gives each system's model FLOP/s, gpt_spec.gpt_flops_per_step (nanoGPT's
6N + 12·L·H·hd·S per token, forward and backward) over the median step, and with
--peak-gflops the fraction of that peak (the machine's, which nothing here measures).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from anchor_settings import (HERE, OPTIMIZERS, is_gpt, parse_gpt_spec,
                             scalescope_optimizer_args, stats, venv_python)
from gpt_spec import gpt_flops_per_step  # bench/, put on sys.path by anchor_settings

SYSTEMS = ["scalescope", "scalescope-gloo", "scalescope-unfused", "scalescope-before", "keras",
           "keras-mw", "torch", "debian-torch"]
# The scalescope systems: the binary (an argument's name) and the flags added to `train`.
SCALESCOPE_VARIANTS = {
    "scalescope": ("binary", []),
    "scalescope-gloo": ("binary", ["--cpu-collectives", "gloo"]),
    "scalescope-unfused": ("binary", ["--no-fusion"]),
    "scalescope-before": ("before_binary", []),
}
RUN_TIMEOUT_S = 1800


def scalescope_args(args, model, batch, n, binary=None):
    return [binary or args.binary, "train", "--model", model, "--devices", f"cpu:{n}",
            "--threads", str(args.threads // n), "--batch", str(batch),
            "--steps", str(args.warmup + args.steps), "--warmup-steps", str(args.warmup),
            *scalescope_optimizer_args(args.optimizer),
            "--data", "synthetic:device", "--no-eval", "--check-every", "0", "-q",
            *(["--precision", args.precision] if args.precision != "fp32" else [])]


def run_scalescope(args, system, model, batch, n):
    binary, extra = SCALESCOPE_VARIANTS[system]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        cmd = scalescope_args(args, model, batch, n, getattr(args, binary)) + extra
        subprocess.run(cmd + ["-o", out], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=RUN_TIMEOUT_S)
        with open(out) as f:
            run = json.load(f)
    steps = [{"ms": s["step_ms"], "loss": s["loss"],
              "allreduce_ms": min(r["allreduce_ms"] for r in s["replicas"])}
             for s in run["steps"]]
    # The run's facts; a --before-binary older than run schema 2.0 wrote them under config.
    facts = run.get("run", run["config"])
    return {"system": system,
            "versions": {"scalescope": run["schema_version"]},
            "steps": steps, "warmup": args.warmup,
            "checks": {"bucket_bytes": facts["bucket_bytes"]}}


def run_anchor(args, system, model, batch, n, allreduce_bytes):
    python = "/usr/bin/python3" if system == "debian-torch" else venv_python(args.venv)
    runner = "keras_runner.py" if system.startswith("keras") else "torch_runner.py"
    cmd = [python, os.path.join(HERE, runner), "--model", model, "--replicas", str(n),
           "--batch", str(batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--threads", str(args.threads), "--optimizer", args.optimizer,
           "--precision", args.precision]
    if system.startswith("keras"):
        cmd += ["--strategy", "multiworker" if system == "keras-mw" else "mirrored"]
    if allreduce_bytes:
        cmd += ["--allreduce-bytes", *map(str, allreduce_bytes)]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        subprocess.run(cmd + ["--json", out], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=RUN_TIMEOUT_S)
        with open(out) as f:
            return json.load(f)


def applies(system, n):
    return not (system in ("keras-mw", "scalescope-gloo") and n == 1)


def one_run(args, system, model, batch, n, allreduce_bytes):
    """The system's result, or {"error": ...} when it failed (the sweep goes on)."""
    try:
        if system in SCALESCOPE_VARIANTS:
            return run_scalescope(args, system, model, batch, n)
        return run_anchor(args, system, model, batch, n, allreduce_bytes)
    except subprocess.CalledProcessError as e:
        last = (e.stderr or "").strip().splitlines()[-3:]
        return {"error": f"exit {e.returncode}: " + " | ".join(last)}
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {RUN_TIMEOUT_S} s"}
    except (OSError, ValueError, KeyError) as e:
        return {"error": f"{type(e).__name__}: {e}"}


def measured(result):
    return result["steps"][result["warmup"]:]


def summarize_point(point):
    """Per system: step-time stats over every successful round, throughput, errors."""
    out = {}
    for system, rounds in point["runs"].items():
        ok = [r for r in rounds if "error" not in r]
        entry = {"rounds": len(rounds), "failed": [r["error"] for r in rounds if "error" in r]}
        if ok:
            ms = [s["ms"] for r in ok for s in measured(r)]
            entry["step_ms"] = stats(ms)
            entry["samples_per_s"] = point["global_batch"] / (entry["step_ms"]["median"] / 1e3)
            if point.get("flops_per_step"):
                seconds = entry["step_ms"]["median"] / 1e3
                entry["gflops_per_s"] = point["flops_per_step"] / seconds / 1e9
                entry["tokens_per_s"] = entry["samples_per_s"] * point["seq"]
            entry["system"] = ok[0]["system"]
            entry["checks"] = ok[0].get("checks", {})
            entry["first_loss"] = ok[0]["steps"][0]["loss"]
            entry["last_loss"] = ok[0]["steps"][-1]["loss"]
            entry.update(allreduce_summary(ok))
        out[system] = entry
    return out


def allreduce_summary(results):
    """The all-reduce time of one step: scalescope's own phase, or the anchor's timed buckets."""
    phase = [s["allreduce_ms"] for r in results for s in measured(r) if "allreduce_ms" in s]
    if phase:
        return {"allreduce_ms": stats(phase)}
    timed = [r["allreduce"] for r in results if r.get("allreduce")]
    if not timed:
        return {}
    buckets = timed[0]
    return {"allreduce_ms": {"median": sum(stats(b["ms"])["median"] for b in buckets)},
            "allreduce_bytes": [b["bytes"] for b in buckets]}


def round_order(systems, round_index):
    return list(systems) if round_index % 2 == 0 else list(reversed(systems))


def sweep(args, points, save):
    for rnd in range(args.rounds):
        for point in points:
            n = point["devices"]
            for system in round_order(args.systems, rnd):
                if not applies(system, n):
                    continue
                buckets = None
                if args.allreduce and rnd == 0 and n > 1 and not system.startswith("scalescope"):
                    first = next((r for r in point["runs"].get("scalescope", [])
                                  if "error" not in r), None)
                    buckets = first["checks"]["bucket_bytes"] if first else None
                result = one_run(args, system, point["model"], point["batch"], n, buckets)
                point["runs"].setdefault(system, []).append(result)
                status = result.get("error") or (
                    f"{stats([s['ms'] for s in measured(result)])['median']:.2f} ms")
                print(f"round {rnd + 1}/{args.rounds} {point['model']} b{point['batch']} "
                      f"N={n} {system}: {status}", file=sys.stderr, flush=True)
                save(points)


def speedups(points):
    """Per (model, batch, system): throughput at N over throughput at 1 device."""
    base = {(p["model"], p["batch"], s): e["samples_per_s"]
            for p in points if p["devices"] == 1
            for s, e in p["summary"].items() if "samples_per_s" in e}
    for p in points:
        for s, e in p["summary"].items():
            # MultiWorkerMirroredStrategy on one worker is MirroredStrategy on one device, and
            # scalescope's collectives do not run on one device.
            one = base.get((p["model"], p["batch"], {"keras-mw": "keras",
                                                      "scalescope-gloo": "scalescope"}.get(s, s)))
            if p["devices"] > 1 and one and "samples_per_s" in e:
                e["speedup"] = e["samples_per_s"] / one
            ours = p["summary"].get("scalescope", {}).get("samples_per_s")
            if ours and "samples_per_s" in e:
                e["scalescope_ratio"] = ours / e["samples_per_s"]


def table_rows(points, peak_gflops=None):
    """One row per (point, system) with the figures the table and the markdown show."""
    rows = []
    for p in points:
        for system in SYSTEMS:
            e = p["summary"].get(system)
            if e is None:
                continue
            row = {"model": p["model"], "batch": p["batch"], "n": p["devices"], "system": system}
            if "step_ms" not in e:
                row["note"] = "failed: " + "; ".join(e["failed"])
            else:
                t = e["step_ms"]
                row["step"] = f"{t['median']:.2f} ({t['p10']:.2f}-{t['p90']:.2f})"
                row["tput"] = f"{e['samples_per_s']:.0f}"
                row["speedup"] = f"{e['speedup']:.2f}x" if "speedup" in e else ""
                # No ratio without a scalescope run at this point (e.g. --systems debian-torch).
                ratio = e.get("scalescope_ratio") if system != "scalescope" else None
                row["ratio"] = f"{ratio:.2f}" if ratio else ""
                ar = e.get("allreduce_ms")
                row["allreduce"] = f"{ar['median']:.2f}" if ar else ""
                row["gflops"] = flops_text(e.get("gflops_per_s"), peak_gflops)
                row["note"] = "; ".join(e["failed"])
            rows.append(row)
    return rows


def flops_text(gflops, peak_gflops):
    if gflops is None:
        return ""
    return f"{gflops:.1f}" + (f" ({gflops / peak_gflops:.0%})" if peak_gflops else "")


COLUMNS = [("model", "model"), ("batch", "batch"), ("n", "N"), ("system", "system"),
           ("step", "step ms median (p10-p90)"), ("tput", "samples/s"),
           ("speedup", "1->N speedup"), ("ratio", "scalescope x"),
           ("allreduce", "all-reduce ms/step"), ("gflops", "GFLOP/s (of peak)"),
           ("note", "note")]


def render_text(rows):
    widths = {k: max(len(h), *(len(str(r.get(k, ""))) for r in rows)) for k, h in COLUMNS}
    lines = ["  ".join(h.ljust(widths[k]) for k, h in COLUMNS)]
    for r in rows:
        lines.append("  ".join(str(r.get(k, "")).ljust(widths[k]) for k, _ in COLUMNS))
    return "\n".join(line.rstrip() for line in lines)


def render_markdown(rows, header):
    lines = [header, "", "| " + " | ".join(h for _, h in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(k, "")) for k, _ in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def parse_cases(text):
    """MODEL:BATCH items separated by commas. A gpt spec holds commas of its own
    (gpt:layers=2,d=64:8), so an item runs until its text ends in :BATCH."""
    cases, pending = [], ""
    for part in text.split(","):
        pending = f"{pending},{part}" if pending else part
        model, _, batch = pending.rpartition(":")  # model specs hold colons too
        if not batch.isdigit():
            continue
        if not model or int(batch) < 1:
            break
        if is_gpt(model):
            try:
                parse_gpt_spec(model)
            except ValueError as e:
                raise argparse.ArgumentTypeError(f"case {pending!r}: {e}") from None
        cases.append((model, int(batch)))
        pending = ""
    if pending or not cases:
        raise argparse.ArgumentTypeError(
            f"case {pending or text!r}: expected MODEL:BATCH, e.g. cifar-cnn:64")
    return cases


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adam")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="every system's: scalescope --precision, PyTorch's CPU autocast")
    ap.add_argument("--cases", type=parse_cases, default=parse_cases("cifar-cnn:64,mlp-41m:32"))
    ap.add_argument("--devices", default="1,2", help="device counts, e.g. 1,2")
    ap.add_argument("--systems", default="scalescope,scalescope-gloo,keras,keras-mw,torch")
    ap.add_argument("--allreduce", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "..", "build", "scalescope"))
    ap.add_argument("--before-binary", help="the scalescope build scalescope-before runs")
    ap.add_argument("--venv")
    ap.add_argument("--peak-gflops", type=float,
                    help="the machine's peak GFLOP/s, to report GPT cases' fraction of it")
    args = ap.parse_args()
    args.systems = args.systems.split(",")
    unknown = [s for s in args.systems if s not in SYSTEMS]
    devices = args.devices.split(",")
    if unknown:
        ap.error(f"--systems: unknown {', '.join(unknown)} (known: {', '.join(SYSTEMS)})")
    if not all(d.isdigit() and int(d) >= 1 for d in devices):
        ap.error(f"--devices {args.devices!r}: expected positive counts, e.g. 1,2")
    args.devices = [int(d) for d in devices]
    if any(args.threads % n for n in args.devices):
        ap.error(f"--threads {args.threads} must divide by every device count {args.devices}")
    if args.rounds < 1 or args.steps < 1 or args.warmup < 0:
        ap.error("--rounds and --steps must be positive, --warmup not negative")
    for system in args.systems:
        binary = SCALESCOPE_VARIANTS.get(system, (None,))[0]
        path = getattr(args, binary) if binary else None
        if binary and not (path and os.access(path, os.X_OK)):
            flag = "--" + binary.replace("_", "-")
            ap.error(f"{flag} {path}: not an executable (needed by {system}; build it first)")
    anchors = [s for s in args.systems
               if not s.startswith("scalescope") and s != "debian-torch"]
    if anchors and not os.access(venv_python(args.venv), os.X_OK):
        ap.error(f"{venv_python(args.venv)} is missing: run bench/anchors/setup.sh "
                 f"(needed by {', '.join(anchors)})")
    return args


def gpt_point(model, global_batch):
    """A GPT point's sequence length and FLOPs per step (forward and backward), else nothing."""
    if not is_gpt(model):
        return {}
    return {"seq": parse_gpt_spec(model).seq,
            "flops_per_step": gpt_flops_per_step(model, global_batch)}


def main():
    args = parse_args()
    points = [{"model": m, "batch": b, "devices": n, "global_batch": b * n, "runs": {},
               **gpt_point(m, b * n)}
              for m, b in args.cases for n in args.devices]

    def save(pts):
        for p in pts:
            p["summary"] = summarize_point(p)
        speedups(pts)
        if args.json:
            tmp = args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"settings": {k: v for k, v in vars(args).items()
                                        if k not in ("json", "markdown")},
                           "points": pts}, f, indent=1)
            os.replace(tmp, args.json)

    sweep(args, points, save)
    save(points)
    rows = table_rows(points, args.peak_gflops)
    print(render_text(rows))
    if args.markdown:
        header = (f"{args.rounds} rounds x {args.steps} steps (+{args.warmup} warm-up), "
                  f"{args.threads} threads in all, {args.optimizer}")
        with open(args.markdown, "w") as f:
            f.write(render_markdown(rows, header))


if __name__ == "__main__":
    main()
