// Efficiency with and without gradient compression, one model: per group of points that differ
// only in their compression (device count, batch, bucket caps), a bar per setting (none, fp16,
// bf16) of the scaling efficiency against one device, its 95% CI as a whisker. Whether halving
// the bytes all-reduced pays for the casts, at a glance; the sentences under the chart say by
// how much.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

// The colour of a setting's bars and legend swatch (the same in every group).
std::string compression_color(GradCompression compression);

struct CompressionChartData {
  struct Bar {
    GradCompression compression = GradCompression::kNone;
    std::optional<Interval> efficiency;  // absent (no bar) without a one-device point
    double step_ms = 0;                  // median
    int64_t bytes_per_step = 0;          // all-reduced per replica
  };
  struct Group {
    std::string label;      // "cpu:2, batch 32/device" (+ ", bucket 5 MB" for other caps)
    std::vector<Bar> bars;  // the effect's settings: none first
  };
  std::string model;
  std::vector<Group> groups;                  // one per CompressionEffect, report order
  std::vector<GradCompression> compressions;  // every setting measured, in order (the legend)
  double y_hi = 1;                            // efficiency (a fraction), at least 1
  // For the text under the chart: one per compressed setting (compression_conclusion, after
  // its group's label); `missing`: one per group with settings that have no efficiency.
  std::vector<std::string> conclusions;
  std::vector<std::string> missing;
};

// REQUIRES: m.compression_effects non-empty.
CompressionChartData prepare_compression(const ModelView& m);
std::string draw_compression(const CompressionChartData& d);

}  // namespace scalescope::html
