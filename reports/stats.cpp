#include "reports/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace scalescope {

double percentile(std::span<const double> values, double q) {
  SS_CHECK(!values.empty(), "percentile of no values");
  SS_CHECK(q >= 0.0 && q <= 1.0, "percentile {} outside [0, 1]", q);
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double mean(std::span<const double> values) {
  SS_CHECK(!values.empty(), "mean of no values");
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

}  // namespace scalescope
