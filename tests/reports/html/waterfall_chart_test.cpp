// The efficiency-loss waterfall's data: per batch, the largest device count with a loss
// breakdown, its five shares stepping down from 100% to the measured efficiency.
#include "reports/html/waterfall_chart.h"
#include "reports/analysis/sweep_analysis.h"

#include <gtest/gtest.h>

#include "tests/reports/html/html_fixtures.h"
#include "tests/test_util.h"

namespace scalescope::html {
namespace {

using html_testing::SampleModels;

TEST(WaterfallChart, TheSharesStepFromIdealToMeasured) {
  const SampleModels models;
  const WaterfallsData w = prepare_waterfalls(models["cnn"]);
  EXPECT_TRUE(w.missing.empty());
  ASSERT_EQ(w.charts.size(), 2u);
  EXPECT_EQ(w.charts[0].batch, 16);
  EXPECT_EQ(w.charts[1].batch, 32);
  for (const WaterfallData& d : w.charts) {
    EXPECT_EQ(d.devices, 4);
    EXPECT_EQ(d.batch_text, "batch " + std::to_string(d.batch) + "/device");
    EXPECT_NEAR(d.efficiency, 10.0 / 14.0, 1e-12);
    EXPECT_NEAR(d.lost, 1.0 - 10.0 / 14.0, 1e-12);
    std::vector<std::string> keys;
    for (const WaterfallData::Loss& l : d.losses) keys.push_back(l.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"allreduce", "input", "compute_slowdown",
                                              "stragglers", "other"}));
    // Each share starts where the last ended, from 1 down to the measured efficiency.
    double level = 1.0;
    for (const WaterfallData::Loss& l : d.losses) {
      EXPECT_DOUBLE_EQ(l.from, level);
      EXPECT_DOUBLE_EQ(l.to, l.from - l.share);
      level = l.to;
    }
    EXPECT_NEAR(level, d.efficiency, 1e-12);
    // Exposed all-reduce is 10% of the 14 ms step, none on one device.
    EXPECT_NEAR(d.losses[0].share, 0.1, 1e-12);
    // The axis: 0% to 100% in steps of 20%.
    EXPECT_DOUBLE_EQ(d.lo, 0.0);
    EXPECT_DOUBLE_EQ(d.hi, 1.0);
    EXPECT_DOUBLE_EQ(d.tick, 0.2);
  }
}

// Across nodes the all-reduce bar splits into its intra-node and inter-node parts, as in
// the table and the JSON.
TEST(WaterfallChart, AcrossNodesTheAllReduceBarSplits) {
  SweepReport r = html_testing::sample_report();
  for (SweepPoint& p : r.points) {
    if (p.model != "cnn" || p.devices != 4) continue;
    for (RepeatRecord& rep : p.repeats) {
      rep.allreduce_split = AllReduceSplit{
          .bytes = 4096, .nodes = 2, .repeats = 5, .global_ms = 12.0, .node_ms = 3.0};
    }
  }
  analyze(r);
  const std::vector<ModelView> models = models_of(r);
  const WaterfallsData w = prepare_waterfalls(models.front());
  ASSERT_EQ(models.front().name, "cnn");
  ASSERT_EQ(w.charts.size(), 2u);
  const WaterfallData& d = w.charts[0];
  std::vector<std::string> keys;
  for (const WaterfallData::Loss& l : d.losses) keys.push_back(l.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"allreduce_intra", "allreduce_inter", "input",
                                            "compute_slowdown", "stragglers", "other"}));
  EXPECT_NEAR(d.losses[0].share, 0.1 * 0.25, 1e-12);
  EXPECT_NEAR(d.losses[1].share, 0.1 * 0.75, 1e-12);
  EXPECT_EQ(d.losses[1].line2, "inter-node");
  EXPECT_DOUBLE_EQ(d.losses[1].from, d.losses[0].to);
  EXPECT_NEAR(d.losses.back().to, d.efficiency, 1e-12);
}

// A share that cannot be told from none (its interval holds 0) is drawn grey and labelled
// "within noise"; a loss beyond noise keeps its phase's colour.
TEST(WaterfallChart, SharesWithinNoiseAreGreyAndSaySo) {
  // Input waits 1 ms on one device and 10% of steps of 8 to 12 ms on two: a share of
  // 0.1 - 1/step, either side of 0. The exposed all-reduce is 10% of every step.
  const SweepReport r = testing_util::report_of(
      {testing_util::make_point({.step_ms = 10.0}),
       testing_util::make_point(
           {.devices = 2, .step_time = [](int r, int i) { return 8.0 + (i + r) % 5; }})});
  const WaterfallsData w = prepare_waterfalls(models_of(r).front());
  ASSERT_EQ(w.charts.size(), 1u);
  const std::string svg = draw_waterfall(w.charts[0]);
  const std::vector<std::string> input = testing_util::lines_with(svg, "data-step=\"input\"");
  ASSERT_EQ(input.size(), 1u) << svg;
  EXPECT_CONTAINS(input[0], "fill=\"#d5d9de\" data-step=\"input\" data-noise=\"true\"");
  EXPECT_CONTAINS(input[0], "within measurement noise, no finding (95% interval of the share");
  const std::vector<std::string> allreduce =
      testing_util::lines_with(svg, "data-step=\"allreduce\"");
  ASSERT_EQ(allreduce.size(), 1u) << svg;
  EXPECT_EQ(allreduce[0].find("data-noise"), std::string::npos) << allreduce[0];
  EXPECT_CONTAINS(svg, ">within noise</text>");
}

TEST(WaterfallChart, BatchesWithoutABreakdownAreNamed) {
  const SampleModels models;
  // Its 2-device point failed; solo has one device; nobase no one-device point.
  for (const char* model : {html_testing::kHostile.c_str(), "solo", "nobase"}) {
    const WaterfallsData w = prepare_waterfalls(models[model]);
    EXPECT_TRUE(w.charts.empty()) << model;
    EXPECT_EQ(w.missing, (std::vector<std::string>{"batch 8/device"})) << model;
  }
}

}  // namespace
}  // namespace scalescope::html
