#include <fmt/format.h>
#include <fmt/ranges.h>

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
// part of training holds there; with `layers` (layers_json's), each layer's output as kept for
// backward.
nlohmann::json planned_memory(const ModelDef& def, const MemoryRequest& r, nlohmann::json* layers) {
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
  if (layers != nullptr) {
    for (size_t i = 0; i < layers->size(); ++i) {
      (*layers)[i]["saved_for_backward_bytes"] = m.model.kept_by_layer.at(i);
      (*layers)[i]["kernel_bytes"] = m.model.kernels_by_layer.at(i);
    }
  }
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

// A shape per sample as the table shows it: 112x112x64.
std::string shape_text(const std::vector<int64_t>& dims) {
  return fmt::format("{}", fmt::join(dims, "x"));
}

nlohmann::json layers_json(const ModelDef& def) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerSummary& l : summarize_layers(def, def.default_input)) {
    layers.push_back({{"name", l.name},
                      {"layer", l.layer},
                      {"output_shape", l.output.dims()},
                      {"params", l.params},
                      {"forward_flops_per_sample", l.forward_flops}});
    if (!l.tied_to.empty()) layers.back()["tied_to"] = l.tied_to;
  }
  return layers;
}

// A layer's own parameters, "tied" where a weight it reads is an earlier layer's.
std::string params_text(const nlohmann::json& l) {
  const std::string own = with_commas(l["params"].get<int64_t>());
  if (!l.contains("tied_to")) return own;
  return l["params"].get<int64_t>() == 0 ? "tied" : own + " + tied";
}

// The memory columns of --layers with --batch: what of the layer's output backward keeps, and
// what its kernel holds of its own.
std::string memory_text(const nlohmann::json& l) {
  if (!l.contains("saved_for_backward_bytes")) return "";
  const auto cell = [&](const char* key) {
    const int64_t bytes = l[key].get<int64_t>();
    return bytes == 0 ? std::string("-") : memory_size(bytes);
  };
  return fmt::format("{:>12} {:>12}", cell("saved_for_backward_bytes"), cell("kernel_bytes"));
}

// What the memory columns of --layers hold, and what of the kernels' own no layer holds.
void print_memory_notes(const nlohmann::json& m) {
  int64_t layers_own = 0;
  for (const auto& l : m["layer_list"]) layers_own += l["kernel_bytes"].get<int64_t>();
  fmt::print(
      "  (kept: what backward reads of the layer's output; of a layer whose activation runs "
      "inside it, at the activation)\n"
      "  (own: what the layer's kernel holds for itself: statistics, masks, weight layouts; the "
      "scratch the layers' passes share and the loss's, {}, make up the rest of the kernels' own "
      "below)\n",
      memory_size(m["memory"]["kernels_bytes"].get<int64_t>() - layers_own));
}

// --layers: each layer's output, parameters and share of the forward's FLOPs, as
// torchinfo's summary lists a PyTorch model's, and with --batch what backward keeps of it.
void print_layers(const nlohmann::json& m) {
  const nlohmann::json& layers = m["layer_list"];
  size_t name_width = 5;
  size_t layer_width = 5;
  for (const auto& l : layers) {
    name_width = std::max(name_width, l["name"].get<std::string>().size());
    layer_width = std::max(layer_width, l["layer"].get<std::string>().size());
  }
  const double total = static_cast<double>(m["forward_flops_per_sample"].get<int64_t>());
  const bool memory = m.contains("memory");
  fmt::print("\n{}, layer by layer (output, parameters and forward FLOPs per sample{}):\n",
             m["name"].get<std::string>(),
             memory ? fmt::format("; kept for backward and the kernel's own at batch {} in {}",
                                  m["memory"]["batch"].get<int64_t>(),
                                  m["memory"]["precision"].get<std::string>())
                    : "");
  fmt::print("  {:<{}}  {:<{}}  {:<14} {:>12} {:>14} {:>6}{}\n", "name", name_width, "layer",
             layer_width, "output", "parameters", "forward", "share",
             memory ? fmt::format("{:>12} {:>12}", "kept", "own") : "");
  for (const auto& l : layers) {
    const int64_t flops = l["forward_flops_per_sample"].get<int64_t>();
    fmt::print("  {:<{}}  {:<{}}  {:<14} {:>12} {:>14} {:>5.1f}%{}\n", l["name"].get<std::string>(),
               name_width, l["layer"].get<std::string>(), layer_width,
               shape_text(l["output_shape"].get<std::vector<int64_t>>()), params_text(l),
               flops == 0 ? "0" : flops_text(flops),
               total > 0 ? 100.0 * static_cast<double>(flops) / total : 0.0, memory_text(l));
  }
  if (memory) print_memory_notes(m);
  for (const auto& l : layers) {
    if (l.contains("tied_to")) {
      fmt::print("  (tied: {}'s weight is {}'s, counted there)\n", l["name"].get<std::string>(),
                 l["tied_to"].get<std::string>());
    }
  }
}

