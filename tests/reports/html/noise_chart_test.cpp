// The noise-scale chart's data and marks: a marker per point with a noise scale, its CI (open
// where it has no upper bound or leaves the axis), the sentences under it, and the figure only
// in the sections of models that measured a noise scale.
#include "reports/html/noise_chart.h"
#include "reports/analysis/sweep_analysis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reports/analysis/noise_scale.h"
#include "reports/html/page.h"
#include "tests/reports/html/html_fixtures.h"
#include "tests/test_util.h"

namespace scalescope::html {
namespace {

using html_testing::constant_point;
using testing_util::count_of;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Sets what analyze() derives from measured gradient norms, as if they had given `b_noise`;
// with the statistics against the one-device point when `baseline` is set.
void set_noise(SweepPoint& p, std::optional<Interval> b_noise, bool baseline = true) {
  NoiseScale n;
  n.batches = {p.batch, p.global_batch};
  n.steps = 20;
  n.mean = {1.0, b_noise ? b_noise->value : -1.0};
  n.b_noise = b_noise;
  p.summary.noise = n;
  if (baseline && b_noise && b_noise->value > 0) {
    p.summary.statistics = statistical_scaling(b_noise->value, p.batch, p.global_batch);
  }
}

// m: batch 32 on 1, 2 and 4 devices (steps 10, 12 and 14 ms); the 4-device point's CI is
// bounded, the 2-device point's is not.
SweepReport noise_report() {
  SweepReport r;
  r.points = {constant_point("m", 1, 32, 10.0), constant_point("m", 2, 32, 12.0),
              constant_point("m", 4, 32, 14.0), constant_point("plain", 1, 32, 10.0),
              constant_point("plain", 2, 32, 12.0)};
  analyze(r);
  set_noise(r.points[1], Interval{40.0, 20.0, kInf});
  set_noise(r.points[2], Interval{16.3, 13.8, 21.6});
  return r;
}

TEST(NoiseChart, AMarkerPerPointWithItsCiAndWhatItCostsInTime) {
  const SweepReport r = noise_report();
  const std::vector<ModelView> models = models_of(r);
  ASSERT_TRUE(has_noise(models.at(0)));
  EXPECT_FALSE(has_noise(models.at(1)));
  const NoiseChartData d = prepare_noise(models.at(0));
  ASSERT_EQ(d.points.size(), 2u);
  const NoiseChartData::Point& two = d.points[0];
  const NoiseChartData::Point& four = d.points[1];
  EXPECT_EQ(two.label, "cpu:2, batch 32/device");
  EXPECT_EQ(four.label, "cpu:4, batch 32/device");
  EXPECT_EQ(four.global_batch, 128);
  EXPECT_TRUE(four.drawn);
  EXPECT_DOUBLE_EQ(four.b_noise->value, 16.3);
  EXPECT_DOUBLE_EQ(four.steps_over_minimum, 1 + 16.3 / 128);
  const double efficiency = (32 + 16.3) / (128 + 16.3);
  EXPECT_DOUBLE_EQ(*four.efficiency, efficiency);
  EXPECT_NEAR(*four.speedup, 4 * 10.0 / 14.0, 1e-9);
  EXPECT_NEAR(*four.time_speedup, 4 * 10.0 / 14.0 * efficiency, 1e-9);
  EXPECT_EQ(four.sentence,
            "cpu:4, batch 32/device (global 128): B_noise 16.3 [13.8, 21.6]; 1.13x the fewest "
            "steps any batch could need; statistical efficiency against one device 33%, so the "
            "throughput speedup 2.86x becomes about 0.96x in time to a target.");
  EXPECT_EQ(two.sentence,
            "cpu:2, batch 32/device (global 64): B_noise 40.0 [20.0, unbounded]; 1.62x the "
            "fewest steps any batch could need; statistical efficiency against one device 69%, "
            "so the throughput speedup 1.67x becomes about 1.15x in time to a target.");
  // Axes: every point's global batch (the one-device baseline's too); y from the lowest CI
  // end (13.8) to the top of the diagonal.
  EXPECT_EQ(d.x_ticks, (std::vector<int64_t>{32, 64, 128}));
  EXPECT_DOUBLE_EQ(d.x_lo, 32);
  EXPECT_DOUBLE_EQ(d.x_hi, 128);
  EXPECT_DOUBLE_EQ(d.y_lo, 8);
  EXPECT_DOUBLE_EQ(d.y_hi, 128);
  EXPECT_TRUE(d.any_unbounded);
  EXPECT_FALSE(d.any_clipped);
  ASSERT_EQ(d.series.size(), 1u);
  EXPECT_EQ(d.series[0].label, "batch 32/device");
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_CONTAINS(d.notes[0], "no upper bound");

  const std::string svg = draw_noise(d);
  EXPECT_EQ(count_of(svg, "data-noise-point="), 2u);
  EXPECT_EQ(count_of(svg, "data-ci="), 2u);
  EXPECT_EQ(count_of(svg, "data-diagonal=\"true\""), 1u);
  EXPECT_CONTAINS(svg,
                  "data-b-noise=\"16.3\" data-b-noise-low=\"13.8\" data-b-noise-high=\"21.6\"");
  // The unbounded end: an open arrow at the top, and the group says so.
  EXPECT_CONTAINS(svg, "data-b-noise-high=\"inf\" data-unbounded=\"true\"");
  EXPECT_EQ(count_of(svg, "data-open=\"high\""), 1u);
  EXPECT_EQ(count_of(svg, "data-open=\"low\""), 0u);
  // The tooltip carries the numbers.
  EXPECT_CONTAINS(svg, "<title>cpu:4, batch 32/device (global 128): B_noise 16.3 [13.8, 21.6];");
}

TEST(NoiseChart, OnlyModelsWithANoiseScaleGetTheFigureAndItsSentences) {
  const SweepReport r = noise_report();
  const std::string page = format_sweep_html(r);
  EXPECT_EQ(count_of(page, "data-chart=\"noise-scale\""), 1u);
  // In m's section, before plain's.
  EXPECT_LT(page.find("data-chart=\"noise-scale\""), page.find("data-model=\"plain\""));
  EXPECT_GT(page.find("data-chart=\"noise-scale\""), page.find("data-model=\"m\""));
  EXPECT_EQ(count_of(page, "<p class=\"note\" data-noise-point="), 2u);
  EXPECT_CONTAINS(page,
                  "<p class=\"note\" data-noise-point=\"cpu:4, batch 32/device\" "
                  "data-b-noise=\"16.3\">cpu:4, batch 32/device (global 128): B_noise 16.3");
  const std::string without = format_sweep_html(html_testing::sample_report());
  EXPECT_EQ(count_of(without, "data-chart=\"noise-scale\""), 0u);
  EXPECT_EQ(count_of(without, "data-noise-point"), 0u);
}

TEST(NoiseChart, NoEstimateANegativeOneAndACiBeyondTheAxis) {
  SweepReport r;
  r.points = {constant_point("m", 2, 32, 12.0), constant_point("m", 4, 32, 14.0),
              constant_point("m", 8, 32, 16.0)};
  analyze(r);
  set_noise(r.points[0], std::nullopt, false);
  set_noise(r.points[1], Interval{-3.0, -9.0, 2.0}, false);
  set_noise(r.points[2], Interval{100.0, 0.5, 150.0}, false);
  const NoiseChartData d = prepare_noise(models_of(r).at(0));
  ASSERT_EQ(d.points.size(), 3u);
  EXPECT_FALSE(d.points[0].drawn);
  EXPECT_EQ(d.points[0].sentence,
            "cpu:2, batch 32/device (global 64): no B_noise: over its 20 steps the mean "
            "|G|\u00b2 estimate was not positive (the gradient looks all noise; more steps may "
            "bound it).");
  EXPECT_FALSE(d.points[1].drawn);
  EXPECT_EQ(d.points[1].sentence,
            "cpu:4, batch 32/device (global 128): B_noise -3.00 [-9.00, 2.00]: not above zero, "
            "so not on the chart (too few steps to tell).");
  // No one-device point: no statistics, so the sentence stops at the steps.
  EXPECT_TRUE(d.points[2].drawn);
  EXPECT_FALSE(d.points[2].efficiency);
  EXPECT_EQ(d.points[2].sentence,
            "cpu:8, batch 32/device (global 256): B_noise 100 [0.50, 150]; 1.39x the fewest "
            "steps any batch could need.");
  // The low end (0.5) is more than 16x below B_noise: the axis stops at 100/16, rounded down
  // to a power of two, and the whisker is drawn open there.
  EXPECT_DOUBLE_EQ(d.y_lo, 4);
  EXPECT_TRUE(d.any_clipped);
  EXPECT_FALSE(d.any_unbounded);
  // The legend holds only batches with a marker; the notes name the points not drawn.
  EXPECT_EQ(d.series.size(), 1u);
  ASSERT_EQ(d.notes.size(), 3u);
  EXPECT_CONTAINS(d.notes[1], "cpu:2, batch 32/device: no positive B_noise");
  const std::string svg = draw_noise(d);
  EXPECT_EQ(count_of(svg, "data-noise-point="), 1u);
  EXPECT_EQ(count_of(svg, "data-open=\"low\""), 1u);
  EXPECT_EQ(count_of(svg, "data-open=\"high\""), 0u);
}

TEST(NoiseChart, SmallSpeedupsKeepTwoSignificantDigits) {
  SweepReport r;
  r.points = {constant_point("m", 1, 32, 10.0), constant_point("m", 2, 32, 1000.0)};
  analyze(r);
  set_noise(r.points[1], Interval{16.3, 13.8, 21.6});
  const NoiseChartData d = prepare_noise(models_of(r).at(0));
  ASSERT_EQ(d.points.size(), 1u);
  // Speedup 2 x 10/1000 = 0.02; efficiency (32 + 16.3)/(64 + 16.3) = 0.60, so 0.012 in time.
  EXPECT_CONTAINS(d.points[0].sentence,
                  "so the throughput speedup 0.02x becomes about 0.012x in time to a target.");
}

}  // namespace
}  // namespace scalescope::html
