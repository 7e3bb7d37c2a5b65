#!/usr/bin/python3
"""Every report scalescope writes validates against the JSON Schemas in reports/schema/.

Usage: validate_reports.py SCALESCOPE_BINARY SOURCE_DIR

Runs the tool for real (a tiny `train`, a weak and a strong sweep, a sweep in which one point
fails at run time, a resumed sweep), validates each file it writes against its schema
(draft 2020-12), checks that `scalescope report` reads every sweep report back, and checks
that the schemas reject broken reports (a missing key, an unknown key, a wrong type, ...), so
that a schema that accepts anything fails this test.

Needs Debian's python3-jsonschema (run with /usr/bin/python3: another python3 on PATH may
not see Debian's modules).
"""

import copy
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError as e:  # pragma: no cover - the message is the point
    # Skipped (ctest's SKIP_RETURN_CODE), not failed: the schemas cannot be checked here.
    print(
        f"validate_reports.py: SKIPPED: cannot import jsonschema ({e}). "
        "Install Debian's python3-jsonschema (`apt-get install -y python3-jsonschema`, or run "
        "scripts/setup.sh) and run this script with /usr/bin/python3 "
        f"(this is {sys.executable})."
    )
    sys.exit(77)

TIMEOUT_S = 300
# Objects whose keys are data, not a fixed set: their additionalProperties is a schema.
FREE_FORM_MAPS = {"env_vars", "numbers"}

failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL {message}", flush=True)


def ok(message):
    print(f"ok   {message}", flush=True)


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def lint_schema(node, path, name):
    """Every object schema with properties closes its key set (or is a known free-form map)."""
    if isinstance(node, dict):
        if path and path[-1] in ("if", "then", "else"):
            return  # conditions narrow an object defined elsewhere; they do not define one
        if "properties" in node or node.get("type") == "object":
            key = path[-1] if path else ""
            extra = node.get("additionalProperties", None)
            if "properties" in node and extra is not False:
                fail(f"{name}: {'/'.join(path) or '(root)'} has properties but no "
                     "\"additionalProperties\": false")
            if "properties" not in node and node.get("type") == "object" and extra is None:
                fail(f"{name}: object {'/'.join(path)} says nothing about its keys")
            if extra not in (None, False) and key not in FREE_FORM_MAPS:
                fail(f"{name}: {'/'.join(path)} is open (additionalProperties) but is not one of "
                     f"the free-form maps {sorted(FREE_FORM_MAPS)}")
        for k, v in node.items():
            lint_schema(v, path + [k], name)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            lint_schema(v, path + [str(i)], name)


def errors_of(validator, doc):
    return sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))


def expect_valid(validator, doc, what):
    errors = errors_of(validator, doc)
    if errors:
        for e in errors[:10]:
            fail(f"{what}: at {e.json_path}: {e.message[:300]}")
        if len(errors) > 10:
            fail(f"{what}: ... and {len(errors) - 10} more errors")
    else:
        ok(f"{what} validates")


def all_errors(errors):
    """The errors and, recursively, those under oneOf/anyOf (their context)."""
    for e in errors:
        yield e
        yield from all_errors(e.context or [])


def json_path(path):
    return "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)


def expect_invalid(validator, doc, what, where):
    """The schema rejects doc, and for the right reason: some error is at `where` (a path)."""
    errors = errors_of(validator, doc)
    if not errors:
        fail(f"the schema accepts {what}")
        return
    expected = json_path(where)
    hits = [e for e in all_errors(errors) if e.json_path == expected]
    if hits:
        ok(f"rejects {what} ({expected}: {hits[-1].message[:100]})")
    else:
        best = jsonschema.exceptions.best_match(errors)
        fail(f"{what} is rejected, but not at {expected}: {best.json_path}: {best.message[:200]}")


