// The bucket-cap axis in reports: the best setting against the default with its interval,
// "no better" when the interval includes 1, the reference when the default was not measured,
// the tables, the JSON and the HTML chart.
#include <gtest/gtest.h>

#include "reports/html/bucket_chart.h"
#include "reports/html/page.h"
#include "reports/json_reader.h"
#include "reports/sweep_report.h"
#include "reports/writers/table.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::make_point;
using testing_util::report_of;

// Two devices, batch 32, bucket caps (cap, first); every step `step_ms` plus `noise` ×
// a fixed pattern in [-2, 2], so that repeats overlap as measured ones do.
SweepPoint bucket_point(double cap, double first, double step_ms, double noise = 0.0,
                        double exposed = 0.1) {
  SweepPoint p = make_point(
      {.devices = 2,
       .repeats = 3,
       .steps = 20,
       .step_time = [=](int r, int i) { return step_ms + noise * ((i * 7 + r * 3) % 5 - 2); },
       .exposed = exposed});
  p.bucket_cap_mb = cap;
  p.first_bucket_mb = first;
  return p;
}

SweepPoint one_device() {
  return make_point({.devices = 1, .step_ms = 8.0});
}

TEST(BucketChoice, AClearlyFasterCapIsBetterThanTheDefault) {
  const SweepReport r =
      report_of({one_device(), bucket_point(5, 1, 8.0, 0.05, 0.02),
                 bucket_point(25, 1, 10.0, 0.05, 0.2), bucket_point(100, 1, 11.0, 0.05, 0.3)});
  ASSERT_EQ(r.bucket_choices.size(), 1u);
  const BucketChoice& c = r.bucket_choices[0];
  EXPECT_EQ(c.devices, 2);
  EXPECT_EQ(c.batch, 32);
  ASSERT_EQ(c.settings.size(), 3u);
  EXPECT_EQ(c.settings[0].cap_mb, 5);
  EXPECT_EQ(c.settings[2].cap_mb, 100);
  EXPECT_EQ(c.best, 0u);
  EXPECT_EQ(c.reference, 1u);
  EXPECT_TRUE(c.reference_is_default);
  // Throughput ratio = 10 / 8 ms; the noise (±0.1 ms) cannot close a 2 ms gap.
  EXPECT_NEAR(c.gain.value, 1.25, 1e-9);
  EXPECT_GT(c.gain.low, 1.2);
  EXPECT_TRUE(c.better());
  // The exposed all-reduce per setting, as the chart draws it: 2% of 8 ms, 20% of 10 ms.
  EXPECT_NEAR(c.settings[0].exposed_ms, 0.16, 1e-9);
  EXPECT_NEAR(c.settings[1].exposed_ms, 2.0, 1e-9);
  EXPECT_NEAR(c.settings[1].allreduce_ms, 4.0, 1e-9);
  EXPECT_EQ(bucket_conclusion(c), "best: 5 MB, 1.250x [" +
                                      fmt::format("{:.3f}, {:.3f}", c.gain.low, c.gain.high) +
                                      "] the throughput of the default 25 MB");
  // One device all-reduces nothing: every setting shares its baseline.
  for (size_t i = 1; i < r.points.size(); ++i) {
    ASSERT_TRUE(r.points[i].summary.speedup);
  }
}

TEST(BucketChoice, NoBetterWhenTheIntervalIncludesOne) {
  // 0.4% apart with ±2% noise: the faster median is not a certain gain.
  const SweepReport r = report_of({bucket_point(25, 1, 10.0, 0.2), bucket_point(50, 1, 9.96, 0.2)});
  ASSERT_EQ(r.bucket_choices.size(), 1u);
  const BucketChoice& c = r.bucket_choices[0];
  EXPECT_EQ(c.best, 1u);
  EXPECT_EQ(c.reference, 0u);
  EXPECT_LE(c.gain.low, 1.0);
  EXPECT_FALSE(c.better());
  EXPECT_CONTAINS(bucket_conclusion(c), "best: no better than the default 25 MB (50 MB had");
}

TEST(BucketChoice, TheDefaultWinningSaysSo) {
  const SweepReport r = report_of({bucket_point(1, 1, 12.0), bucket_point(25, 1, 10.0)});
  const BucketChoice& c = r.bucket_choices.at(0);
  EXPECT_EQ(c.best, c.reference);
  EXPECT_FALSE(c.better());
  EXPECT_EQ(bucket_conclusion(c), "best: the default 25 MB, no other setting beat it");
}

