#!/usr/bin/env python3
"""One line from a run report (`scalescope train -o RUN.json`) for gpu-check's summary.

usage: run_summary.py RUN.json LABEL PATTERN...

Prints "LABEL: key median, ... (medians of N measured steps; R replicas, P processes,
B buckets, S samples/s)": the median over the measured steps (after the report's warm-up
steps) of every per-replica field whose name contains one of the PATTERNs, taking the
slowest replica of each step, then the step time. Exits 1 when the report has no measured
step.
"""
import json
import statistics
import sys


def main():
    path, label, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
    report = json.load(open(path))
    summary = report.get("summary", {})
    steps = report.get("steps", [])[int(summary.get("warmup_steps", 0)):]
    if not steps:
        print(f"{label}: no measured step in {path}")
        return 1
    keys = sorted({k for s in steps for r in s.get("replicas", []) for k in r
                   if any(p in k for p in patterns) and isinstance(r[k], (int, float))})
    medians = [(k, statistics.median(max(r.get(k, 0.0) for r in s["replicas"]) for s in steps))
               for k in keys]
    medians.append(("step_ms", statistics.median(s["step_ms"] for s in steps)))
    # The run's derived facts; reports before schema 2.0 kept them in "config".
    run = report.get("run", report.get("config", {}))
    facts = [f"medians of {len(steps)} measured steps", f"{run.get('replicas', '?')} replicas"]
    if "cluster" in report:
        facts.append(f"{report['cluster'].get('processes')} processes")
    if run.get("bucket_bytes"):
        facts.append(f"{len(run['bucket_bytes'])} buckets")
    if isinstance(summary.get("samples_per_second"), (int, float)):
        facts.append(f"{summary['samples_per_second']:.0f} samples/s")
    print(f"{label}: " + ", ".join(f"{k} {v:.2f}" for k, v in medians) + f" ({'; '.join(facts)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
