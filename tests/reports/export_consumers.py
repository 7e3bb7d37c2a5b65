#!/usr/bin/python3
"""`scalescope export` files are read by the tools they are for.

Usage: export_consumers.py SCALESCOPE_BINARY

Runs a tiny sweep, derives a second report from it whose step times are all 25% longer (the
analysis is recomputed when a report is read, so only the samples need changing), exports both
in every format and checks:
  gbench                   Google Benchmark's compare.py (Debian's libbenchmark-tools, which
                           needs python3-scipy) compares the two exports and finds every
                           benchmark 25% slower;
  bencher                  the export validates against Bencher's BMF JSON Schema;
  github-action-benchmark  each entry is the action's BenchmarkResult (name, unit, value;
                           range and extra strings), names unique.
Exit status 77 (ctest: skipped) when compare.py is not installed and everything else passed.
Run with /usr/bin/python3: another python3 on PATH may not see Debian's modules.
"""

import copy
import json
import os
import subprocess
import sys
import tempfile

COMPARE_PY = "/usr/share/benchmark/compare.py"  # dpkg -L libbenchmark-tools
SKIPPED = 77
SLOWDOWN = 1.25

# Bencher Metric Format, as published at https://bencher.dev/docs/reference/bencher-metric-format
BMF_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "patternProperties": {
        ".+": {
            "type": "object",
            "patternProperties": {
                ".+": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number"},
                        "lower_value": {"type": "number"},
                        "upper_value": {"type": "number"},
                    },
                    "required": ["value"],
                }
            },
        }
    },
}

failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL {message}", flush=True)


def ok(message):
    print(f"ok   {message}", flush=True)


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


def export(binary, report, fmt, out, *extra):
    r = run([binary, "export", report, "--format", fmt, "-o", out, *extra])
    if r.returncode != 0:
        fail(f"export --format {fmt} {report}: status {r.returncode}: {r.stderr}")
        return None
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def slower(report_path, out_path):
    """The report with every step time (group and per replica phase) scaled by SLOWDOWN. Its
    stale summaries do not matter: a report's analysis is recomputed when it is read."""
    with open(report_path, encoding="utf-8") as f:
        doc = json.load(f)
    for point in doc["points"]:
        for repeat in point["repeats"]:
            repeat["step_ms"] = [t * SLOWDOWN for t in repeat["step_ms"]]
            for replica in repeat["replicas"]:
                for key, values in replica.items():
                    if key.endswith("_ms") and key != "start_ms":
                        replica[key] = [t * SLOWDOWN for t in values]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def check_compare_py(base, cur, tmp):
    if not os.path.exists(COMPARE_PY):
        return False
    dump = os.path.join(tmp, "diff.json")
    r = run(["/usr/bin/python3", COMPARE_PY, "--no-color", "-d", dump, "benchmarks", base, cur])
    if r.returncode != 0:
        hint = ""
        if "scipy" in r.stderr:
            hint = " (compare.py needs python3-scipy: run scripts/setup.sh)"
        fail(f"compare.py exited with {r.returncode}{hint}: {r.stderr.strip()}")
        return True
    print(r.stdout)
    with open(dump, encoding="utf-8") as f:
        diff = json.load(f)
    with open(base, encoding="utf-8") as f:
        names = {b["name"] for b in json.load(f)["benchmarks"]}
    seen = set()
    for entry in diff:
        name = entry["name"]
        if name.endswith("_cv"):
            continue  # spread relative to the mean: unchanged by scaling
        seen.add(name)
        for m in entry["measurements"]:
            if abs(m["time"] - (SLOWDOWN - 1)) > 1e-6 or abs(m["cpu"] - (SLOWDOWN - 1)) > 1e-6:
                fail(f"compare.py: {name} changed by {m['time']:+.4f}, not {SLOWDOWN - 1:+.4f}")
    missing = {n for n in names if not n.endswith("_cv")} - seen
    if missing:
        fail(f"compare.py did not compare {sorted(missing)}")
    if "OVERALL_GEOMEAN" not in seen:
        fail("compare.py computed no overall geometric mean")
    if not [e for e in diff if e.get("utest")]:
        fail("compare.py ran no U test (repetitions should allow one)")
    if not failures:
        ok(f"compare.py compares the exports: {len(seen)} rows, each {SLOWDOWN - 1:+.0%}")
    return True


