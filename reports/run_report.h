// The machine-readable record of one `scalescope train` run (`-o run.json`).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/precision.h"

#include "reports/analysis/noise_scale.h"
#include "reports/environment.h"
#include "reports/json_fields.h"
#include "reports/json_reader.h"
#include "reports/phases.h"

namespace scalescope {

// 2.0: the config block holds the options as a config file does (train --config reads it back);
// the run's facts (replicas, batch per device, buckets...) moved to a block of their own, "run".
// 2.1: "layer_profile" (--profile-layers).
inline constexpr const char* kRunSchemaVersion = "2.5";

// With --noise-scale: a step's squared gradient norms (reports/analysis/noise_scale.h).
struct StepGradNorms {
  // Per replica, in rank order: its last micro-batch's gradient, before the all-reduce (as the
  // mean over the micro-batch's samples).
  std::vector<double> local;
  double global = 0.0;  // the averaged gradient's, after the all-reduce
  // REQUIRES: local non-empty.
  GradSqNorms norms() const;
};

struct StepRecord {
  int64_t step = 0;   // 1-based
  double loss = 0.0;  // mean over the global batch
  // The group's step time: the slowest replica's.
  double step_ms = 0.0;
  // Of step_ms (of the slowest replica): waiting for the batch and handing it to the device.
  double input_ms = 0.0;
  std::vector<PhaseTimes> replicas{};  // per replica, in rank order
  // Replica 0's all-reduce time of each gradient bucket (RunReport::bucket_bytes order).
  std::vector<double> bucket_ms{};
  double lr = 0.0;  // the learning rate the step applied
  std::optional<StepGradNorms> grad_norms{};
};

// The group's step figures from its replicas, so that nobody recomputes them: r.step_ms and
// r.input_ms (input + h2d) of the slowest replica. REQUIRES: r.replicas non-empty.
void set_group_times(StepRecord& r);

struct EvalRecord {
  int64_t epoch = 0;  // 1-based; the last one may be partial
  int64_t step = 0;   // evaluated after this step
  double loss = 0.0;
  double accuracy = 0.0;
};

// A run with a target (--until-accuracy, --until-loss): whether an evaluation reached it, and
// what training took until then.
struct TargetRecord {
  std::string metric;  // "accuracy" or "loss"
  double value = 0.0;  // the target
  bool reached = false;
  int64_t step = 0;       // of the evaluation that reached it (the last step when none did)
  int64_t samples = 0;    // trained on until then: step × global batch
  double epochs = 0.0;    // samples / the training split's samples
  double train_ms = 0.0;  // the steps until then, added up (the group's step times)
  // From the first step's start to the end of that evaluation: evaluations, checks and input
  // waits between steps included.
  double wall_ms = 0.0;
};
nlohmann::json to_json(const TargetRecord& t);
// "accuracy 0.75 reached at step 50 (0.32 epochs, 3200 samples) after 0.77 s of training
// (1.98 s wall)", or "... not reached in 150 steps (...)".
std::string target_text(const TargetRecord& t);
// Strict: throws Error naming a key that is missing, mistyped or out of range.
TargetRecord target_from_json(const JsonReader& r);

// What sampling one GPU with NVML found while the steps were measured (GPU runs).
struct GpuUtilization {
  std::string host;  // the node's host name in multi-process runs ("" in one process)
  std::string pci_bus_id;
  int64_t samples = 0;         // readings taken
  int64_t failed_samples = 0;  // readings NVML could not take
  double mean_gpu_util_percent = 0.0;
  double max_gpu_util_percent = 0.0;
  double mean_memory_util_percent = 0.0;
  int64_t max_memory_used_bytes = 0;
  std::string error;  // why readings failed or were not taken ("" when all succeeded)
};

// Runs across nodes: the all-reduce of the gradient buckets, timed after the measured steps
// over every replica and over each node's replicas alone (the same bytes): the difference is
// what crossing nodes costs.
struct AllReduceSplit {
  int64_t bytes = 0;  // per replica: all buckets
  int nodes = 0;
  int repeats = 0;
  double global_ms = 0.0;  // median over the repeats of the slowest replica's time
  double node_ms = 0.0;
  // The share of the all-reduce time that the node-local part explains: node_ms / global_ms,
  // within [0, 1] (1 when the global all-reduce is no slower).
  double intra_node_fraction() const;
};

// fp16 runs: the dynamic loss scaling (PyTorch GradScaler's rule) and what it did.
struct LossScalingRecord {
  double initial_scale = 0.0;
  double growth_factor = 0.0;
  double backoff_factor = 0.0;
  int64_t growth_interval = 0;  // clean steps in a row before the scale grows
  double final_scale = 0.0;     // what the step after the last would have used
  // The steps whose all-reduced gradients overflowed: skipped on every replica (no update).
  std::vector<int64_t> skipped_steps;
};

// What a library chose to run for one pass of one layer's kernel (cuDNN's convolution
// algorithm, oneDNN's implementation), as planned on replica 0.
struct KernelChoiceRecord {
  int layer = 0;           // index in the model
  std::string layer_name;  // as the model describes it ("conv2d(32, 3x3, same)")
  std::string pass;
  std::string algorithm;
  std::string math;
  std::string layout;
  bool deterministic = true;
  int64_t workspace_bytes = 0;
  // Where the library chose within a workspace limit (cuDNN's convolutions): the limit and how
  // it was reached ("" and 0 elsewhere).
  int64_t workspace_limit_bytes = 0;
  std::string workspace_limit_rule{};
  // Why the pass is not deterministic although deterministic algorithms were preferred ("" when
  // it is, or when determinism was not asked for).
  std::string fallback{};
  // Where the library timed its candidates (--conv-search benchmark): what this pass's
  // algorithm took when timed, ms; -1 elsewhere.
  double measured_ms = -1;
};

// --profile-layers: one layer of replica 0's model, its mean times per measured step (the
// distance between events recorded on the compute stream around the layer's work).
struct LayerTimeRecord {
  int layer = 0;           // index in the model
  std::string layer_name;  // its module path, if any, and what it is ("layer1.0.conv1 Conv2D(...)")
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  int64_t forward_flops = 0;  // of the replica's batch, per step (forward_flops × batch)
  // What its forward moves at the least (models/layer_spec.h forward_bytes); 0: not recorded
  // (reports before run 2.3 and sweep 1.17).
  int64_t forward_bytes = 0;
  double total_ms() const { return forward_ms + backward_ms; }
  // Few FLOPs per byte (below any CPU's or GPU's balance): memory bandwidth bounds its forward.
  bool memory_bound() const {
    return forward_bytes > 0 &&
           static_cast<double>(forward_flops) < 4.0 * static_cast<double>(forward_bytes);
  }
  // The forward's achieved GFLOP/s; none without FLOPs or time.
  std::optional<double> forward_gflop_per_s() const {
    if (forward_ms <= 0.0 || forward_flops <= 0) return std::nullopt;
    return static_cast<double>(forward_flops) / (forward_ms * 1e6);
  }
  // The GB/s its forward moved, where it is memory-bound; none elsewhere.
  std::optional<double> forward_gb_per_s() const {
    if (forward_ms <= 0.0 || !memory_bound()) return std::nullopt;
    return static_cast<double>(forward_bytes) / (forward_ms * 1e6);
  }
};

// The keys of the records above, for their writers and strict readers both (the run report's,
// the results that cross processes, the sweep report's). `check` refuses values out of range,
// naming the key.
template <>
struct JsonFields<EvalRecord> {
  static constexpr auto kFields =
      std::make_tuple(field("epoch", &EvalRecord::epoch), field("step", &EvalRecord::step),
                      field("loss", &EvalRecord::loss), field("accuracy", &EvalRecord::accuracy));
};

template <>
struct JsonFields<TargetRecord> {
  static constexpr auto kFields = std::make_tuple(
      field("metric", &TargetRecord::metric), field("value", &TargetRecord::value),
      field("reached", &TargetRecord::reached), field("step", &TargetRecord::step),
      field("samples", &TargetRecord::samples), field("epochs", &TargetRecord::epochs),
      field("train_ms", &TargetRecord::train_ms), field("wall_ms", &TargetRecord::wall_ms));
  static void check(const TargetRecord& t, const JsonReader& r);
};

template <>
struct JsonFields<GpuUtilization> {
  using G = GpuUtilization;
  static constexpr auto kFields = std::make_tuple(
      field("host", &G::host), field("pci_bus_id", &G::pci_bus_id), field("samples", &G::samples),
      field("failed_samples", &G::failed_samples),
      field("mean_gpu_util_percent", &G::mean_gpu_util_percent),
      field("max_gpu_util_percent", &G::max_gpu_util_percent),
      field("mean_memory_util_percent", &G::mean_memory_util_percent),
      field("max_memory_used_bytes", &G::max_memory_used_bytes), field("error", &G::error));
};

template <>
struct JsonFields<AllReduceSplit> {
  static constexpr auto kFields = std::make_tuple(
      field("bytes", &AllReduceSplit::bytes), field("nodes", &AllReduceSplit::nodes),
      field("repeats", &AllReduceSplit::repeats), field("global_ms", &AllReduceSplit::global_ms),
      field("node_ms", &AllReduceSplit::node_ms));
  static void check(const AllReduceSplit& s, const JsonReader& r);
};

template <>
struct JsonFields<LossScalingRecord> {
  using L = LossScalingRecord;
  static constexpr auto kFields = std::make_tuple(
      field("initial_scale", &L::initial_scale), field("growth_factor", &L::growth_factor),
      field("backoff_factor", &L::backoff_factor), field("growth_interval", &L::growth_interval),
      field("final_scale", &L::final_scale), field("skipped_steps", &L::skipped_steps));
  static void check(const LossScalingRecord& s, const JsonReader& r);
};

template <>
struct JsonFields<KernelChoiceRecord> {
  using K = KernelChoiceRecord;
  static constexpr auto kFields = std::make_tuple(
      field("layer", &K::layer), field("layer_name", &K::layer_name), field("pass", &K::pass),
      field("algorithm", &K::algorithm), field("math", &K::math), field("layout", &K::layout),
      field("deterministic", &K::deterministic), field("workspace_bytes", &K::workspace_bytes),
      // Both or neither: where a limit applied.
      optional_field(
          "workspace_limit_bytes", &K::workspace_limit_bytes,
          +[](const K& k) { return !k.workspace_limit_rule.empty(); }),
      optional_field("workspace_limit_rule", &K::workspace_limit_rule),
      optional_field("fallback", &K::fallback),
      optional_field(
          "measured_ms", &K::measured_ms, +[](const K& k) { return k.measured_ms >= 0; }));
  static void check(const KernelChoiceRecord& k, const JsonReader& r);
};

template <>
struct JsonFields<LayerTimeRecord> {
  using L = LayerTimeRecord;
  static constexpr auto kFields =
      std::make_tuple(field("layer", &L::layer), field("layer_name", &L::layer_name),
                      field("forward_ms", &L::forward_ms), field("backward_ms", &L::backward_ms),
                      field("forward_flops", &L::forward_flops),
                      optional_field("forward_bytes", &L::forward_bytes));
};

// The trainer's gradient bucket caps unless told otherwise (PyTorch DDP's): the first bucket,
// which the last layers fill early in backward, small so that communication starts soon.
inline constexpr double kDefaultBucketCapMb = 25.0;
inline constexpr double kDefaultFirstBucketMb = 1.0;

// Gradient compression of the all-reduce (--grad-compression): none, or every bucket cast to a
// 16-bit type (IEEE half, bfloat16), pre-divided by the replica count, all-reduced in that type
// and cast back, as PyTorch DDP's fp16 and bf16 communication hooks do.
enum class GradCompression { kNone, kFp16, kBf16 };
std::string to_string(GradCompression compression);
// Throws Error naming `name` and what is accepted.
GradCompression parse_grad_compression(const std::string& name);
// "fp16 gradients": how labels, tables and pages name a compression ("" for none).
std::string compression_text(GradCompression compression);
// "none", "fp16" or "bf16", as options and reports spell them.
std::vector<std::string> grad_compression_names();
// The bytes one gradient takes in the all-reduce: 4 (float), 2 compressed.
int64_t wire_bytes_per_gradient(GradCompression compression);
// The bytes a replica all-reduces per step: the buckets' bytes added up.
int64_t allreduce_bytes(const std::vector<int64_t>& bucket_bytes);

struct RunReport {
  std::string command_line;
  // The options the run was given, keyed as a config file keys them (written by the caller
  // that parsed them: harness/trainer train_config_json); the report's "config" block.
  nlohmann::json config = nlohmann::json::object();
  std::string model;
  int64_t params = 0;
  int64_t forward_flops_per_sample = 0;
  std::string input_shape;
  std::string devices;
  int threads_per_device = 0;
  // The host threads each replica ran for communication beside its compute: the reducer's
  // thread and the communicator's own (Gloo's event loop); 0 on one device.
  int communication_threads_per_device = 0;
  int replicas = 1;
  int64_t batch = 0;     // per device (replica) and micro-batch
  int accumulation = 1;  // micro-batches per step
  int64_t global_batch() const { return batch * replicas * accumulation; }
  std::string optimizer;
  double lr = 0.0;  // base learning rate (one replica)
  std::string lr_scaling = "none";
  int64_t lr_warmup_steps = 0;
  bool overlap = true;
  bool prefetch = true;  // the batch's copy started during the step before
  bool fusion = true;    // activations fused into their neighbours' kernels (--no-fusion: not)
  GradCompression grad_compression = GradCompression::kNone;
  // What the kernels computed in (run_precision: the option, or the devices' default).
  Precision precision = Precision::kFp32;
  // What the user should know about it on this machine (KernelBackend::precision_note).
  std::string precision_note;
  std::optional<LossScalingRecord> loss_scaling;  // fp16 runs
  // What each bucket's all-reduce moves per replica, in the order backward completes them:
  // its gradients × wire_bytes_per_gradient (half the float bytes with compression).
  std::vector<int64_t> bucket_bytes;
  int64_t consistency_checks = 0;  // weight checksum comparisons that passed
  uint64_t seed = 0;
  std::string data;
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  std::optional<TargetRecord> target;  // runs with a target
  // --noise-scale was asked for (the steps hold grad_norms where it could be measured).
  bool noise_scale = false;
  NoiseBatches noise_batches() const { return {batch, global_batch()}; }
  // Steps left out of the summary (the first steps plan kernels and warm caches).
  int64_t warmup_steps = 0;
  // Adaptive warm-up: whether the step time settled (false: stopped at the bound).
  bool warmup_settled = true;
  std::vector<int64_t> peak_memory_bytes;  // per replica: device memory at its highest
  // Per replica: how often its device asked the system for memory during the measured steps
  // (Device::device_allocations); 0 on a backend that reuses its memory in steady state.
  std::vector<int64_t> measured_device_allocations;
  // Per replica: the median time from a step's end on the device to the host's return from
  // waiting for it (the device idles that long between steps, unseen by step times).
  std::vector<double> host_wait_overshoot_ms;
  // Per replica: the device memory libraries held outside the allocator (NCCL's buffers),
  // counted against the memory limit from the first step on.
  std::vector<int64_t> library_memory_bytes;
  // GPU runs: whether kernels could compute fp32 products in TF32 (precision tf32).
  std::optional<bool> tf32;
  // GPU runs: whether deterministic kernels were asked for (false: --no-deterministic), and how
  // strictly: "preferred" (where one fits the workspace limit), "required" or "off".
  std::optional<bool> deterministic;
  std::optional<std::string> determinism;
  // GPU runs: how cuDNN's convolution algorithms were chosen, "heuristic" or "benchmark".
  std::optional<std::string> conv_search;
  // Layer by layer, what the libraries chose; empty where no kernel chose (our own kernels).
  std::vector<KernelChoiceRecord> kernels;
  // --profile-layers: each layer's times, in layer order; empty without.
  std::vector<LayerTimeRecord> layer_profile;
  // GPU runs: every GPU's NVML sampling over the measured steps.
  std::vector<GpuUtilization> gpu_utilization;
  std::optional<AllReduceSplit> allreduce_split;  // runs across nodes
  // Multi-process runs: the processes and hosts (environments left empty).
  std::optional<ClusterInfo> cluster;
};

// Summary figures over steps after the warm-up ones (all steps if there are no others).
struct RunSummary {
  int64_t measured_steps = 0;
  double step_ms_median = 0.0;
  double step_ms_p10 = 0.0;
  double step_ms_p90 = 0.0;
  double samples_per_second = 0.0;  // global batch / median step time
  // Median of step_ms - input_ms: forward, backward, exposed all-reduce and optimizer.
  double compute_ms_median = 0.0;
  double first_loss = 0.0;
  double last_loss = 0.0;
};
RunSummary summarize(const RunReport& report);

nlohmann::json to_json(const RunReport& report);
nlohmann::json to_json(const AllReduceSplit& split);
// The run report's records of an evaluation and of a GPU's utilisation, and their strict
// readers (Error naming a key that is missing or mistyped).
nlohmann::json to_json(const EvalRecord& eval);
EvalRecord eval_from_json(const JsonReader& r);
nlohmann::json to_json(const GpuUtilization& gpu);
nlohmann::json to_json(const KernelChoiceRecord& choice);
KernelChoiceRecord kernel_choice_from_json(const JsonReader& r);
// The passes that are not deterministic although deterministic kernels were preferred
// (KernelChoiceRecord::fallback): one line naming each layer, pass and algorithm, ending in a
// newline; "" when there are none.
std::string fallback_line(const RunReport& report);
// fp16 runs: the loss scale after the last step and the steps its overflows skipped (on every
// replica), one line ending in a newline; "" for other precisions.
std::string loss_scaling_line(const RunReport& report);
// Those passes as the line names them: "conv2d(64, 7x7) backward-data (ALGO_0)".
std::vector<std::string> fallback_passes(const std::vector<KernelChoiceRecord>& kernels);
// The line's opening, for every place that lists fallbacks.
inline constexpr const char* kFallbackLead =
    "not deterministic where no deterministic algorithm fits the workspace limit";
GpuUtilization gpu_utilization_from_json(const JsonReader& r);
// Reads what to_json(AllReduceSplit) wrote; throws Error naming the key that is missing, of
// the wrong type or out of range.
AllReduceSplit split_from_json(const JsonReader& r);
// Written atomically; throws Error naming the path on failure.
void write_run_report(const std::string& path, const RunReport& report);

}  // namespace scalescope
