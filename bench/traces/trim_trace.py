"""Trims a Kineto Chrome trace to what `scalescope analyze` reads, and gzips it: test data.

Usage: python3 bench/traces/trim_trace.py IN.json OUT.json.gz

Kept: the complete ('X') events of the categories the analysis reads (cpu_op, user_annotation,
python_function, cuda_runtime, cuda_driver, kernel, gpu_memcpy, gpu_memset) with their name,
category, pid, tid, ts and dur, and of their args only correlation, stream and device; the
process and thread names ('M'); the top-level keys schemaVersion, distributedInfo,
displayTimeUnit and baseTimeNanoseconds. Left out: flow events, instant events, the profiler's
own span, every other arg. Times are not changed. Standard library only.
"""
import gzip
import json
import os
import sys

CATEGORIES = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver",
              "kernel", "gpu_memcpy", "gpu_memset"}
ARGS = ("correlation", "stream", "device")
TOP = ("schemaVersion", "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds")


def trim_event(e):
    if e.get("ph") == "M":
        return {k: e[k] for k in ("name", "ph", "pid", "tid", "args") if k in e}
    if e.get("ph") != "X" or e.get("cat") not in CATEGORIES:
        return None
    out = {k: e[k] for k in ("ph", "cat", "name", "pid", "tid", "ts", "dur") if k in e}
    args = {k: e["args"][k] for k in ARGS if k in e.get("args", {})}
    if args:
        out["args"] = args
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[2])
    src, dst = sys.argv[1], sys.argv[2]
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        doc = json.load(f)
    out = {k: doc[k] for k in TOP if k in doc}
    out["traceName"] = os.path.basename(dst)
    out["traceEvents"] = [t for t in map(trim_event, doc["traceEvents"]) if t is not None]
    with gzip.open(dst, "wt", compresslevel=9) as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"{dst}: {len(out['traceEvents'])} of {len(doc['traceEvents'])} events, "
          f"{os.path.getsize(dst)} bytes")


if __name__ == "__main__":
    main()
