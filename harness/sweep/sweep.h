// Scaling sweeps: the mirrored trainer over a grid of models × device counts × batch sizes,
// each point warmed up until its step time settles, measured, and repeated; the report
// written after every point so that a crash keeps what was finished.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/device_spec.h"
#include "harness/trainer/trainer.h"
#include "reports/sweep_report.h"

namespace scalescope {

struct SweepOptions {
  // The default sweep finishes in well under a minute on 2 cores and shows two stories:
  // a convolutional net that scales well and an MLP whose gradients swamp the link.
  std::vector<std::string> models = {"cifar-cnn", "mlp:scale=0.1"};
  // Device counts, all of one kind ("cpu:1,2", "cuda:1,2,4" or "1,2,4,8": GPUs when the
  // machine has them, CPU devices otherwise).
  std::string devices = "";  // "" = 1 and 2 (2 only where it fits); see resolve_devices
  ScalingMode mode = ScalingMode::kWeak;
  std::vector<int64_t> batches = {32, 64};  // weak: per device; strong: global
  int threads = 0;                          // per CPU device; 0: usable cores / most devices
  bool oversubscribe = false;               // allow CPU devices × threads > usable cores
  int repeats = 3;
  int64_t steps = 20;             // measured steps per repeat
  int64_t max_warmup_steps = 40;  // the warm-up stops here even if not settled
  SteadyStateOptions steady;      // when the step time counts as settled
  TrainOptions train;             // optimizer, data, buckets, overlap, seed, timeouts
  std::string output = "scalescope-report.json";
  // Chrome traces: each point's first repeat written to trace_prefix + a name of the point
  // (+ ".trace.json"); "" writes none. The point records its trace's path.
  std::string trace_prefix;
  std::string command_line;
};

// "cifar-cnn,cnn:width=1,2,4" → cifar-cnn, cnn:width=1, cnn:width=2, cnn:width=4. Throws
// Error naming an empty item.
std::vector<std::string> split_model_list(const std::string& text);

// "32,64,128" → its values, each from 1 to `max`; throws Error "FLAG: 'ITEM' is not WHAT
// (accepted: ACCEPTED)" for the first bad item.
std::vector<int64_t> parse_positive_list(std::string_view text, int64_t max,
                                         const std::string& flag, const std::string& what,
                                         const std::string& accepted);

// "A:B" → measured steps A..B (1-based) for the profiler's capture range; throws Error
// naming the text.
std::pair<int64_t, int64_t> parse_profile_steps(const std::string& text);
// A file-name-safe name of a point: "cifar-cnn_cpu2_b64".
std::string point_file_name(const SweepPoint& point);

// The config file's keys (JSON): the long flag names with '-' as '_'. Unknown keys, wrong
// types and bad values are errors naming the key.
void apply_sweep_config(const nlohmann::json& config, SweepOptions& options,
                        const std::string& what);
nlohmann::json sweep_config_json(const SweepOptions& options);

// The device axis: one kind and ascending unique counts.
struct DeviceAxis {
  DeviceKind kind = DeviceKind::kCpu;
  std::vector<int> counts;
};
// Parses options.devices (the default when empty: cpu 1,2 — or 1 alone on one core).
// Throws Error naming the value when malformed or when a count exceeds what the machine has.
DeviceAxis resolve_devices(const SweepOptions& options);

// Every check that needs no measurement: models, axes, device counts against the machine,
// strong-scaling divisibility, option ranges. Throws Error naming the value.
void validate(const SweepOptions& options);

struct SweepProgress {
  // Before every repeat of every point: `done` runs finished out of `total`.
  std::function<void(const SweepPoint& point, int repeat, int done, int total, double elapsed_s)>
      on_run;
  std::function<void(const SweepPoint& point)> on_point_done;
};

// Runs the grid (skipping points already in `resume`, when given) and returns the report;
// writes it to options.output after every point. A point that fails is recorded with its
// error and the sweep goes on.
SweepReport run_sweep(const SweepOptions& options, const Environment& environment,
                      const SweepProgress& progress, const SweepReport* resume = nullptr);

}  // namespace scalescope
