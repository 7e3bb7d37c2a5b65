// Time to a target (--until-accuracy / --until-loss), one model: per point of more than one
// device, its time-to-target speedup against the one-device point of its batch split into its
// factors. Two bars, the hardware speedup (throughput) and the time-to-target speedup (hardware
// × statistical efficiency); the ideal, N, as a dashed line over them; and, where the point
// measured a noise scale, the time-to-target speedup B_noise predicted (hardware × predicted
// statistical efficiency) as a ring. The gap between the bars is what the larger global batch
// cost in samples; the sentences under the chart give every point's numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/analysis/time_to_target.h"
#include "reports/html/view.h"

namespace scalescope::html {

struct TargetChartData {
  struct Point {
    std::string label;  // "cpu:4, batch 32/device"
    std::string tick;   // its x label: "cpu:4" (+ ", batch 32" when the model has more batches)
    int devices = 0;
    // Its repeats' medians and, against the one-device point of the same batch, its speedup
    // and factors (absent: `sentence` says why).
    TimeToTarget time;
    std::optional<double> predicted_speedup;  // hardware × predicted statistical efficiency
    std::string sentence;                     // for the text under the chart
  };
  std::string model;
  std::string target;         // "accuracy 0.75"
  std::vector<Point> points;  // every point with a target: by batch, then devices
  // The multi-device points, in `points`' order: a group of bars each (n/a without a speedup).
  std::vector<size_t> drawn;
  bool any_predicted = false;  // a ring to draw (and a note under the plot on what it is)
  double y_hi = 1;             // the y axis' top (a speedup), above every bar, ring and ideal
};

// Whether the model has a point that trained to a target (the page draws the figure only then).
bool has_target(const ModelView& m);

// REQUIRES: has_target(m).
TargetChartData prepare_target(const ModelView& m);
std::string draw_target(const TargetChartData& d);

}  // namespace scalescope::html
