#!/usr/bin/env python3
"""Multi-process runs under Open MPI on this machine (issue: multi-node).

    multiprocess_test.py SCALESCOPE SOURCE_DIR

1. Equivalence across processes: `mpirun -np 2 scalescope train --devices cpu:4` (2 replicas
   per process) ends with the same weights, bit for bit, and the same per-step losses as one
   process with 4 replicas on the same global batches, reducing over Gloo as well (shared memory
   sums in another order).
2. A sweep over cpu:1,2,4 under mpirun -np 2 (the 1- and 2-device points run in process 0
   while process 1 waits; the 4-device point spans both): every point succeeds, the report
   lists both processes and both environments, and it validates against the schema.
3. Killing one rank mid-sweep: the survivor exits within the collective timeout with an
   error naming the lost rank, and the report keeps the points finished before.
Also: `collectives` under mpirun counts the GPUs each process needs, not the total, and an
out-of-memory error on a process reads as it does in one process.

Exits 77 (skipped) when mpirun is missing.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SCALESCOPE, SOURCE = sys.argv[1], sys.argv[2]
MPIRUN = shutil.which("mpirun")
if MPIRUN is None:
    print("SKIP: mpirun not found (Debian: apt-get install openmpi-bin)")
    sys.exit(77)

# Root in containers and CI; more ranks than cores on small machines. Recovery keeps the
# survivors running after a rank dies, so the test sees scalescope's own error rather than
# mpirun killing everyone first.
MPI_FLAGS = ["--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1"]
if os.geteuid() == 0:
    MPI_FLAGS.append("--allow-run-as-root")
ENV = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism="none",
           OMPI_MCA_rmaps_base_oversubscribe="1",
           PATH=os.path.dirname(os.path.abspath(SCALESCOPE)) + os.pathsep + os.environ["PATH"])

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def run(cmd, timeout=300):
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:])
    return p


def mpirun(n, args, extra=()):
    if args[0] == "sh":  # a shell around scalescope: it must find it on PATH
        return [MPIRUN, "-np", str(n), *MPI_FLAGS, "-x", "PATH", *extra, *args]
    return [MPIRUN, "-np", str(n), *MPI_FLAGS, *extra, SCALESCOPE, *args]


def validate(report, schema_name, what):
    try:
        import jsonschema
        schema = json.load(open(f"{SOURCE}/reports/schema/{schema_name}"))
        jsonschema.Draft202012Validator(schema).validate(report)
    except ImportError:
        print("note: python3-jsonschema missing, schema not checked")
    except jsonschema.ValidationError as e:
        check(False, f"{what} breaks the schema: {e.message}")


work = tempfile.mkdtemp(prefix="scalescope-mpi-")
common = ["--model", "mlp:scale=0.05", "--data", "synthetic", "--batch", "16", "--steps", "5",
          "--optimizer", "adam", "--no-eval", "--check-every", "2", "-q"]

# 1. Equivalence across processes.
# One process reduces over Gloo too (not shared memory): the same ring, so the same bits.
single = run([SCALESCOPE, "train", "--devices", "cpu:4", "--cpu-collectives", "gloo", *common,
              "--save", f"{work}/single.safetensors", "-o", f"{work}/single.json"])
# Not quiet: process 0 alone prints the step lines, and says what their losses average.
multi = run(mpirun(2, ["train", "--devices", "cpu:4", *[a for a in common if a != "-q"],
                       "--save", f"{work}/multi.safetensors", "-o", f"{work}/multi.json"]))
check(single.returncode == 0, "single-process train failed")
check(multi.returncode == 0, "mpirun -np 2 train failed")
if single.returncode == 0 and multi.returncode == 0:
    a = open(f"{work}/single.safetensors", "rb").read()
    b = open(f"{work}/multi.safetensors", "rb").read()
    check(a == b, "weights differ between 1 process × 4 replicas and 2 processes × 2 replicas")
    ra, rb = json.load(open(f"{work}/single.json")), json.load(open(f"{work}/multi.json"))
    la = [s["loss"] for s in ra["steps"]]
    lb = [s["loss"] for s in rb["steps"]]
    check(la == lb, f"per-step losses differ: {la} vs {lb}")
    check("cluster" not in ra, "a single-process run report has a cluster")
    c = rb.get("cluster", {})
    check(c.get("processes") == 2 and c.get("replicas_per_process") == 2,
          f"the run report's cluster is {c}")
    check([m["rank"] for m in c.get("members", [])] == [0, 1], "members are not ranks 0 and 1")
    check(len(rb["steps"][0]["replicas"]) == 4, "the run report lacks replicas of process 1")
    check("over 2 processes" in multi.stdout, "train did not say it ran over 2 processes")
    check(multi.stdout.count("median step") == 1, "more than rank 0 printed the summary")
    check(multi.stdout.count("the mean over this process's replicas") == 1,
          "the step lines' note on their losses is not printed once")
    steps_printed = re.findall(r"^step +(\d+) ", multi.stdout, re.M)
    check(steps_printed == ["1", "2", "3", "4", "5"], f"step lines printed: {steps_printed}")

# 2. A sweep spanning the processes, with points that fit in process 0 alone.
report = f"{work}/sweep.json"
sweep = run(mpirun(2, ["sweep", "--devices", "cpu:1,2,4", "--models", "mlp:scale=0.05",
                       "--batch", "16", "--repeats", "1", "--steps", "4",
                       "--max-warmup-steps", "3", "--data", "synthetic", "--oversubscribe",
                       "-q", "-o", report]))
check(sweep.returncode == 0, "mpirun -np 2 sweep failed")
if sweep.returncode == 0:
    r = json.load(open(report))
    check([p["status"] for p in r["points"]] == ["ok"] * 3,
          f"point statuses {[p['status'] for p in r['points']]}")
    c = r.get("cluster", {})
    check(c.get("processes") == 2 and c.get("nodes") == 1, f"the sweep's cluster is {c}")
    check(len(c.get("environments", [])) == 2, "the sweep report lacks a process's environment")
    check(c.get("replicas_per_process") == 2, "replicas per process is not 2")
    validate(r, "sweep-report.schema.json", "the multi-process sweep report")
    check(sweep.stdout.count("report written to") == 1, "more than rank 0 printed the tables")
    check("speedup" in sweep.stdout.lower(), "the tables were not printed")

# 2b. Two nodes (SCALESCOPE_NODE_NAME differs per rank): the all-reduce of a point that spans
# them is timed globally and within each node, and the efficiency loss splits accordingly.
nodes_report = f"{work}/nodes.json"
nodes = run(mpirun(2, ["sh", "-c",
                       'SCALESCOPE_NODE_NAME=node$OMPI_COMM_WORLD_RANK exec scalescope "$@"',
                       "sh", "sweep", "--devices", "cpu:1,2,4", "--models", "mlp:scale=0.05",
                       "--batch", "16", "--repeats", "2", "--steps", "4",
                       "--max-warmup-steps", "3", "--data", "synthetic", "--oversubscribe",
                       "-q", "-o", nodes_report]))
check(nodes.returncode == 0, "the sweep over two named nodes failed")
if nodes.returncode == 0:
    r = json.load(open(nodes_report))
    check(r.get("cluster", {}).get("nodes") == 2, f"the sweep's cluster is {r.get('cluster')}")
    by_devices = {p["devices"]: p for p in r["points"]}
    check(sorted(by_devices) == [1, 2, 4] and all(p["status"] == "ok" for p in r["points"]),
          "not every point ran")
    if sorted(by_devices) == [1, 2, 4]:
        # The 2-device point runs in process 0 alone: one node, no split.
        check(all("allreduce_split" not in x for x in by_devices[2]["repeats"]),
              "a point on one node has an all-reduce split")
        check("allreduce_intra_node" not in (by_devices[2]["summary"]["efficiency_loss"] or {}),
              "a point on one node splits its efficiency loss by node")
        for x in by_devices[4]["repeats"]:
            s = x.get("allreduce_split")
            check(s is not None and s["nodes"] == 2 and s["global_ms"] > 0 and s["node_ms"] > 0
                  and s["bytes"] == sum(by_devices[4]["bucket_bytes"])
                  and s["bytes"] >= 4 * by_devices[4]["params"],
                  f"the 4-device repeat's split is {s}")
        loss = by_devices[4]["summary"]["efficiency_loss"]
        check(loss is not None and "allreduce_intra_node" in loss,
              f"the 4-device point's efficiency loss is not split by node: {loss}")
        if loss is not None and "allreduce_intra_node" in loss:
            check(abs(loss["allreduce_intra_node"] + loss["allreduce_inter_node"] -
                      loss["allreduce"]) < 1e-9, f"the node split does not add up: {loss}")
    validate(r, "sweep-report.schema.json", "the two-node sweep report")

# 2c. collectives counts GPUs per process, as training does: under mpirun -np 2, cuda:2 asks
# each process for one GPU of its own. Without a GPU the refusal names this process's share,
# not two GPUs on one machine (with GPUs it may run; a build without CUDA refuses the kind).
coll = run(mpirun(2, ["collectives", "--devices", "cuda:2", "-e", "1K", "--timeout", "20"]))
said = coll.stdout + coll.stderr
check(coll.returncode == 0 or "hosts 1 replica(s) on cuda devices but sees 0" in said
      or "built without the cuda backend" in said,
      "collectives under mpirun -np 2 counted cuda:2 on one machine, not per process")


# 2d. Out of memory on a process: the error, which every process raises and process 0 prints,
# reads as in one process, with the batch's planned peak and without our source lines.
oom = run(mpirun(2, ["train", "--devices", "cpu:2", "--model", "dense-100", "--data", "synthetic",
                     "--batch", "2000", "--steps", "2", "--no-eval", "--memory-limit-mb", "0.5",
                     "-q"]))
said = oom.stdout + oom.stderr
check(oom.returncode != 0, "a run past its memory limit under mpirun succeeded")
check("out of memory" in said and "plans a peak of" in said
      and "`scalescope models dense-100 --batch 2000" in said,
      "the out-of-memory error under mpirun does not say what the batch plans")
check(re.search(r"error: .*\.cpp:\d", said) is None,
      "the out-of-memory error under mpirun carries source lines")
check(said.count("scalescope: error:") == 1,
      "the error every process raised alike is not printed once (by process 0)")

# 2e. What only process 0 checks (the files it will write, the checkpoint replica 0 loads)
# stops every process with its error, printed once: before, process 0 stopped alone and
# process 1 said only that it had lost process 0.
broken = f"{work}/broken.safetensors"
open(broken, "w").write("abc")
for args, problem in [(["-o", f"{work}/no-such-dir/r.json"], "cannot create files in directory"),
                      (["--load", broken], "shorter than the 8-byte header length")]:
    refused = run(mpirun(2, ["train", "--devices", "cpu:2", "--model", "dense-100", "--data",
                             "synthetic", "--batch", "8", "--steps", "1", "--no-eval", "-q",
                             *args]))
    said = refused.stdout + refused.stderr
    check(refused.returncode != 0, f"train {args} under mpirun succeeded")
    check(problem in said and "lost" not in said,
          f"train {args} under mpirun did not say what process 0 found: {said[-500:]}")
    check(said.count("scalescope: error:") == 1,
          f"train {args} under mpirun printed its error other than once")


# 2f. The cores a process may use are its affinity's (taskset, a launcher's binding), and the
# processes running on the same cores share them: two confined to one core refuse a sweep of
# a device each (it would oversubscribe that core, as it would in one process); two confined
# to a core each run it, one thread per device, and without --devices sweep one device per
# process.
cpus = sorted(os.sched_getaffinity(0))
if len(cpus) >= 2 and shutil.which("taskset"):
    tiny = ["--models", "dense-100", "--batch", "8", "--repeats", "1", "--steps", "2",
            "--max-warmup-steps", "1", "--data", "synthetic", "-q"]
    same = run(mpirun(2, ["sh", "-c", f'exec taskset -c {cpus[0]} scalescope "$@"', "sh",
                          "sweep", "--devices", "cpu:2", *tiny, "-o", f"{work}/same.json"]))
    said = same.stdout + same.stderr
    check(same.returncode != 0 and
          "2 cpu devices × 1 thread need 2 cores; this process may use 1" in said,
          f"two processes on one core did not refuse to share it: {said[-500:]}")
    own_report = f"{work}/own.json"
    own = run(mpirun(2, ["sh", "-c",
                         f'case $OMPI_COMM_WORLD_RANK in 0) c={cpus[0]};; *) c={cpus[1]};; esac; '
                         'exec taskset -c $c scalescope "$@"', "sh", "sweep", *tiny,
                         "-o", own_report]))
    check(own.returncode == 0, "two processes on a core each could not sweep")
    if own.returncode == 0:
        r = json.load(open(own_report))
        check([p["devices"] for p in r["points"]] == [1, 2] and
              all(p["threads_per_device"] == 1 for p in r["points"]),
              f"the points on a core per process are {[(p['devices'], p['threads_per_device']) for p in r['points']]}")
        check([e["host"]["usable_cores"] for e in r["cluster"]["environments"]] == [1, 1],
              "the processes' environments do not say each may use one core")
        check([m.get("cpus") for m in r["cluster"]["members"]] == [str(c) for c in cpus[:2]],
              f"the report's members record CPUs {[m.get('cpus') for m in r['cluster']['members']]}")
        validate(r, "sweep-report.schema.json", "the sweep report of processes on a core each")


# 3. Kill rank 1 in the middle of a sweep.
def descendants(parent):
    """The pids of every process under `parent` (children, theirs, ...), from /proc."""
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            # The parent pid is the fourth field, after the name in parentheses (which may hold
            # spaces or parentheses itself).
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(pid))
    found, todo = [], [parent]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def rank_pids(parent):
    """The pids of the scalescope processes under `parent`, by their MPI rank: only this test's,
    not those of another mpirun running beside it (ctest -j runs harness.netns_nodes, whose
    sweep has ranks of the same name and number, at the same time)."""
    pids = {}
    for pid in descendants(parent):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if not cmd or os.path.basename(cmd[0].decode()) != "scalescope" or b"sweep" not in cmd:
            continue
        for e in env:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                pids[int(e.split(b"=")[1])] = pid
    return pids


killed_report = f"{work}/killed.json"
timeout_ms = 20000
# Each rank says how it ended (under --enable-recovery mpirun's own status does not).
cmd = mpirun(2, ["sh", "-c", 'scalescope "$@"; echo "rank $OMPI_COMM_WORLD_RANK exit $?" >&2',
                 "sh", "sweep", "--devices", "cpu:2,4", "--models", "mlp:scale=0.05",
                 "--batch", "16,32,64", "--repeats", "2", "--steps", "30",
                 "--max-warmup-steps", "3", "--data", "synthetic", "--oversubscribe",
                 "--collective-timeout-ms", str(timeout_ms), "-q", "-o", killed_report],
             extra=["--enable-recovery"])
print("$", " ".join(cmd), flush=True)
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
deadline = time.time() + 240
killed_at = None
while time.time() < deadline and proc.poll() is None:
    try:
        points = json.load(open(killed_report))["points"]
    except (OSError, ValueError, KeyError):
        points = []
    # After a finished point that spanned both processes, in the middle of the next one.
    if any(p["devices"] == 4 for p in points):
        time.sleep(0.5)
        pids = rank_pids(proc.pid)
        if 1 in pids:
            os.kill(pids[1], signal.SIGKILL)
            killed_at = time.time()
            break
    time.sleep(0.1)
check(killed_at is not None, "never found rank 1 to kill after the first 4-device point")


def dump_stacks(pids):
    """Every thread's stack of each process, to tell where a hang waits (gdb, when present)."""
    gdb = shutil.which("gdb")
    if gdb is None:
        print("(no gdb: no stacks of the hung processes)")
        return
    for rank, pid in sorted(pids.items()):
        p = subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                           capture_output=True, text=True, timeout=120)
        frames = [line for line in p.stdout.splitlines() if line.startswith(("Thread", "#"))]
        print(f"--- rank {rank} (pid {pid}) stacks ---")
        print("\n".join(frames[:200]))


