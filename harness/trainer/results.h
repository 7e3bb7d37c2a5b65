// What a run's replicas record, gathered from every process of the run, and the run's report
// assembled from it. Results cross processes as the run report's own named records.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "harness/trainer/run_plan.h"
#include "reports/run_report.h"

namespace scalescope {

class Cluster;

// One replica's record, written by its own thread only.
struct ReplicaRecord {
  std::vector<PhaseTimes> phases;  // per step
  std::vector<double> losses;      // per step: the replica's mean loss
  // --noise-scale, per step: the squared norm of the replica's micro-batch gradient (as its
  // mean over the micro-batch), and of its 1/N slice of the averaged gradient (the replicas'
  // slices add up to the averaged gradient's). Empty without.
  std::vector<double> grad_sq_local;
  std::vector<double> grad_sq_global;
  int64_t peak_memory_bytes = 0;
  int64_t measured_allocations = 0;  // device allocations during the measured steps
  int64_t library_memory_bytes = 0;  // the device's memory held outside the allocator, at most
  // Median over the measured steps: from a step's end on the device to the host's return
  // from waiting for it.
  double wait_overshoot_ms = 0.0;
};

// What replica 0 alone keeps for the whole group.
struct GroupRecord {
  int64_t steps = 0;
  int64_t warmup_steps = 0;
  bool warmup_settled = true;
  std::vector<std::vector<double>> bucket_ms;  // [step][bucket]
  std::vector<int64_t> bucket_bytes;
  std::vector<EvalRecord> evals;
  // Runs with a target: the step whose evaluation reached it (0: none did), and when that
  // evaluation (or, when none did, the run's last one) ended, ms after the first step began.
  int64_t target_step = 0;
  double target_wall_ms = 0.0;
  std::vector<double> lrs;  // per step
  int64_t consistency_checks = 0;
  std::optional<AllReduceSplit> allreduce_split;  // runs across nodes
  int threads_per_device = 0;
  int communication_threads_per_device = 0;       // RunReport's
  std::vector<KernelChoiceRecord> kernels;        // as replica 0 planned them
  std::vector<LayerTimeRecord> layer_profile;     // --profile-layers: replica 0's layers
  std::optional<LossScalingRecord> loss_scaling;  // fp16 runs, as replica 0 scaled
};

struct RunResults {
  explicit RunResults(int replicas) : replicas(static_cast<size_t>(replicas)) {}
  std::vector<ReplicaRecord> replicas;  // [rank], of the whole run
  GroupRecord group;
  std::vector<GpuUtilization> gpu_utilization;  // every process's sampled GPUs
};

// The progress hook's view of each step (TrainHooks::on_step), from every replica of this
// process: once the last of them recorded a step, the step's loss as the mean of theirs and its
// times as the slowest one's, as the report will have them (in a run of one process, the run's
// own figures: equal shards make the mean of the means the global batch's). Replicas call it
// from their threads; the hook runs under its lock, so its calls come one at a time, in order.
class StepProgress {
 public:
  StepProgress(int replicas, std::function<void(const StepRecord&)> hook);
  void add(int local, int64_t step, const PhaseTimes& phases, double loss);

 private:
  struct Pending {
    std::vector<PhaseTimes> phases;
    double loss_sum = 0.0;
    int added = 0;
  };
  const int replicas_;
  const std::function<void(const StepRecord&)> hook_;
  std::mutex mutex_;
  std::map<int64_t, Pending> pending_;  // replicas may be a step apart
};

// The records of replicas [first, first + local), the group's when `with_group`, and this
// process's GPU utilisation, for the other processes.
nlohmann::json results_to_json(const RunResults& results, int first, int local, bool with_group);
// Adds what results_to_json wrote in the process on `host`. Strict: throws Error naming a
// key that is missing or mistyped (`what` names the sender).
void add_results(RunResults& results, const nlohmann::json& message, const std::string& host,
                 const std::string& what);

// The run's report. Throws Error when a replica recorded fewer steps than the run had.
RunReport assemble_report(const TrainOptions& options, const RunPlan& plan, RunResults& results,
                          const Cluster* cluster);

}  // namespace scalescope
