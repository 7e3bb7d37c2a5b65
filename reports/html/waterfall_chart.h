// Efficiency-loss waterfall at the largest device count of one batch: ideal 100%, minus each
// share the loss breakdown attributes, down to the measured efficiency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

struct WaterfallData {
  struct Loss {
    std::string key;  // data-step: the cause's JSON key
    std::string line1;
    std::string line2;  // "" when the label is one line
    double share = 0;   // lost (positive) or gained (negative)
    double from = 0;    // the efficiency before this share, and after it
    double to = 0;
    std::string color;
    // No loss beyond measurement noise (LossComponent::beyond_noise): drawn grey, labelled
    // "within noise" (its interval holds 0) or "no loss" (below 0).
    bool noise = false;
    std::string noise_label;
    std::string interval;  // "95% interval of the share -0.8% to 1.2%", when there is one
  };
  std::string model;
  std::string device_kind;
  int devices = 0;
  int64_t batch = 0;
  std::string batch_text;
  double efficiency = 0;
  double lost = 0;
  // A bar per loss cause (kLossCauses, the all-reduce's split in two across nodes): from 1
  // down to efficiency.
  std::vector<Loss> losses;
  // The efficiency axis: from lo to hi in steps of `tick`, the bars' range rounded out.
  double lo = 0;
  double hi = 1;
  double tick = 0.2;
};

struct WaterfallsData {
  std::vector<WaterfallData> charts;  // per batch with a loss breakdown, ascending
  std::vector<std::string> missing;   // the other batches, as text
};

WaterfallsData prepare_waterfalls(const ModelView& m);
std::string draw_waterfall(const WaterfallData& d);

}  // namespace scalescope::html
