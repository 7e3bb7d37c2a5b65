#!/usr/bin/env python3
"""Two nodes on one machine (network namespaces, netns_nodes.sh), scalescope across them.

    netns_test.py SCALESCOPE SOURCE_DIR nodes|link|slurm

mpirun runs on node1 and starts node2's processes through netns_nodes.sh as its launch agent
(as it would through ssh), one process per node; each node has its own host name and reaches
the other over one veth link.

nodes: a train across the nodes (4 replicas, 2 per node) ends with the same weights, bit for
       bit, as one process with 4; a sweep over cpu:1,2,4 splits the cross-node point's
       all-reduce by node and records each process's network; a --network-interface that a
       node lacks is refused on every process, naming the interfaces there; `collectives`
       across the nodes passes its data check (and refuses ranks that do not divide
       evenly); killing every
       process of node2 mid-sweep ends the run within the collective timeout with an error
       naming node2, keeping the finished points.
link:  the link shaped with tc tbf: `scalescope collectives` across the nodes measures the
       configured rate; sweeps at two rates show the inter-node share of the all-reduce loss
       grow as the rate falls, and an α-β fit over the cross-node all-reduces recovers what
       the link adds per byte from the faster rate to the slower.
slurm: a Slurm cluster of the two nodes (slurmctld on node1, slurmd on each, munge):
       srun --mpi=pmix (the default there) runs a train, bit for bit equal to one process,
       and a sweep across the nodes; srun --mpi=none fails at once with Open MPI's reason.
       Skipped (77) when slurmctld, slurmd or munged is missing.

Root only: exits 77 (skipped), saying why, without root, iproute2, unshare or mpirun. The
nodes are removed whatever happens (finally, SIGTERM, SIGINT, an overall alarm); ctest's
harness.netns_cleanup removes them too should this process be killed outright.
"""
import glob
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SCALESCOPE, SOURCE, PART = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
NODES = os.path.join(os.path.abspath(SOURCE), "tests/harness/collectives/netns_nodes.sh")
# Everything here must end well within ctest's TIMEOUT, teardown included.
BUDGET_S = 150

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message, flush=True)


def nodes(*args, timeout=60):
    return subprocess.run([NODES, *args], capture_output=True, text=True, timeout=timeout)


class Timeout(Exception):
    pass


def on_signal(signum, _frame):
    raise Timeout(f"signal {signum}") if signum == signal.SIGALRM else SystemExit(128 + signum)


MPIRUN = shutil.which("mpirun")
why = nodes("check")
if why.returncode != 0:
    print(why.stdout.strip() or why.stderr.strip())
    sys.exit(77 if why.returncode == 77 else 1)
if MPIRUN is None:
    print("SKIP: mpirun not found (Debian: apt-get install openmpi-bin)")
    sys.exit(77)
SUBNET = nodes("subnet").stdout.strip()

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none")
# Open MPI starts node2's daemon through the fixture (as through ssh) and keeps its own
# traffic on the nodes' link: lo is the same address on both nodes.
MPI_FLAGS = ["--mca", "plm_rsh_agent", NODES, "--mca", "oob_tcp_if_include", SUBNET,
             "--mca", "btl_tcp_if_include", SUBNET, "--host", "node1:1,node2:1", "-np", "2",
             "--bind-to", "none", "-x", "OMP_NUM_THREADS=1"]


def across_nodes(args, extra=()):
    """mpirun on node1, one process per node."""
    return [NODES, "exec", "node1", MPIRUN, *MPI_FLAGS, *extra, SCALESCOPE, *args]


def run(cmd, timeout=120):
    """`cmd`'s result; one that runs past `timeout` is killed and ends with status 124, what it
    printed so far kept (a hang must still show where it was)."""
    print("$", " ".join(cmd), flush=True)
    began = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        print(f"  killed: still running after {timeout} s", flush=True)
        p = subprocess.CompletedProcess(cmd, 124, text(e.stdout), text(e.stderr))
    print(f"  ({time.time() - began:.1f} s, status {p.returncode})", flush=True)
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:])
    return p


def validate(report, what):
    try:
        import jsonschema
        schema = json.load(open(f"{SOURCE}/reports/schema/sweep-report.schema.json"))
        jsonschema.Draft202012Validator(schema).validate(report)
    except ImportError:
        print("note: python3-jsonschema missing, schema not checked")
    except jsonschema.ValidationError as e:
        check(False, f"{what} breaks the schema: {e.message}")


