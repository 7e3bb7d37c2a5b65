// The gradient noise scale against the global batch, one model: per point with a noise scale
// (--noise-scale, more than one device), its B_noise as a marker with the 95% CI as a whisker,
// and the diagonal where the global batch equals B_noise. A point far right of / below the
// diagonal trains past its noise scale: each extra sample of its batch buys little, so its
// throughput speedup overstates the speedup in time to a target. The sentences under the
// chart say by how much.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

struct NoiseChartData {
  struct Point {
    std::string label;  // "cpu:4, batch 32/device"
    int devices = 0;
    int64_t global_batch = 0;
    int64_t steps = 0;  // the measured steps the estimate pools
    std::string color;  // its batch's series colour (as in the speedup chart)
    // Absent when the mean |G|² estimate was not positive. `high` may be +infinity: the steps
    // bound B_noise from below only.
    std::optional<Interval> b_noise;
    // Drawn on the chart: a B_noise above zero (the axis is logarithmic).
    bool drawn = false;
    // Where several points share a global batch, their markers are spread sideways by this
    // many marker widths (0 for a point alone at its batch).
    double dodge = 0;
    double steps_over_minimum = 0;       // 1 + B_noise / global batch; with b_noise
    std::optional<double> efficiency;    // statistical, against the one-device point
    std::optional<double> speedup;       // throughput, against the one-device point
    std::optional<double> time_speedup;  // speedup × efficiency
    std::string sentence;                // for the text under the chart
  };
  struct Series {
    std::string label;  // "batch 32/device"
    std::string color;
  };
  std::string model;
  std::vector<Point> points;     // by batch, then devices
  std::vector<Series> series;    // the batches with a drawn point (the legend)
  std::vector<int64_t> x_ticks;  // the global batches of the model's points, ascending
  // Axis domains (powers of two): x the global batches, y B_noise and the diagonal over x.
  double x_lo = 1, x_hi = 2, y_lo = 1, y_hi = 2;
  bool any_unbounded = false;      // a CI with no upper bound
  bool any_clipped = false;        // a CI end beyond the axis (drawn open)
  std::vector<std::string> notes;  // under the plot, inside the chart
};

// Whether the model has a point with a noise scale (the page draws the figure only then).
bool has_noise(const ModelView& m);

// REQUIRES: has_noise(m).
NoiseChartData prepare_noise(const ModelView& m);
std::string draw_noise(const NoiseChartData& d);

}  // namespace scalescope::html
