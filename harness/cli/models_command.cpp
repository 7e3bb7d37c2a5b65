#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "models/zoo.h"
#include "models/zoo_families.h"

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

// The given specs, or with none the list above. A bad spec fails the command with the
// zoo's message naming it.
int run_models(const std::vector<std::string>& given, bool as_json) {
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
  }
  if (as_json) {
    nlohmann::json families = nlohmann::json::array();
    for (const ZooEntry& e : zoo()) {
      families.push_back(
          {{"name", e.name}, {"description", e.description}, {"example", e.example}});
    }
    fmt::print("{}\n", nlohmann::json{{"models", list}, {"zoo", families}}.dump(2));
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
  return 0;
}

}  // namespace

void add_models_command(CLI::App& app, Action& action) {
  struct ModelsArgs {
    std::vector<std::string> specs;
    bool json = false;
    OptionList list;
  };
  auto args = std::make_shared<ModelsArgs>();
  args->list.add("MODEL", args->specs, "Model specs to describe, e.g. cifar-resnet:depth=56");
  args->list.add("--json", args->json, "Print JSON instead of a table");
  CLI::App* cmd = app.add_subcommand("models",
                                     "Describe model specs (parameters, forward FLOPs per "
                                     "sample, layers) or, with none, list the zoo");
  add_options(*cmd, args->list);
  cmd->callback([&action, args, cmd] {
    action = [args, cmd] {
      (void)settle_options(*cmd, args->list);
      return run_models(args->specs, args->json);
    };
  });
}

}  // namespace scalescope::cli
