// Constructed sweep points with known samples, for the tests of everything that reads
// reports (analysis, tables, HTML, compare, exports).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "reports/analysis/sweep_analysis.h"
#include "reports/sweep_report.h"

namespace scalescope::testing_util {

struct PointSpec {
  std::string model = "m";
  int devices = 1;
  ScalingMode mode = ScalingMode::kWeak;
  int64_t batch = 32;  // per device (weak) or global (strong)
  int repeats = 2;
  int steps = 10;
  // The group's step time of step i of repeat r (default: `step_ms` for every step).
  double step_ms = 10.0;
  std::function<double(int repeat, int step)> step_time{};
  // Replicas other than 0 take this share of replica 0's step (replica 0 is the slowest:
  // the group's phases are its phases).
  double other_replicas = 1.0;
  // Phases as shares of a replica's step; the optimizer takes what is left unless given
  // (then the rest is time no phase accounts for).
  double input = 0.1, h2d = 0.0, forward = 0.3, backward = 0.4, optimizer = -1.0;
  double exposed = 0.1;  // of the exposed all-reduce, with more than one device only
  // Buckets; each all-reduce takes alpha + beta · bytes · 2(N−1)/N ms (none on one device).
  std::vector<int64_t> bucket_bytes{1 << 20, 4 << 20};
  double alpha = 0.5;
  double beta = 1e-6;
  int64_t params = 0;
};

inline SweepPoint make_point(const PointSpec& spec) {
  SweepPoint p;
  p.model = spec.model;
  p.params = spec.params;
  p.device_kind = "cpu";
  p.devices = spec.devices;
  p.device_spec = "cpu:" + std::to_string(spec.devices);
  p.mode = spec.mode;
  p.batch = spec.mode == ScalingMode::kWeak ? spec.batch : spec.batch / spec.devices;
  p.global_batch = spec.mode == ScalingMode::kWeak ? spec.batch * spec.devices : spec.batch;
  p.bucket_bytes = spec.bucket_bytes;
  for (int r = 0; r < spec.repeats; ++r) {
    RepeatRecord rep;
    for (int i = 0; i < spec.steps; ++i) {
      StepRecord s;
      s.step = i + 1;
      s.step_ms = spec.step_time ? spec.step_time(r, i) : spec.step_ms;
      for (int k = 0; k < spec.devices; ++k) {
        const double step = k == 0 ? s.step_ms : spec.other_replicas * s.step_ms;
        PhaseTimes t;
        t[Phase::kInput] = spec.input * step;
        t[Phase::kH2D] = spec.h2d * step;
        t[Phase::kForward] = spec.forward * step;
        t[Phase::kBackward] = spec.backward * step;
        t[Phase::kAllReduceExposed] = spec.devices > 1 ? spec.exposed * step : 0.0;
        t[Phase::kAllReduce] = 2.0 * t[Phase::kAllReduceExposed];
        t[Phase::kOptimizer] =
            spec.optimizer >= 0.0 ? spec.optimizer * step : step - t.exposed_sum_ms();
        t.step_ms = step;
        s.replicas.push_back(t);
      }
      for (int64_t b : spec.bucket_bytes) {
        const double bus = static_cast<double>(b) * bus_factor(spec.devices);
        s.bucket_ms.push_back(spec.devices > 1 ? spec.alpha + spec.beta * bus : 0.0);
      }
      rep.steps.push_back(std::move(s));
    }
    p.repeats.push_back(std::move(rep));
  }
  return p;
}

inline SweepPoint failed_point(PointSpec spec, const std::string& error) {
  SweepPoint p = make_point(spec);
  p.status = "failed";
  p.error = error;
  p.repeats.clear();
  return p;
}

// A complete report of `points`, analysed.
inline SweepReport report_of(std::vector<SweepPoint> points) {
  SweepReport r;
  r.tool_version = "test";
  r.created = "2026-01-01T00:00:00Z";
  r.config = nlohmann::json::object();
  r.points = std::move(points);
  r.complete = true;
  analyze(r);
  return r;
}

}  // namespace scalescope::testing_util
