// Time to accuracy across a sweep: how long each point's repeats trained until an evaluation
// reached the target, and, against one device, that speedup split into its two factors.
//
// With T the training time to the target and E the samples trained on until then:
//   time-to-target speedup  = T(1 device) / T(N devices)
//   statistical efficiency  = E(1 device) / E(N devices): the larger global batch needs more
//                             samples for the same progress (at most 1 in expectation);
//   hardware speedup        = the ratio of the runs' mean throughputs, E/T at N over E/T at 1,
// so that speedup = hardware × statistical, exactly, from the same medians. The noise scale
// predicts the statistical factor (reports/analysis/noise_scale.h): (B_1 + B_noise) / (B_N +
// B_noise).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>

#include "reports/run_report.h"

namespace scalescope {

struct TimeToTarget {
  std::string metric;  // "accuracy" or "loss"
  double value = 0.0;  // the target
  int repeats = 0;
  int reached = 0;  // repeats that reached it
  // Medians over the repeats that reached it (0 when none did).
  double steps = 0.0;
  double samples = 0.0;
  double epochs = 0.0;
  double train_s = 0.0;
  double wall_s = 0.0;
  // Against the one-device point of the same model and batch, when both reached the target
  // in every repeat.
  std::optional<double> speedup;
  std::optional<double> hardware;
  std::optional<double> statistical;
  // What the noise scale measured at this point predicts for `statistical`.
  std::optional<double> predicted_statistical;
  bool all_reached() const { return repeats > 0 && reached == repeats; }
};

// REQUIRES: targets non-empty, all of one metric and value.
TimeToTarget summarize_targets(std::span<const TargetRecord> targets);
// Fills at_n's speedup and its factors against `one` when both reached the target every time.
void compare_targets(TimeToTarget& at_n, const TimeToTarget& one);

nlohmann::json to_json(const TimeToTarget& t);
// "2.10x = 3.05x hardware × 69% statistical (B_noise predicted 62%)" or why there is none.
std::string speedup_text(const TimeToTarget& t);

}  // namespace scalescope
