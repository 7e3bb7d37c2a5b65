// The speedup chart's data: measured speedups per batch, the projection from the largest
// measured point, the log axes' ranges, and notes for what cannot be drawn.
#include "reports/html/speedup_chart.h"

#include <gtest/gtest.h>

#include "tests/reports/html/html_fixtures.h"
#include "tests/test_util.h"

namespace scalescope::html {
namespace {

using html_testing::SampleModels;

TEST(SpeedupChart, MeasuredAndProjectedSpeedupsPerBatch) {
  const SampleModels models;
  const SpeedupData d = prepare_speedup(models["cnn"]);
  EXPECT_EQ(d.model, "cnn");
  EXPECT_EQ(d.device_kind, "cpu");
  ASSERT_EQ(d.series.size(), 2u);
  EXPECT_EQ(d.series[0].batch, 16);
  EXPECT_EQ(d.series[1].batch_text, "batch 32/device");
  EXPECT_NE(d.series[0].color, d.series[1].color);
  for (const SpeedupData::Series& s : d.series) {
    ASSERT_EQ(s.measured.size(), 3u);
    // Weak scaling, constant steps of 10, 12 and 14 ms: speedup = N × 10 / step.
    EXPECT_EQ(s.measured[0].devices, 1);
    EXPECT_DOUBLE_EQ(s.measured[0].speedup.value, 1.0);
    EXPECT_DOUBLE_EQ(s.measured[1].speedup.value, 2 * 10.0 / 12.0);
    EXPECT_DOUBLE_EQ(s.measured[2].speedup.value, 4 * 10.0 / 14.0);
    EXPECT_DOUBLE_EQ(*s.measured[2].efficiency, 10.0 / 14.0);
    EXPECT_TRUE(s.failed.empty());
    EXPECT_FALSE(s.unknown);
    // The projection starts at the largest measured point and doubles the devices thrice.
    ASSERT_TRUE(s.projected_from.has_value());
    EXPECT_EQ(s.projected_from->devices, 4);
    ASSERT_EQ(s.projected.size(), 3u);
    EXPECT_EQ(s.projected[0].devices, 8);
    EXPECT_EQ(s.projected[2].devices, 32);
    for (const SpeedupData::Projected& p : s.projected) {
      EXPECT_DOUBLE_EQ(p.speedup, p.efficiency * p.devices);
      EXPECT_LT(p.efficiency, 10.0 / 14.0);  // only worse than measured as all-reduce grows
    }
  }
  EXPECT_EQ(d.measured_max, 4);
  EXPECT_TRUE(d.any_projection);
  EXPECT_FALSE(d.any_failed);
  EXPECT_TRUE(d.notes.empty());
  // Powers of two around every value: devices up to the 32 projected, speedup 1 to 32 (the
  // ideal at 32 devices).
  EXPECT_EQ(d.x_hi, 32.0);
  EXPECT_EQ(d.y_lo, 1.0);
  EXPECT_EQ(d.y_hi, 32.0);
}

TEST(SpeedupChart, GapsAreExplained) {
  const SampleModels models;
  // No one-device point: nothing measured to draw, and a note says why.
  const SpeedupData nobase = prepare_speedup(models["nobase"]);
  ASSERT_EQ(nobase.series.size(), 1u);
  EXPECT_TRUE(nobase.series[0].unknown);
  EXPECT_TRUE(nobase.series[0].measured.empty());
  EXPECT_FALSE(nobase.any_projection);
  ASSERT_EQ(nobase.notes.size(), 1u);
  EXPECT_CONTAINS(nobase.notes[0], "batch 8/device: no one-device point");
  EXPECT_EQ(nobase.x_hi, 4.0);
  // A failed point: a mark and a note.
  const SpeedupData failed = prepare_speedup(models[html_testing::kHostile]);
  ASSERT_EQ(failed.series[0].failed.size(), 1u);
  EXPECT_EQ(failed.series[0].failed[0].devices, 2);
  EXPECT_CONTAINS(failed.series[0].failed[0].error, "out of memory");
  EXPECT_TRUE(failed.any_failed);
  EXPECT_CONTAINS(failed.notes.back(), "a point that failed");
  // One device: the axes still span 1 to 2.
  const SpeedupData solo = prepare_speedup(models["solo"]);
  EXPECT_EQ(solo.x_hi, 2.0);
  EXPECT_EQ(solo.y_lo, 1.0);
  EXPECT_EQ(solo.y_hi, 2.0);
}

}  // namespace
}  // namespace scalescope::html
