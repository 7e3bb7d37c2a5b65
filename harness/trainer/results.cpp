#include "harness/trainer/results.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "harness/collectives/cluster.h"
#include "models/kernels.h"
#include "reports/json_reader.h"

namespace scalescope {
namespace {

nlohmann::json replica_json(const ReplicaRecord& r, int rank) {
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseTimes& p : r.phases) phases.push_back(to_json(p, /*with_buckets=*/true));
  return {{"rank", rank},
          {"phases", std::move(phases)},
          {"losses", r.losses},
          {"grad_sq_local", r.grad_sq_local},
          {"grad_sq_global", r.grad_sq_global},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"measured_device_allocations", r.measured_allocations},
          {"host_wait_overshoot_ms", r.wait_overshoot_ms},
          {"library_memory_bytes", r.library_memory_bytes}};
}

void read_replica(RunResults& results, const JsonReader& r) {
  const int rank = r.int32("rank");
  SS_CHECK(rank >= 0 && static_cast<size_t>(rank) < results.replicas.size(),
           "{} holds the records of replica {} of {}", r.name("rank"), rank,
           results.replicas.size());
  ReplicaRecord& record = results.replicas[static_cast<size_t>(rank)];
  record.phases.clear();
  const nlohmann::json& phases = r.array("phases");
  for (size_t i = 0; i < phases.size(); ++i) {
    record.phases.push_back(phase_times_from_json(r.element("phases", i)));
  }
  record.losses = r.numbers("losses");
  record.grad_sq_local = r.numbers("grad_sq_local");
  record.grad_sq_global = r.numbers("grad_sq_global");
  record.peak_memory_bytes = r.int64("peak_memory_bytes");
  record.measured_allocations = r.int64("measured_device_allocations");
  record.wait_overshoot_ms = r.number("host_wait_overshoot_ms");
  record.library_memory_bytes = r.int64("library_memory_bytes");
}

nlohmann::json group_json(const GroupRecord& g) {
  nlohmann::json evals = nlohmann::json::array();
  for (const EvalRecord& e : g.evals) evals.push_back(to_json(e));
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelChoiceRecord& k : g.kernels) kernels.push_back(to_json(k));
  return {{"steps", g.steps},
          {"warmup_steps", g.warmup_steps},
          {"warmup_settled", g.warmup_settled},
          {"bucket_ms", g.bucket_ms},
          {"bucket_bytes", g.bucket_bytes},
          {"evals", std::move(evals)},
          {"target_step", g.target_step},
          {"target_wall_ms", g.target_wall_ms},
          {"lrs", g.lrs},
          {"consistency_checks", g.consistency_checks},
          {"allreduce_split", g.allreduce_split ? to_json(*g.allreduce_split) : nullptr},
          {"threads_per_device", g.threads_per_device},
          {"kernels", std::move(kernels)}};
}

GroupRecord read_group(const JsonReader& r) {
  GroupRecord g;
  g.steps = r.int64("steps");
  g.warmup_steps = r.int64("warmup_steps");
  g.warmup_settled = r.boolean("warmup_settled");
  const nlohmann::json& bucket_ms = r.array("bucket_ms");
  for (size_t i = 0; i < bucket_ms.size(); ++i) {
    const nlohmann::json& step = bucket_ms[i];
    SS_CHECK(step.is_array() && std::all_of(step.begin(), step.end(),
                                            [](const nlohmann::json& v) { return v.is_number(); }),
             "'{}[{}]' must be a list of numbers (one time per bucket), not {}",
             r.name("bucket_ms"), i, dump_json(step).substr(0, 60));
    g.bucket_ms.push_back(step.get<std::vector<double>>());
  }
  g.bucket_bytes = r.int64s("bucket_bytes");
  const nlohmann::json& evals = r.array("evals");
  for (size_t i = 0; i < evals.size(); ++i)
    g.evals.push_back(eval_from_json(r.element("evals", i)));
  g.target_step = r.int64("target_step");
  g.target_wall_ms = r.number("target_wall_ms");
  g.lrs = r.numbers("lrs");
  g.consistency_checks = r.int64("consistency_checks");
  if (!r.at("allreduce_split").is_null()) {
    g.allreduce_split = split_from_json(r.object("allreduce_split"));
  }
  g.threads_per_device = r.int32("threads_per_device");
  const nlohmann::json& kernels = r.array("kernels");
  for (size_t i = 0; i < kernels.size(); ++i)
    g.kernels.push_back(kernel_choice_from_json(r.element("kernels", i)));
  return g;
}

}  // namespace

nlohmann::json results_to_json(const RunResults& results, int first, int local, bool with_group) {
  nlohmann::json replicas = nlohmann::json::array();
  for (int rank = first; rank < first + local; ++rank) {
    replicas.push_back(replica_json(results.replicas[static_cast<size_t>(rank)], rank));
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuUtilization& u : results.gpu_utilization) gpus.push_back(to_json(u));
  nlohmann::json m = {{"replicas", std::move(replicas)}, {"gpu_utilization", std::move(gpus)}};
  if (with_group) m["group"] = group_json(results.group);
  return m;
}

void add_results(RunResults& results, const nlohmann::json& message, const std::string& host,
                 const std::string& what) {
  const JsonReader r(message, what);
  const nlohmann::json& replicas = r.array("replicas");
  for (size_t i = 0; i < replicas.size(); ++i) read_replica(results, r.element("replicas", i));
  const nlohmann::json& gpus = r.array("gpu_utilization");
  for (size_t i = 0; i < gpus.size(); ++i) {
    GpuUtilization gpu = gpu_utilization_from_json(r.element("gpu_utilization", i));
    gpu.host = host;  // the sender's, as this process knows it
    results.gpu_utilization.push_back(std::move(gpu));
  }
  if (r.has("group")) results.group = read_group(r.object("group"));
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

std::optional<ClusterInfo> cluster_info(const Plan& plan, const Cluster* cluster) {
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
TargetRecord target_record(const TrainOptions& o, const Plan& plan, const GroupRecord& g,
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

RunReport assemble_report(const TrainOptions& o, const Plan& plan, RunResults& results,
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
  report.replicas = plan.replicas;
  report.batch = plan.batch;
  report.accumulation = o.accumulation;
  report.optimizer = to_string(o.optimizer.kind);
  report.lr = o.optimizer.lr;
  report.lr_scaling = to_string(o.lr_scaling);
  report.lr_warmup_steps = o.lr_warmup_steps;
  report.seed = o.seed;
  report.noise_scale = o.noise_scale;
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
  if (kernel_backend(plan.spec.kind).has_tf32()) report.tf32 = o.tf32;
  if (kernel_backend(plan.spec.kind).has_nondeterministic()) {
    report.deterministic = determinism_of(o) != Determinism::kOff;
    report.determinism = to_string(determinism_of(o));
  }
  report.kernels = g.kernels;
  report.evals = g.evals;
  report.cluster = cluster_info(plan, cluster);
  report.steps = step_records(results);
  if (o.has_target()) report.target = target_record(o, plan, g, report);
  report.gpu_utilization = std::move(results.gpu_utilization);
  return report;
}

}  // namespace scalescope
