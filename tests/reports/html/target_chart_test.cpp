// The time-to-target chart's data and marks: per multi-device point the hardware and
// time-to-target speedups, the ideal and the noise scale's prediction; a sentence per point
// (reached or not, the speedup or why there is none); and the figure only in the sections of
// models that trained to a target.
#include "reports/html/target_chart.h"

#include <gtest/gtest.h>

#include <vector>

#include "reports/html/page.h"
#include "tests/reports/html/html_fixtures.h"
#include "tests/test_util.h"

namespace scalescope::html {
namespace {

using testing_util::count_of;

constexpr int64_t kTrainSamples = 10000;

// What a run to accuracy 0.75 recorded: reached at `step` after `train_ms` of training, or (step
// 0) not reached.
struct Run {
  int64_t step = 0;
  double train_ms = 0;
};

// A point of model `model` whose repeats trained to accuracy 0.75 as `runs` say.
SweepPoint target_point(const std::string& model, int devices, int64_t batch,
                        const std::vector<Run>& runs) {
  testing_util::PointSpec spec = html_testing::constant_spec(model, devices, batch, 10.0);
  spec.repeats = static_cast<int>(runs.size());
  SweepPoint p = testing_util::make_point(spec);
  for (size_t i = 0; i < runs.size(); ++i) {
    TargetRecord t;
    t.metric = "accuracy";
    t.value = 0.75;
    t.reached = runs[i].step > 0;
    t.step = t.reached ? runs[i].step : 200;
    t.samples = t.step * p.global_batch;
    t.epochs = static_cast<double>(t.samples) / kTrainSamples;
    t.train_ms = t.reached ? runs[i].train_ms : 9000;
    t.wall_ms = 1.5 * t.train_ms;
    p.repeats[i].target = t;
  }
  return p;
}

// m, accuracy 0.75, three repeats a point:
//   batch 16: cpu:1 reached once, cpu:2 every time (no baseline to compare with)
//   batch 32: cpu:1 120 steps in 2.4 s; cpu:2 75 steps in 1.5 s; cpu:4 45 steps in 2.58 s (the
//             noise scale's prediction set on it)
//   batch 64: cpu:1 every time; cpu:2 two of three; cpu:8 none
// and `plain`, no target.
SweepReport target_report() {
  std::vector<SweepPoint> points = {
      target_point("m", 1, 16, {{300, 3000}, {0, 0}, {0, 0}}),
      target_point("m", 2, 16, {{150, 2000}, {150, 2000}, {150, 2000}}),
      target_point("m", 1, 32, {{120, 2300}, {120, 2500}, {120, 2400}}),
      target_point("m", 2, 32, {{75, 1500}, {75, 1500}, {75, 1500}}),
      target_point("m", 4, 32, {{45, 2600}, {45, 2580}, {45, 2500}}),
      target_point("m", 1, 64, {{70, 1400}, {70, 1400}, {70, 1400}}),
      target_point("m", 2, 64, {{50, 900}, {0, 0}, {52, 1000}}),
      target_point("m", 8, 64, {{0, 0}, {0, 0}, {0, 0}}),
      html_testing::constant_point("plain", 1, 32, 10.0),
      html_testing::constant_point("plain", 2, 32, 12.0)};
  SweepReport r = testing_util::report_of(std::move(points));
  r.points[4].summary.time_to_target->predicted_statistical = 0.66;
  return r;
}

TEST(TargetChart, SpeedupSplitIntoHardwareAndStatisticalPerPoint) {
  const SweepReport r = target_report();
  const std::vector<ModelView> models = models_of(r);
  ASSERT_TRUE(has_target(models.at(0)));
  EXPECT_FALSE(has_target(models.at(1)));
  const TargetChartData d = prepare_target(models.at(0));
  EXPECT_EQ(d.target, "accuracy 0.75");
  ASSERT_EQ(d.points.size(), 8u);
  // The multi-device points get a group of bars each, in order.
  EXPECT_EQ(d.drawn, (std::vector<size_t>{1, 3, 4, 6, 7}));
  EXPECT_TRUE(d.any_predicted);

  const TargetChartData::Point& four = d.points[4];
  EXPECT_EQ(four.label, "cpu:4, batch 32/device");
  EXPECT_EQ(four.tick, "cpu:4, batch 32");  // the model has more than one batch
  EXPECT_EQ(four.time.reached, 3);
  EXPECT_DOUBLE_EQ(four.time.steps, 45);
  EXPECT_DOUBLE_EQ(four.time.epochs, 45.0 * 128 / kTrainSamples);
  EXPECT_DOUBLE_EQ(four.time.train_s, 2.58);  // the median repeat
  EXPECT_DOUBLE_EQ(*four.time.speedup, 2.4 / 2.58);
  EXPECT_DOUBLE_EQ(*four.time.statistical, 120.0 * 32 / (45.0 * 128));
  EXPECT_NEAR(*four.time.hardware * *four.time.statistical, *four.time.speedup, 1e-12);
  EXPECT_NEAR(*four.predicted_speedup, *four.time.hardware * 0.66, 1e-12);
  EXPECT_EQ(four.sentence,
            "cpu:4, batch 32/device: accuracy 0.75 reached in 3/3 runs after 45 steps (0.58 "
            "epochs), 2.58 s of training; time-to-target speedup 0.93x against one device = "
            "1.40x hardware \u00d7 67% statistical (the noise scale predicted 66%).");
  const TargetChartData::Point& two = d.points[3];
  EXPECT_DOUBLE_EQ(*two.time.speedup, 1.6);
  EXPECT_FALSE(two.predicted_speedup);
  EXPECT_EQ(two.sentence,
            "cpu:2, batch 32/device: accuracy 0.75 reached in 3/3 runs after 75 steps (0.48 "
            "epochs), 1.50 s of training; time-to-target speedup 1.60x against one device = "
            "2.00x hardware \u00d7 80% statistical.");
  EXPECT_EQ(d.points[2].sentence,
            "cpu:1, batch 32/device: accuracy 0.75 reached in 3/3 runs after 120 steps (0.38 "
            "epochs), 2.40 s of training; the baseline of the speedups.");
  // The y axis holds the largest ideal (8 devices) and every bar.
  EXPECT_GE(d.y_hi, 8.0);
  EXPECT_LE(d.y_hi, 10.0);

  const std::string svg = draw_target(d);
  EXPECT_EQ(count_of(svg, "data-target-point="), 5u);
  EXPECT_EQ(count_of(svg, "data-target-bar=\"hardware\""), 2u);
  EXPECT_EQ(count_of(svg, "data-target-bar=\"time-to-target\""), 2u);
  EXPECT_EQ(count_of(svg, "data-ideal="), 5u);
  EXPECT_EQ(count_of(svg, "data-predicted-speedup="), 1u);
  EXPECT_EQ(count_of(svg, "data-ring-note"), 1u);  // what the ring means
  EXPECT_EQ(count_of(svg, "data-missing="), 3u);   // no speedup: n/a
  EXPECT_CONTAINS(svg,
                  "data-target-point=\"cpu:4, batch 32/device\" data-devices=\"4\" "
                  "data-speedup=\"0.9302\" data-hardware=\"1.3953\" data-statistical=\"0.6667\"");
  // Tooltips carry the numbers.
  EXPECT_CONTAINS(svg,
                  "<title>cpu:4, batch 32/device: time-to-target speedup 0.93x = 1.40x "
                  "hardware \u00d7 67% statistical</title>");
  EXPECT_CONTAINS(svg,
                  "<title>cpu:4, batch 32/device: the noise scale predicted 66% statistical, "
                  "so 0.92x in time to the target</title>");
}

TEST(TargetChart, PointsThatDidNotReachTheTargetOrHaveNoBaselineSaySo) {
  const SweepReport r = target_report();
  const TargetChartData d = prepare_target(models_of(r).at(0));
  ASSERT_EQ(d.points.size(), 8u);
  EXPECT_EQ(d.points[0].sentence,
            "cpu:1, batch 16/device: 1 of 3 runs reached accuracy 0.75, after 300 steps (0.48 "
            "epochs), 3.00 s of training (that run); the baseline of the speedups.");
  EXPECT_FALSE(d.points[1].time.speedup);
  EXPECT_EQ(d.points[1].sentence,
            "cpu:2, batch 16/device: accuracy 0.75 reached in 3/3 runs after 150 steps (0.48 "
            "epochs), 2.00 s of training; no speedup: the one-device point reached the target in "
            "only 1 of 3 runs.");
  const TargetChartData::Point& partial = d.points[6];
  EXPECT_EQ(partial.time.reached, 2);
  EXPECT_EQ(partial.time.repeats, 3);
  EXPECT_FALSE(partial.time.speedup);
  EXPECT_EQ(partial.sentence,
            "cpu:2, batch 64/device: 2 of 3 runs reached accuracy 0.75, after 51 steps (0.65 "
            "epochs), 0.95 s of training (medians of those 2); no speedup: every run has to reach "
            "the target.");
  EXPECT_EQ(d.points[7].sentence,
            "cpu:8, batch 64/device: none of 3 runs reached accuracy 0.75; no speedup: every run "
            "has to reach the target.");
}

TEST(TargetChart, OnlyModelsWithATargetGetTheFigureAndItsSentences) {
  const SweepReport r = target_report();
  const std::string page = format_sweep_html(r);
  EXPECT_EQ(count_of(page, "data-chart=\"time-to-target\""), 1u);
  // In m's section, before plain's.
  EXPECT_GT(page.find("data-chart=\"time-to-target\""), page.find("data-model=\"m\""));
  EXPECT_LT(page.find("data-chart=\"time-to-target\""), page.find("data-model=\"plain\""));
  EXPECT_CONTAINS(page, "<figcaption>Time to accuracy 0.75 ");
  EXPECT_EQ(count_of(page, "<p class=\"note\" data-target-point="), 8u);
  EXPECT_CONTAINS(page,
                  "<p class=\"note\" data-target-point=\"cpu:4, batch 32/device\" "
                  "data-reached=\"3/3\" data-speedup=\"0.9302\">cpu:4, batch 32/device: accuracy "
                  "0.75 reached in 3/3 runs");
  EXPECT_CONTAINS(page,
                  "<p class=\"note\" data-target-point=\"cpu:2, batch 64/device\" "
                  "data-reached=\"2/3\" data-speedup=\"none\">");
  const std::string without = format_sweep_html(html_testing::sample_report());
  EXPECT_EQ(count_of(without, "data-chart=\"time-to-target\""), 0u);
  EXPECT_EQ(count_of(without, "data-target-point"), 0u);
}

// One batch: the x labels name the device count alone; no prediction, so no ring and no note.
TEST(TargetChart, OneBatchLabelsTheDeviceCountAlone) {
  const SweepReport r = testing_util::report_of(
      {target_point("m", 1, 32, {{120, 2400}}), target_point("m", 2, 32, {{75, 1500}})});
  const TargetChartData d = prepare_target(models_of(r).at(0));
  ASSERT_EQ(d.points.size(), 2u);
  EXPECT_EQ(d.points[1].tick, "cpu:2");
  EXPECT_FALSE(d.any_predicted);
  const std::string svg = draw_target(d);
  EXPECT_EQ(count_of(svg, "data-ring-note"), 0u);
  EXPECT_EQ(count_of(svg, "data-predicted-speedup="), 0u);
}

}  // namespace
}  // namespace scalescope::html
