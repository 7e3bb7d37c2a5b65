// analyze_compression(): what gradient compression changed, point against point. Points that
// differ only in their compression are compared with the uncompressed one: the bytes each
// all-reduced, the exposed all-reduce, the casts, the step time and the throughput (with its
// confidence interval), and the efficiency each reached against one device.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "reports/analysis/stats.h"
#include "reports/analysis/sweep_analysis.h"
#include "reports/sweep_report.h"

namespace scalescope {
namespace {

// The points that differ only in their compression: same model, devices, batch axis, bucket
// caps and precision.
std::string compression_group_key(const SweepPoint& p) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", p.model, p.device_kind, p.devices,
                     to_string(p.mode), p.mode == ScalingMode::kWeak ? p.batch : p.global_batch,
                     p.bucket_cap_mb, p.first_bucket_mb, to_string(p.precision));
}

CompressionEffect::Setting setting_of(const SweepPoint& p) {
  const PointSummary& s = p.summary;
  CompressionEffect::Setting out;
  out.compression = p.grad_compression;
  out.bytes_per_step = allreduce_bytes(p.bucket_bytes);
  out.throughput = s.throughput.value;
  out.step_ms = s.step_ms_median;
  out.allreduce_ms = s.group[Phase::kAllReduce];
  out.exposed_ms = s.group[Phase::kAllReduceExposed];
  out.cast_ms = s.group[Phase::kGradCast];
  out.efficiency = s.efficiency;
  return out;
}

// REQUIRES: group holds exactly one uncompressed point and at least one compressed one.
CompressionEffect compare(std::vector<const SweepPoint*> group) {
  std::sort(group.begin(), group.end(), [](const SweepPoint* a, const SweepPoint* b) {
    return a->grad_compression < b->grad_compression;
  });
  const SweepPoint& none = *group.front();
  CompressionEffect e;
  static_cast<PointGroup&>(e) = PointGroup::of(none);
  e.cap_mb = none.bucket_cap_mb;
  e.first_mb = none.first_bucket_mb;
  const std::vector<double> reference = pooled_step_ms(none);
  for (const SweepPoint* p : group) {
    CompressionEffect::Setting s = setting_of(*p);
    if (p->compressed()) {
      s.saved_ms = none.summary.step_ms_median - s.step_ms;
      // Same global batch: the throughput ratio is the inverse ratio of the median step times.
      s.gain = bootstrap_median_ratio_ci(reference, pooled_step_ms(*p));
    }
    e.settings.push_back(s);
  }
  return e;
}

}  // namespace

std::vector<CompressionEffect> analyze_compression(const std::vector<SweepPoint>& points) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const SweepPoint*>> groups;
  for (const SweepPoint& p : points) {
    if (!p.ok() || p.devices < 2 || p.repeats.empty()) continue;
    const std::string key = compression_group_key(p);
    if (!groups.contains(key)) order.push_back(key);
    groups[key].push_back(&p);
  }
  std::vector<CompressionEffect> out;
  for (const std::string& key : order) {
    const std::vector<const SweepPoint*>& group = groups[key];
    const auto uncompressed = std::count_if(group.begin(), group.end(),
                                            [](const SweepPoint* p) { return !p->compressed(); });
    // A resumed report cannot hold two points of one key; one without the other compares
    // nothing.
    if (uncompressed == 1 && group.size() >= 2) out.push_back(compare(group));
  }
  return out;
}

std::string compression_conclusion(const CompressionEffect& e, size_t i) {
  const CompressionEffect::Setting& none = e.settings.front();
  const CompressionEffect::Setting& s = e.settings[i];
  const std::string what = fmt::format(
      "{}: {:.3g} of {:.3g} MB per step, exposed all-reduce {:.2f} -> {:.2f} ms (casts {:.2f} "
      "ms), step {:.2f} ms {}",
      to_string(s.compression), static_cast<double>(s.bytes_per_step) / 1e6,
      static_cast<double>(none.bytes_per_step) / 1e6, none.exposed_ms, s.exposed_ms, s.cast_ms,
      std::abs(s.saved_ms), s.saved_ms >= 0.0 ? "shorter" : "longer");
  const Interval g = s.gain.value_or(Interval{});
  const std::string gain = fmt::format("{:.3f}x [{:.3f}, {:.3f}]", g.value, g.low, g.high);
  if (s.faster()) return fmt::format("{}; {} the throughput of none", what, gain);
  return fmt::format("{}; no faster than none ({}, the interval {})", what, gain,
                     g.high < 1.0 ? "is below 1: slower" : "includes 1");
}

}  // namespace scalescope
