// Speedup against devices, one model: per batch, the measured speedups (with their 95%
// intervals), the ideal y = N, and the all-reduce model's projection dashed in a shaded
// "projected" band; log-log, so the ideal line is the diagonal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

struct SpeedupData {
  struct Measured {
    int devices = 0;
    Interval speedup;
    std::optional<double> efficiency;
    std::string label;  // the point's
  };
  struct Projected {
    int devices = 0;
    double speedup = 0;
    double efficiency = 0;
    double step_ms = 0;
    double exposed_ms = 0;
  };
  struct Failed {
    int devices = 0;
    std::string label;
    std::string error;
  };
  struct Series {
    int64_t batch = 0;
    std::string batch_text;
    std::string color;
    std::vector<Measured> measured;  // ok points with a speedup, by device count
    std::vector<Failed> failed;
    bool unknown = false;  // ok points without a speedup (no one-device baseline)
    // The projection, from the measured point it starts at (when measured) onwards.
    std::optional<Measured> projected_from;
    std::vector<Projected> projected;
  };
  std::string model;
  std::string device_kind;
  std::vector<Series> series;  // one per batch, ascending
  // Axes: devices 1 .. x_hi, speedup y_lo .. y_hi, powers of two.
  double x_hi = 2;
  double y_lo = 1;
  double y_hi = 2;
  int measured_max = 1;  // the most devices measured: the projected band starts beyond
  bool any_projection = false;
  bool any_failed = false;
  std::vector<std::string> notes;  // under the chart: what is missing and why
};

SpeedupData prepare_speedup(const ModelView& m);
std::string draw_speedup(const SpeedupData& d);

}  // namespace scalescope::html
