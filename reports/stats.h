// Order statistics over samples (step times and the like).
#pragma once

#include <span>
#include <vector>

namespace scalescope {

// Linear interpolation between closest ranks (NumPy's default). q in [0, 1].
// REQUIRES: values non-empty.
double percentile(std::span<const double> values, double q);
inline double median(std::span<const double> values) {
  return percentile(values, 0.5);
}
double mean(std::span<const double> values);

}  // namespace scalescope
