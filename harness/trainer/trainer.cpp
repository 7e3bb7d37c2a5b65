#include "harness/trainer/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/nvtx.h"
#include "core/units.h"
#include "harness/collectives/cluster.h"
#include "harness/collectives/failures.h"
#include "harness/collectives/rendezvous.h"
#include "harness/collectives/replica_comms.h"
#include "harness/telemetry/utilization.h"
#include "harness/trainer/replica.h"
#include "harness/trainer/results.h"
#include "harness/trainer/run_plan.h"
#include "harness/trainer/training_memory.h"
#include "models/kernel_settings.h"
#include "models/kernels.h"

namespace scalescope {
namespace {

// An idle process waits for the others' run for as long as it takes: a lost process is
// still noticed at once (its connections close), and a process that stops answering is
// noticed by the processes that run, which then exit and close theirs.
constexpr std::chrono::milliseconds kIdleWait = std::chrono::hours(24 * 7);

std::unique_ptr<ReplicaComms> make_comms(const TrainOptions& o, const RunPlan& plan,
                                         const Cluster* cluster) {
  const ProcessLayout& l = plan.layout;
  if (l.local == 0) return nullptr;
  // Across nodes, each node's replicas get a group of their own too: what crossing nodes
  // costs is measured against it.
  NodeGroup node;
  if (l.nodes > 1) {
    node = {.size = l.on_node,
            .first = l.node_first,
            .index = cluster->members()[static_cast<size_t>(cluster->rank())].node};
  }
  return std::make_unique<ReplicaComms>(
      plan.spec.kind, plan.replicas, l.first, l.local,
      std::chrono::milliseconds(o.collective_timeout_ms), l.processes,
      cluster != nullptr ? cluster->gloo_hostname() : std::string(),
      cluster != nullptr ? cluster->gloo_interface() : std::string(), node, o.cpu_shared_memory);
}

// What training at the run's batch plans per device, for an out-of-memory error: how far off
// the batch is, and the command that shows what holds it (when the run's samples are the
// model's default input, which the command plans).
std::string planned_peak_note(const RunPlan& plan, const TrainOptions& o) {
  int threads = 0;
  const TrainingMemory m =
      plan_training(plan.def, plan.data.sample_shape, plan.spec.kind,
                    BackendOptions{.cpu_threads = o.threads,
                                   .cpu_devices = std::max(1, plan.layout.sharing_cores),
                                   .plan_only = true},
                    plan.batch, o.optimizer, !plan.data.device_resident, &threads);
  std::string note = fmt::format("; training at {} samples per device plans a peak of {} on each",
                                 plan.batch, memory_size(m.total()));
  if (plan.data.sample_shape == plan.def.default_input) {
    note += fmt::format(
        " (`scalescope models {} --batch {} --devices {}:1 --threads {} --precision {} "
        "--optimizer {}{}` shows what holds it)",
        o.model, plan.batch, to_string(plan.spec.kind), threads, to_string(plan.precision),
        to_string(o.optimizer.kind),
        o.optimizer.momentum > 0.0f ? fmt::format(" --momentum {}", o.optimizer.momentum) : "");
  }
  return note;
}

// An out-of-memory error with planned_peak_note; any other error as it is. Only devices that
// plan without memory add it: a GPU's plan would need what just ran out.
std::exception_ptr with_planned_peak(std::exception_ptr error, const RunPlan& plan,
                                     const TrainOptions& o) {
  if (!can_plan_only(plan.spec.kind)) return error;
  try {
    std::rethrow_exception(error);
  } catch (const OutOfMemoryError& e) {
    std::string note;
    // On a thread of its own: planning sets the OpenMP threads of the thread it runs on.
    std::thread([&] {
      try {
        note = planned_peak_note(plan, o);
      } catch (const std::exception&) {  // the error as it came, then
      }
    }).join();
    if (note.empty()) return error;
    return std::make_exception_ptr(OutOfMemoryError(e, e.message() + note));
  } catch (...) {
    return error;
  }
}

// This process's replicas of a run: each a thread, their shared state and their errors.
class LocalRun {
 public:
  // Checks the options and opens what every replica needs; throws Error naming what is
  // wrong. `cluster`: the processes of a multi-process run (null: this process alone).
  LocalRun(const TrainOptions& o, const TrainHooks& hooks, const Cluster* cluster)
      : plan_(checked(o)),
        results_(plan_.replicas),
        sampling_(plan_.layout.local),
        // Progress is shown by the process of replica 0, as the run's result is.
        progress_(plan_.layout.local, plan_.layout.first == 0 ? hooks.on_step : nullptr),
        kernel_settings_(KernelSettings{.precision = plan_.precision,
                                        .determinism = determinism_of(o),
                                        .conv_search = o.conv_search,
                                        .fuse_layers = o.fusion}),
        comms_(make_comms(o, plan_, cluster)),
        options_(o),
        hooks_(hooks) {
    const std::string note = kernel_backend(plan_.spec.kind).precision_note(plan_.precision);
    if (!note.empty()) SS_LOG_WARN("{}: {}", to_string(plan_.precision), note);
  }
  ~LocalRun() { join(); }
  LocalRun(const LocalRun&) = delete;
  LocalRun& operator=(const LocalRun&) = delete;

  // Whether this process hosts replicas of the run.
  ReplicaComms* comms() const { return comms_.get(); }
  const RunPlan& plan() const { return plan_; }
  RunResults& results() { return results_; }

