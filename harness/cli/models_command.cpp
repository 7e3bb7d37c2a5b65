#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/check.h"
#include "core/device_spec.h"
#include "core/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "harness/options/run_options.h"
#include "harness/trainer/options.h"
#include "harness/trainer/training_memory.h"
#include "models/kernels.h"
#include "models/zoo.h"
#include "models/zoo_families.h"
#include "reports/json_reader.h"

namespace scalescope::cli {
namespace {

// Human-friendly counts: 282,250 params; 1.2 GFLOP.
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string flops_text(int64_t flops) {
  const double f = static_cast<double>(flops);
  if (f >= 1e9) return fmt::format("{:.2f} GFLOP", f / 1e9);
  if (f >= 1e6) return fmt::format("{:.2f} MFLOP", f / 1e6);
  return fmt::format("{:.1f} kFLOP", f / 1e3);
}

// The fixed models, a few sizes of each width family to show the span of the size axis, and
// the presets of the depth and decoder families.
std::vector<std::string> listed_specs() {
  std::vector<std::string> specs = {"cifar-cnn",     "mlp-41m",       "dense-100",
                                    "gap-cnn",       "cnn:width=0.5", "cnn:width=2",
                                    "cnn:width=4",   "cnn:width=12",  "mlp:scale=0.01",
                                    "mlp:scale=0.1", "mlp:scale=1"};
  for (const int depth : {20, 32, 44, 56, 110}) {
    specs.push_back(fmt::format("cifar-resnet:depth={}", depth));
  }
  for (const int depth : {18, 34, 50, 101, 152})
    specs.push_back(fmt::format("resnet:depth={}", depth));
  for (const GptPreset& p : gpt_presets()) specs.push_back(fmt::format("gpt:preset={}", p.name));
  return specs;
}

// What `models --batch` plans: one replica's training at `batch` on a device of `kind`.
struct MemoryRequest {
  int64_t batch = 0;  // 0: none
  std::string devices = "cpu:1";
  int threads = 0;  // CPU threads of the device (0: as train chooses for one device)
  OptimizerConfig optimizer;
  std::string precision;  // "" the device's default
};

// The model built on a device of the requested kind, its batch planned, and the memory each
// part of training holds there.
nlohmann::json planned_memory(const ModelDef& def, const MemoryRequest& r) {
  const DeviceSpec spec = parse_device_spec(r.devices);
  check_devices_available(spec);
  // The kernels the plan measures compute in it (process-wide, so restored after).
  const Precision precision = run_precision(r.precision, spec.kind);
  const ScopedPrecision scope(precision);
  const TrainingMemory m = plan_training(
      def, def.default_input, spec.kind,
      BackendOptions{
          .cpu_threads = r.threads, .cpu_devices = 1, .plan_only = can_plan_only(spec.kind)},
      r.batch, r.optimizer, /*staged=*/true);
  return {{"device", to_string(spec.kind)},
          {"batch", r.batch},
          {"precision", to_string(precision)},
          {"optimizer", to_string(r.optimizer.kind)},
          {"parameters_bytes", m.model.parameters},
          {"optimizer_state_bytes", m.optimizer},
          {"kept_activations_bytes", m.model.kept},
          {"forward_arena_bytes", m.model.transient},
          {"activation_gradients_bytes", m.model.gradients},
          {"kernels_bytes", m.model.kernels},
          {"batch_bytes", m.input + m.loss},
          {"planned_peak_bytes", m.total()}};
}

void print_memory(const std::string& name, const nlohmann::json& m) {
  fmt::print("\n{} at batch {} on one {} device in {}, {}: planned peak {}\n", name,
             m["batch"].get<int64_t>(), m["device"].get<std::string>(),
             m["precision"].get<std::string>(), m["optimizer"].get<std::string>(),
             memory_size(m["planned_peak_bytes"].get<int64_t>()));
  const std::pair<const char*, const char*> rows[] = {
      {"parameters_bytes", "weights, their gradients, the layers' buffers"},
      {"optimizer_state_bytes", "optimizer state"},
      {"kept_activations_bytes", "activations saved for backward (bf16/fp16: 16-bit)"},
      {"forward_arena_bytes", "outputs in flight (graphs: and activation gradients)"},
      {"activation_gradients_bytes", "a sequence's activation gradients (ping-pong)"},
      {"kernels_bytes", "the kernels' own (workspaces, scratch, statistics)"},
      {"batch_bytes", "the batch on the device and the loss"}};
  for (const auto& [key, what] : rows)
    fmt::print("  {:<52} {:>12}\n", what, memory_size(m[key].get<int64_t>()));
}

// The given specs, or with none the list above. A bad spec fails the command with the
// zoo's message naming it.
int run_models(const std::vector<std::string>& given, bool as_json, const MemoryRequest& memory) {
  SS_CHECK_INPUT(memory.batch == 0 || !given.empty(),
                 "--batch plans the memory of the models named: give one, e.g. `scalescope models "
                 "gpt:preset=small --batch 8`");
  nlohmann::json list = nlohmann::json::array();
  for (const std::string& spec : given.empty() ? listed_specs() : given) {
    const ModelDef def = make_model(spec);
    const ModelSummary s = summarize(def, def.default_input);
    list.push_back({{"name", def.name},
                    {"params", s.params},
                    {"forward_flops_per_sample", s.forward_flops},
                    {"input_shape", def.default_input.dims()},
                    {"output_shape", s.output.dims()},
                    {"loss", to_string(def.loss)},
                    {"layers", def.layers.size()}});
    if (memory.batch > 0) list.back()["memory"] = planned_memory(def, memory);
  }
  if (as_json) {
    nlohmann::json families = nlohmann::json::array();
    for (const ZooEntry& e : zoo()) {
      families.push_back(
          {{"name", e.name}, {"description", e.description}, {"example", e.example}});
    }
    fmt::print("{}\n", dump_json(nlohmann::json{{"models", list}, {"zoo", families}}, 2));
    return 0;
  }
  size_t width = 16;
  for (const auto& m : list) width = std::max(width, m["name"].get<std::string>().size());
  fmt::print("{:<{}} {:>14} {:>14}  {:<14} {}\n", "model", width, "parameters", "forward/sample",
             "input", "loss");
  for (const auto& m : list) {
    const auto input = m["input_shape"].get<std::vector<int64_t>>();
    std::string shape;
    for (size_t i = 0; i < input.size(); ++i) shape += fmt::format("{}{}", i ? "x" : "", input[i]);
    fmt::print("{:<{}} {:>14} {:>14}  {:<14} {}\n", m["name"].get<std::string>(), width,
               with_commas(m["params"].get<int64_t>()),
               flops_text(m["forward_flops_per_sample"].get<int64_t>()), shape,
               m["loss"].get<std::string>());
  }
  fmt::print("\nModel specs: name[:key=value,...]\n");
  for (const ZooEntry& e : zoo())
    fmt::print("  {:<12} {}  (e.g. {})\n", e.name, e.description, e.example);
  fmt::print("FLOPs: a multiply-add counts two; element-wise ops and pooling one per element.\n");
  for (const auto& m : list) {
    if (m.contains("memory")) print_memory(m["name"].get<std::string>(), m["memory"]);
  }
  if (memory.batch > 0) {
    fmt::print(
        "\nThe planned peak is of training steps with data staged from the host; an "
        "evaluation plans its own batch sizes, and --accumulate, --grad-compression and "
        "--noise-scale add buffers of their own.\n");
  }
  return 0;
}

}  // namespace

void add_models_command(CLI::App& app, Action& action) {
  struct ModelsArgs {
    std::vector<std::string> specs;
    bool json = false;
    MemoryRequest memory;
    OptionList list;
  };
  auto args = std::make_shared<ModelsArgs>();
  args->list.add("MODEL", args->specs, "Model specs to describe, e.g. cifar-resnet:depth=56");
  args->list.add("--json", args->json, "Print JSON instead of a table");
  args->list.add("--batch", args->memory.batch,
                 "Plan the device memory of training the models at this batch per device: its "
                 "peak and what holds it (0: no plan)",
                 at_least<int64_t>(0, "must be 0 (no plan) or a positive number of samples"));
  add_devices_option(args->list, args->memory.devices)
      .shown_default("cpu:1 (the memory is one device's, of the kind given)");
  add_threads_option(args->list, args->memory.threads);
  add_optimizer_option(args->list, args->memory.optimizer);
  add_momentum_option(args->list, args->memory.optimizer);
  add_precision_option(args->list, args->memory.precision);
  CLI::App* cmd = app.add_subcommand("models",
                                     "Describe model specs (parameters, forward FLOPs per "
                                     "sample, layers) or, with none, list the zoo");
  add_options(*cmd, args->list);
  cmd->callback([&action, args, cmd] {
    action = [args, cmd] {
      (void)settle_options(*cmd, args->list);
      return run_models(args->specs, args->json, args->memory);
    };
  });
}

}  // namespace scalescope::cli
