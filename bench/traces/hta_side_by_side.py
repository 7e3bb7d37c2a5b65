"""`scalescope analyze` against Holistic Trace Analysis on the same Kineto traces, per rank.

Usage: bench/traces/.venv/bin/python bench/traces/hta_side_by_side.py SCALESCOPE DIR [DIR...]
(each DIR holds one job's traces, a file per rank, as HTA's TraceAnalysis(trace_dir=DIR) reads
them). Prints a Markdown table per DIR; docs/analyze.md quotes them.

HTA's temporal breakdown and communication-computation overlap cover one window per rank: from
the first GPU kernel to the last, of the kernels whose launch came before the last
ProfilerStep (HTA's default filtering), on HTA's own clock (its timestamps less its min_ts).
To compare definitions and not windows, each rank's trace is given to scalescope with that
window added as a host range named "hta_window" (on the thread of its first ProfilerStep), and
analysed with --step-range hta_window: both tools then split the same span. Compared:
  idle          HTA: window - union of every GPU kernel, copy and memset
                scalescope: input + idle (nothing ran on the device)
  compute       HTA: union of the kernels its ComputeKernelGroupingPattern calls compute
                scalescope: forward + backward + optimizer (kernels its rule table calls compute)
  non-compute   HTA: window - idle - compute
                scalescope: communication, host-to-device and other copies, each exposed
  overlap       HTA: |communication kernels ∩ compute kernels| / |communication kernels|
                scalescope: 1 - communication exposed / communication total
Differences are in percentage points of the window, which is that many percent of a step. Each
rank is shown twice: with the trace's own times, and with every range rounded to whole µs first
as HTA's reader rounds traces with sub-µs timestamps (start up, end down).
Traces without GPU kernels (a CPU job) have no HTA temporal breakdown: HTA's window starts at
the first kernel; the table says what HTA raised.
"""
import contextlib
import glob
import gzip
import io
import json
import math
import os
import subprocess
import sys
import tempfile

from hta.trace_analysis import TraceAnalysis


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def hta_tables(trace_dir):
    """HTA's temporal breakdown and overlap per rank, and its per-rank windows (raw µs)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        t = TraceAnalysis(trace_dir=trace_dir)
        breakdown = t.get_temporal_breakdown(visualize=False)
        overlap = t.get_comm_comp_overlap(visualize=False)
    windows = {}
    for rank, df in t.t.traces.items():
        gpu = df[df["stream"].ne(-1)]
        windows[rank] = (gpu["ts"].min() + t.t.min_ts, (gpu["ts"] + gpu["dur"]).max() + t.t.min_ts)
    return breakdown.set_index("rank"), overlap.set_index("rank"), windows


def rank_of(doc, path):
    info = doc.get("distributedInfo", {})
    if "rank" in info:
        return info["rank"]
    digits = "".join(c for c in os.path.basename(path).split("rank")[-1][:8] if c.isdigit())
    return int(digits or 0)


def floored(e):
    """The event in whole µs as HTA's reader rounds sub-µs traces: the start rounded up, the
    end down (a range shorter than that becomes empty here, negative in HTA)."""
    if e.get("ph") != "X" or "dur" not in e:
        return e
    start, end = math.ceil(e["ts"]), math.floor(e["ts"] + e["dur"])
    return dict(e, ts=start, dur=max(0, end - start))


def with_window(doc, window, floor):
    """The trace with the window as a host range on the thread of its first ProfilerStep (and
    with floor, every time in whole µs)."""
    steps = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    first = min(steps, key=lambda e: e["ts"])
    out = dict(doc)
    events = [floored(e) for e in doc["traceEvents"]] if floor else doc["traceEvents"]
    out["traceEvents"] = events + [{
        "ph": "X", "cat": "user_annotation", "name": "hta_window", "pid": first["pid"],
        "tid": first["tid"], "ts": float(window[0]), "dur": float(window[1] - window[0])}]
    return out


def scalescope(binary, files, *args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "analysis.json")
        subprocess.run([binary, "analyze", *files, "-q", "-o", out, *args], check=True,
                       stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def ours_on_windows(binary, files, windows, floor=False):
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for path in files:
            doc = load(path)
            rank = rank_of(doc, path)
            paths.append(os.path.join(tmp, f"rank-{rank}.json"))
            with open(paths[-1], "w") as f:
                json.dump(with_window(doc, windows[rank], floor), f)
        report = scalescope(binary, paths, "--step-range", "hta_window")
    return {r["rank"]: r["steps"][0] for r in report["job"]["ranks"]}


def step_ms(binary, files):
    report = scalescope(binary, files)
    return {r["rank"]: r["medians"]["step_ms"] for r in report["summary"]["ranks"]}


def rows(binary, trace_dir):
    files = sorted(glob.glob(os.path.join(trace_dir, "*.json*")))
    steps = step_ms(binary, files)
    try:
        breakdown, overlap, windows = hta_tables(trace_dir)
    except Exception as e:  # HTA's own failure is a result here, not an error of this script
        return [f"| all | {min(steps.values()):.2f} | HTA: {type(e).__name__}: {e} |||||||||"]
    out = []
    for floor in (False, True):
        ours = ours_on_windows(binary, files, windows, floor)
        for rank, b in breakdown.iterrows():
            out.append(row(rank, b, overlap, ours[rank], steps[rank], floor))
    return out


def row(rank, b, overlap, s, step, floor):
    """One rank's figures, HTA's against ours (ours in HTA's whole µs if floor)."""
    window = s["step_ms"]
    hta = {"idle": b["idle_time(us)"] / 1e3, "compute": b["compute_time(us)"] / 1e3,
           "non": b["non_compute_time(us)"] / 1e3}
    mine = {"idle": s["idle_ms"] + s["input_ms"], "compute": s["compute_ms"],
            "non": s["communication_exposed_ms"] + s["h2d_exposed_ms"] + s["copy_exposed_ms"]}
    comm = s["communication_ms"]
    ours_overlap = 100.0 * (1.0 - s["communication_exposed_ms"] / comm) if comm > 0 else None
    cells = [f"{rank}{' (whole µs)' if floor else ''}", f"{step:.2f}", f"{window:.2f}"]
    for k in ("idle", "compute", "non"):
        cells.append(f"{hta[k]:.3f} / {mine[k]:.3f} ({100 * (mine[k] - hta[k]) / window:+.2f})")
    cells.append(f"{overlap.loc[rank, 'comp_comm_overlap_pctg']:.2f} / " +
                 (f"{ours_overlap:.2f}" if ours_overlap is not None else "n/a"))
    return "| " + " | ".join(cells) + " |"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.splitlines()[2])
    binary = sys.argv[1]
    for trace_dir in sys.argv[2:]:
        print(f"\n{trace_dir}\n")
        print("| rank | step ms (median) | window ms | idle ms HTA / ours (Δ pp) | compute ms "
              "HTA / ours (Δ pp) | non-compute ms HTA / ours (Δ pp) | overlap % HTA / ours |")
        print("|---|---|---|---|---|---|---|")
        for row in rows(binary, trace_dir):
            print(row)


if __name__ == "__main__":
    main()
