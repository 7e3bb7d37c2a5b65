"""TensorFlow/Keras anchor: Keras's own model.fit under tf.distribute, printing anchor_common's
result JSON.   .venv/bin/python keras_runner.py [runner args] --strategy mirrored|multiworker

mirrored: one process, the CPU split into --replicas logical CPU devices, MirroredStrategy over
  them (on CPU devices TF 2.21 picks CollectiveAllReduce, RING: checks["cross_device_ops"]).
  Threads: --threads is the process's budget: intra-op = --threads (one pool, shared by the
  logical devices), inter-op = --replicas (so the replicas' ops run side by side). Measured
  on 2 cores (cifar-cnn / mlp-41m, 2 replicas): intra 1 + inter 2 was as fast, within noise;
  inter-op 1 was 10-20% slower, intra 1 + inter 1 1.4-1.9x slower; so this setting stays.
multiworker: --replicas worker processes (this script, hidden --worker-index) with TF_CONFIG on
  127.0.0.1, MultiWorkerMirroredStrategy with RING collectives (what AUTO picks on CPU), each
  with intra-op --threads/--replicas and inter-op 1. The parent reports worker 0's step times,
  every worker's under checks, and whether the workers' weights end bit-identical (sha256).
  fit's distribute_reduction_method is "first": its default sums the (already global) loss
  over the workers once more.

Training: compile(steps_per_execution=1) and fit(epochs=1, steps_per_epoch=warmup+steps) in
strategy.scope(). A callback times on_train_batch_begin to on_train_batch_end, where Keras has
already turned the logs into numbers (the step has finished). Per-step loss: logs["loss"] is a
running mean over the epoch (Mean metric, summed over replicas and workers); the callback resets
the metrics in on_train_batch_begin, before its clock starts, so logs["loss"] is that step's
loss. checks["first_loss_direct"] recomputes step 0's loss by a plain forward pass. Adam runs
with adaptive_epsilon=True, scalescope's (and PyTorch's) algorithm: see keras_model.

Data: step k's global batch is the replicas' slices in replica order, batched at the global
batch (mirrored; checks["replica_slices_ok"]: replica r gets slice r), or each worker's own
slice (distribute_datasets_from_function, auto-sharding off). --allreduce-bytes times
replica_context.all_reduce(SUM) in strategy.run in a tf.function, as Keras's gradients take.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import numpy as np

    import anchor_common
    import keras_model
except ImportError as e:
    sys.exit(f"keras_runner: {e}; run it with bench/anchors/.venv/bin/python "
             "(created by bench/anchors/setup.sh)")

WORKER_TIMEOUT_S = 600
COMMUNICATION = "RING"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    anchor_common.add_runner_arguments(ap)
    ap.add_argument("--strategy", choices=["mirrored", "multiworker"], default="mirrored")
    ap.add_argument("--worker-index", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--worker-dir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    anchor_common.check_runner_arguments(args)
    if anchor_common.is_gpt(args.model):
        ap.error(f"--model {args.model}: no Keras twin of the gpt models (torch_runner.py has)")
    return args


def import_tf():
    try:
        import tensorflow as tf
        import tf_keras as keras
    except ImportError as e:
        sys.exit(f"keras_runner: cannot import TensorFlow/tf-keras ({e}); create the venv with "
                 f"bench/anchors/setup.sh and run with {anchor_common.venv_python()}")
    return tf, keras


def versions(tf, keras):
    return {"tensorflow": tf.__version__, "tf_keras": keras.__version__, "numpy": np.__version__}


# ---- training (one process: the mirrored run, or one multiworker worker) ----

def step_batches(args, replicas):
    """x, y of every step's batches of the listed replicas, step by step in replica order (all
    replicas: the global batches; synthetic data: one step, repeated), and step 0's batches."""
    batches = anchor_common.load_batches(args)
    n = 1 if args.data == "synthetic" else args.warmup + args.steps
    xs, ys = zip(*(batches(k, r) for k in range(n) for r in replicas))
    return np.concatenate(xs), np.concatenate(ys), [batches(0, r) for r in replicas]


def make_dataset(tf, x, y, batch):
    """Batches of `batch` in order, cached in memory and repeated, auto-sharding off."""
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.cache().repeat().prefetch(2).with_options(options)


def slices_match(strategy, dist, expected):
    """Whether the distributed dataset's first element gives replica i exactly expected[i]."""
    x, y = next(iter(dist))
    xs, ys = strategy.experimental_local_results(x), strategy.experimental_local_results(y)
    return len(xs) == len(expected) and all(
        np.array_equal(a.numpy(), e[0]) and np.array_equal(b.numpy(), e[1])
        for a, b, e in zip(xs, ys, expected))


