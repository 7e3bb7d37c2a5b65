// What a faster precision does to a point's bottleneck: the points of a precision other than
// their devices' default that are communication-bound where the default's point at the same
// model, devices, batch and gradient settings is not (issue 38: as compute gets faster, the
// all-reduce's share grows).
#pragma once

#include <vector>

#include "reports/sweep_report.h"

namespace scalescope {

struct PrecisionShift {
  const SweepPoint* point = nullptr;      // communication-bound, not the default precision
  const SweepPoint* reference = nullptr;  // the default precision's twin, not
  double exposed_share = 0.0;             // exposed all-reduce ÷ step, of `point`
  double reference_exposed_share = 0.0;
  double throughput_ratio = 0.0;  // point ÷ reference
};

// Exposed all-reduce over the step time of the slowest replica (medians); 0 without steps.
double exposed_allreduce_share(const SweepPoint& p);

// The point of `points` in its devices' default precision that measured what `p` did (same
// model, devices, batch and gradient settings), or null; `p` itself when it is in the default.
const SweepPoint* default_precision_twin(const std::vector<SweepPoint>& points,
                                         const SweepPoint& p);

// In report order. The views point into `points`.
std::vector<PrecisionShift> communication_bound_by_precision(const std::vector<SweepPoint>& points);

}  // namespace scalescope
