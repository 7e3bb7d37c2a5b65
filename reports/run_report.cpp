#include "reports/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/enum_names.h"
#include "core/fs.h"
#include "reports/analysis/stats.h"

namespace scalescope {

namespace {

constexpr auto kCompressionNames = enum_names<GradCompression>("none", "fp16", "bf16");

}  // namespace

std::string to_string(GradCompression compression) {
  return std::string(kCompressionNames(compression));
}

GradCompression parse_grad_compression(const std::string& name) {
  const std::optional<GradCompression> c = kCompressionNames.parse(name);
  SS_CHECK(c.has_value(), "gradient compression '{}': unknown; use {}", name,
           kCompressionNames.accepted());
  return *c;
}

std::string compression_text(GradCompression compression) {
  if (compression == GradCompression::kNone) return "";
  return fmt::format("{} gradients", kCompressionNames(compression));
}

std::vector<std::string> grad_compression_names() {
  const auto& names = kCompressionNames.names();
  return {names.begin(), names.end()};
}

int64_t wire_bytes_per_gradient(GradCompression compression) {
  return compression == GradCompression::kNone ? 4 : 2;
}

int64_t allreduce_bytes(const std::vector<int64_t>& bucket_bytes) {
  int64_t total = 0;
  for (const int64_t b : bucket_bytes) total += b;
  return total;
}

void set_group_times(StepRecord& r) {
  const PhaseTimes& slowest = slowest_replica(r.replicas);
  r.step_ms = slowest.step_ms;
  r.input_ms = slowest.exposed_ms(PhaseKind::kInput);
}

GradSqNorms StepGradNorms::norms() const {
  return {.small = mean(local), .big = global};
}

namespace {

// The steps' norms, from the first step on (the moving averages start there).
std::vector<GradSqNorms> step_norms(const RunReport& r) {
  std::vector<GradSqNorms> norms;
  for (const StepRecord& s : r.steps) {
    if (s.grad_norms) norms.push_back(s.grad_norms->norms());
  }
  return norms;
}

size_t measured_from(const RunReport& report) {
  return static_cast<size_t>(
      report.warmup_steps < static_cast<int64_t>(report.steps.size()) ? report.warmup_steps : 0);
}

// The run's "noise_scale": over the measured steps, with the last step's smoothed B_noise.
// REQUIRES: a norm per step.
nlohmann::json noise_scale_json(const RunReport& r, std::span<const GradSqNorms> norms,
                                std::span<const NoiseStep> smoothed) {
  nlohmann::json j = to_json(summarize_noise(norms.subspan(measured_from(r)), r.noise_batches()));
  j["smoothed_b_noise"] = to_json(smoothed.back().smoothed)["b_noise"];
  return j;
}

nlohmann::json step_json(const StepRecord& s, const NoiseStep* noise) {
  nlohmann::json replicas = nlohmann::json::array();
  for (const PhaseTimes& p : s.replicas) replicas.push_back(to_json(p, false));
  nlohmann::json j = {{"step", s.step},
                      {"loss", s.loss},
                      {"step_ms", s.step_ms},
                      {"input_ms", s.input_ms},
                      {"lr", s.lr},
                      {"bucket_ms", s.bucket_ms},
                      {"replicas", std::move(replicas)}};
  if (s.grad_norms && noise != nullptr) {
    j["grad_sq_norms"] = {{"local", s.grad_norms->local},
                          {"global", s.grad_norms->global},
                          {"estimate", to_json(noise->raw)},
                          {"smoothed", to_json(noise->smoothed)}};
  }
  return j;
}

}  // namespace

RunSummary summarize(const RunReport& report) {
  RunSummary s;
  if (report.steps.empty()) return s;
  const size_t skip = measured_from(report);
  std::vector<double> times;
  std::vector<double> compute;
  for (size_t i = skip; i < report.steps.size(); ++i) {
    times.push_back(report.steps[i].step_ms);
    compute.push_back(report.steps[i].step_ms - report.steps[i].input_ms);
  }
  s.compute_ms_median = median(compute);
  s.measured_steps = static_cast<int64_t>(times.size());
  s.step_ms_median = median(times);
  s.step_ms_p10 = percentile(times, 0.1);
  s.step_ms_p90 = percentile(times, 0.9);
  s.samples_per_second = s.step_ms_median > 0.0
                             ? static_cast<double>(report.global_batch()) * 1e3 / s.step_ms_median
                             : 0.0;
  s.first_loss = report.steps.front().loss;
  s.last_loss = report.steps.back().loss;
  return s;
}

nlohmann::json to_json(const GpuUtilization& u) {
  return write_fields(u);
}

GpuUtilization gpu_utilization_from_json(const JsonReader& r) {
  return read_fields<GpuUtilization>(r);
}

nlohmann::json to_json(const KernelChoiceRecord& k) {
  return write_fields(k);
}

KernelChoiceRecord kernel_choice_from_json(const JsonReader& r) {
  return read_fields<KernelChoiceRecord>(r);
}

void JsonFields<KernelChoiceRecord>::check(const KernelChoiceRecord& k, const JsonReader& r) {
  if (r.has("workspace_limit_rule")) (void)r.int64("workspace_limit_bytes");
  if (r.has("workspace_limit_bytes")) (void)r.string("workspace_limit_rule");
  SS_CHECK(!r.has("measured_ms") || k.measured_ms >= 0, "{} {} must not be negative",
           r.name("measured_ms"), k.measured_ms);
  SS_CHECK(k.layer >= 0, "{} {} must not be negative", r.name("layer"), k.layer);
  SS_CHECK(k.workspace_bytes >= 0 && k.workspace_limit_bytes >= 0,
           "{} {} and {} {} must not be negative", r.name("workspace_bytes"), k.workspace_bytes,
           r.name("workspace_limit_bytes"), k.workspace_limit_bytes);
}

std::vector<std::string> fallback_passes(const std::vector<KernelChoiceRecord>& kernels) {
  std::vector<std::string> passes;
  for (const KernelChoiceRecord& k : kernels) {
    if (!k.fallback.empty())
      passes.push_back(fmt::format("{} {} ({})", k.layer_name, k.pass, k.algorithm));
  }
  return passes;
}

std::string fallback_line(const RunReport& report) {
  const std::vector<std::string> passes = fallback_passes(report.kernels);
  if (passes.empty()) return "";
  return fmt::format("{}: {} (the run report says why; --deterministic refuses instead)\n",
                     kFallbackLead, fmt::join(passes, "; "));
}

std::string loss_scaling_line(const RunReport& report) {
  if (!report.loss_scaling) return "";
  const LossScalingRecord& s = *report.loss_scaling;
  const size_t skipped = s.skipped_steps.size();
  return fmt::format("loss scaling: scale {:g} after the last step (from {:g}); {}\n",
                     s.final_scale, s.initial_scale,
                     skipped == 0
                         ? std::string("no step skipped")
                         : fmt::format("{} step{} skipped for overflow ({})", skipped,
                                       skipped == 1 ? "" : "s", fmt::join(s.skipped_steps, ", ")));
}

nlohmann::json to_json(const TargetRecord& t) {
  return write_fields(t);
}

std::string target_text(const TargetRecord& t) {
  return fmt::format(
      "{} {:.4g} {} ({:.2f} epochs, {} samples) after {:.2f} s of training ({:.2f} s wall)",
      t.metric, t.value,
      t.reached ? fmt::format("reached at step {}", t.step)
                : fmt::format("not reached in {} steps", t.step),
      t.epochs, t.samples, t.train_ms / 1e3, t.wall_ms / 1e3);
}

TargetRecord target_from_json(const JsonReader& r) {
  return read_fields<TargetRecord>(r);
}

void JsonFields<TargetRecord>::check(const TargetRecord& t, const JsonReader& r) {
  SS_CHECK(t.metric == "accuracy" || t.metric == "loss", "{} '{}' is not accuracy or loss",
           r.name("metric"), t.metric);
  SS_CHECK(t.step >= 1 && t.samples >= 1 && t.epochs > 0.0,
           "{}: {} steps, {} samples and {} epochs must be positive", r.name("step"), t.step,
           t.samples, t.epochs);
  SS_CHECK(t.train_ms >= 0.0 && t.wall_ms >= t.train_ms,
           "{}: a wall time of {} ms cannot be below the {} ms of training", r.name("wall_ms"),
           t.wall_ms, t.train_ms);
}

nlohmann::json to_json(const EvalRecord& e) {
  return write_fields(e);
}

EvalRecord eval_from_json(const JsonReader& r) {
  return read_fields<EvalRecord>(r);
}

namespace {

// What the options came to: the run's facts that are no option.
nlohmann::json run_json(const RunReport& r) {
  nlohmann::json j = {{"threads_per_device", r.threads_per_device},
                      {"communication_threads_per_device", r.communication_threads_per_device},
                      {"replicas", r.replicas},
                      {"batch_per_device", r.batch},
                      {"global_batch", r.global_batch()},
                      {"grad_compression", to_string(r.grad_compression)},
                      {"precision", to_string(r.precision)},
                      {"bucket_bytes", r.bucket_bytes},
                      {"allreduce_bytes_per_step", allreduce_bytes(r.bucket_bytes)},
                      {"data", r.data}};
  if (!r.precision_note.empty()) j["precision_note"] = r.precision_note;
  if (r.loss_scaling) {
    j["loss_scaling"] = write_fields(*r.loss_scaling);
    j["loss_scaling"]["skipped"] = r.loss_scaling->skipped_steps.size();
  }
  if (r.tf32) j["tf32"] = *r.tf32;
  if (r.deterministic) j["deterministic"] = *r.deterministic;
  if (r.determinism) j["determinism"] = *r.determinism;
  if (r.conv_search) j["conv_search"] = *r.conv_search;
  return j;
}

// The kernels the libraries chose, and the passes that fell back to non-deterministic ones.
void add_kernels(nlohmann::json& j, const RunReport& r) {
  if (r.kernels.empty()) return;
  nlohmann::json kernels = nlohmann::json::array();
  nlohmann::json fallbacks = nlohmann::json::array();
  for (const KernelChoiceRecord& k : r.kernels) {
    kernels.push_back(to_json(k));
    if (k.fallback.empty()) continue;
    fallbacks.push_back({{"layer", k.layer},
                         {"layer_name", k.layer_name},
                         {"pass", k.pass},
                         {"algorithm", k.algorithm},
                         {"why", k.fallback}});
  }
  j["kernels"] = std::move(kernels);
  if (!fallbacks.empty()) j["nondeterministic_fallbacks"] = std::move(fallbacks);
}

}  // namespace

nlohmann::json to_json(const RunReport& r) {
  const std::vector<GradSqNorms> norms = step_norms(r);
  const bool with_noise =
      !norms.empty() && norms.size() == r.steps.size() && estimable(r.noise_batches());
  const std::vector<NoiseStep> smoothed =
      with_noise ? smooth_noise(norms, r.noise_batches()) : std::vector<NoiseStep>{};
  nlohmann::json steps = nlohmann::json::array();
  for (size_t i = 0; i < r.steps.size(); ++i) {
    steps.push_back(step_json(r.steps[i], with_noise ? &smoothed[i] : nullptr));
  }
  nlohmann::json evals = nlohmann::json::array();
  for (const EvalRecord& e : r.evals) evals.push_back(to_json(e));
  const RunSummary s = summarize(r);
  nlohmann::json j = {
      {"schema", "scalescope-run"},
      {"schema_version", kRunSchemaVersion},
      {"command_line", r.command_line},
      {"model",
       {{"name", r.model},
        {"params", r.params},
        {"forward_flops_per_sample", r.forward_flops_per_sample},
        {"input_shape", r.input_shape}}},
      {"config", r.config},
      {"run", run_json(r)},
      {"summary",
       {{"warmup_steps", r.warmup_steps},
        {"warmup_settled", r.warmup_settled},
        {"peak_memory_bytes", r.peak_memory_bytes},
        {"measured_device_allocations", r.measured_device_allocations},
        {"host_wait_overshoot_ms", r.host_wait_overshoot_ms},
        {"library_memory_bytes", r.library_memory_bytes},
        {"measured_steps", s.measured_steps},
        {"step_ms_median", s.step_ms_median},
        {"step_ms_p10", s.step_ms_p10},
        {"step_ms_p90", s.step_ms_p90},
        {"compute_ms_median", s.compute_ms_median},
        {"samples_per_second", s.samples_per_second},
        {"first_loss", s.first_loss},
        {"last_loss", s.last_loss},
        {"consistency_checks", r.consistency_checks}}},
      {"steps", std::move(steps)},
      {"evals", std::move(evals)},
  };
  if (r.cluster) j["cluster"] = to_json(*r.cluster);
  if (r.target) j["target"] = to_json(*r.target);
  if (r.noise_scale) {
    j["noise_scale"] = with_noise
                           ? noise_scale_json(r, norms, smoothed)
                           : nlohmann::json{{"unavailable", noise_scale_unavailable_reason()}};
  }
  add_kernels(j, r);
  if (!r.layer_profile.empty()) j["layer_profile"] = json_fields::value_json(r.layer_profile);
  if (r.allreduce_split) j["allreduce_split"] = to_json(*r.allreduce_split);
  if (!r.gpu_utilization.empty()) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuUtilization& u : r.gpu_utilization) gpus.push_back(to_json(u));
    j["gpu_utilization"] = std::move(gpus);
  }
  return j;
}