TEST(BucketChoice, WithoutTheDefaultTheSmallestSettingIsTheReference) {
  const SweepReport r =
      report_of({bucket_point(5, 0.5, 9.0), bucket_point(5, 1, 10.0), bucket_point(100, 1, 11.0)});
  const BucketChoice& c = r.bucket_choices.at(0);
  ASSERT_EQ(c.settings.size(), 3u);
  EXPECT_EQ(c.settings[0].first_mb, 0.5);  // ascending cap, then first cap
  EXPECT_FALSE(c.reference_is_default);
  EXPECT_EQ(c.reference, 0u);
  EXPECT_EQ(c.best, 0u);
  EXPECT_EQ(bucket_conclusion(c), "best: 5 MB (first 0.5 MB), no other setting beat it");
}

TEST(BucketChoice, OnlyGroupsOfSeveralSettingsAreChosen) {
  SweepPoint other_batch = bucket_point(5, 1, 9.0);
  other_batch.batch = 64;
  other_batch.global_batch = 128;
  const SweepReport r = report_of({one_device(), bucket_point(25, 1, 10.0), other_batch});
  EXPECT_TRUE(r.bucket_choices.empty());
  // The default caps keep the label of the points before the axis existed.
  EXPECT_EQ(r.points[1].label(), "m cpu:2 batch 32");
  EXPECT_EQ(r.points[2].label(), "m cpu:2 batch 64 bucket 5 MB");
  EXPECT_NE(r.points[1].key(), bucket_point(5, 1, 10.0).key());
  EXPECT_EQ(one_device().key(), "m|cpu|1|weak|32|32");
}

TEST(BucketChoice, TablesJsonAndReadingBackAgree) {
  const SweepReport r =
      report_of({one_device(), bucket_point(5, 1, 8.0, 0.05), bucket_point(25, 1, 10.0, 0.05)});
  const std::string tables = format_sweep_tables(r);
  EXPECT_CONTAINS(tables, "bucket caps (medians per step");
  EXPECT_CONTAINS(tables, bucket_conclusion(r.bucket_choices[0]));
  EXPECT_CONTAINS(tables, "5 MB");  // the buckets column of the model's table
  const nlohmann::json j = to_json(r);
  ASSERT_EQ(j["bucket_choices"].size(), 1u);
  EXPECT_EQ(j["bucket_choices"][0]["best"]["bucket_cap_mb"], 5.0);
  EXPECT_EQ(j["bucket_choices"][0]["reference"]["is_default"], true);
  EXPECT_EQ(j["bucket_choices"][0]["better"], true);
  EXPECT_EQ(j["points"][1]["bucket_cap_mb"], 5.0);
  const SweepReport back = sweep_report_from_json(j, "test");
  EXPECT_EQ(back.points[1].bucket_cap_mb, 5.0);
  ASSERT_EQ(back.bucket_choices.size(), 1u);
  EXPECT_EQ(back.bucket_choices[0].settings, r.bucket_choices[0].settings);

  // Reports before 1.5 ran the default caps.
  nlohmann::json old = j;
  for (nlohmann::json& p : old["points"]) {
    p.erase("bucket_cap_mb");
    p.erase("first_bucket_mb");
  }
  const SweepReport read_old = sweep_report_from_json(old, "old");
  EXPECT_TRUE(read_old.points[1].default_buckets());
  nlohmann::json bad = j;
  bad["points"][1]["bucket_cap_mb"] = -1;
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(bad, "bad.json"); }),
                  "bucket caps must be positive sizes");
}

