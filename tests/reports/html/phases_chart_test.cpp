// The phase chart's data: a segment per exposed phase of the schema and "other", a row per
// point with the group's median phases.
#include "reports/html/phases_chart.h"

#include <gtest/gtest.h>

#include "core/nvtx.h"
#include "reports/phases.h"
#include "tests/reports/html/html_fixtures.h"

namespace scalescope::html {
namespace {

using html_testing::SampleModels;

TEST(PhasesChart, SegmentsAreTheExposedPhasesThenOther) {
  const SampleModels models;
  const PhasesData d = prepare_phases(models["cnn"]);
  std::vector<std::string> keys;
  for (const PhasesData::Segment& s : d.segments) keys.push_back(s.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"input", "h2d", "forward", "backward",
                                            "allreduce_exposed", "optimizer", "other"}));
  EXPECT_EQ(d.segments[1].label, "exposed host-to-device copy");
  EXPECT_EQ(d.segments[3].color, hex(nvtx::category(Phase::kBackward).color));
  EXPECT_EQ(d.segments[4].color, hex(nvtx::category(Phase::kAllReduce).color));
}

TEST(PhasesChart, ARowPerPointOfTheGroupsMedianPhases) {
  const SampleModels models;
  const PhasesData d = prepare_phases(models["cnn"]);
  ASSERT_EQ(d.rows.size(), 6u);  // 1, 2, 4 devices × batch 16, 32
  EXPECT_TRUE(d.rows[0].batch_starts);
  EXPECT_FALSE(d.rows[1].batch_starts);
  EXPECT_TRUE(d.rows[3].batch_starts);
  EXPECT_EQ(d.rows[1].name, "cpu:2 \u00b7 batch 16/device");
  // 10 ms on one device: input 10%, h2d 5%, forward 25%, backward 35%, no all-reduce,
  // optimizer 5%, other the 20% left.
  const PhasesData::Row& one = d.rows[0];
  ASSERT_EQ(one.ms.size(), d.segments.size());
  const std::vector<double> expected = {1.0, 0.5, 2.5, 3.5, 0.0, 0.5, 2.0};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(one.ms[i], expected[i], 1e-12) << i;
  EXPECT_DOUBLE_EQ(one.step_ms, 10.0);
  // 14 ms on four devices: the exposed all-reduce takes 10% of it out of "other".
  const PhasesData::Row& four = d.rows[2];
  EXPECT_NEAR(four.ms[4], 1.4, 1e-12);
  EXPECT_NEAR(four.ms[6], 1.4, 1e-12);
  EXPECT_NEAR(d.x_max, 14.0, 1e-12);
}

TEST(PhasesChart, FailedPointsHaveARowWithoutPhases) {
  const SampleModels models;
  const PhasesData d = prepare_phases(models[html_testing::kHostile]);
  ASSERT_EQ(d.rows.size(), 2u);
  EXPECT_TRUE(d.rows[0].ok);
  EXPECT_FALSE(d.rows[1].ok);
  EXPECT_TRUE(d.rows[1].ms.empty());
  EXPECT_EQ(d.rows[1].error, "out of memory <& 'quotes'>");
  EXPECT_NEAR(d.x_max, 5.0, 1e-12);
}

}  // namespace
}  // namespace scalescope::html