def train(keras, args, strategy, dataset, first):
    """Fits warmup + steps batches; returns the model, its steps and this process's checks."""
    with strategy.scope():
        model = keras_model.build_compiled(keras, args)
    if args.strategy == "multiworker":
        # fit's default ("auto" = "sum") all-reduces the already global mean loss across the
        # workers once more: logs["loss"] would be workers x the loss, after an extra collective
        model.distribute_reduction_method = "first"
    checks = {"keras_optimizer": keras_model.optimizer_settings(model.optimizer),
              "first_loss_direct": keras_model.direct_loss(keras, args, model, first)}
    timer = keras_model.step_timer(keras)
    model.fit(dataset, epochs=1, steps_per_epoch=args.warmup + args.steps, verbose=0,
              callbacks=[timer])
    checks["first_loss_logged"] = timer.steps[0]["loss"]
    return model, timer.steps, checks


def time_allreduce(tf, strategy, sizes, repeats):
    """[{"bytes", "ms"}]: the strategy's all-reduce (sum) of float32 buffers, 2 untimed calls."""
    out, correct = [], True
    expected = strategy.num_replicas_in_sync * (strategy.num_replicas_in_sync + 1) / 2
    for size in sizes:
        n = max(1, size // 4)
        values = strategy.experimental_distribute_values_from_function(
            lambda ctx, n=n: tf.fill([n], float(ctx.replica_id_in_sync_group + 1)))

        @tf.function
        def reduce(v):
            def fn(t):  # identity: placed on the replica's device (a bare argument is not)
                return tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, tf.identity(t))[-1]
            return strategy.run(fn, args=(v,))

        ms = []
        for i in range(2 + repeats):
            t0 = time.perf_counter()
            got = float(strategy.experimental_local_results(reduce(values))[0])
            if i >= 2:
                ms.append((time.perf_counter() - t0) * 1e3)
            correct &= got == expected
        out.append({"bytes": size, "ms": ms})
    return out, correct


def weights_digest(model):
    """(sha256 of every weight's bytes in order, float64 sum): equal digests = identical bits."""
    h, total = hashlib.sha256(), 0.0
    for w in model.get_weights():
        h.update(np.ascontiguousarray(w).tobytes())
        total += float(np.sum(w, dtype=np.float64))
    return h.hexdigest(), total


# ---- mirrored ----

