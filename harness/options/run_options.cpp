#include "harness/options/run_options.h"

#include <fmt/format.h>

#include "core/backend.h"
#include "core/device_spec.h"
#include "core/precision.h"
#include "models/zoo.h"

namespace scalescope {
namespace {

constexpr const char* kBatchHelp = "Samples per micro-batch and device (weak scaling)";
constexpr const char* kGlobalBatchHelp =
    "Samples per step over all devices, split over them (strong scaling), instead of --batch; "
    "must divide by the devices × --accumulate";
constexpr const char* kSamples = "must be a positive number of samples";
constexpr const char* kWorkersHelp = "Input pipeline worker threads";
constexpr const char* kWorkersRange = "must be between 1 and 256";

}  // namespace

OptionDecl& add_model_option(OptionList& list, std::string& model) {
  return list.add("--model", model, "Model spec name[:key=value,...] (see `scalescope models`)",
                  parses([](const std::string& m) { (void)make_model(m); }));
}

OptionDecl& add_devices_option(OptionList& list, std::string& devices) {
  return list.add("--devices", devices,
                  "Devices: cpu:N (N CPU replicas), sim:N (N simulated accelerators) or cuda:N "
                  "(N GPUs, the first N visible: CUDA_VISIBLE_DEVICES chooses which)",
                  parses([](const std::string& d) { (void)parse_device_spec(d); }));
}

OptionDecl& add_threads_option(OptionList& list, int& threads) {
  return list.add(
      "--threads", threads,
      "CPU threads per device (0: the usable cores / the largest device count)",
      in_range(0, kMaxCpuThreads,
               fmt::format("must be 0 (automatic) or between 1 and {}", kMaxCpuThreads)));
}

OptionDecl& add_batch_option(OptionList& list, int64_t& batch) {
  return list.add("--batch", batch, kBatchHelp, at_least<int64_t>(1, kSamples));
}

OptionDecl& add_batch_option(OptionList& list, std::vector<int64_t>& batches) {
  return list.add("--batch", batches, kBatchHelp, at_least<int64_t>(1, kSamples));
}

OptionDecl& add_workers_option(OptionList& list, int& workers) {
  return list.add("--workers", workers, kWorkersHelp, in_range(1, 256, kWorkersRange));
}

OptionDecl& add_workers_option(OptionList& list, std::vector<int>& workers) {
  return list.add("--workers", workers,
                  fmt::format("{}: the counts to measure, e.g. 1,2,4", kWorkersHelp),
                  in_range(1, 256, kWorkersRange));
}

OptionDecl& add_optimizer_option(OptionList& list, OptimizerConfig& optimizer) {
  return list.add("--optimizer",
                  Choice{{"sgd", "adam"},
                         [&optimizer] { return std::string(to_string(optimizer.kind)); },
                         [&optimizer](const std::string& name) {
                           optimizer.kind =
                               name == "sgd" ? OptimizerKind::kSgd : OptimizerKind::kAdam;
                         }},
                  "sgd or adam");
}

OptionDecl& add_momentum_option(OptionList& list, OptimizerConfig& optimizer) {
  // The optimizer's own range, checked here too so that it is refused before any work.
  return list.add("--momentum", optimizer.momentum, "SGD momentum", [](const float& m) {
    return m >= 0.0f && m < 1.0f ? std::string() : "must be in [0, 1)";
  });
}

OptionDecl& add_seed_option(OptionList& list, uint64_t& seed) {
  return list.add("--seed", seed, "Seed of the weights and of the data's order and augmentation");
}

OptionDecl& add_global_batch_option(OptionList& list, int64_t& global_batch) {
  return list.add("--global-batch", global_batch, kGlobalBatchHelp, at_least<int64_t>(0, kSamples));
}

OptionDecl& add_global_batch_option(OptionList& list, std::vector<int64_t>& global_batches) {
  return list.add("--global-batch", global_batches, kGlobalBatchHelp,
                  at_least<int64_t>(1, kSamples));
}

namespace {

constexpr const char* kPrecisionHelp =
    "Precision: fp32, tf32 (fp32 data, matrix products on GPU tensor cores), bf16 or fp16 "
    "(convolutions and matrix products on 16-bit copies with fp32 accumulation; weights, "
    "optimizer state, all-reduced gradients, norms and the loss in fp32, as autocast)";
constexpr const char* kPrecisionDefault = "tf32 on cuda devices, fp32 on cpu and sim";

OptionCheck<std::string> known_precision() {
  return parses([](const std::string& name) { (void)parse_precision(name); });
}

}  // namespace

OptionDecl& add_precision_option(OptionList& list, std::string& precision) {
  return list
      .add("--precision", precision, kPrecisionHelp,
           [known = known_precision()](const std::string& name) {
             return name.empty() ? std::string() : known(name);
           })
      .shown_default(kPrecisionDefault)
      .present_when([&precision] { return !precision.empty(); });
}

OptionDecl& add_precision_option(OptionList& list, std::vector<std::string>& precisions) {
  return list
      .add("--precision", precisions, fmt::format("{}; a list is a sweep axis", kPrecisionHelp),
           known_precision())
      .split_at_commas()
      .shown_default(kPrecisionDefault)
      .present_when([&precisions] { return !precisions.empty(); });
}

}  // namespace scalescope