double AllReduceSplit::intra_node_fraction() const {
  if (global_ms <= 0.0) return 1.0;
  return std::clamp(node_ms / global_ms, 0.0, 1.0);
}

nlohmann::json to_json(const AllReduceSplit& s) {
  nlohmann::json j = write_fields(s);
  j["intra_node_fraction"] = s.intra_node_fraction();
  return j;
}

AllReduceSplit split_from_json(const JsonReader& r) {
  return read_fields<AllReduceSplit>(r);
}

void JsonFields<LossScalingRecord>::check(const LossScalingRecord& s, const JsonReader& r) {
  SS_CHECK(std::isfinite(s.initial_scale) && s.initial_scale > 0.0, "{} {} must be positive",
           r.name("initial_scale"), s.initial_scale);
  SS_CHECK(std::isfinite(s.final_scale) && s.final_scale > 0.0, "{} {} must be positive",
           r.name("final_scale"), s.final_scale);
  SS_CHECK(s.growth_factor > 1.0 && s.backoff_factor > 0.0 && s.backoff_factor < 1.0 &&
               s.growth_interval >= 1,
           "{}: growth {} every {} steps and backoff {} cannot scale a loss",
           r.name("growth_factor"), s.growth_factor, s.growth_interval, s.backoff_factor);
  for (size_t i = 0; i < s.skipped_steps.size(); ++i) {
    SS_CHECK(s.skipped_steps[i] >= 1 && (i == 0 || s.skipped_steps[i] > s.skipped_steps[i - 1]),
             "{}: step {} out of order", r.name("skipped_steps"), s.skipped_steps[i]);
  }
}

void JsonFields<AllReduceSplit>::check(const AllReduceSplit& a, const JsonReader& r) {
  SS_CHECK(a.bytes >= 0, "{} {} must not be negative", r.name("bytes"), a.bytes);
  SS_CHECK(a.nodes >= 1, "{} {} must be at least 1", r.name("nodes"), a.nodes);
  SS_CHECK(a.repeats >= 1, "{} {} must be at least 1", r.name("repeats"), a.repeats);
  SS_CHECK(a.global_ms >= 0.0, "{} {} must not be negative", r.name("global_ms"), a.global_ms);
  SS_CHECK(a.node_ms >= 0.0, "{} {} must not be negative", r.name("node_ms"), a.node_ms);
}

void write_run_report(const std::string& path, const RunReport& report) {
  write_file_atomic(path, dump_json(to_json(report), 2) + "\n");
}

}  // namespace scalescope
