// The HTML report's comparison of precisions: one section per model that ran more than one,
// and the sentence when the faster precision turns a point communication-bound.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reports/html/page.h"
#include "reports/html/precision_section.h"
#include "reports/html/view.h"
#include "reports/writers/table.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope::html {
namespace {

using testing_util::make_point;
using testing_util::PointSpec;

SweepPoint point(int devices, double step_ms, double exposed, bool bf16) {
  SweepPoint p = make_point({.devices = devices, .step_ms = step_ms, .exposed = exposed});
  p.precision = bf16 ? Precision::kBf16 : Precision::kFp32;
  p.precision_default = !bf16;
  return p;
}

// bf16 computes 2.5x faster; the same all-reduce then takes 40% of its step at two devices
// against 4% of fp32's.
SweepReport two_precisions() {
  return testing_util::report_of({point(1, 10.0, 0.0, false), point(1, 4.0, 0.0, true),
                                  point(2, 10.5, 0.04, false), point(2, 6.0, 0.4, true)});
}

TEST(PrecisionSection, ComparesEachModelsPrecisionsAndSaysWhichTurnsCommunicationBound) {
  const SweepReport r = two_precisions();
  const std::vector<ModelView> views = precision_views(r, 1);
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].name, "m: precisions compared");
  EXPECT_EQ(views[0].points.size(), 4u);
  EXPECT_EQ(views[0].index, 1);
  const std::vector<std::string> c = precision_conclusions(r, views[0]);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_CONTAINS(c[0], "In bf16, cpu:2, batch 32/device turns communication-bound");
  EXPECT_CONTAINS(c[0], "40.0% of its step, against 4.0% in fp32");
  const std::string page = format_sweep_html(r);
  EXPECT_CONTAINS(page, "data-precisions=\"m\"");
  EXPECT_EQ(testing_util::count_of(page, "<tr data-precision="), 4u);
  EXPECT_CONTAINS(page, "cpu:2 \u00b7 batch 32/device \u00b7 bf16");  // the phases chart's row
  // Each precision also has a section of its own, scaled against its own one device.
  EXPECT_CONTAINS(page, "<code>m in bf16</code>");
  // The terminal's tables say it too.
  EXPECT_CONTAINS(format_sweep_tables(r),
                  "m cpu:2 batch 32 in bf16 turns communication-bound: exposed all-reduce 40.0% "
                  "of the step against 4.0% in fp32");
}

TEST(PrecisionSection, NoneWithoutAPrecisionAxis) {
  const SweepReport r =
      testing_util::report_of({point(1, 10.0, 0.0, false), point(2, 10.5, 0.04, false)});
  EXPECT_TRUE(precision_views(r, 1).empty());
  EXPECT_EQ(format_sweep_html(r).find("data-precisions"), std::string::npos);
}

// Each precision's speedup chart projects from its own points (the all-reduce model's series
// of that precision), not from another precision's of the same batch.
TEST(PrecisionSection, EachPrecisionsChartProjectsItsOwnSeries) {
  const auto at = [](int devices, double step_ms, bool bf16) {
    SweepPoint p =
        make_point({.devices = devices, .step_ms = step_ms, .alpha = 0.25, .beta = 2e-6});
    p.precision = bf16 ? Precision::kBf16 : Precision::kFp32;
    p.precision_default = !bf16;
    return p;
  };
  const SweepReport r =
      testing_util::report_of({at(1, 10.0, false), at(2, 12.0, false), at(4, 14.0, false),
                               at(1, 4.0, true), at(2, 6.0, true), at(4, 8.0, true)});
  ASSERT_EQ(r.communication.size(), 1u);
  ASSERT_EQ(r.communication[0].series.size(), 2u);
  const std::string page = format_sweep_html(r);
  // One chart per precision, each with its own three projected points.
  EXPECT_EQ(testing_util::count_of(page, "data-projected=\"8\""), 2u);
  for (const CommunicationAnalysis::Series& s : r.communication[0].series) {
    const Projection& p = s.projections[0];
    EXPECT_CONTAINS(page, fmt::format("8 devices: speedup {:.2f}, efficiency {}",
                                      p.efficiency * p.devices, percent(p.efficiency)));
  }
  EXPECT_CONTAINS(page, "Fitted over the buckets of every precision's points");
  EXPECT_EQ(format_sweep_html(testing_util::report_of(
                                  {at(1, 10.0, false), at(2, 12.0, false), at(4, 14.0, false)}))
                .find("Fitted over the buckets of every precision's points"),
            std::string::npos);
}

}  // namespace
}  // namespace scalescope::html
