// The efficiency heat map's data: a cell per devices × batch, in the state of its point.
#include "reports/html/heatmap_chart.h"
#include "reports/analysis/sweep_analysis.h"

#include <gtest/gtest.h>

#include "tests/reports/html/html_fixtures.h"

namespace scalescope::html {
namespace {

using html_testing::constant_point;
using State = HeatmapData::Cell::State;

TEST(HeatmapChart, ACellPerDevicesAndBatchInItsPointsState) {
  // Batch 16 on 1, 2 and 4 devices; batch 32 on 1 (failed) and 4; no batch 32 on 2 devices.
  SweepReport r;
  r.points = {constant_point("m", 1, 16, 10.0), constant_point("m", 2, 16, 12.5),
              constant_point("m", 4, 16, 16.0), html_testing::failed_point("m", 1, 32, "boom"),
              constant_point("m", 4, 32, 20.0)};
  analyze(r);
  const HeatmapData d = prepare_heatmap(models_of(r).front());
  EXPECT_EQ(d.devices, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(d.batches, (std::vector<std::string>{"batch 16/device", "batch 32/device"}));
  ASSERT_EQ(d.cells.size(), 2u);
  ASSERT_EQ(d.cells[0].size(), 3u);
  EXPECT_EQ(d.cells[0][0].state, State::kOk);
  EXPECT_DOUBLE_EQ(d.cells[0][0].efficiency.value, 1.0);
  EXPECT_EQ(d.cells[0][1].state, State::kOk);
  EXPECT_DOUBLE_EQ(d.cells[0][1].efficiency.value, 0.8);
  EXPECT_DOUBLE_EQ(*d.cells[0][1].speedup, 1.6);
  EXPECT_DOUBLE_EQ(d.cells[0][2].efficiency.value, 10.0 / 16.0);
  EXPECT_EQ(d.cells[0][2].label, "m cpu:4 batch 16");
  EXPECT_EQ(d.cells[1][0].state, State::kFailed);
  EXPECT_EQ(d.cells[1][0].error, "boom");
  EXPECT_EQ(d.cells[1][1].state, State::kMissing);
  // Its one-device point failed: no efficiency to show.
  EXPECT_EQ(d.cells[1][2].state, State::kUnknown);
}

TEST(HeatmapChart, ColoursRunFromRedThroughYellowToGreen) {
  EXPECT_EQ(efficiency_color(0.0), "#c62a2a");
  EXPECT_EQ(efficiency_color(-1.0), "#c62a2a");
  EXPECT_EQ(efficiency_color(0.5), "#f09a3e");
  EXPECT_EQ(efficiency_color(1.0), "#2e9e55");
  EXPECT_EQ(efficiency_color(1.7), "#2e9e55");
  // Halfway between the stops at 0.75 and 0.9.
  EXPECT_EQ(efficiency_color(0.825), "#c8d068");
}

}  // namespace
}  // namespace scalescope::html
