// What a scaling sweep is told: its options, their declarations in the option schema (the
// flags of `scalescope sweep`, the keys of its config file and of a report's "config" block),
// and the command line that runs a sweep of given options.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device_spec.h"
#include "harness/options/option_schema.h"
#include "harness/trainer/options.h"
#include "reports/sweep_report.h"

namespace scalescope {

// The default models where the devices are GPUs, the workloads of the published scaling
// references, each at the per-GPU batch sizes those use unless --batch is given.
struct DefaultModel {
  std::string spec;
  std::vector<int64_t> batches;
};
inline const std::vector<DefaultModel> kGpuDefaultModels = {
    // tf_cnn_benchmarks' fp32 runs take 64 images per GPU; PyTorch's DDP benchmark 32-128.
    {"resnet:depth=50", {64, 128}},
    // nanoGPT's GPT-2 reproduction: 12 sequences of 1024 tokens per GPU (8 where memory is
    // short).
    {"gpt:preset=small", {8, 12}},
};

struct SweepOptions {
  // The default sweep on CPU devices finishes in about a minute on 2 cores and shows three
  // stories: a convolutional net that scales well, an MLP whose gradients swamp the link,
  // and a ResNet whose batch norm and many small layers make compute the limit.
  std::vector<std::string> models = {"cifar-cnn", "mlp:scale=0.1", "cifar-resnet:depth=20"};
  // Device counts, all of one kind ("cpu:1,2", "cuda:1,2,4" or "1,2,4,8": GPUs when the
  // machine has them, CPU devices otherwise); "" chooses (default_device_axis).
  std::string devices = "";
  // The batch axis: per-device sizes (weak scaling) unless global sizes are given, which are
  // split over the devices (strong scaling).
  std::vector<int64_t> batches = {32, 64};
  std::vector<int64_t> global_batches;
  // Per-device batch sizes of a model that replace `batches` for it (the GPU default
  // sweep's: each model at its references' sizes); weak scaling only.
  std::map<std::string, std::vector<int64_t>> model_batches;
  int threads = 0;             // per CPU device; 0: usable cores / most devices
  bool oversubscribe = false;  // allow CPU devices × threads > usable cores
  int repeats = 3;
  int64_t steps = 20;             // measured steps per repeat
  int64_t max_warmup_steps = 40;  // the warm-up stops here even if not settled
  SteadyStateOptions steady;      // when the step time counts as settled
  // Time to accuracy (train.until_accuracy or train.until_loss): each repeat trains from the
  // same initial weights until an evaluation reaches the target, at most this many epochs
  // (then every step of the run is timed after a fixed warm-up of train.warmup_steps).
  int64_t max_epochs = 0;
  // Axes of the grid beyond one device (no all-reduce runs on one): the gradient bucket caps
  // and the first bucket's cap, in MiB.
  std::vector<double> bucket_caps_mb = {kDefaultBucketCapMb};
  std::vector<double> first_buckets_mb = {kDefaultFirstBucketMb};
  // And the gradient compressions ("none", "fp16", "bf16").
  std::vector<std::string> grad_compressions = {"none"};
  // Precisions, an axis of the grid at every point, one device included (empty: the devices'
  // default only).
  std::vector<std::string> precisions;
  // Optimizer, data, overlap, seed, timeouts; each point's model, devices, batch, buckets,
  // length and profiler range are the sweep's.
  TrainOptions train;
  std::string output = "scalescope-report.json";
  // Chrome traces: each point's first repeat written to trace_prefix + a name of the point
  // (+ ".trace.json"); "" writes none. The point records its trace's path.
  std::string trace_prefix;
  // "A:B": measured steps A..B of every run inside a profiler capture range ("" = none).
  std::string profile_steps;
  std::string command_line;

  ScalingMode mode() const {
    return global_batches.empty() ? ScalingMode::kWeak : ScalingMode::kStrong;
  }
  // The batch sizes of the grid: per device (weak) or global (strong).
  const std::vector<int64_t>& axis_batches() const {
    return global_batches.empty() ? batches : global_batches;
  }
  // Those of `model`'s points.
  const std::vector<int64_t>& axis_batches(const std::string& model) const {
    const auto it = model_batches.find(model);
    return it != model_batches.end() && global_batches.empty() ? it->second : axis_batches();
  }
};

// The sweep's declarations: its own options, the data and training groups (on `train`).
void add_sweep_options(OptionList& list, SweepOptions& options);

// The report's "config" block: the options with a config key, as a config file holds them.
nlohmann::json sweep_config_json(const SweepOptions& options);
// The arguments of `scalescope sweep` that run `options`: the flags whose values differ
// from the defaults.
std::vector<std::string> sweep_arguments(const SweepOptions& options);

// Each model and batch size of the grid once, in the order first given (`--batch 16,16` or
// `--models cifar-cnn,cifar-cnn` ran every point twice, in a report that `compare` then cannot
// match), as the device counts, precisions and bucket caps are taken.
void drop_repeated_values(SweepOptions& options);

// "cifar-cnn,cnn:width=1,2,4" → cifar-cnn, cnn:width=1, cnn:width=2, cnn:width=4. Throws
// Error on an empty item.
std::vector<std::string> split_model_list(const std::string& text);

// "A:B" → measured steps A..B (1-based) of a profiler capture range; nothing unless
// 1 <= A <= B.
std::optional<std::pair<int64_t, int64_t>> parse_profile_steps(const std::string& text);

// The axis `devices` spells; "" is the default axis (default_device_axis: the visible GPUs,
// else CPU devices 1 and 2, or one per process of a launch of `processes`). Throws Error
// naming a malformed count.
DeviceAxis sweep_device_axis(const std::string& devices, int processes = 1);

}  // namespace scalescope
