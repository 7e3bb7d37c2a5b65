// Exposed all-reduce against the gradient bucket cap, one model: a line per device count,
// batch and first-bucket cap that the sweep measured with several caps (log-scaled caps,
// linear milliseconds from 0), the best throughput's cap ringed. What bucket size buys in
// overlap, the question DDP users ask most often.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reports/html/view.h"

namespace scalescope::html {

struct BucketChartData {
  struct Series {
    std::string label;  // "cpu:2, batch 32/device" (+ ", first 0.5 MB")
    std::string color;
    std::vector<BucketChoice::Setting> settings;  // ascending cap
    double best_cap_mb = 0;  // of the group's best throughput; 0 when in another series
  };
  std::string model;
  std::vector<Series> series;
  std::vector<double> caps;              // every cap measured, ascending (the x ticks)
  double y_hi = 1;                       // ms
  std::vector<std::string> conclusions;  // one per group, for the text under the chart
};

BucketChartData prepare_buckets(const ModelView& m);
std::string draw_buckets(const BucketChartData& d);

}  // namespace scalescope::html