void print_models_table(const nlohmann::json& list) {
  size_t width = 16;
  for (const auto& m : list) width = std::max(width, m["name"].get<std::string>().size());
  fmt::print("{:<{}} {:>14} {:>14}  {:<14} {}\n", "model", width, "parameters", "forward/sample",
             "input", "loss");
  for (const auto& m : list) {
    fmt::print("{:<{}} {:>14} {:>14}  {:<14} {}\n", m["name"].get<std::string>(), width,
               with_commas(m["params"].get<int64_t>()),
               flops_text(m["forward_flops_per_sample"].get<int64_t>()),
               shape_text(m["input_shape"].get<std::vector<int64_t>>()),
               m["loss"].get<std::string>());
  }
}

void print_zoo() {
  fmt::print("\nModel specs: name[:key=value,...]\n");
  for (const ZooEntry& e : zoo())
    fmt::print("  {:<12} {}  (e.g. {})\n", e.name, e.description, e.example);
}

nlohmann::json zoo_json() {
  nlohmann::json families = nlohmann::json::array();
  for (const ZooEntry& e : zoo()) {
    families.push_back({{"name", e.name}, {"description", e.description}, {"example", e.example}});
  }
  return families;
}

// What `models` was asked: the specs (none: the zoo), and what to add to each.
struct ModelsRequest {
  std::vector<std::string> specs;
  bool json = false;
  bool layers = false;  // each model's layers
  MemoryRequest memory;
};

// The given specs, or with none the list above and the specs' grammar. A bad spec fails the
// command with the zoo's message naming it.
int run_models(const ModelsRequest& r) {
  SS_CHECK_INPUT(r.memory.batch == 0 || !r.specs.empty(),
                 "--batch plans the memory of the models named: give one, e.g. `scalescope models "
                 "gpt:preset=small --batch 8`");
  SS_CHECK_INPUT(!r.layers || !r.specs.empty(),
                 "--layers lists the layers of the models named: give one, e.g. `scalescope "
                 "models resnet:depth=50 --layers`");
  nlohmann::json list = nlohmann::json::array();
  for (const std::string& spec : r.specs.empty() ? listed_specs() : r.specs) {
    const ModelDef def = make_model(spec);
    const ModelSummary s = summarize(def, def.default_input);
    list.push_back({{"name", def.name},
                    {"params", s.params},
                    {"forward_flops_per_sample", s.forward_flops},
                    {"input_shape", def.default_input.dims()},
                    {"output_shape", s.output.dims()},
                    {"loss", to_string(def.loss)},
                    {"layers", def.layers.size()}});
    if (r.layers) list.back()["layer_list"] = layers_json(def);
    if (r.memory.batch > 0) {
      nlohmann::json& m = list.back();
      m["memory"] = planned_memory(def, r.memory, r.layers ? &m["layer_list"] : nullptr);
    }
  }
  if (r.json) {
    fmt::print("{}\n", dump_json(nlohmann::json{{"models", list}, {"zoo", zoo_json()}}, 2));
    return 0;
  }
  print_models_table(list);
  if (r.specs.empty()) print_zoo();
  fmt::print("FLOPs: a multiply-add counts two; element-wise ops and pooling one per element.\n");
  for (const auto& m : list) {
    if (m.contains("layer_list")) print_layers(m);
    if (m.contains("memory")) print_memory(m["name"].get<std::string>(), m["memory"]);
  }
  if (r.memory.batch > 0) {
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
    ModelsRequest request;
    OptionList list;
  };
  auto args = std::make_shared<ModelsArgs>();
  args->list.add("MODEL", args->request.specs,
                 "Model specs to describe, e.g. cifar-resnet:depth=56");
  args->list.add("--json", args->request.json, "Print JSON instead of a table");
  args->list.add("--layers", args->request.layers,
                 "Also list each model's layers: name, output shape, parameters and forward FLOPs "
                 "per sample with their share");
  args->list.add("--batch", args->request.memory.batch,
                 "Plan the device memory of training the models at this batch per device: its "
                 "peak and what holds it (0: no plan)",
                 at_least<int64_t>(0, "must be 0 (no plan) or a positive number of samples"));
  add_devices_option(args->list, args->request.memory.devices)
      .shown_default("cpu:1 (the memory is one device's, of the kind given)");
  add_threads_option(args->list, args->request.memory.threads);
  add_optimizer_option(args->list, args->request.memory.optimizer);
  add_momentum_option(args->list, args->request.memory.optimizer);
  add_precision_option(args->list, args->request.memory.precision);
  CLI::App* cmd =
      app.add_subcommand("models",
                         "Describe model specs (parameters, forward FLOPs per "
                         "sample; --layers: layer by layer) or, with none, list the zoo");
  add_options(*cmd, args->list);
  cmd->callback([&action, args, cmd] {
    action = [args, cmd] {
      (void)settle_options(*cmd, args->list);
      return run_models(args->request);
    };
  });
}

}  // namespace scalescope::cli