TEST(BucketChart, ALinePerGroupWithTheBestRinged) {
  SweepReport r =
      report_of({one_device(), bucket_point(1, 1, 9.0, 0.0, 0.05),
                 bucket_point(5, 1, 8.0, 0.0, 0.02), bucket_point(25, 1, 10.0, 0.0, 0.2)});
  const std::vector<html::ModelView> models = html::models_of(r);
  const html::BucketChartData d = html::prepare_buckets(models.at(0));
  ASSERT_EQ(d.series.size(), 1u);
  EXPECT_EQ(d.caps, (std::vector<double>{1, 5, 25}));
  EXPECT_EQ(d.series[0].best_cap_mb, 5);
  EXPECT_EQ(d.series[0].label, "cpu:2, batch 32/device");
  EXPECT_GE(d.y_hi, 4.0);  // the largest all-reduce: 40% of 10 ms
  const std::string svg = html::draw_buckets(d);
  EXPECT_EQ(testing_util::count_of(svg, "data-bucket="), 3u);
  EXPECT_EQ(testing_util::count_of(svg, "data-best=\"true\""), 1u);
  ASSERT_EQ(d.conclusions.size(), 1u);
  EXPECT_CONTAINS(d.conclusions[0], bucket_conclusion(r.bucket_choices[0]));
  // On the page, once per model that has a choice, its conclusion under it; not at all
  // without the axis.
  const std::string page = format_sweep_html(r);
  EXPECT_EQ(testing_util::count_of(page, "data-chart=\"buckets\""), 1u);
  EXPECT_EQ(testing_util::count_of(page, "data-bucket-choice"), 1u);
  const SweepReport plain = report_of({one_device(), bucket_point(25, 1, 10.0)});
  EXPECT_EQ(testing_util::count_of(format_sweep_html(plain), "data-chart=\"buckets\""), 0u);
}

// A sweep over bucket caps and precisions chooses per precision, says which in the tables and
// the JSON, and draws each choice in its own precision's section of the page.
TEST(BucketChoice, EachPrecisionChoosesApartAndSaysWhich) {
  const auto in_bf16 = [](SweepPoint p) {
    p.precision = Precision::kBf16;
    p.precision_default = false;
    return p;
  };
  const SweepReport r =
      report_of({one_device(), bucket_point(5, 1, 8.0, 0.05), bucket_point(25, 1, 10.0, 0.05),
                 in_bf16(one_device()), in_bf16(bucket_point(5, 1, 6.0, 0.05)),
                 in_bf16(bucket_point(25, 1, 5.0, 0.05))});
  ASSERT_EQ(r.bucket_choices.size(), 2u);
  EXPECT_EQ(r.bucket_choices[0].settings[r.bucket_choices[0].best].cap_mb, 5);
  EXPECT_EQ(r.bucket_choices[1].settings[r.bucket_choices[1].best].cap_mb, 25);
  EXPECT_EQ(r.bucket_choices[1].label(), "m cpu:2 batch 32 in bf16");
  const std::string tables = format_sweep_tables(r);
  EXPECT_EQ(testing_util::lines_with(tables, "m cpu:2 batch 32 in bf16").size(), 2u)
      << tables;  // the loss's row and the bucket choice's
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["bucket_choices"][0]["precision"], "fp32");
  EXPECT_EQ(j["bucket_choices"][1]["precision"], "bf16");
  const std::vector<html::ModelView> models = html::models_of(r);
  ASSERT_EQ(models.size(), 2u);
  for (const html::ModelView& m : models) {
    ASSERT_EQ(m.bucket_choices.size(), 1u) << m.name;
    EXPECT_EQ(m.bucket_choices[0]->precision, m.precision) << m.name;
  }
}

// A choice among compressed points in another precision is headed as its points are named:
// the compression, then the precision.
TEST(BucketChoice, ACompressedChoiceNamesItsCompressionThenItsPrecision) {
  const auto compressed_bf16 = [](SweepPoint p) {
    p.precision = Precision::kBf16;
    p.precision_default = false;
    p.grad_compression = GradCompression::kFp16;
    return p;
  };
  SweepPoint single = one_device();
  single.precision = Precision::kBf16;
  single.precision_default = false;
  const SweepReport r = report_of({single, compressed_bf16(bucket_point(5, 1, 6.0, 0.05)),
                                   compressed_bf16(bucket_point(25, 1, 5.0, 0.05))});
  ASSERT_EQ(r.bucket_choices.size(), 1u);
  const std::string tables = format_sweep_tables(r);
  EXPECT_CONTAINS(tables, "\nm cpu:2 batch 32 fp16 gradients in bf16\n");
  EXPECT_CONTAINS(r.points[1].label(), "fp16 gradients in bf16");
}

}  // namespace
}  // namespace scalescope