def run(binary, args, cwd):
    cmd = [binary] + args
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        fail(f"timed out after {TIMEOUT_S} s: {' '.join(cmd)}")
        return False
    if p.returncode != 0:
        fail(f"exit status {p.returncode}: {' '.join(cmd)}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
        return False
    return True


def produce(binary, cwd, name, args):
    """Runs scalescope writing `name`; returns the parsed report or None."""
    if not run(binary, args + ["-o", name], cwd):
        return None
    path = os.path.join(cwd, name)
    if not os.path.exists(path):
        fail(f"{' '.join(args)} did not write {name}")
        return None
    try:
        return load_json(path)
    except json.JSONDecodeError as e:
        # nlohmann/json never writes NaN or Infinity (it writes null), so this is a real break.
        fail(f"{name} is not valid JSON: {e}")
        return None


def reads_back(binary, cwd, name):
    if run(binary, ["report", name], cwd):
        ok(f"`scalescope report {name}` reads it")


# --- mutations for the negative cases -------------------------------------------------------


def at(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def mutated(doc, path, value=None, delete=False):
    out = copy.deepcopy(doc)
    parent = at(out, path[:-1])
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def first_point(report, predicate):
    for i, p in enumerate(report["points"]):
        if predicate(p):
            return i
    return None


# A negative case: (what, document, path, change, value). change is "delete" (a required key
# goes missing: the error belongs to the parent), "add" (a key the object does not define: the
# parent) or "set" (a wrong value: the path itself).
def check_negative(v, cases):
    for what, doc, path, change, value in cases:
        broken = mutated(doc, path, value, delete=change == "delete")
        expect_invalid(v, broken, what, path if change == "set" else path[:-1])


def negative_run_cases(v, run_doc):
    r = run_doc
    check_negative(v, [
        ("a run report without summary.step_ms_median", r, ["summary", "step_ms_median"],
         "delete", None),
        ("a run report without top-level 'steps'", r, ["steps"], "delete", None),
        ("a run report with an unknown key in config", r, ["config", "not_a_key"], "add", 1),
        ("a run report with an unknown top-level key", r, ["extra"], "add", {}),
        ("a run report with an unknown phase in a replica", r,
         ["steps", 0, "replicas", 0, "comm_ms"], "add", 0.1),
        ("a run report whose step number is a string", r, ["steps", 0, "step"], "set", "1"),
        ("a run report whose params is a float", r, ["model", "params"], "set", 1.5),
        ("a run report whose overlap is a number", r, ["config", "overlap"], "set", 1),
        ("a run report with a negative phase time", r, ["steps", 0, "replicas", 0, "forward_ms"],
         "set", -1.0),
        ("a run report with a null loss (a NaN, as nlohmann/json writes it)", r,
         ["steps", 0, "loss"], "set", None),
        ("a run report with 0 replicas", r, ["run", "replicas"], "set", 0),
        ("a run report whose config names a fact, not an option", r,
         ["config", "batch_per_device"], "add", 8),
        ("a run report whose config lacks an option", r, ["config", "batch"], "delete", None),
        ("a run report whose config gives a batch of 0", r, ["config", "batch"], "set", 0),
        ("a run report without its run block", r, ["run"], "delete", None),
        ("a run report with optimizer 'lamb'", r, ["config", "optimizer"], "set", "lamb"),
        ("a run report labelled as a sweep", r, ["schema"], "set", "scalescope-sweep"),
        ("a run report of schema version 3.0", r, ["schema_version"], "set", "3.0"),
        ("a run report of schema version 1.9 (its config held the run's facts)", r,
         ["schema_version"], "set", "1.9"),
        ("a run report with a negative squared norm", r,
         ["steps", 0, "grad_sq_norms", "local", 0], "set", -1.0),
        ("a run report whose noise scale lacks b_noise", r, ["noise_scale", "b_noise"],
         "delete", None),
        ("a run report whose noise scale has an unknown key", r, ["noise_scale", "b_crit"],
         "add", 1.0),
    ])


def negative_sweep_cases(v, weak, failed):
    w = weak
    ok_i = first_point(weak, lambda p: p["status"] == "ok" and p["devices"] > 1)
    fail_i = first_point(failed, lambda p: p["status"] == "failed")
    cases = [
        ("a sweep report without points[0].summary.throughput", w,
         ["points", 0, "summary", "throughput"], "delete", None),
        ("a sweep report without environment.host.os", w, ["environment", "host", "os"],
         "delete", None),
        ("a sweep report without 'complete'", w, ["complete"], "delete", None),
        ("a sweep report with an unknown top-level key", w, ["extra"], "add", 1),
        ("a sweep report with an unknown key in a repeat", w, ["points", 0, "repeats", 0, "extra"],
         "add", []),
        ("a sweep report with an unknown config key", w, ["config", "colour"], "add", "red"),
        ("a sweep report with an unknown key in environment.build", w,
         ["environment", "build", "extra"], "add", "x"),
        ("a sweep report with an unknown key in a point's phases", w,
         ["points", 0, "summary", "phases", "comm_ms"], "add", {"median_ms": 0, "share": 0}),
        ("a sweep report whose devices is a string", w, ["points", 0, "devices"], "set", "2"),
        ("a sweep report whose step_ms column holds a string", w,
         ["points", 0, "repeats", 0, "step_ms", 0], "set", "1.0"),
        ("a sweep report whose complete is a string", w, ["complete"], "set", "true"),
        ("a point with status 'broken'", w, ["points", 0, "status"], "set", "broken"),
        ("a point with mode 'diagonal'", w, ["points", 0, "mode"], "set", "diagonal"),
        ("a point with grad_compression 'fp8'", w, ["points", 0, "grad_compression"], "set",
         "fp8"),
        ("a repeat with a negative squared gradient norm", w,
         ["points", ok_i, "repeats", 0, "grad_sq_global", 0], "set", -1.0),
        ("a noise scale without its interval", w,
         ["points", ok_i, "summary", "noise_scale", "b_noise_low"], "delete", None),
        ("a compression effect without settings", w, ["compression_effects", 0, "settings"],
         "delete", None),
        ("a finding with severity 'critical'", w,
         ["points", 0, "summary", "verdict", 0, "severity"], "set", "critical"),
        ("a bottleneck 'disk-bound'", w, ["points", 0, "summary", "bottleneck"], "set",
         "disk-bound"),
        ("a point with devices 0", w, ["points", 0, "devices"], "set", 0),
        ("a negative throughput", w, ["points", 0, "summary", "throughput", "value"], "set", -1.0),
        ("a speedup that is a number, not an interval", w, ["points", 0, "summary", "speedup"],
         "set", 1.0),
        ("an ok point with a null summary", w, ["points", 0, "summary"], "set", None),
        ("an ok point without repeats", w, ["points", 0, "repeats"], "set", []),
        ("a config with both batch and global_batch", w, ["config", "global_batch"], "add", [16]),
        ("a config with neither batch nor global_batch", w, ["config", "batch"], "delete", None),
        ("a sweep report labelled as a run", w, ["schema"], "set", "scalescope-run"),
        ("a sweep report of schema version 2.0", w, ["schema_version"], "set", "2.0"),
        ("a created time that is not UTC ISO-8601", w, ["created"], "set",
         "Tue Jan 7 12:00:00 2025"),
        ("a communication entry without fit_error", w, ["communication", 0, "fit_error"],
         "delete", None),
        ("an env_vars value that is a number", w, ["environment", "env_vars", "OMP_NUM_THREADS"],
         "set", 4),
    ]
    if ok_i is not None:
        cases.append(("an efficiency_loss share that is a string", w,
                      ["points", ok_i, "summary", "efficiency_loss", "other"], "set", "0"))
    if fail_i is not None:
        f = failed
        cases += [
            ("a failed point with a summary", f, ["points", fail_i, "summary"], "set",
             copy.deepcopy(weak["points"][0]["summary"])),
            ("a failed point with repeats", f, ["points", fail_i, "repeats"], "set",
             copy.deepcopy(weak["points"][0]["repeats"])),
            ("a failed point with no error text", f, ["points", fail_i, "error"], "set", ""),
        ]
    check_negative(v, cases)

    # What the schema must still accept: the open parts are open, and the nullable parts are
    # nullable.
    positives = [
        ("a sweep report with allowlisted env vars",
         mutated(w, ["environment", "env_vars"], {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "2"})),
        ("a finding with an extra number",
         mutated(w, ["points", 0, "summary", "verdict", 0, "numbers", "anything_ms"], 1.5)),
        ("an ok point whose speedup and efficiency are null",
         mutated(mutated(w, ["points", 0, "summary", "speedup"], None),
                 ["points", 0, "summary", "efficiency"], None)),
        ("schema version 1.8", mutated(w, ["schema_version"], "1.8")),
    ]
    if ok_i is not None:
        positives.append(("a negative efficiency-loss share",
                          mutated(w, ["points", ok_i, "summary", "efficiency_loss", "stragglers"],
                                  -0.25)))
    for what, doc in positives:
        expect_valid(v, doc, what)


def constructed_failed_report(weak):
    """weak.json with its multi-device point turned into a failed one, as the sweep records it."""
    doc = copy.deepcopy(weak)
    i = first_point(doc, lambda p: p["devices"] > 1)
    if i is None:
        return None
    p = doc["points"][i]
    p.update({"status": "failed", "error": "injected failure (validate_reports.py)",
              "repeats": [], "summary": None, "bucket_bytes": [], "peak_memory_bytes": 0,
              "params": 0, "forward_flops_per_sample": 0})
    return doc


def constructed_projection_report(weak):
    """weak.json with a fit that explains the all-reduce times, and the projection a sweep
    writes from it: on a small machine the measured fits are not reliable, and CPU devices are
    not projected beyond its cores, so the sweeps here write none."""
    doc = copy.deepcopy(weak)
    i = first_point(doc, lambda p: p["devices"] > 1)
    if i is None or not doc["communication"]:
        return None
    p = doc["points"][i]
    doc["communication"][0].update({
        "fit": {"alpha_ms": 0.02, "beta_ms_per_byte": 1e-7, "r_squared": 0.98,
                "bus_bandwidth_gbps": 10.0, "samples": 4,
                "model": "ms = alpha + beta * bytes * 2(N-1)/N", "reliable": True,
                "min_r_squared": 0.9},
        "fit_error": "",
        "projection_note": "",
        "series": [{"batch": p["batch"], "measured_devices": p["devices"], "projections": [
            {"devices": 2 * p["devices"], "allreduce_ms": 0.4, "exposed_ms": 0.1,
             "step_ms": 10.0, "efficiency": 0.9, "projection": True}]}],
    })
    return doc


def negative_projection_cases(v, projected):
    """A fit marked not reliable has no projection, and says why."""
    unreliable = mutated(projected, ["communication", 0, "fit", "reliable"], False)
    expect_invalid(v, unreliable, "a projection from a fit marked not reliable",
                   ["communication", 0, "series"])
    expect_invalid(v, mutated(unreliable, ["communication", 0, "series"], []),
                   "a fit marked not reliable without a note saying why",
                   ["communication", 0, "projection_note"])
    expect_valid(v, mutated(mutated(unreliable, ["communication", 0, "series"], []),
                            ["communication", 0, "projection_note"],
                            "not reliable: r² 0.007, below the 0.9 a projection needs"),
                 "a fit marked not reliable, with no projection and a note")
    ok_i = first_point(projected, lambda p: p["status"] == "ok" and p["devices"] > 1)
    if ok_i is not None:
        check_negative(v, [
            ("a loss component's interval without its high end", projected,
             ["points", ok_i, "summary", "efficiency_loss", "intervals", "input", "high"],
             "delete", None),
            ("beyond_noise that is not a list of components", projected,
             ["points", ok_i, "summary", "efficiency_loss", "beyond_noise"], "set", "input"),
        ])


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} SCALESCOPE_BINARY SOURCE_DIR")
    binary = os.path.abspath(sys.argv[1])
    source = os.path.abspath(sys.argv[2])
    if not os.access(binary, os.X_OK):
        sys.exit(f"validate_reports.py: {binary} is not an executable")

    schema_dir = os.path.join(source, "reports", "schema")
    schemas = {}
    for kind in ("run", "sweep"):
        path = os.path.join(schema_dir, f"{kind}-report.schema.json")
        schema = load_json(path)
        try:
            Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as e:
            sys.exit(f"validate_reports.py: {path} is not a valid draft 2020-12 schema: {e.message}")
        if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
            fail(f"{path}: $schema is not draft 2020-12")
        lint_schema(schema, [], os.path.basename(path))
        schemas[kind] = Draft202012Validator(schema)
    run_v, sweep_v = schemas["run"], schemas["sweep"]

    sweep_common = ["--models", "dense-100", "--devices", "cpu:1,2", "--repeats", "2", "--steps",
                    "4", "--max-warmup-steps", "4", "-q"]
    with tempfile.TemporaryDirectory(prefix="scalescope-schema-") as tmp:
        # --- run reports
        run_doc = produce(binary, tmp, "run.json",
                          ["train", "--model", "dense-100", "--devices", "cpu:2", "--steps", "5",
                           "--no-eval", "-q", "--grad-compression", "fp16", "--noise-scale",
                           "--profile-layers"])
        if run_doc is not None and (run_doc["config"]["grad_compression"] != "fp16" or
                                    run_doc["run"]["grad_compression"] != "fp16"):
            fail("run.json trained with --grad-compression fp16 on two devices but says "
                 f"{run_doc['config']['grad_compression']!r} (asked) and "
                 f"{run_doc['run']['grad_compression']!r} (applied)")
        if run_doc is not None and len(run_doc.get("layer_profile", [])) != 3:
            fail("run.json trained dense-100 with --profile-layers but its layer_profile does not "
                 "have its 3 layers")
        if run_doc is not None and ("b_noise" not in run_doc.get("noise_scale", {}) or
                                    any("grad_sq_norms" not in s for s in run_doc["steps"])):
            fail("run.json trained with --noise-scale on two devices but has no noise scale "
                 "or steps without grad_sq_norms")
        # One device: the noise scale's "unavailable" branch.
        eval_doc = produce(binary, tmp, "run-eval.json",
                           ["train", "--model", "dense-100", "--devices", "cpu:1", "--batch",
                            "2048", "--epochs", "1", "-q", "--noise-scale"])
        if eval_doc is not None and "unavailable" not in eval_doc.get("noise_scale", {}):
            fail("run-eval.json asked for --noise-scale on one device without saying why it "
                 "has none")
        # A target: the run stops at the first evaluation (every 10 steps) that reaches it.
        target_doc = produce(binary, tmp, "run-target.json",
                             ["train", "--model", "dense-100", "--devices", "cpu:2", "--batch",
                              "256", "--epochs", "1", "--eval-every", "10", "--until-accuracy",
                              "0.3", "-q"])
        if target_doc is not None and not target_doc.get("target", {}).get("reached"):
            fail("run-target.json trained to accuracy 0.3 on learnable synthetic data but did not "
                 f"reach it: {target_doc.get('target')}")
        # fp16 on simulated devices: the loss scaling block.
        fp16_doc = produce(binary, tmp, "run-fp16.json",
                           ["train", "--model", "dense-100", "--devices", "sim:2", "--steps", "3",
                            "--no-eval", "-q", "--precision", "fp16"])
        if fp16_doc is not None and fp16_doc["run"].get("loss_scaling", {}).get("skipped") != 0:
            fail("run-fp16.json trained in fp16 without an overflow but its run.loss_scaling is "
                 f"{fp16_doc['run'].get('loss_scaling')}")
        for name, doc in (("run.json", run_doc), ("run-eval.json (with evals)", eval_doc),
                          ("run-target.json", target_doc), ("run-fp16.json", fp16_doc)):
            if doc is not None:
                expect_valid(run_v, doc, name)
        if eval_doc is not None and not eval_doc["evals"]:
            fail("run-eval.json has no evals: the eval branch of the schema went untested")

        # --- sweep reports
        # A first bucket of ~1 KiB splits dense-100's gradients into two buckets of different
        # sizes: the all-reduce fit and its projections then exist. Two bucket caps × two
        # compressions: a bucket choice per compression, a compression effect per cap.
        weak = produce(binary, tmp, "weak.json",
                       ["sweep"] + sweep_common + ["--batch", "8", "--first-bucket-mb", "0.001",
                                                   "--bucket-cap-mb", "0.01,25",
                                                   "--grad-compression", "none,bf16",
                                                   "--noise-scale"])
        if weak is not None and any(
                (p["summary"]["noise_scale"] is None) != (p["devices"] == 1)
                for p in weak["points"]):
            fail("weak.json swept with --noise-scale: every point beyond one device needs a "
                 "noise_scale summary, and the one-device point none")
        if weak is not None and (len(weak["bucket_choices"]) != 2 or
                                 len(weak["compression_effects"]) != 2):
            fail(f"weak.json swept two bucket caps and two compressions but has "
                 f"{len(weak['bucket_choices'])} bucket choices and "
                 f"{len(weak['compression_effects'])} compression effects (2 and 2 expected)")
        strong = produce(binary, tmp, "strong.json",
                         ["sweep"] + sweep_common + ["--global-batch", "16", "--profile-layers"])
        if strong is not None and any(len(p.get("layer_profile", [])) != 3
                                      for p in strong["points"] if p["status"] == "ok"):
            fail("strong.json swept dense-100 with --profile-layers but a point's layer_profile "
                 "does not have its 3 layers")
        # Strong scaling over a 4 MiB device: the one-device point (batch 4096, ~5.7 MB) runs
        # out of memory at run time, the two-device one (2048 each, ~2.9 MB) fits and has no
        # baseline (null speedup, efficiency and efficiency_loss).
        failed = produce(binary, tmp, "failed.json",
                         ["sweep"] + sweep_common + ["--global-batch", "4096", "--memory-limit-mb",
                                                     "4"])
        # Simulated devices: the points say sim and the environment says what that means; an
        # fp16 axis gives repeats with loss_scaling.
        simulated = produce(binary, tmp, "sim.json",
                            ["sweep", "--models", "dense-100", "--devices", "sim:1,2", "--repeats",
                             "1", "--steps", "3", "--max-warmup-steps", "3", "--batch", "8",
                             "--precision", "fp32,fp16", "-q"])
        if simulated is not None and any(
                ("loss_scaling" in r) != (p["precision"] == "fp16")
                for p in simulated["points"] for r in p["repeats"]):
            fail("sim.json: every fp16 repeat needs a loss_scaling block, and only those")
        if simulated is not None:
            kinds = {p["device_kind"] for p in simulated["points"]}
            if kinds != {"sim"} or not simulated["environment"].get("simulated_devices"):
                fail(f"sim.json does not mark its points as simulated: kinds {kinds}, "
                     f"environment.simulated_devices {simulated['environment'].get('simulated_devices')!r}")
        # Time to accuracy: every point trains to the target; the two-device one has a speedup.
        to_target = produce(binary, tmp, "to-target.json",
                            ["sweep", "--models", "dense-100", "--devices", "cpu:1,2", "--repeats",
                             "1", "--batch", "128", "--until-accuracy", "0.3", "--max-epochs",
                             "1", "--eval-every", "10", "--noise-scale", "-q"])
        if to_target is not None and any(
                p["summary"]["time_to_target"] is None or
                (p["devices"] == 2 and p["summary"]["time_to_target"]["speedup"] is None)
                for p in to_target["points"]):
            fail("to-target.json: every point needs a time_to_target, and the two-device one a "
                 "speedup against one device")
        resumed = None
        if weak is not None:
            with open(os.path.join(tmp, "to-resume.json"), "w", encoding="utf-8") as f:
                json.dump(weak, f)
            resumed = produce(binary, tmp, "resumed.json",
                              ["sweep", "--resume", "to-resume.json", "--batch", "8,16", "-q"])

        sweeps = {"weak.json": weak, "strong.json": strong, "failed.json": failed,
                  "resumed.json": resumed, "sim.json": simulated, "to-target.json": to_target}
        for name, doc in sweeps.items():
            if doc is None:
                continue
            expect_valid(sweep_v, doc, name)
            reads_back(binary, tmp, name)

        if failed is not None:
            points = failed["points"]
            bad = [p for p in points if p["status"] == "failed"]
            good = [p for p in points if p["status"] == "ok"]
            if not bad or not good:
                fail("failed.json should hold a failed point and an ok one, holds "
                     f"{[(p['device_spec'], p['status'], p['error'][:80]) for p in points]}")
            else:
                p = bad[0]
                if not (p["error"] and p["repeats"] == [] and p["summary"] is None):
                    fail(f"failed.json's failed point is not recorded as such: {p['error']!r}, "
                         f"{len(p['repeats'])} repeats, summary {type(p['summary']).__name__}")
                else:
                    ok(f"failed.json records {p['device_spec']} as failed: {p['error'][:70]}...")
                if good[0]["summary"]["speedup"] is not None:
                    fail("failed.json: the ok point has a speedup without a one-device baseline")

        projected = constructed_projection_report(weak) if weak is not None else None
        if projected is not None:
            expect_valid(sweep_v, projected, "weak.json with a reliable fit and a projection")
            negative_projection_cases(sweep_v, projected)

        # Coverage: the schema's nullable and optional branches were all exercised.
        all_points = [p for d in sweeps.values() if d for p in d["points"]]
        all_comm = [c for d in list(sweeps.values()) + [projected] if d
                    for c in d["communication"]]
        coverage = {
            "an all-reduce fit": any(c["fit"] is not None for c in all_comm),
            "a projection": any(s["projections"] for c in all_comm for s in c["series"]),
            "no fit": any(c["fit"] is None for c in all_comm),
            "an efficiency_loss": any(p["summary"] and p["summary"]["efficiency_loss"]
                                      for p in all_points),
            "a bus bandwidth": any(p["summary"] and p["summary"]["bus_bandwidth_gbps"] is not None
                                   for p in all_points),
            "strong scaling": any(p["mode"] == "strong" for p in all_points),
            "a compressed point": any(p.get("grad_compression") == "bf16" for p in all_points),
        }
        for what, seen in coverage.items():
            if not seen:
                fail(f"no written report had {what}: that part of the schema went untested")

        # A failed point built by hand, as run_point records one: the schema and the reader
        # agree on its shape.
        if weak is not None:
            constructed = constructed_failed_report(weak)
            expect_valid(sweep_v, constructed, "weak.json with a point turned failed")
            with open(os.path.join(tmp, "constructed-failed.json"), "w", encoding="utf-8") as f:
                json.dump(constructed, f)
            reads_back(binary, tmp, "constructed-failed.json")

        # --- negative cases: the schemas can fail
        if run_doc is not None:
            negative_run_cases(run_v, run_doc)
        if weak is not None and failed is not None:
            negative_sweep_cases(sweep_v, weak, failed)

    if failures:
        print(f"\n{len(failures)} failure(s)", file=sys.stderr)
        return 1
    print("\nall reports validate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
