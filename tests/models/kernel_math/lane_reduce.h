// A warp's lanes emulated one after another on the host: RecordingReduce records a whole row's
// reductions in call order (one thread taking every column), ReplayingReduce then gives each
// lane those totals while it keeps the lane's partial values, so that a test can check that the
// lanes' shares of a row combine to the row and that each lane writes what the whole row's
// thread wrote for its columns.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace scalescope::kernel_math_test {

struct RecordingReduce {
  mutable std::vector<double> totals;
  float max(float v) const {
    totals.push_back(v);
    return v;
  }
  double sum(double v) const {
    totals.push_back(v);
    return v;
  }
};

struct ReplayingReduce {
  const std::vector<double>& totals;
  std::vector<double>& partials;  // per reduction, summed (or maxed) over the lanes so far
  mutable size_t next = 0;
  float max(float v) const {
    partials[next] = std::fmax(partials[next], v);
    return static_cast<float>(totals[next++]);
  }
  double sum(double v) const {
    partials[next] += v;
    return totals[next++];
  }
};

}  // namespace scalescope::kernel_math_test