def mirrored_strategy(tf, args):
    """The logical CPU devices and thread pools (before TF initialises its devices) and the
    strategy over them."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(args.replicas)])
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.replicas)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    strategy = tf.distribute.MirroredStrategy(devices=devices)
    if strategy.num_replicas_in_sync != args.replicas:
        sys.exit(f"keras_runner: MirroredStrategy built {strategy.num_replicas_in_sync} replicas "
                 f"on {devices}, not --replicas {args.replicas}")
    return strategy


def cross_device_ops_name(strategy):
    """The all-reduce the strategy picked, e.g. "CollectiveAllReduce (RING)" (private fields:
    "unknown" if a TF version renames them)."""
    ext = strategy.extended
    ops = getattr(ext, "_cross_device_ops", None)
    if ops is None:
        return "unknown"
    impl = getattr(getattr(ops, "_options", None), "implementation", None)
    return type(ops).__name__ + (f" ({impl.name})" if impl is not None else "")


def mirrors_identical(strategy, model):
    """Whether every variable's copies on the replicas' devices hold the same bits."""
    for v in model.weights:
        copies = [c.numpy() for c in strategy.experimental_local_results(v)]
        if any(c.tobytes() != copies[0].tobytes() for c in copies[1:]):
            return False
    return True


def run_mirrored(args):
    tf, keras = import_tf()
    strategy = mirrored_strategy(tf, args)
    x, y, first = step_batches(args, range(args.replicas))
    dataset = make_dataset(tf, x, y, args.batch * args.replicas)
    checks = {"replicas_built": strategy.num_replicas_in_sync,
              "devices": list(strategy.extended.worker_devices),
              "cross_device_ops": cross_device_ops_name(strategy),
              "intra_op_threads": args.threads, "inter_op_threads": args.replicas,
              "replica_slices_ok": slices_match(
                  strategy, strategy.experimental_distribute_dataset(dataset), first)}
    model, steps, more = train(keras, args, strategy, dataset, first)
    checks.update(more)
    checks["dtype_policy"] = keras.mixed_precision.global_policy().name
    checks["replicas_identical"] = mirrors_identical(strategy, model)
    allreduce = None
    if args.allreduce_bytes:
        allreduce, checks["allreduce_sum_ok"] = time_allreduce(
            tf, strategy, args.allreduce_bytes, args.allreduce_repeats)
    anchor_common.emit(args, anchor_common.result(
        args, f"tensorflow {tf.__version__} MirroredStrategy", versions(tf, keras), steps,
        checks, allreduce))


# ---- multiworker ----

def run_worker(args):
    """One MultiWorkerMirroredStrategy worker: trains on its replica's slice and writes its
    report to --worker-dir/worker-<index>.json."""
    die_with_parent()
    tf, keras = import_tf()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads // args.replicas)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    impl = getattr(tf.distribute.experimental.CommunicationImplementation, COMMUNICATION)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=impl))
    x, y, first = step_batches(args, [args.worker_index])
    dist = strategy.distribute_datasets_from_function(
        lambda ctx: make_dataset(tf, x, y, args.batch))
    report = {"replicas_built": strategy.num_replicas_in_sync,
              "devices": list(strategy.extended.worker_devices),
              "replica_slices_ok": slices_match(strategy, dist, first)}
    model, report["steps"], more = train(keras, args, strategy, dist, first)
    report.update(more)
    report["weights_sha256"], report["weights_sum"] = weights_digest(model)
    if args.allreduce_bytes:
        report["allreduce"], report["allreduce_sum_ok"] = time_allreduce(
            tf, strategy, args.allreduce_bytes, args.allreduce_repeats)
    report["versions"] = versions(tf, keras)
    path = os.path.join(args.worker_dir, f"worker-{args.worker_index}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(report, f)
    os.replace(path + ".tmp", path)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def die_with_parent():
    """A worker gets SIGKILL when the parent dies, so none is left waiting for its peers
    (SIGKILL: TensorFlow catches SIGTERM)."""
    parent = os.getppid()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        sys.exit("keras_runner: the parent process is gone")


def spawn_workers(args, tmp):
    ports = free_ports(args.replicas)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for i in range(args.replicas):
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": i}}))
        log = open(os.path.join(tmp, f"worker-{i}.log"), "w")
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--worker-index", str(i),
             "--worker-dir", tmp], env=env, stdout=log, stderr=subprocess.STDOUT))
        log.close()
    return procs


def last_line(path):
    with open(path, errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[-1] if lines else "no output"


def worker_failure(procs, tmp):
    for i, p in enumerate(procs):
        if p.poll() not in (None, 0):
            log = os.path.join(tmp, f"worker-{i}.log")
            return f"worker {i} exited with {p.returncode}: {last_line(log)}"
    return None


def wait_workers(procs, tmp):
    """Waits for every worker; on a failure or the timeout kills the others and exits."""
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    try:
        while not all(p.poll() == 0 for p in procs):
            failure = worker_failure(procs, tmp)
            if failure:
                sys.exit(f"keras_runner: {failure}")
            if time.monotonic() > deadline:
                sys.exit(f"keras_runner: workers still running after {WORKER_TIMEOUT_S} s")
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def combine(args, reports):
    """Worker 0's step times; the loss averaged over the workers (each logs the global mean)."""
    losses = np.array([[s["loss"] for s in r["steps"]] for r in reports])
    steps = [{"ms": s["ms"], "loss": float(losses[:, k].mean())}
             for k, s in enumerate(reports[0]["steps"])]
    checks = {"replicas_built": reports[0]["replicas_built"],
              "devices": [r["devices"] for r in reports],
              "communication": COMMUNICATION,
              "intra_op_threads": args.threads // args.replicas, "inter_op_threads": 1,
              "worker_ms": [[s["ms"] for s in r["steps"]] for r in reports],
              "worker_loss": losses.tolist(),
              "replica_slices_ok": all(r["replica_slices_ok"] for r in reports),
              "first_loss_direct": float(np.mean([r["first_loss_direct"] for r in reports])),
              "first_loss_logged": steps[0]["loss"],
              "weights_sum": reports[0]["weights_sum"],
              "replicas_identical": len({r["weights_sha256"] for r in reports}) == 1,
              "keras_optimizer": reports[0]["keras_optimizer"]}
    if args.allreduce_bytes:
        checks["allreduce_sum_ok"] = all(r["allreduce_sum_ok"] for r in reports)
    return steps, checks


def run_multiworker(args):
    missing = [m for m in ("tensorflow", "tf_keras") if importlib.util.find_spec(m) is None]
    if missing:  # fail here, with one line, rather than in every worker
        sys.exit(f"keras_runner: {', '.join(missing)} not installed; create the venv with "
                 f"bench/anchors/setup.sh and run with {anchor_common.venv_python()}")
    with tempfile.TemporaryDirectory(prefix="keras-runner-") as tmp:
        wait_workers(spawn_workers(args, tmp), tmp)
        reports = []
        for i in range(args.replicas):
            with open(os.path.join(tmp, f"worker-{i}.json")) as f:
                reports.append(json.load(f))
    if reports[0]["replicas_built"] != args.replicas:
        sys.exit(f"keras_runner: MultiWorkerMirroredStrategy built "
                 f"{reports[0]['replicas_built']} replicas, not --replicas {args.replicas}")
    steps, checks = combine(args, reports)
    v = reports[0]["versions"]
    anchor_common.emit(args, anchor_common.result(
        args, f"tensorflow {v['tensorflow']} MultiWorkerMirroredStrategy", v, steps, checks,
        reports[0].get("allreduce")))


def main():
    args = parse_args()
    try:
        if args.worker_index is not None:
            run_worker(args)
        elif args.strategy == "multiworker":
            run_multiworker(args)
        else:
            run_mirrored(args)
    except OSError as e:  # a missing --data or --weights file, an unwritable --json
        sys.exit(f"keras_runner: {e}")


if __name__ == "__main__":
    main()
