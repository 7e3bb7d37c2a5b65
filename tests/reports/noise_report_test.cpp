// The noise scale in sweep reports: points' estimates from their steps' norms, the statistical
// scaling against one device and its verdict finding, the tables, and the JSON round trip.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reports/sweep_report.h"
#include "reports/writers/table.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::make_point;
using testing_util::PointSpec;
using testing_util::report_of;

constexpr double kGradSq = 2.0;

// Every step's norms as the noise model predicts them for |G|² = 2 and tr(Σ) = 2·b_noise,
// with a deterministic wobble (±5%) on the small batch's so that the interval has a width.
SweepPoint noisy_point(int devices, double b_noise, double exposed = 0.1) {
  PointSpec spec;
  spec.devices = devices;
  spec.exposed = exposed;
  SweepPoint p = make_point(spec);
  if (devices == 1) return p;
  const double trace = kGradSq * b_noise;
  int i = 0;
  for (RepeatRecord& r : p.repeats) {
    for (StepRecord& s : r.steps) {
      const double wobble = 1.0 + 0.05 * ((i++ % 3) - 1);
      StepGradNorms n;
      n.local.assign(static_cast<size_t>(devices),
                     (kGradSq + trace / static_cast<double>(p.batch)) * wobble);
      n.global = kGradSq + trace / static_cast<double>(p.global_batch);
      s.grad_norms = n;
    }
  }
  return p;
}

TEST(NoiseReport, PointsEstimateTheirNoiseScaleAndItsCostInSamples) {
  const SweepReport r = report_of({noisy_point(1, 0), noisy_point(2, 16), noisy_point(4, 16)});
  EXPECT_FALSE(r.points[0].summary.noise.has_value());  // one device: one batch size
  for (size_t i : {1u, 2u}) {
    const PointSummary& s = r.points[i].summary;
    ASSERT_TRUE(s.noise && s.noise->b_noise) << i;
    // The wobble averages out over the 20 steps' cycle only approximately.
    EXPECT_NEAR(s.noise->b_noise->value, 16.0, 1.0);
    EXPECT_LE(s.noise->b_noise->low, s.noise->b_noise->value);
    EXPECT_GE(s.noise->b_noise->high, s.noise->b_noise->value);
    EXPECT_EQ(s.noise->batches.small, 32);
    ASSERT_TRUE(s.statistics.has_value());
    EXPECT_EQ(s.statistics->small, 32);
  }
  // 4 devices: global batch 128 against 32 at B_noise ~16: (32 + 16) / (128 + 16) = 1/3 of the
  // samples do the work, and at most (1 + 16/32) / (1 + 16/128) = 1.33x fewer steps.
  const StatisticalScaling& four = *r.points[2].summary.statistics;
  EXPECT_NEAR(four.efficiency, (32 + four.b_noise) / (128 + four.b_noise), 1e-12);
  EXPECT_NEAR(four.efficiency, 1.0 / 3.0, 0.02);
  EXPECT_NEAR(four.steps_saved, 1.33, 0.03);
  // That loses more than any phase: the verdict leads with it.
  const Finding& top = r.points[2].summary.verdict.top();
  EXPECT_EQ(top.kind, "statistically-limited");
  EXPECT_EQ(top.severity, "high");
  EXPECT_CONTAINS(top.explanation, "the global batch 128 is");
  EXPECT_CONTAINS(top.explanation, "fewer steps than at batch 32");
  EXPECT_NEAR(top.share, 1.0 - four.efficiency, 1e-12);
}

TEST(NoiseReport, ANoiseScaleFarAboveTheBatchLeavesTheVerdictToThePhases) {
  // B_noise about 100000 (the wobble moves the estimate): a batch of 64 wastes under 1% of its
  // samples; the exposed all-reduce (30% of the step) stays the finding.
  const SweepReport r = report_of({noisy_point(1, 0), noisy_point(2, 100000, 0.3)});
  const PointSummary& s = r.points[1].summary;
  ASSERT_TRUE(s.statistics.has_value());
  EXPECT_GT(s.statistics->efficiency, 0.99);
  for (const Finding& f : s.verdict.findings) EXPECT_NE(f.kind, "statistically-limited");
  EXPECT_EQ(s.verdict.top().kind, "communication-bound");
}

TEST(NoiseReport, TheNormsSurviveTheJsonAndBadOnesAreRefused) {
  const SweepReport r = report_of({noisy_point(1, 0), noisy_point(2, 16)});
  const nlohmann::json j = to_json(r);
  const nlohmann::json& rep = j["points"][1]["repeats"][0];
  ASSERT_TRUE(rep.contains("grad_sq_global"));
  ASSERT_TRUE(rep["replicas"][1].contains("grad_sq_local"));
  EXPECT_FALSE(j["points"][0]["repeats"][0].contains("grad_sq_global"));
  EXPECT_DOUBLE_EQ(j["points"][1]["summary"]["noise_scale"]["b_noise"].get<double>(),
                   r.points[1].summary.noise->b_noise->value);
  const SweepReport back = sweep_report_from_json(j, "r.json");
  ASSERT_TRUE(back.points[1].summary.noise && back.points[1].summary.noise->b_noise);
  EXPECT_DOUBLE_EQ(back.points[1].summary.noise->b_noise->value,
                   r.points[1].summary.noise->b_noise->value);

  nlohmann::json bad = j;
  bad["points"][1]["repeats"][0]["replicas"][0]["grad_sq_local"][3] = -1.0;
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(bad, "bad.json"); }),
                  "grad_sq_local");
  bad = j;
  bad["points"][1]["repeats"][0]["grad_sq_global"].erase(0);
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(bad, "bad.json"); }),
                  "grad_sq_global");
  // Reports before 1.7 have no norms: no noise scale, nothing refused.
  nlohmann::json old = j;
  for (nlohmann::json& rp : old["points"][1]["repeats"]) {
    rp.erase("grad_sq_global");
    for (nlohmann::json& c : rp["replicas"]) c.erase("grad_sq_local");
  }
  EXPECT_FALSE(sweep_report_from_json(old, "old.json").points[1].summary.noise.has_value());
}

TEST(NoiseReport, TheTableHasARowPerPointWithANoiseScale) {
  const std::string tables =
      format_sweep_tables(report_of({noisy_point(1, 0), noisy_point(2, 16), noisy_point(4, 16)}));
  const size_t at = tables.find("gradient noise scale B_noise");
  ASSERT_NE(at, std::string::npos) << tables;
  const std::string rest = tables.substr(at);
  EXPECT_EQ(testing_util::lines_with(rest, "m cpu:1 batch 32").size(), 0u);
  const std::vector<std::string> four = testing_util::lines_with(rest, "m cpu:4 batch 32");
  ASSERT_EQ(four.size(), 1u) << rest;
  EXPECT_CONTAINS(four[0], " 128 ");
  EXPECT_CONTAINS(four[0], "33%");
  EXPECT_CONTAINS(rest, "steps/fewest");
  EXPECT_EQ(format_sweep_tables(report_of({noisy_point(1, 0)})).find("gradient noise scale"),
            std::string::npos);
}

}  // namespace
}  // namespace scalescope
