// Report pairs for the tests of compare: a one- and a two-device point whose step times
// jitter deterministically, and lookups of a point's metrics.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "reports/compare/compare.h"
#include "tests/reports/sweep_fixtures.h"

namespace scalescope::compare_testing {

// A point whose step times jitter around `step_ms` by up to ±noise (relative), deterministically
// from `seed`; every phase is a fixed share of its step.
struct PointSpec {
  std::string model = "m";
  int devices = 2;
  int64_t batch = 32;
  double step_ms = 10.0;
  double noise = 0.01;
  int repeats = 2;
  int steps = 12;
  double h2d_share = 0.005;
  double exposed_share = 0.1;  // devices > 1 only
  uint32_t seed = 1;
};

inline SweepPoint make_point(const PointSpec& spec) {
  // Step times jitter by up to ±noise from an LCG: the same samples on every machine.
  auto state = std::make_shared<uint32_t>(spec.seed * 2654435761u + 12345u);
  return testing_util::make_point({.model = spec.model,
                                   .devices = spec.devices,
                                   .batch = spec.batch,
                                   .repeats = spec.repeats,
                                   .steps = spec.steps,
                                   .step_time =
                                       [state, spec](int, int) {
                                         *state = *state * 1664525u + 1013904223u;
                                         const double u = static_cast<double>(*state >> 8) /
                                                          static_cast<double>(1u << 24);
                                         return spec.step_ms * (1.0 + spec.noise * (2.0 * u - 1.0));
                                       },
                                   .other_replicas = 0.95,
                                   .h2d = spec.h2d_share,
                                   .exposed = spec.exposed_share,
                                   .bucket_bytes = {1 << 20},
                                   .alpha = 0.0,
                                   .beta = 0.0});
}

// A one-device and a two-device point of model "m"; the two-device one as `two` says.
inline SweepReport pair_report(const PointSpec& two) {
  PointSpec one = two;
  one.devices = 1;
  one.step_ms = 8.0;
  one.noise = 0.01;
  one.seed = two.seed + 100;
  return testing_util::report_of({make_point(one), make_point(two)});
}

inline Comparison compare(const SweepReport& base, const SweepReport& cur, CompareOptions o = {}) {
  return compare_reports(base, cur, o, "base.json", "cur.json");
}

// The pair `spec` describes against the same pair with the two-device point's steps taking
// `step_ms` and jittered from `seed`.
inline Comparison changed(PointSpec spec, double step_ms, uint32_t seed,
                          const CompareOptions& o = {}) {
  const SweepReport base = pair_report(spec);
  spec.step_ms = step_ms;
  spec.seed = seed;
  return compare(base, pair_report(spec), o);
}

inline const MetricComparison& metric_of(const PointComparison& p, Metric m) {
  for (const MetricComparison& c : p.metrics) {
    if (c.metric == m) return c;
  }
  ADD_FAILURE() << "no " << metric_name(m) << " in " << p.label;
  static const MetricComparison none;
  return none;
}

inline bool has_metric(const PointComparison& p, Metric m) {
  for (const MetricComparison& c : p.metrics) {
    if (c.metric == m) return true;
  }
  return false;
}

}  // namespace scalescope::compare_testing
