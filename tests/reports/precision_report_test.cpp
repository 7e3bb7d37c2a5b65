// The sweep report with a precision axis: each precision scales against its own one device
// and projects from its own points.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "reports/sweep_report.h"
#include "reports/writers/table.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::report_of;

SweepPoint constant_point(int devices, double step_ms, bool bf16, double alpha = 0.5,
                          double beta = 1e-6) {
  SweepPoint p = testing_util::make_point(
      {.devices = devices, .step_ms = step_ms, .alpha = alpha, .beta = beta});
  if (bf16) {
    p.precision = Precision::kBf16;
    p.precision_default = false;
  }
  return p;
}

// Each precision's speedup is against one device in the same precision: a faster precision
// does not make its own points look superlinear, nor the default's sublinear. Its points read
// back with their precision, and the table gives it a column.
TEST(PrecisionReport, EachPrecisionScalesAgainstItsOwnOneDevicePoint) {
  SweepReport r = report_of({constant_point(1, 10.0, false), constant_point(1, 5.0, true),
                             constant_point(2, 12.5, false), constant_point(2, 6.25, true)});
  ASSERT_TRUE(r.points[2].summary.speedup && r.points[3].summary.speedup);
  EXPECT_DOUBLE_EQ(r.points[2].summary.speedup->value, 1.6);
  EXPECT_DOUBLE_EQ(r.points[3].summary.speedup->value, 1.6);
  const SweepReport back = sweep_report_from_json(to_json(r), "test");
  EXPECT_EQ(back.points[3].precision, Precision::kBf16);
  EXPECT_FALSE(back.points[3].precision_default);
  EXPECT_TRUE(back.points[2].precision_default);
  EXPECT_EQ(back.points[3].key(), r.points[3].key());
  const std::string table = format_sweep_tables(r);
  EXPECT_CONTAINS(table, "precision");
  EXPECT_EQ(testing_util::lines_with(table, "      bf16  ").size(), 2u);  // the column
  EXPECT_CONTAINS(table, "m cpu:2 batch 32 in bf16");                     // the loss's row
}

// With a precision axis the all-reduce model, fitted over every precision's buckets, projects
// each precision from its own largest point and one-device step: bf16's faster compute makes
// the same all-reduce cost it more.
TEST(PrecisionReport, TheAllReduceModelProjectsEachPrecisionFromItsOwnPoints) {
  const auto point = [](int devices, double step_ms, bool bf16) {
    return constant_point(devices, step_ms, bf16, 0.25, 2e-6);
  };
  SweepReport r = report_of({point(1, 10.0, false), point(2, 12.0, false), point(4, 14.0, false),
                             point(1, 4.0, true), point(2, 6.0, true), point(4, 8.0, true)});
  ASSERT_EQ(r.communication.size(), 1u);
  const CommunicationAnalysis& c = r.communication[0];
  ASSERT_TRUE(c.fit.has_value()) << c.fit_error;
  ASSERT_EQ(c.series.size(), 2u);
  for (const CommunicationAnalysis::Series& s : c.series) {
    const double one_device = s.precision == Precision::kBf16 ? 4.0 : 10.0;
    EXPECT_EQ(s.precision_default, s.precision != Precision::kBf16);
    EXPECT_EQ(s.measured_devices, 4);
    ASSERT_EQ(s.projections.size(), 3u);
    for (const Projection& p : s.projections) {
      // Efficiency is the one-device step of the series' own precision over the projected one.
      EXPECT_NEAR(p.efficiency * p.step_ms, one_device, 1e-9) << to_string(s.precision);
    }
  }
  EXPECT_LT(c.series[1].projections[0].efficiency, c.series[0].projections[0].efficiency);
  const nlohmann::json j = to_json(r)["communication"][0]["series"];
  EXPECT_EQ(j[0]["precision"], "fp32");
  EXPECT_EQ(j[1]["precision"], "bf16");
  const std::string table = format_sweep_tables(r);
  EXPECT_EQ(testing_util::lines_with(table, "projected efficiency, batch 32:").size(), 1u);
  EXPECT_EQ(testing_util::lines_with(table, "projected efficiency, batch 32 in bf16:").size(), 1u);
}

}  // namespace
}  // namespace scalescope