try:
    out, err = proc.communicate(timeout=timeout_ms / 1000 * 3 + 30)
except subprocess.TimeoutExpired:
    hung = rank_pids(proc.pid)
    dump_stacks(hung)
    for pid in hung.values():  # not left running after the test
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    proc.kill()
    out, err = proc.communicate()
    check(False, "the surviving rank hung after rank 1 was killed")
if killed_at is not None:
    elapsed = time.time() - killed_at
    print(f"survivor exited {elapsed:.1f} s after the kill, status {proc.returncode}")
    print(err[-2000:])
    # Exactly 1: "rank 0 exit 141" (killed by SIGPIPE writing to the dead peer) is a failure.
    status = re.search(r"^rank 0 exit (\d+)$", err, re.MULTILINE)
    check(status is not None and status.group(1) == "1",
          f"the surviving rank 0 exited with {status.group(1) if status else 'no status'}, not 1")
    # scalescope's own words ("lost process rank 1 (host)" or "lost contact with process
    # rank 1 (host)"), not mpirun's "process rank 1 with PID ...".
    check(re.search(r"lost (contact with )?process rank 1 \(", err) is not None,
          "the survivor's error does not name rank 1")
    check(elapsed < timeout_ms / 1000 * 2 + 10, f"the survivor took {elapsed:.0f} s to exit")
    r = json.load(open(killed_report))
    ok = [p for p in r["points"] if p["status"] == "ok"]
    check(len(ok) >= 2, f"the report kept {len(ok)} finished points")
    check(not r["complete"], "the report of a sweep that stopped says complete")

shutil.rmtree(work, ignore_errors=True)
if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all multi-process checks passed")