  void start() {
    if (comms_ == nullptr) return;
    shared_.emplace(
        ReplicaShared{options_, hooks_, plan_, *comms_, now_ns(), sampling_, results_, progress_});
    for (int j = 0; j < plan_.layout.local; ++j) {
      threads_.emplace_back([this, rank = plan_.layout.first + j] { run_replica(rank); });
    }
  }
  // Waits for the replicas; then this process's sampled utilisation joins the results.
  void join() {
    for (std::thread& t : threads_) t.join();
    if (threads_.empty()) return;
    threads_.clear();
    for (const GpuUtilizationSummary& u : sampling_.summaries()) {
      results_.gpu_utilization.push_back(to_report(u));
    }
  }
  // The cause among the replicas' errors, or null. REQUIRES: joined.
  std::exception_ptr error() const { return errors_.empty() ? nullptr : cause_of(errors_); }

 private:
  static const TrainOptions& checked(const TrainOptions& o) {
    validate(o);
    return o;
  }

  static GpuUtilization to_report(const GpuUtilizationSummary& u) {
    return {.host = "",
            .pci_bus_id = u.pci_bus_id,
            .samples = u.samples,
            .failed_samples = u.failed_samples,
            .mean_gpu_util_percent = u.mean_gpu_util_percent,
            .max_gpu_util_percent = u.max_gpu_util_percent,
            .mean_memory_util_percent = u.mean_memory_util_percent,
            .max_memory_used_bytes = static_cast<int64_t>(u.max_memory_used_bytes),
            .error = u.error};
  }

  void run_replica(int rank) {
    set_thread_rank(rank);
    nvtx::name_current_thread(fmt::format("scalescope replica {}", rank).c_str());
    try {
      Replica replica(*shared_, rank);
      try {
        replica.train();
      } catch (...) {
        // Before the replica's destructors run: they may wait for work that peers will
        // never match, which the aborts make return (the group's: the peers' host waits;
        // the replica's own: its queued collectives).
        fail(rank, std::current_exception());
        replica.abort_collectives(fmt::format("replica {} stopped: the run failed", rank));
      }
    } catch (...) {
      fail(rank, std::current_exception());
    }
  }

  // The other replicas then fail in their next collective (the lost peer closes its
  // connections, or the abort stops them) or at its timeout; which error is reported is
  // chosen by error().
  void fail(int rank, std::exception_ptr error) {
    {
      std::lock_guard lock(error_mutex_);
      errors_.push_back(std::move(error));
    }
    comms_->finished(rank);
    comms_->abort(fmt::format("replica {} failed", rank));
  }

  RunPlan plan_;
  RunResults results_;
  UtilizationSampling sampling_;
  StepProgress progress_;
  // Process-wide and read when kernels are built: every replica's kernels alike, and what
  // the process had before once the run is over.
  ScopedKernelSettings kernel_settings_;
  std::unique_ptr<ReplicaComms> comms_;
  const TrainOptions& options_;
  const TrainHooks& hooks_;
  std::optional<ReplicaShared> shared_;  // while replicas run
  std::mutex error_mutex_;
  std::vector<std::exception_ptr> errors_;  // guarded by error_mutex_, in the order they came
  std::vector<std::thread> threads_;
};

RunReport train_alone(const TrainOptions& o, const TrainHooks& hooks) {
  LocalRun run(o, hooks, nullptr);
  nvtx::initialize();  // before threads make ranges: NVTX's own initialisation is unguarded
  run.start();
  run.join();
  if (const std::exception_ptr error = run.error()) {
    std::rethrow_exception(with_planned_peak(error, run.plan(), o));
  }
  return assemble_report(o, run.plan(), run.results(), nullptr);
}

// Every process calls it with the same options; each returns the whole run's report.
RunReport train_across(const TrainOptions& o, const TrainHooks& hooks, Cluster& cluster) {
  const std::chrono::milliseconds timeout(o.collective_timeout_ms);
  std::unique_ptr<LocalRun> run;
  std::exception_ptr setup_error;
  try {
    run = std::make_unique<LocalRun>(o, hooks, &cluster);
  } catch (...) {
    // The others wait for this process's part of the rendezvous: it tells them instead.
    setup_error = std::current_exception();
  }
  nvtx::initialize();
  ReplicaComms* comms = run ? run->comms() : nullptr;
  if (run) run->start();
  run_rendezvous(cluster, comms, setup_error, timeout);  // (~LocalRun joins if it throws)
  if (run) run->join();

  nlohmann::json mine = {{"status", "idle"}};
  if (setup_error) {
    mine = error_message(setup_error);
  } else if (const std::exception_ptr error = run->error()) {
    mine = error_message(with_planned_peak(error, run->plan(), o));
  } else if (comms != nullptr) {
    const ProcessLayout& l = run->plan().layout;
    mine = results_to_json(run->results(), l.first, l.local, l.first == 0);
    mine["status"] = "ok";
  }
  const std::vector<nlohmann::json> all = exchange_messages(
      cluster, mine, comms != nullptr ? timeout : kIdleWait, "gathering a run's results");
  throw_first_error(all, cluster);
  if (setup_error) std::rethrow_exception(setup_error);  // (every process failed alike)
  RunResults& results = run->results();
  results.gpu_utilization.clear();  // every process's, this one's included, from the messages
  for (size_t p = 0; p < all.size(); ++p) {
    if (all[p].at("status") != "ok") continue;
    add_results(results, all[p], cluster.members()[p].hostname,
                fmt::format("the results of process {}", cluster.describe(static_cast<int>(p))));
  }
  return assemble_report(o, run->plan(), results, &cluster);
}

}  // namespace

RunReport train(const TrainOptions& o, const TrainHooks& hooks) {
  Cluster* cluster = o.cluster != nullptr && o.cluster->multi_process() ? o.cluster : nullptr;
  return cluster == nullptr ? train_alone(o, hooks) : train_across(o, hooks, *cluster);
}

}  // namespace scalescope
