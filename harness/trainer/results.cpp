#include "harness/trainer/results.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "harness/collectives/cluster.h"
#include "models/kernels.h"
#include "reports/json_fields.h"

namespace scalescope {
namespace {

// Replicas send their steps' bucket intervals too (timelines of the whole run).
nlohmann::json phases_with_buckets(const PhaseTimes& p) {
  return to_json(p, /*with_buckets=*/true);
}

}  // namespace

template <>
struct JsonFields<ReplicaRecord> {
  using R = ReplicaRecord;
  static constexpr auto kFields =
      std::make_tuple(list_field("phases", &R::phases, phases_with_buckets, phase_times_from_json),
                      field("losses", &R::losses), field("grad_sq_local", &R::grad_sq_local),
                      field("grad_sq_global", &R::grad_sq_global),
                      field("peak_memory_bytes", &R::peak_memory_bytes),
                      field("measured_device_allocations", &R::measured_allocations),
                      field("library_memory_bytes", &R::library_memory_bytes),
                      field("host_wait_overshoot_ms", &R::wait_overshoot_ms));
};

template <>
struct JsonFields<GroupRecord> {
  using G = GroupRecord;
  static constexpr auto kFields = std::make_tuple(
      field("steps", &G::steps), field("warmup_steps", &G::warmup_steps),
      field("warmup_settled", &G::warmup_settled), field("bucket_ms", &G::bucket_ms),
      field("bucket_bytes", &G::bucket_bytes), field("evals", &G::evals),
      field("target_step", &G::target_step), field("target_wall_ms", &G::target_wall_ms),
      field("lrs", &G::lrs), field("consistency_checks", &G::consistency_checks),
      field("allreduce_split", &G::allreduce_split),
      field("threads_per_device", &G::threads_per_device),
      field("communication_threads_per_device", &G::communication_threads_per_device),
      field("kernels", &G::kernels), field("layer_profile", &G::layer_profile),
      field("loss_scaling", &G::loss_scaling));
};

StepProgress::StepProgress(int replicas, std::function<void(const StepRecord&)> hook)
    : replicas_(replicas), hook_(std::move(hook)) {}

void StepProgress::add(int local, int64_t step, const PhaseTimes& phases, double loss) {
  if (!hook_) return;
  const std::lock_guard lock(mutex_);
  Pending& p = pending_[step];
  p.phases.resize(static_cast<size_t>(replicas_));
  p.phases[static_cast<size_t>(local)] = phases;
  p.loss_sum += loss;
  if (++p.added < replicas_) return;
  StepRecord r;
  r.step = step;
  r.loss = p.loss_sum / replicas_;
  r.replicas = std::move(p.phases);
  set_group_times(r);
  pending_.erase(step);
  hook_(r);
}

nlohmann::json results_to_json(const RunResults& results, int first, int local, bool with_group) {
  nlohmann::json replicas = nlohmann::json::array();
  for (int rank = first; rank < first + local; ++rank) {
    nlohmann::json replica = write_fields(results.replicas[static_cast<size_t>(rank)]);
    replica["rank"] = rank;
    replicas.push_back(std::move(replica));
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuUtilization& u : results.gpu_utilization) gpus.push_back(to_json(u));
  nlohmann::json m = {{"replicas", std::move(replicas)}, {"gpu_utilization", std::move(gpus)}};
  if (with_group) m["group"] = write_fields(results.group);
  return m;
}

void add_results(RunResults& results, const nlohmann::json& message, const std::string& host,
                 const std::string& what) {
  const JsonReader r(message, what);
  const nlohmann::json& replicas = r.array("replicas");
  for (size_t i = 0; i < replicas.size(); ++i) {
    const JsonReader replica = r.element("replicas", i);
    const int rank = replica.int32("rank");
    SS_CHECK(rank >= 0 && static_cast<size_t>(rank) < results.replicas.size(),
             "{} holds the records of replica {} of {}", replica.name("rank"), rank,
             results.replicas.size());
    results.replicas[static_cast<size_t>(rank)] = read_fields<ReplicaRecord>(replica);
  }
  const nlohmann::json& gpus = r.array("gpu_utilization");
  for (size_t i = 0; i < gpus.size(); ++i) {
    GpuUtilization gpu = gpu_utilization_from_json(r.element("gpu_utilization", i));
    gpu.host = host;  // the sender's, as this process knows it
    results.gpu_utilization.push_back(std::move(gpu));
  }
  if (r.has("group")) results.group = read_fields<GroupRecord>(r.object("group"));
}

namespace {

// Step `step`'s squared gradient norms, when the replicas measured them.
std::optional<StepGradNorms> grad_norms(const RunResults& results, size_t step) {
  if (results.replicas.front().grad_sq_local.empty()) return std::nullopt;
  StepGradNorms norms;
  for (size_t rank = 0; rank < results.replicas.size(); ++rank) {
    const ReplicaRecord& replica = results.replicas[rank];
    SS_CHECK(replica.grad_sq_local.size() == replica.losses.size() &&
                 replica.grad_sq_global.size() == replica.losses.size(),
             "replica {} recorded gradient norms of {} of its {} steps", rank,
             replica.grad_sq_local.size(), replica.losses.size());
    norms.local.push_back(replica.grad_sq_local[step]);
    norms.global += replica.grad_sq_global[step];
  }
  return norms;
}

// The step records of the run, every replica's phases side by side.
std::vector<StepRecord> step_records(const RunResults& results) {
  const GroupRecord& g = results.group;
  std::vector<StepRecord> steps;
  for (int64_t i = 0; i < g.steps; ++i) {
    const auto step = static_cast<size_t>(i);
    StepRecord r;
    r.step = i + 1;
    r.lr = g.lrs[step];
    r.bucket_ms = g.bucket_ms[step];
    double loss = 0.0;
    for (size_t rank = 0; rank < results.replicas.size(); ++rank) {
      const ReplicaRecord& replica = results.replicas[rank];
      SS_CHECK(static_cast<int64_t>(replica.phases.size()) == g.steps &&
                   static_cast<int64_t>(replica.losses.size()) == g.steps,
               "replica {} recorded {} of the run's {} steps", rank, replica.phases.size(),
               g.steps);
      r.replicas.push_back(replica.phases[step]);
      loss += replica.losses[step];
    }
    // Equal shards: the mean of the replicas' means is the global mean.
    r.loss = loss / static_cast<double>(results.replicas.size());
    r.grad_norms = grad_norms(results, step);
    set_group_times(r);
    steps.push_back(std::move(r));
  }
  return steps;
}

std::optional<ClusterInfo> cluster_info(const RunPlan& plan, const Cluster* cluster) {
  if (plan.layout.processes == 1 || cluster == nullptr) return std::nullopt;
  ClusterInfo c;
  c.processes = plan.layout.processes;
  c.replicas_per_process = plan.layout.replicas_per_process;
  for (const ClusterMember& m : cluster->members()) {
    if (m.rank < c.processes) c.members.push_back(m);
  }
  for (const ClusterMember& m : c.members) c.nodes = std::max(c.nodes, m.node + 1);
  return c;
}

// Whether and when the run reached its target, from the evaluation replica 0 recorded.
TargetRecord target_record(const TrainOptions& o, const RunPlan& plan, const GroupRecord& g,
                           const RunReport& report) {
  TargetRecord t;
  t.metric = o.until_accuracy > 0.0 ? "accuracy" : "loss";
  t.value = o.until_accuracy > 0.0 ? o.until_accuracy : o.until_loss;
  t.reached = g.target_step > 0;
  t.step = t.reached ? g.target_step : g.steps;
  t.samples = t.step * report.global_batch();
  t.epochs = static_cast<double>(t.samples) / static_cast<double>(plan.data.train->size());
  for (int64_t i = 0; i < t.step; ++i) t.train_ms += report.steps[static_cast<size_t>(i)].step_ms;
  // The host's clock and the devices' event times may disagree by a little.
  t.wall_ms = std::max(g.target_wall_ms, t.train_ms);
  return t;
}

}  // namespace

RunReport assemble_report(const TrainOptions& o, const RunPlan& plan, RunResults& results,
                          const Cluster* cluster) {
  const GroupRecord& g = results.group;
  RunReport report;
  report.command_line = o.command_line;
  report.model = plan.def.name;
  report.params = plan.summary.params;
  report.forward_flops_per_sample = plan.summary.forward_flops;
  report.input_shape = plan.data.sample_shape.to_string();
  report.devices = to_string(plan.spec);
  report.threads_per_device = g.threads_per_device;
  report.communication_threads_per_device = g.communication_threads_per_device;
  report.replicas = plan.replicas;
  report.batch = plan.batch;
  report.accumulation = o.accumulation;
  report.optimizer = to_string(o.optimizer.kind);
  report.lr = o.optimizer.lr;
  report.lr_scaling = to_string(o.lr_scaling);
  report.lr_warmup_steps = o.lr_warmup_steps;
  report.seed = o.seed;
  report.noise_scale = o.noise_scale;
  report.config = train_config_json(o);
  report.data = plan.data.train->describe();
  report.overlap = o.overlap;
  report.prefetch = o.prefetch;
  report.fusion = o.fusion;
  report.grad_compression = effective_compression(o, plan.replicas);
  report.bucket_bytes = g.bucket_bytes;
  report.consistency_checks = g.consistency_checks;
  report.warmup_steps = g.warmup_steps;
  report.warmup_settled = g.warmup_settled;
  for (const ReplicaRecord& r : results.replicas) {
    report.peak_memory_bytes.push_back(r.peak_memory_bytes);
    report.measured_device_allocations.push_back(r.measured_allocations);
    report.host_wait_overshoot_ms.push_back(r.wait_overshoot_ms);
    report.library_memory_bytes.push_back(r.library_memory_bytes);
  }
  report.allreduce_split = g.allreduce_split;
  report.precision = plan.precision;
  report.precision_note = kernel_backend(plan.spec.kind).precision_note(plan.precision);
  report.loss_scaling = g.loss_scaling;
  if (kernel_backend(plan.spec.kind).has_tf32()) report.tf32 = plan.precision == Precision::kTf32;
  if (kernel_backend(plan.spec.kind).has_nondeterministic()) {
    report.deterministic = determinism_of(o) != Determinism::kOff;
    report.determinism = to_string(determinism_of(o));
    report.conv_search = to_string(o.conv_search);
  }
  report.kernels = g.kernels;
  report.layer_profile = g.layer_profile;
  report.evals = g.evals;
  report.cluster = cluster_info(plan, cluster);
  report.steps = step_records(results);
  if (o.has_target()) report.target = target_record(o, plan, g, report);
  report.gpu_utilization = std::move(results.gpu_utilization);
  return report;
}

}  // namespace scalescope
