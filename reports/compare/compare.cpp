#include "reports/compare/compare.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "core/check.h"
#include "core/enum_names.h"

namespace scalescope {

std::string_view to_string(PointStatus status) {
  static constexpr auto kNames = enum_names<PointStatus>(
      "compared", "only in the baseline", "only in the current report",
      "failed in the current report", "failed in the baseline", "failed in both");
  return kNames(status);
}

int PointComparison::regressions() const {
  return static_cast<int>(std::count_if(metrics.begin(), metrics.end(), [](const auto& m) {
    return m.change == Change::kRegressed;
  }));
}

int PointComparison::improvements() const {
  return static_cast<int>(std::count_if(
      metrics.begin(), metrics.end(), [](const auto& m) { return m.change == Change::kImproved; }));
}

bool PointComparison::weak() const {
  return std::any_of(metrics.begin(), metrics.end(),
                     [](const MetricComparison& m) { return !m.test.exact_enough; });
}

int Comparison::regressions() const {
  int n = 0;
  for (const PointComparison& p : points) n += p.regressions();
  return n;
}

int Comparison::improvements() const {
  int n = 0;
  for (const PointComparison& p : points) n += p.improvements();
  return n;
}

int Comparison::newly_failed() const {
  return static_cast<int>(std::count_if(points.begin(), points.end(), [](const auto& p) {
    return p.status == PointStatus::kFailedInCurrent;
  }));
}

int Comparison::compared() const {
  return static_cast<int>(std::count_if(points.begin(), points.end(), [](const auto& p) {
    return p.status == PointStatus::kCompared;
  }));
}

bool Comparison::weak() const {
  return std::any_of(points.begin(), points.end(),
                     [](const PointComparison& p) { return p.weak(); });
}

bool Comparison::regressed() const {
  return regressions() > 0 || newly_failed() > 0;
}

namespace {

struct PointSamples {
  std::vector<double> step_ms;
  // Per phase (by index_of), the slowest replica's phase per step; all empty when a step has
  // no replica record.
  std::array<std::vector<double>, kPhaseCount> phases;
};

PointSamples samples_of(const SweepPoint& p) {
  PointSamples out;
  bool replicas = true;
  for (const RepeatRecord& r : p.repeats) {
    for (const StepRecord& s : r.steps) {
      out.step_ms.push_back(s.step_ms);
      replicas = replicas && !s.replicas.empty();
      if (!replicas) continue;
      const PhaseTimes& slowest = slowest_replica(s.replicas);
      for (const PhaseDef& d : kPhases) out.phases[index_of(d.phase)].push_back(slowest[d.phase]);
    }
  }
  if (!replicas) {
    for (std::vector<double>& v : out.phases) v.clear();
  }
  SS_CHECK(!out.step_ms.empty(), "point {} is ok but has no measured steps", p.label());
  return out;
}

void compare_point(PointComparison& out, const SweepPoint& base, const SweepPoint& cur,
                   const CompareOptions& options) {
  const PointSamples b = samples_of(base);
  const PointSamples c = samples_of(cur);
  out.baseline_steps = static_cast<int64_t>(b.step_ms.size());
  out.current_steps = static_cast<int64_t>(c.step_ms.size());
  const auto add = [&](Metric metric, double baseline, double current, const MannWhitney& test,
                       bool material) {
    out.metrics.push_back(compare_metric(metric, baseline, current, test, material, options));
  };
  const MannWhitney step_test = mann_whitney_u(c.step_ms, b.step_ms);
  const double step_b = median(b.step_ms);
  const double step_c = median(c.step_ms);
  add(Metric::kThroughput, static_cast<double>(base.global_batch) * 1e3 / step_b,
      static_cast<double>(cur.global_batch) * 1e3 / step_c, step_test, true);
  add(Metric::kStepTime, step_b, step_c, step_test, true);
  // At one device efficiency is 1 by definition: nothing to compare.
  if (base.devices > 1 && base.summary.efficiency && cur.summary.efficiency) {
    add(Metric::kEfficiency, base.summary.efficiency->value, cur.summary.efficiency->value,
        step_test, true);
  }
  for (const PhaseDef& d : kPhases) {
    const std::vector<double>& pb = b.phases[index_of(d.phase)];
    const std::vector<double>& pc = c.phases[index_of(d.phase)];
    if (pb.empty() || pc.empty()) continue;
    const double mb = median(pb);
    const double mc = median(pc);
    if (mb == 0.0 && mc == 0.0) continue;  // a phase neither run has (all-reduce at 1 device)
    const bool material = std::abs(mc - mb) >= options.min_phase_change * step_b;
    add(Metric::of(d.phase), mb, mc, mann_whitney_u(pc, pb), material);
  }
}

std::map<std::string, const SweepPoint*> index_points(const SweepReport& report,
                                                      const std::string& name) {
  std::map<std::string, const SweepPoint*> out;
  for (const SweepPoint& p : report.points) {
    SS_CHECK(out.emplace(p.key(), &p).second,
             "report {} has two points for {}: compare cannot tell which to match", name,
             p.label());
  }
  return out;
}

ReportInfo info_of(const SweepReport& report, const std::string& name) {
  return {name,
          report.created,
          report.tool_version,
          report.environment.build.git_commit,
          report.environment.build.git_dirty,
          report.complete};
}

}  // namespace

Comparison compare_reports(const SweepReport& baseline, const SweepReport& current,
                           const CompareOptions& options, const std::string& baseline_name,
                           const std::string& current_name) {
  SS_CHECK(options.alpha > 0.0 && options.alpha < 1.0,
           "alpha {} is not a significance level (accepted: 0 < alpha < 1, e.g. 0.05)",
           options.alpha);
  SS_CHECK(options.min_phase_change >= 0.0, "minimum phase change {} is negative",
           options.min_phase_change);
  Comparison out;
  out.options = options;
  out.baseline = info_of(baseline, baseline_name);
  out.current = info_of(current, current_name);
  out.environment = compare_environments(baseline.environment, current.environment);
  const auto base_points = index_points(baseline, baseline_name);
  const auto cur_points = index_points(current, current_name);
  for (const SweepPoint& b : baseline.points) {
    PointComparison pc;
    pc.key = b.key();
    pc.label = b.label();
    pc.baseline_error = b.error;
    const auto it = cur_points.find(pc.key);
    if (it == cur_points.end()) {
      pc.status = PointStatus::kOnlyInBaseline;
    } else {
      const SweepPoint& c = *it->second;
      pc.current_error = c.error;
      if (b.ok() && c.ok()) {
        pc.status = PointStatus::kCompared;
        compare_point(pc, b, c, options);
      } else if (b.ok()) {
        pc.status = PointStatus::kFailedInCurrent;
      } else if (c.ok()) {
        pc.status = PointStatus::kFailedInBaseline;
      } else {
        pc.status = PointStatus::kFailedInBoth;
      }
    }
    out.points.push_back(std::move(pc));
  }
  for (const SweepPoint& c : current.points) {
    if (base_points.count(c.key()) != 0) continue;
    PointComparison pc;
    pc.key = c.key();
    pc.label = c.label();
    pc.current_error = c.error;
    pc.status = PointStatus::kOnlyInCurrent;
    out.points.push_back(std::move(pc));
  }
  return out;
}

}  // namespace scalescope
