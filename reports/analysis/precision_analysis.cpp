#include "reports/analysis/precision_analysis.h"

#include <algorithm>

namespace scalescope {
namespace {

bool communication_bound(const SweepPoint& p) {
  return p.ok() && p.summary.verdict.top().kind == "communication-bound";
}

// The same measurement but for the precision.
bool twins(const SweepPoint& a, const SweepPoint& b) {
  return a.model == b.model && a.device_kind == b.device_kind && a.devices == b.devices &&
         a.mode == b.mode && a.batch == b.batch && a.global_batch == b.global_batch &&
         a.bucket_cap_mb == b.bucket_cap_mb && a.first_bucket_mb == b.first_bucket_mb &&
         a.grad_compression == b.grad_compression;
}

}  // namespace

double exposed_allreduce_share(const SweepPoint& p) {
  const PhaseMedians& g = p.summary.group;
  return g.step_ms > 0.0 ? g[Phase::kAllReduceExposed] / g.step_ms : 0.0;
}

const SweepPoint* default_precision_twin(const std::vector<SweepPoint>& points,
                                         const SweepPoint& p) {
  const auto twin = std::find_if(points.begin(), points.end(), [&](const SweepPoint& q) {
    return q.precision_default && twins(p, q);
  });
  return twin == points.end() ? nullptr : &*twin;
}

std::vector<PrecisionShift> communication_bound_by_precision(
    const std::vector<SweepPoint>& points) {
  std::vector<PrecisionShift> out;
  for (const SweepPoint& p : points) {
    if (p.precision_default || !communication_bound(p)) continue;
    const SweepPoint* twin = default_precision_twin(points, p);
    if (twin == nullptr || !twin->ok() || communication_bound(*twin)) continue;
    out.push_back({.point = &p,
                   .reference = twin,
                   .exposed_share = exposed_allreduce_share(p),
                   .reference_exposed_share = exposed_allreduce_share(*twin),
                   .throughput_ratio = p.summary.throughput.value /
                                       std::max(twin->summary.throughput.value, 1e-12)});
  }
  return out;
}

}  // namespace scalescope