def point(report, model, devices):
    found = [p for p in report["points"] if p["model"] == model and p["devices"] == devices]
    return found[0] if found else None


TRAIN = ["--model", "mlp:scale=0.05", "--data", "synthetic", "--batch", "16", "--steps", "5",
         "--optimizer", "adam", "--no-eval", "-q"]
SWEEP = ["--batch", "16", "--repeats", "2", "--steps", "4", "--max-warmup-steps", "3",
         "--data", "synthetic", "--oversubscribe", "-q"]


def train_across_nodes(work):
    single = run([SCALESCOPE, "train", "--devices", "cpu:4", "--cpu-collectives", "gloo", *TRAIN,
                  "--save", f"{work}/single.safetensors"])
    multi = run(across_nodes(["train", "--devices", "cpu:4", *TRAIN,
                              "--save", f"{work}/multi.safetensors", "-o", f"{work}/run.json"]))
    check(single.returncode == 0 and multi.returncode == 0, "a train failed")
    if single.returncode != 0 or multi.returncode != 0:
        return
    check(open(f"{work}/single.safetensors", "rb").read() ==
          open(f"{work}/multi.safetensors", "rb").read(),
          "weights differ between 1 process × 4 replicas and 2 nodes × 2")
    c = json.load(open(f"{work}/run.json")).get("cluster", {})
    check(c.get("nodes") == 2 and [m["hostname"] for m in c.get("members", [])] ==
          ["node1", "node2"], f"the run's cluster is {c}")
    check("over 2 processes on 2 nodes" in multi.stdout, "train did not say it ran on 2 nodes")


def sweep_across_nodes(work):
    out = f"{work}/sweep.json"
    p = run(across_nodes(["sweep", "--devices", "cpu:1,2,4", "--models", "mlp:scale=0.01",
                          *SWEEP, "--network-interface", "ss-link", "-o", out]))
    check(p.returncode == 0, "the sweep across the nodes failed")
    if p.returncode != 0:
        return
    r = json.load(open(out))
    check([x["status"] for x in r["points"]] == ["ok"] * 3, "not every point ran")
    networks = [e.get("network") for e in r["cluster"]["environments"]]
    check(networks == [{"interface": "ss-link", "address": f"10.231.22.{n}",
                        "chosen_by": "--network-interface"} for n in (1, 2)],
          f"the processes' networks are {networks}")
    four = point(r, "mlp:scale=0.01", 4)
    for x in four["repeats"] if four else []:
        s = x.get("allreduce_split") or {}
        # Which of the two is longer depends on the link's rate (netns_link shapes it).
        check(s.get("nodes") == 2 and s.get("global_ms", 0) > 0 and s.get("node_ms", 0) > 0,
              f"the cross-node repeat's split is {s}")
    validate(r, "the sweep across the nodes")


def refused_interface():
    p = run(across_nodes(["train", "--devices", "cpu:2", *TRAIN, "--network-interface", "eth9"]),
            timeout=60)
    check(p.returncode != 0, "--network-interface eth9 was accepted")
    for n in (1, 2):
        check(re.search(rf"process rank {n - 1} \(node{n}\): --network-interface eth9: node{n} "
                        rf"has no network interface named 'eth9'; interfaces there: "
                        rf"lo \(127\.0\.0\.1.*ss-link \(10\.231\.22\.{n}", p.stderr),
              f"the refusal does not name node{n}'s interfaces")


def collectives_across_nodes(work):
    """2 ranks per process; the data check of every size across the link."""
    out = f"{work}/collectives.json"
    p = run(across_nodes(["collectives", "--devices", "cpu:4", "-b", "4K", "-e", "1M", "-f", "16",
                          "-w", "1", "-n", "2", "--json", out]))
    check(p.returncode == 0, "collectives across the nodes failed")
    if p.returncode == 0:
        r = json.load(open(out))
        check(r["ranks"] == 4 and r["processes"] == 2 and r["nodes"] == 2,
              f"collectives ran {r['ranks']} ranks in {r['processes']} processes")
        check(all(s["wrong"] == 0 for s in r["sizes"]) and len(r["sizes"]) == 3,
              "the data check failed across the nodes")
    odd = run(across_nodes(["collectives", "--devices", "cpu:3"]), timeout=60)
    check(odd.returncode != 0 and "3 ranks cannot be shared evenly by 2 processes" in odd.stderr
          and "all_reduce over" not in odd.stdout,
          "collectives --devices cpu:3 over 2 processes was not refused before it started")


