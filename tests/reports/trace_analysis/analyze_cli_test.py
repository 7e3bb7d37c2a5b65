"""`scalescope analyze` end to end (ctest reports.analyze_cli).

Usage: analyze_cli_test.py SCALESCOPE SOURCE_DIR

- The DDP traces of tests/data/traces/ddp_gloo, two ranks against one: exit 0, the JSON valid
  against reports/schema/analysis-report.schema.json (whose point summaries are the sweep
  schema's), the page has the waterfall.
- The same traces named by their folders (as the TensorBoard handler writes them, as HTA reads
  them): the same analysis.
- The same job's traces from Debian's PyTorch 1.13 (tests/data/traces/ddp_gloo_legacy: its
  profiler has no Kineto): the same, each rank's format "torch-legacy", and compare reads the
  analysis back.
- compare on two analyses: the same one passes (exit 0); the job made 1.5x slower is a
  regression (exit 1).
- Bad input: a truncated gzip trace, a file that is no trace, a missing file: exit 1 and a
  message naming the file and what was wrong.
- scalescope's own traces: a sweep of cpu:1,2 with --trace; the 2-device point's trace analysed
  against the 1-device point's gives the phases its report gave (within 1 µs, the trace's
  resolution) and the same verdict.
Skipped (exit 77) without python3-jsonschema.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("skipped: python3-jsonschema is not installed")
    sys.exit(77)

BINARY, SOURCE = sys.argv[1], sys.argv[2]
TRACES = os.path.join(SOURCE, "tests", "data", "traces")
DATA = os.path.join(TRACES, "ddp_gloo")
SCHEMAS = os.path.join(SOURCE, "reports", "schema")


def run(*args, expect=0):
    p = subprocess.run([BINARY, *args], capture_output=True, text=True)
    if p.returncode != expect:
        sys.exit(f"scalescope {' '.join(args)}: exit {p.returncode}, expected {expect}\n"
                 f"{p.stdout}\n{p.stderr}")
    return p


def validate(report):
    """Against the analysis schema, whose point summaries $ref the sweep schema beside it (read
    from the schema folder, whichever of jsonschema's two reference APIs this one has)."""
    schemas = {}
    for name in ("analysis-report.schema.json", "sweep-report.schema.json"):
        with open(os.path.join(SCHEMAS, name)) as f:
            schemas["file://" + os.path.join(SCHEMAS, name)] = json.load(f)
    uri = "file://" + os.path.join(SCHEMAS, "analysis-report.schema.json")
    schema = dict(schemas[uri], **{"$id": uri})
    jsonschema.Draft202012Validator.check_schema(schema)
    try:
        import referencing
        registry = referencing.Registry().with_resources(
            (u, referencing.Resource.from_contents(
                s, default_specification=referencing.jsonschema.DRAFT202012))
            for u, s in schemas.items())
        validator = jsonschema.Draft202012Validator(schema, registry=registry)
    except ImportError:  # jsonschema before 4.18 (Debian 12's 4.10)
        resolver = jsonschema.RefResolver(uri, schema, store=schemas)
        validator = jsonschema.Draft202012Validator(schema, resolver=resolver)
    validator.validate(report)
    return validator


def ddp_traces(tmp):
    out, page = os.path.join(tmp, "a.json"), os.path.join(tmp, "a.html")
    two = [os.path.join(DATA, "two_ranks", f"rank-{r}.pt.trace.json.gz") for r in (0, 1)]
    p = run("analyze", *two, "--baseline", os.path.join(DATA, "one_rank", "rank-0.pt.trace.json.gz"),
            "--name", "ddp", "-o", out, "--html", page)
    assert "slowest rank" in p.stdout and "verdict for ddp cpu:2" in p.stdout, p.stdout
    with open(out) as f:
        report = json.load(f)
    validate(report)
    # The sweep schema is really consulted: a point summary it refuses is refused.
    bad = copy.deepcopy(report)
    bad["summary"]["point"]["bottleneck"] = "slow"
    try:
        validate(bad)
        sys.exit("an analysis whose point summary has bottleneck 'slow' passed the schema")
    except jsonschema.ValidationError:
        pass
    assert report["summary"]["point"]["efficiency"] is not None
    with open(page) as f:
        assert 'data-chart="waterfall"' in f.read()
    folders = os.path.join(tmp, "folders.json")
    run("analyze", os.path.join(DATA, "two_ranks"), "--baseline", os.path.join(DATA, "one_rank"),
        "--name", "ddp", "-o", folders, "-q")
    with open(folders) as f:
        by_folder = json.load(f)
    for key in ("job", "baseline", "summary"):
        assert by_folder[key] == report[key], key
    return out, report


def legacy_traces(tmp):
    data = os.path.join(TRACES, "ddp_gloo_legacy")
    out = os.path.join(tmp, "legacy.json")
    two = [os.path.join(data, "two_ranks", f"rank-{r}.json.gz") for r in (0, 1)]
    p = run("analyze", *two, "--baseline", os.path.join(data, "one_rank", "rank-0.json.gz"),
            "--name", "ddp", "-o", out)
    assert "verdict for ddp cpu:2" in p.stdout, p.stdout
    with open(out) as f:
        report = json.load(f)
    validate(report)
    formats = {r["format"] for job in ("job", "baseline") for r in report[job]["ranks"]}
    assert formats == {"torch-legacy"}, formats
    assert report["summary"]["point"]["efficiency"] is not None
    run("compare", out, out)


def compare(tmp, path, report):
    run("compare", path, path)
    for rank in report["job"]["ranks"]:
        for step in rank["steps"]:
            for key in list(step):
                if key.endswith("_ms"):
                    step[key] *= 1.5
    slow = os.path.join(tmp, "slow.json")
    with open(slow, "w") as f:
        json.dump(report, f)
    p = run("compare", path, slow, expect=1)
    assert "regress" in p.stdout.lower(), p.stdout


def bad_files(tmp):
    with open(os.path.join(DATA, "two_ranks", "rank-0.pt.trace.json.gz"), "rb") as f:
        data = f.read()
    cut = os.path.join(tmp, "rank-0.json.gz")
    with open(cut, "wb") as f:
        f.write(data[: len(data) // 3])
    for path, says in ((cut, "cut short"), (os.path.join(SOURCE, "README.md"), "not valid JSON"),
                       (os.path.join(tmp, "none.json"), "none.json")):
        p = run("analyze", path, expect=1)
        assert path in p.stderr and says in p.stderr, p.stderr
        assert "internal error" not in p.stderr, p.stderr


def own_traces(tmp):
    prefix = os.path.join(tmp, "t-")
    sweep = os.path.join(tmp, "sweep.json")
    run("sweep", "--models", "mlp:scale=0.01", "--devices", "cpu:1,2", "--batch", "16", "--steps",
        "10", "--repeats", "1", "--threads", "1", "--trace", prefix, "-o", sweep, "-q")
    with open(sweep) as f:
        points = json.load(f)["points"]
    one, two = (next(p for p in points if p["devices"] == n) for n in (1, 2))
    out = os.path.join(tmp, "own.json")
    run("analyze", two["trace"], "--baseline", one["trace"], "--name", "mlp:scale=0.01", "-q",
        "-o", out)
    with open(out) as f:
        got = json.load(f)["summary"]["point"]
    want = two["summary"]
    for key, value in want["phases"].items():
        mine = got["phases"][key]["median_ms"]
        assert abs(mine - value["median_ms"]) <= 1e-3, (key, mine, value["median_ms"])
    assert [f["kind"] for f in got["verdict"]] == [f["kind"] for f in want["verdict"]], (
        got["verdict"], want["verdict"])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path, report = ddp_traces(tmp)
        compare(tmp, path, report)
        legacy_traces(tmp)
        bad_files(tmp)
        own_traces(tmp)
    print("ok")


if __name__ == "__main__":
    main()