def check_bencher(doc, name):
    try:
        import jsonschema
    except ImportError as e:
        fail(f"cannot import jsonschema ({e}): install python3-jsonschema")
        return
    errors = list(jsonschema.Draft7Validator(BMF_SCHEMA).iter_errors(doc))
    for e in errors:
        fail(f"{name}: BMF schema: {e.message} at {list(e.absolute_path)}")
    for bench, measures in doc.items():
        if not {"throughput", "latency"} <= set(measures):
            fail(f"{name}: {bench} lacks throughput or latency")
        for measure, m in measures.items():
            if not m["lower_value"] <= m["value"] <= m["upper_value"]:
                fail(f"{name}: {bench} {measure}: value outside [lower_value, upper_value]")
    if not errors:
        ok(f"{name}: valid Bencher Metric Format, {len(doc)} benchmarks")


def check_github(doc, name, unit):
    if not isinstance(doc, list) or not doc:
        fail(f"{name}: not a non-empty array")
        return
    names = set()
    for e in doc:
        types = {"name": str, "unit": str, "value": (int, float), "range": str, "extra": str}
        for key, t in types.items():
            if not isinstance(e.get(key), t) or isinstance(e.get(key), bool):
                fail(f"{name}: entry {e.get('name')}: {key} is {e.get(key)!r}")
        if set(e) - set(types):
            fail(f"{name}: entry {e.get('name')} has unknown keys {set(e) - set(types)}")
        if e.get("unit") != unit:
            fail(f"{name}: entry {e.get('name')}: unit {e.get('unit')!r}, not {unit!r}")
        names.add(e.get("name"))
    if len(names) != len(doc):
        fail(f"{name}: benchmark names repeat")
    else:
        ok(f"{name}: {len(doc)} github-action-benchmark entries in {unit}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="scalescope-export-") as tmp:
        base = os.path.join(tmp, "base.json")
        r = run([binary, "sweep", "--models", "dense-100", "--devices", "cpu:1,2", "--batch", "8",
                 "--repeats", "3", "--steps", "4", "--max-warmup-steps", "4", "--threads", "1",
                 "-q", "-o", base])
        if r.returncode != 0:
            sys.exit(f"the sweep failed ({r.returncode}): {r.stdout}{r.stderr}")
        cur = os.path.join(tmp, "cur.json")
        slower(base, cur)
        exports = {}
        for label, path in (("base", base), ("cur", cur)):
            exports[label] = export(binary, path, "gbench", os.path.join(tmp, f"{label}.gb.json"))
        bencher = export(binary, cur, "bencher", os.path.join(tmp, "bmf.json"))
        if bencher is not None:
            check_bencher(bencher, "bencher export")
        for metric, unit in (("throughput", "samples/s"), ("step-time", "ms")):
            doc = export(binary, cur, "github-action-benchmark",
                         os.path.join(tmp, f"gh-{metric}.json"), "--metric", metric)
            if doc is not None:
                check_github(doc, f"github-action-benchmark --metric {metric}", unit)
        have_compare = True
        if exports["base"] is not None and exports["cur"] is not None:
            have_compare = check_compare_py(os.path.join(tmp, "base.gb.json"),
                                            os.path.join(tmp, "cur.gb.json"), tmp)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    if not have_compare:
        print(f"SKIPPED: {COMPARE_PY} is absent; install Debian's libbenchmark-tools and "
              "python3-scipy (scripts/setup.sh) to check the gbench export with compare.py")
        return SKIPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
