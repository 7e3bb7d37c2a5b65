#include "harness/sweep/options.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "core/backend.h"
#include "core/check.h"
#include "harness/options/run_options.h"
#include "models/zoo.h"

namespace scalescope {
namespace {

// The sweep's own options (the data and training groups come after them).
void add_axes(OptionList& list, SweepOptions& o) {
  list.add("--models", o.models,
           "Models, comma-separated; 'cnn:width=1,2,4' is three sizes (see `scalescope models`)",
           parses([](const std::string& m) { (void)make_model(m); }));
  list.add("--devices", o.devices,
           "Device counts: 1,2,4,8 (GPUs if present, else CPU), cuda:1,2,4 (GPUs: the first N "
           "visible), cpu:1,2 or sim:1,2 (simulated accelerators: the GPU code path on CPU "
           "threads) (default: 1, 2, 4, ... up to every visible GPU; without GPUs cpu:1,2, or 1 "
           "alone on one core)",
           parses([](const std::string& d) { (void)sweep_device_axis(d); }))
      .list_accepted_in_file();
  add_batch_option(list, o.batches).present_when([&o] { return o.global_batches.empty(); });
  add_global_batch_option(list, o.global_batches).present_when([&o] {
    return !o.global_batches.empty();
  });
  // A list given as text: "cnn:width=1,2,4" is three models. A --batch given on the command
  // line replaces a config file's global batch (and so the scaling mode).
  list.on_settle([&o](const OptionSources& given) {
    const std::string text = fmt::format("{}", fmt::join(o.models, ","));
    naming(given, "models", text, [&] { o.models = split_model_list(text); });
    using Source = OptionSources::Source;
    const Source batch = given.of("batch");
    SS_CHECK_INPUT(batch == Source::kDefault || batch != given.of("global_batch"),
                   "give {} (weak scaling) or {} (strong scaling), not both", given.name("batch"),
                   given.name("global_batch"));
    if (batch == Source::kCommandLine) o.global_batches.clear();
  });
  add_threads_option(list, o.threads);
  list.add("--oversubscribe", o.oversubscribe,
           "Allow more CPU threads than cores (timings then do not measure scaling)");
}

void add_measurement(OptionList& list, SweepOptions& o) {
  list.add("--repeats", o.repeats, "Independent runs per point",
           in_range(1, 1000, "must be from 1 to 1000"));
  list.add("--steps", o.steps, "Measured steps per run, after the warm-up",
           at_least<int64_t>(2, "must be at least 2 measured steps per repeat"));
  list.add("--max-warmup-steps", o.max_warmup_steps,
           "Warm-up runs until the step time settles, at most this many steps",
           at_least<int64_t>(1, "must be at least 1"));
  list.add("--steady-window", o.steady.window,
           "Steps per window when deciding the step time has settled",
           in_range(1, 1000, "must be from 1 to 1000 steps"));
  list.add("--steady-tolerance", o.steady.tolerance,
           "Settled: two windows' median step times within this fraction", [](const double& t) {
             return std::isfinite(t) && t > 0.0 && t < 1.0
                        ? std::string()
                        : std::string("must be a fraction between 0 and 1");
           });
}

void add_time_to_target(OptionList& list, SweepOptions& o) {
  add_target_options(list, o.train);
  list.add("--max-epochs", o.max_epochs,
           "With --until-accuracy or --until-loss: the most epochs each run may train",
           at_least<int64_t>(0, "must be a positive number of epochs"));
}

void add_outputs(OptionList& list, SweepOptions& o) {
  list.add("-o,--output", o.output, "Report file (JSON), rewritten after every point",
           [](const std::string& path) { return path.empty() ? "must name a file" : ""; });
  list.add("--trace", o.trace_prefix,
           "Write each point's first repeat as a Chrome/Perfetto trace named PREFIX + the "
           "point (e.g. --trace traces/ or --trace run1-)")
      .command_line_only();
  list.add("--profile-steps", o.profile_steps,
           "Measured steps A:B of every run inside a profiler capture range "
           "(cudaProfilerStart/Stop and an NVTX range 'profile'; see `scalescope profile`)",
           [](const std::string& text) {
             return text.empty() || parse_profile_steps(text)
                        ? ""
                        : "must be FIRST:LAST measured steps, 1 <= FIRST <= LAST (e.g. 3:7)";
           })
      .command_line_only();
}

// `values` with each value once, where it first appears.
template <class T>
void drop_repeats(std::vector<T>& values) {
  std::vector<T> once;
  for (const T& v : values) {
    if (std::find(once.begin(), once.end(), v) == once.end()) once.push_back(v);
  }
  values = std::move(once);
}

}  // namespace

void add_sweep_options(OptionList& list, SweepOptions& o) {
  add_axes(list, o);
  add_measurement(list, o);
  add_time_to_target(list, o);
  add_data_options(list, o.train.data);
  const TrainingAxes axes{&o.bucket_caps_mb, &o.first_buckets_mb, &o.grad_compressions,
                          &o.precisions};
  add_training_options(list, o.train, &axes);
  add_profile_layers_option(list, o.train);
  add_outputs(list, o);
}

nlohmann::json sweep_config_json(const SweepOptions& o) {
  SweepOptions copy = o;  // the declarations bind variables; these are a copy's
  OptionList list;
  add_sweep_options(list, copy);
  return options_json(list);
}

std::vector<std::string> sweep_arguments(const SweepOptions& o) {
  SweepOptions copy = o;
  SweepOptions defaults;
  OptionList list;
  OptionList default_list;
  add_sweep_options(list, copy);
  add_sweep_options(default_list, defaults);
  return options_argv(list, default_list);
}

// A token with ':' starts a model; "key=value" adds a key to the one before; a bare value
// repeats the one before with its last key set to that value.
void drop_repeated_values(SweepOptions& o) {
  drop_repeats(o.models);
  drop_repeats(o.batches);
  drop_repeats(o.global_batches);
  for (auto& [model, batches] : o.model_batches) drop_repeats(batches);
}

std::vector<std::string> split_model_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    SS_CHECK_INPUT(!item.empty(), "an empty model name");
    const bool is_value = item.find(':') == std::string::npos &&
                          item.find_first_not_of("0123456789.") == std::string::npos;
    if (!out.empty() && item.find(':') == std::string::npos &&
        item.find('=') != std::string::npos) {
      out.back() += "," + item;
    } else if (!out.empty() && is_value && out.back().find('=') != std::string::npos) {
      const std::string& last = out.back();
      out.push_back(last.substr(0, last.rfind('=') + 1) + item);
    } else {
      out.push_back(item);
    }
    start = end + 1;
  }
  return out;
}

std::optional<std::pair<int64_t, int64_t>> parse_profile_steps(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  int64_t first = 0;
  int64_t last = 0;
  const char* end = text.data() + text.size();
  const auto a = std::from_chars(text.data(), text.data() + colon, first);
  const auto b = std::from_chars(text.data() + colon + 1, end, last);
  if (a.ec != std::errc() || a.ptr != text.data() + colon || b.ec != std::errc() || b.ptr != end ||
      first < 1 || last < first) {
    return std::nullopt;
  }
  return std::pair{first, last};
}

DeviceAxis sweep_device_axis(const std::string& devices, int processes) {
  return devices.empty() ? default_device_axis(processes).axis : parse_device_axis(devices);
}

}  // namespace scalescope