def killed_node(work):
    """Kills every process of node2 (its launch daemon too) after a cross-node point."""
    out = f"{work}/killed.json"
    timeout_ms = 20000
    cmd = across_nodes(["sweep", "--devices", "cpu:2,4", "--models", "mlp:scale=0.01",
                        "--batch", "16,32,64", "--repeats", "2", "--steps", "30",
                        "--max-warmup-steps", "3", "--data", "synthetic", "--oversubscribe",
                        "--collective-timeout-ms", str(timeout_ms), "-q", "-o", out])
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    killed_at = None
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            points = json.load(open(out))["points"]
        except (OSError, ValueError, KeyError):
            points = []
        if any(x["devices"] == 4 for x in points):
            time.sleep(0.3)  # into the next point
            nodes("kill", "node2")
            killed_at = time.time()
            break
        time.sleep(0.1)
    check(killed_at is not None, "the sweep never finished a cross-node point")
    try:
        _, err = proc.communicate(timeout=timeout_ms / 1000 * 2 + 10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        check(False, "the run hung after node2 was killed")
    if killed_at is None:
        return
    elapsed = time.time() - killed_at
    print(f"  node2 killed; the run ended {elapsed:.1f} s later, status {proc.returncode}")
    check(proc.returncode != 0, "the run of a killed node succeeded")
    check(elapsed < timeout_ms / 1000, f"the run took {elapsed:.0f} s to end after the kill")
    # Two correct endings race: rank 0's own error (its exchange with node2 fails), or mpirun,
    # which lost node2's launch daemon at the same moment, stopping rank 0 with SIGTERM (whose
    # message says where the finished points are) and, when rank 0 has not ended within ORTE's
    # grace period, SIGKILL: under load (a CI run on 2 cores) that message is then never
    # printed (seen once in a rehearsal). mpirun's own message names node2 ("lost
    # communication with a remote daemon ... on node node2"), or, as a 2-core rehearsal saw
    # once with the kill 0.3 s into the next point, only says that ORTE "was unable to
    # reliably start one or more daemons": mpirun's words, which scalescope, killed, cannot
    # add to. Either way the run ends at once and the report below keeps the finished points.
    ours = re.search(r"lost (contact with )?process rank 1 \(node2\)", err) is not None
    mpirun = (re.search(r"lost communication with a remote daemon", err) is not None and
              re.search(r"Remote daemon: .* on node node2", err) is not None) or \
        re.search(r"ORTE was unable to reliably start one or more daemons", err) is not None
    check(ours or mpirun, f"the error is neither ours nor mpirun's for a lost node: {err[-1500:]}")
    if mpirun and not ours:
        said = re.search(r"interrupted by SIGTERM: the sweep stopped; its \d+ finished points "
                         rf"are in {re.escape(out)}", err) is not None
        print(f"  mpirun ended the run; rank 0 {'said' if said else 'did not say'} where the "
              "finished points are")
    r = json.load(open(out))
    ok = [x for x in r["points"] if x["status"] == "ok"]
    check(len(ok) >= 2 and any(x["devices"] == 4 for x in ok),
          f"the report kept {len(ok)} finished points")
    check(not r["complete"], "the report of a stopped sweep says complete")


def part_nodes(work):
    train_across_nodes(work)
    sweep_across_nodes(work)
    refused_interface()
    collectives_across_nodes(work)
    killed_node(work)


# The link's rate for the collectives measurement, and the two the sweeps compare, Mbit/s:
# far apart, because the inter-node share saturates (the rest of the step stays), and at two
# rates close together this 2-core machine's noise in compute time can outweigh the change.
BENCH_RATE = 200
RATES = (400, 50)
# Bus bandwidth against the configured rate. TCP/IP and Ethernet headers take ~4.4% of each
# 1514-byte frame tbf counts, so a saturated link moves ~0.956 of the rate in payload; tbf's
# 64 KB burst lets at most that much more through per message (1.5% of 4 MiB). The lower
# bound leaves room for the ranks' own work and other load on 2 cores: 0.91-0.94 here, 0.841
# in a clean-clone CI run; a wrong bus factor (×2 or ×0.5) or an unshaped link (GB/s) falls
# far outside.
BUS_RANGE = (0.70, 1.05)
# The α-β fit over the sweeps' cross-node all-reduces: two message sizes (two models), each
# timed after the measured steps with nothing else running (the split). These 4-rank rings
# cross the link in 6 synchronous steps rather than 2, and the ranks' own work per byte
# (4 ranks on 2 cores) is a large part of the time at 400 Mbit/s: the fit there came out at
# 0.68-0.93 of the rate in ten runs here (eight beside 2-3 busy processes) and 0.607 in a
# clean-clone CI run, while at 50 Mbit/s it stayed at 0.86-0.90, two busy processes or none.
# So each rate's fit is held only to the upper bound (the ranks' work can only slow the
# link), and the lower bound applies to what the link adds from the fast rate to the slow
# one, in which that work cancels.
FIT_RANGE = (0.70, 1.15)


def collectives_at(work, mbit):
    out = f"{work}/collectives.json"
    p = run(across_nodes(["collectives", "--devices", "cpu:2", "-b", "256K", "-e", "4M",
                          "-w", "2", "-n", "5", "--network-interface", "ss-link", "--json", out]))
    check(p.returncode == 0, "collectives across the nodes failed")
    if p.returncode != 0:
        return
    print(p.stdout)
    r = json.load(open(out))
    rate = mbit * 1e6 / 8 / 1e9  # GB/s
    largest = r["sizes"][-1]["busbw_gbps"]
    fitted = (r.get("alpha_beta") or {}).get("bus_bandwidth_gbps", 0)
    print(f"  link {mbit} Mbit/s = {rate:.4f} GB/s: bus bandwidth at 4 MiB {largest:.4f} GB/s "
          f"({largest / rate:.3f}×), α-β fit {fitted:.4f} GB/s ({fitted / rate:.3f}×)")
    check(r["processes"] == 2 and r["nodes"] == 2, "collectives did not span the two nodes")
    check(BUS_RANGE[0] <= largest / rate <= BUS_RANGE[1],
          f"bus bandwidth {largest:.4f} GB/s is not {BUS_RANGE} × {rate:.4f}")
    check(BUS_RANGE[0] <= fitted / rate <= BUS_RANGE[1],
          f"the α-β fit's {fitted:.4f} GB/s is not {BUS_RANGE} × {rate:.4f}")


def sweep_at(work, mbit):
    """The cross-node points' inter-node loss share, inter-node ms, and fit samples."""
    out = f"{work}/sweep{mbit}.json"
    # One bucket per step (--first-bucket-mb as large as the cap): each split times one
    # all-reduce of the whole gradient, so the fit's intercept is one α for both models.
    p = run(across_nodes(["sweep", "--devices", "cpu:1,2,4", "--models",
                          "cifar-cnn,cnn:width=0.5", *SWEEP, "--first-bucket-mb", "25",
                          "--network-interface", "ss-link", "-o", out]))
    check(p.returncode == 0, f"the sweep at {mbit} Mbit/s failed")
    if p.returncode != 0:
        return None
    print("\n".join(line for line in p.stdout.splitlines() if "cpu:" in line or "point" in line))
    r = json.load(open(out))
    four = point(r, "cifar-cnn", 4)
    check(all(len(point(r, m, 4)["bucket_bytes"]) == 1 for m in ("cifar-cnn", "cnn:width=0.5")),
          "a cross-node point has more than one bucket")
    loss = four["summary"]["efficiency_loss"]
    splits = [x["allreduce_split"] for m in ("cifar-cnn", "cnn:width=0.5")
              for x in point(r, m, 4)["repeats"]]
    inter_ms = statistics.median(s["global_ms"] - s["node_ms"] for s in splits[:2])
    return {"inter_share": loss["allreduce_inter_node"], "intra_share": loss["allreduce_intra_node"],
            "inter_ms": inter_ms, "samples": [(s["bytes"] * 1.5, s["global_ms"]) for s in splits]}


def fitted_slope(samples):
    """β in ms per byte from ms = α + β·bytes·2(N-1)/N (N = 4), least squares."""
    n = len(samples)
    mx = sum(x for x, _ in samples) / n
    my = sum(y for _, y in samples) / n
    return sum((x - mx) * (y - my) for x, y in samples) / sum((x - mx) ** 2 for x, _ in samples)


def bytes_per_s(ms_per_byte):
    return 1e3 / ms_per_byte if ms_per_byte > 0 else math.inf


def ms_per_byte(mbit):
    return 1e3 * 8 / (mbit * 1e6)


def sweep_again(work, mbit, seen):
    """`seen` with the samples of a second sweep at the same rate added. Four samples of two
    sizes are few for this 2-core machine: a clean-clone CI rehearsal saw the smaller model's
    two all-reduces at 400 Mbit/s take 14.5 and 10.2 ms, and the fit fall to 0.699 of the
    rate. Twice the samples, all of them kept (none dropped for being far off), still miss
    the range when the bus factor or the link's shaping is wrong."""
    nodes("shape", f"{mbit}mbit")
    again = sweep_at(work, mbit)
    if again is None:
        return seen
    print(f"  again at {mbit} Mbit/s, samples {again['samples']}")
    return dict(seen, samples=seen["samples"] + again["samples"])


def link_fits(seen):
    """Each rate's fit against the rate, and the link's added time per byte from the fast
    rate to the slow one against what the two rates give."""
    fast, slow = RATES
    slopes = {mbit: fitted_slope(v["samples"]) for mbit, v in seen.items()}
    each = {mbit: bytes_per_s(b) / (mbit * 1e6 / 8) for mbit, b in slopes.items()}
    grew = slopes[slow] - slopes[fast]
    added = (ms_per_byte(slow) - ms_per_byte(fast)) / grew if grew > 0 else math.inf
    return each, added


def fit_failures(each, added):
    """What the fits break: each rate's upper bound, and the range of what the link added."""
    failures = []
    if any(x > FIT_RANGE[1] for x in each.values()):
        failures.append(f"a fit over the cross-node all-reduces exceeds {FIT_RANGE[1]}× its "
                        f"rate: {each}")
    if not FIT_RANGE[0] <= added <= FIT_RANGE[1]:
        failures.append(f"from {RATES[0]} to {RATES[1]} Mbit/s the all-reduces' time per byte "
                        f"grew {added:.3f}× of what the rates give, outside {FIT_RANGE}")
    return failures


def check_fits(work, seen):
    each, added = link_fits(seen)
    for mbit, s in seen.items():
        print(f"  samples (bytes·2(N-1)/N, ms): {s['samples']}")
        print(f"  {mbit} Mbit/s: inter-node share of the loss {s['inter_share']:.3f} (intra "
              f"{s['intra_share']:.3f}), inter-node ms {s['inter_ms']:.1f}, fit "
              f"{each[mbit]:.3f}× the rate")
    print(f"  from {RATES[0]} to {RATES[1]} Mbit/s the link added {added:.3f}× what the rates "
          "give")
    for mbit in RATES:
        if fit_failures(each, added):
            seen[mbit] = sweep_again(work, mbit, seen[mbit])
            each, added = link_fits(seen)
            fitted = ", ".join(f"{m}: {x:.3f}×" for m, x in each.items())
            print(f"  fits over all samples: {fitted}, added {added:.3f}×")
    for failure in fit_failures(each, added):
        check(False, failure)


def part_link(work):
    nodes("shape", f"{BENCH_RATE}mbit")
    collectives_at(work, BENCH_RATE)
    seen = {}
    for mbit in RATES:
        nodes("shape", f"{mbit}mbit")
        seen[mbit] = sweep_at(work, mbit)
    if any(v is None for v in seen.values()):
        return
    fast, slow = seen[RATES[0]], seen[RATES[1]]
    check(slow["inter_share"] > fast["inter_share"],
          f"the inter-node share did not grow from {RATES[0]} to {RATES[1]} Mbit/s: "
          f"{fast['inter_share']:.3f} -> {slow['inter_share']:.3f}")
    # The inter-node part of the larger model's all-reduce grows by the link's time for its
    # bytes at the slow rate less that at the fast one (the ranks' own work cancels).
    link_ms = fast["samples"][0][0] * (ms_per_byte(RATES[1]) - ms_per_byte(RATES[0]))
    diff = slow["inter_ms"] - fast["inter_ms"]
    grew = link_ms / diff if diff > 0 else math.inf
    check(FIT_RANGE[0] <= grew <= FIT_RANGE[1],
          f"inter-node time grew {diff:.1f} ms from {RATES[0]} "
          f"to {RATES[1]} Mbit/s where the link adds {link_ms:.1f} ms: {grew:.3f} of the growth, "
          f"outside {FIT_RANGE}")
    check_fits(work, seen)


class Skip(Exception):
    pass


def srun(args, extra=()):
    """srun on node1: one task per node, each with the node's 2 CPUs."""
    return [NODES, "exec", "node1", "srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1",
            "--cpus-per-task=2", *extra, SCALESCOPE, *args]


def print_slurm_state(conf):
    """What Slurm made of a job that failed or hung: its queue, its nodes, its daemons' logs."""
    for what in (["squeue"], ["sinfo", "-N", "-l"]):
        p = subprocess.run([NODES, "exec", "node1", *what], capture_output=True, text=True,
                           timeout=30, env=ENV)
        print(f"$ {' '.join(what)}\n{p.stdout}{p.stderr}")
    for log in sorted(glob.glob(os.path.join(os.path.dirname(conf), "slurm*.log"))):
        print(f"--- the last lines of {log}")
        print("".join(open(log, errors="replace").readlines()[-15:]))


def part_slurm(work):
    """Slurm's srun through PMIx (Debian's slurm-wlm and Open MPI share it)."""
    up = nodes("slurm-up")
    if up.returncode == 77:
        raise Skip(up.stdout.strip())
    check(up.returncode == 0, f"the Slurm cluster did not start: {up.stderr}")
    if up.returncode != 0:
        return
    ENV["SLURM_CONF"] = up.stdout.strip()
    single = run([SCALESCOPE, "train", "--devices", "cpu:4", "--cpu-collectives", "gloo", *TRAIN,
                  "--save", f"{work}/single.safetensors"])
    multi = run(srun(["train", "--devices", "cpu:4", *TRAIN, "--network-interface", "ss-link",
                      "--save", f"{work}/srun.safetensors"]), timeout=60)
    check(multi.returncode == 0 and "over 2 processes on 2 nodes" in multi.stdout,
          "srun train did not run over the 2 nodes")
    if multi.returncode != 0:
        print_slurm_state(up.stdout.strip())
    if single.returncode == 0 and multi.returncode == 0:
        check(open(f"{work}/single.safetensors", "rb").read() ==
              open(f"{work}/srun.safetensors", "rb").read(),
              "weights differ between 1 process × 4 replicas and srun's 2 nodes × 2")
    out = f"{work}/srun-sweep.json"
    sweep = run(srun(["sweep", "--devices", "cpu:1,2,4", "--models", "mlp:scale=0.01", *SWEEP,
                      "--network-interface", "ss-link", "-o", out]))
    check(sweep.returncode == 0, "srun sweep failed")
    if sweep.returncode == 0:
        r = json.load(open(out))
        check([x["status"] for x in r["points"]] == ["ok"] * 3, "not every srun point ran")
        envs = r["cluster"]["environments"]
        check([e["host"]["hostname"] for e in envs] == ["node1", "node2"] and
              all("SLURM_JOB_ID" in e["env_vars"] for e in envs),
              "the sweep's processes are not Slurm's tasks on node1 and node2")
        four = point(r, "mlp:scale=0.01", 4)
        check(four is not None and all(x.get("allreduce_split", {}).get("nodes") == 2
                                       for x in four["repeats"]), "no cross-node split")
    # Without a PMI that Debian's Open MPI speaks (it has PMIx only), a clear error at once.
    began = time.time()
    none = run(srun(["train", "--devices", "cpu:4", *TRAIN], extra=["--mpi=none"]), timeout=60)
    check(none.returncode != 0 and time.time() - began < 30,
          "srun --mpi=none did not fail at once")
    check('launched using "srun"' in none.stderr + none.stdout,
          "srun --mpi=none did not say that the PMI is missing")


def leftovers():
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in names.splitlines() if line.startswith("ss-node")]


def main():
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):
        signal.signal(s, on_signal)
    signal.alarm(BUDGET_S)
    began = time.time()
    skipped = None
    # Not under /tmp: each Slurm node has a /tmp of its own.
    work = tempfile.mkdtemp(prefix="scalescope-netns-", dir="/var/tmp")
    try:
        up = nodes("up")
        if up.returncode != 0:
            check(False, f"making the nodes failed: {up.stderr}")
        else:
            {"nodes": part_nodes, "link": part_link, "slurm": part_slurm}[PART](work)
    except Skip as e:
        skipped = str(e)
    except Timeout:
        check(False, f"the test ran past its {BUDGET_S} s budget")
    finally:
        signal.alarm(0)
        down = nodes("down")
        check(down.returncode == 0, f"removing the nodes failed: {down.stderr}")
        check(leftovers() == [], f"namespaces left behind: {leftovers()}")
        shutil.rmtree(work, ignore_errors=True)
    print(f"{PART}: {time.time() - began:.1f} s, teardown included")
    if skipped and not failures:
        print(skipped)
        sys.exit(77)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


main()
