// Gradient compression in sweep reports: the effects analysis, its JSON, the tables and the
// HTML page.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "reports/html/compression_chart.h"
#include "reports/html/page.h"
#include "reports/html/svg.h"
#include "reports/html/view.h"
#include "reports/sweep_report.h"
#include "reports/writers/table.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::count_of;
using testing_util::make_point;
using testing_util::report_of;

constexpr GradCompression kNone = GradCompression::kNone;
constexpr GradCompression kFp16 = GradCompression::kFp16;
constexpr GradCompression kBf16 = GradCompression::kBf16;

// Two devices, batch 32, `compression` at bucket caps (cap, first); every step `step_ms` plus
// `noise` × a fixed pattern in [-2, 2]. Uncompressed points all-reduce 5 MiB per step in two
// buckets, compressed ones half of it and spend `cast_ms` per step on the casts.
SweepPoint cpoint(GradCompression compression, double step_ms, double noise = 0.0,
                  double cap = kDefaultBucketCapMb, double first = kDefaultFirstBucketMb,
                  double cast_ms = 0.5, const std::string& model = "m") {
  const bool compressed = compression != kNone;
  SweepPoint p = make_point(
      {.model = model,
       .devices = 2,
       .repeats = 3,
       .steps = 20,
       .step_time = [=](int r, int i) { return step_ms + noise * ((i * 7 + r * 3) % 5 - 2); },
       .exposed = 0.1,
       .bucket_bytes = compressed ? std::vector<int64_t>{1 << 19, 2 << 20}
                                  : std::vector<int64_t>{1 << 20, 4 << 20}});
  p.grad_compression = compression;
  p.bucket_cap_mb = cap;
  p.first_bucket_mb = first;
  if (compressed) {
    for (RepeatRecord& r : p.repeats) {
      for (StepRecord& s : r.steps) {
        for (PhaseTimes& t : s.replicas) t[Phase::kGradCast] = cast_ms;
      }
    }
  }
  return p;
}

SweepPoint one_device(const std::string& model = "m") {
  return make_point({.model = model, .devices = 1, .step_ms = 8.0});
}

std::vector<GradCompression> compressions_of(const CompressionEffect& e) {
  std::vector<GradCompression> out;
  for (const CompressionEffect::Setting& s : e.settings) out.push_back(s.compression);
  return out;
}

TEST(CompressionEffect, GroupsTheSettingsOfOneCapsNoneFirst) {
  // Report order bf16, none, fp16: the effect still lists none, fp16, bf16.
  const SweepReport r =
      report_of({one_device(), cpoint(kBf16, 9.0), cpoint(kNone, 10.0), cpoint(kFp16, 8.0)});
  ASSERT_EQ(r.compression_effects.size(), 1u);
  const CompressionEffect& e = r.compression_effects[0];
  EXPECT_EQ(e.model, "m");
  EXPECT_EQ(e.device_kind, "cpu");
  EXPECT_EQ(e.devices, 2);
  EXPECT_EQ(e.mode, ScalingMode::kWeak);
  EXPECT_EQ(e.batch, 32);
  EXPECT_EQ(e.cap_mb, kDefaultBucketCapMb);
  EXPECT_EQ(e.first_mb, kDefaultFirstBucketMb);
  EXPECT_EQ(compressions_of(e), (std::vector<GradCompression>{kNone, kFp16, kBf16}));
  // The settings are the points they name: none's step is 10 ms, fp16's 8, bf16's 9.
  EXPECT_NEAR(e.settings[0].step_ms, 10.0, 1e-9);
  EXPECT_NEAR(e.settings[1].step_ms, 8.0, 1e-9);
  EXPECT_NEAR(e.settings[2].step_ms, 9.0, 1e-9);
}

TEST(CompressionEffect, NoEffectWithoutAnUncompressedPoint) {
  EXPECT_TRUE(report_of({one_device(), cpoint(kFp16, 8.0), cpoint(kBf16, 9.0)})
                  .compression_effects.empty());
  // Nor with nothing to compare none with, nor on one device.
  EXPECT_TRUE(report_of({one_device(), cpoint(kNone, 10.0)}).compression_effects.empty());
  SweepPoint single = cpoint(kFp16, 8.0);
  single.devices = 1;
  EXPECT_TRUE(report_of({one_device(), single}).compression_effects.empty());
  // A failed compressed point compares nothing either.
  SweepPoint failed = cpoint(kFp16, 8.0);
  failed.status = "failed";
  failed.error = "boom";
  failed.repeats.clear();
  EXPECT_TRUE(report_of({one_device(), cpoint(kNone, 10.0), failed}).compression_effects.empty());
}

TEST(CompressionEffect, OtherCapsAreAnotherEffect) {
  const SweepReport r = report_of({cpoint(kNone, 10.0, 0.0, 5), cpoint(kNone, 10.0),
                                   cpoint(kFp16, 8.0), cpoint(kFp16, 7.0, 0.0, 5),
                                   cpoint(kBf16, 9.0, 0.0, 5, 0.5)});  // no none at (5, 0.5)
  ASSERT_EQ(r.compression_effects.size(), 2u);
  // In the order of the groups' first points: 5 MB first.
  EXPECT_EQ(r.compression_effects[0].cap_mb, 5);
  EXPECT_EQ(r.compression_effects[1].cap_mb, kDefaultBucketCapMb);
  for (const CompressionEffect& e : r.compression_effects) {
    EXPECT_EQ(e.first_mb, kDefaultFirstBucketMb);
    EXPECT_EQ(compressions_of(e), (std::vector<GradCompression>{kNone, kFp16}));
  }
  EXPECT_NEAR(r.compression_effects[0].settings[1].step_ms, 7.0, 1e-9);
  EXPECT_NEAR(r.compression_effects[1].settings[1].step_ms, 8.0, 1e-9);
}

TEST(CompressionEffect, AClearlyShorterStepIsFaster) {
  const SweepReport r =
      report_of({one_device(), cpoint(kNone, 10.0, 0.05), cpoint(kFp16, 8.0, 0.05)});
  const CompressionEffect& e = r.compression_effects.at(0);
  const CompressionEffect::Setting& none = e.settings[0];
  const CompressionEffect::Setting& fp16 = e.settings[1];
  EXPECT_EQ(none.saved_ms, 0.0);
  EXPECT_FALSE(none.gain);
  EXPECT_FALSE(none.faster());
  EXPECT_NEAR(fp16.saved_ms, 2.0, 1e-9);
  ASSERT_TRUE(fp16.gain);
  // Throughput ratio = 10 / 8 ms; the noise (±0.1 ms) cannot close a 2 ms gap.
  EXPECT_NEAR(fp16.gain->value, 1.25, 1e-9);
  EXPECT_GT(fp16.gain->low, 1.2);
  EXPECT_TRUE(fp16.faster());
  EXPECT_NEAR(fp16.throughput / none.throughput, 1.25, 1e-9);
  const std::string c = compression_conclusion(e, 1);
  EXPECT_EQ(c.rfind("fp16: ", 0), 0u) << c;
  EXPECT_CONTAINS(c, "step 2.00 ms shorter");
  EXPECT_CONTAINS(c, fmt::format("; 1.250x [{:.3f}, {:.3f}] the throughput of none", fp16.gain->low,
                                 fp16.gain->high));
}

TEST(CompressionEffect, EqualStepsAreNotFasterAndLongerOnesAreSlower) {
  const SweepReport r =
      report_of({cpoint(kNone, 10.0, 0.2), cpoint(kFp16, 10.0, 0.2), cpoint(kBf16, 12.0, 0.05)});
  const CompressionEffect& e = r.compression_effects.at(0);
  const CompressionEffect::Setting& fp16 = e.settings[1];
  ASSERT_TRUE(fp16.gain);
  EXPECT_LE(fp16.gain->low, 1.0);
  EXPECT_GE(fp16.gain->high, 1.0);
  EXPECT_FALSE(fp16.faster());
  EXPECT_CONTAINS(compression_conclusion(e, 1), "no faster than none (");
  EXPECT_CONTAINS(compression_conclusion(e, 1), "the interval includes 1)");
  const CompressionEffect::Setting& bf16 = e.settings[2];
  EXPECT_NEAR(bf16.saved_ms, -2.0, 1e-9);
  EXPECT_FALSE(bf16.faster());
  EXPECT_LT(bf16.gain->high, 1.0);
  EXPECT_CONTAINS(compression_conclusion(e, 2), "step 2.00 ms longer");
  EXPECT_CONTAINS(compression_conclusion(e, 2), "the interval is below 1: slower)");
}

TEST(CompressionEffect, BytesCastsExposedAndEfficiencyOfEachSetting) {
  const SweepReport r =
      report_of({one_device(), cpoint(kNone, 10.0), cpoint(kFp16, 8.0, 0.0, 25, 1, 0.75)});
  const CompressionEffect& e = r.compression_effects.at(0);
  EXPECT_EQ(e.settings[0].bytes_per_step, int64_t{5} << 20);  // 1 + 4 MiB
  EXPECT_EQ(e.settings[1].bytes_per_step, int64_t{5} << 19);  // half of it
  EXPECT_EQ(e.settings[0].cast_ms, 0.0);
  EXPECT_NEAR(e.settings[1].cast_ms, 0.75, 1e-9);
  EXPECT_NEAR(e.settings[0].exposed_ms, 1.0, 1e-9);  // 10% of 10 ms
  EXPECT_NEAR(e.settings[1].exposed_ms, 0.8, 1e-9);
  EXPECT_NEAR(e.settings[0].allreduce_ms, 2.0, 1e-9);
  // Against the one device's 8 ms: 80% without compression, 100% with.
  ASSERT_TRUE(e.settings[0].efficiency && e.settings[1].efficiency);
  EXPECT_NEAR(e.settings[0].efficiency->value, 0.8, 1e-9);
  EXPECT_NEAR(e.settings[1].efficiency->value, 1.0, 1e-9);
  EXPECT_CONTAINS(compression_conclusion(e, 1),
                  "fp16: 2.62 of 5.24 MB per step, exposed all-reduce 1.00 -> 0.80 ms (casts "
                  "0.75 ms), step 2.00 ms shorter");
  // Without the one-device point there is no efficiency to show.
  const SweepReport alone = report_of({cpoint(kNone, 10.0), cpoint(kFp16, 8.0)});
  EXPECT_FALSE(alone.compression_effects.at(0).settings[0].efficiency);
  EXPECT_FALSE(alone.compression_effects.at(0).settings[1].efficiency);
}

TEST(CompressionEffect, Json) {
  const SweepReport r =
      report_of({one_device(), cpoint(kNone, 10.0, 0.05), cpoint(kFp16, 8.0, 0.05)});
  const nlohmann::json j = to_json(r);
  ASSERT_EQ(j["compression_effects"].size(), 1u);
  const nlohmann::json& e = j["compression_effects"][0];
  EXPECT_EQ(e["model"], "m");
  EXPECT_EQ(e["device_kind"], "cpu");
  EXPECT_EQ(e["devices"], 2);
  EXPECT_EQ(e["mode"], "weak");
  EXPECT_EQ(e["batch"], 32);
  EXPECT_EQ(e["bucket_cap_mb"], kDefaultBucketCapMb);
  EXPECT_EQ(e["first_bucket_mb"], kDefaultFirstBucketMb);
  ASSERT_EQ(e["settings"].size(), 2u);
  const nlohmann::json& none = e["settings"][0];
  const nlohmann::json& fp16 = e["settings"][1];
  EXPECT_EQ(none["grad_compression"], "none");
  EXPECT_EQ(fp16["grad_compression"], "fp16");
  EXPECT_EQ(none["allreduce_bytes_per_step"], int64_t{5} << 20);
  EXPECT_EQ(fp16["allreduce_bytes_per_step"], int64_t{5} << 19);
  EXPECT_EQ(none["gain"], nullptr);
  EXPECT_EQ(none["faster"], false);
  EXPECT_EQ(fp16["faster"], true);
  EXPECT_NEAR(fp16["gain"]["value"].get<double>(), 1.25, 1e-9);
  EXPECT_GT(fp16["gain"]["low"].get<double>(), 1.2);
  EXPECT_NEAR(fp16["step_ms_saved"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(fp16["step_ms"].get<double>(), 8.0, 0.2);
  EXPECT_NEAR(fp16["grad_cast_ms"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(none["grad_cast_ms"], 0.0);
  EXPECT_NEAR(none["exposed_allreduce_ms"].get<double>(), 1.0, 0.05);
  EXPECT_NEAR(fp16["throughput"].get<double>(), r.points[2].summary.throughput.value, 1e-9);
  EXPECT_NEAR(none["efficiency"]["value"].get<double>(), 0.8, 0.02);
  EXPECT_EQ(j["points"][2]["grad_compression"], "fp16");
  EXPECT_EQ(j["points"][1]["grad_compression"], "none");
}

TEST(CompressionEffect, ReadingBackKeepsTheCompression) {
  const SweepReport r = report_of(
      {one_device(), cpoint(kNone, 10.0, 0.05), cpoint(kFp16, 8.0, 0.05), cpoint(kBf16, 9.0)});
  const nlohmann::json j = to_json(r);
  const SweepReport back = sweep_report_from_json(j, "test");
  ASSERT_EQ(back.points.size(), 4u);
  EXPECT_EQ(back.points[1].grad_compression, kNone);
  EXPECT_EQ(back.points[2].grad_compression, kFp16);
  EXPECT_EQ(back.points[3].grad_compression, kBf16);
  ASSERT_EQ(back.compression_effects.size(), 1u);
  EXPECT_EQ(compressions_of(back.compression_effects[0]),
            compressions_of(r.compression_effects[0]));
  EXPECT_EQ(back.compression_effects[0].settings[1].bytes_per_step,
            r.compression_effects[0].settings[1].bytes_per_step);

  nlohmann::json bad = j;
  bad["points"][2]["grad_compression"] = "fp8";
  const std::string error =
      testing_util::error_of([&] { sweep_report_from_json(bad, "bad.json"); });
  EXPECT_CONTAINS(error, "grad_compression");
  EXPECT_CONTAINS(error, "'fp8'");

  // Reports before 1.6 did not compress.
  nlohmann::json old = j;
  old["points"].erase(old["points"].begin() + 2, old["points"].end());
  for (nlohmann::json& p : old["points"]) p.erase("grad_compression");
  const SweepReport read_old = sweep_report_from_json(old, "old");
  ASSERT_EQ(read_old.points.size(), 2u);
  EXPECT_EQ(read_old.points[1].grad_compression, kNone);
  EXPECT_FALSE(read_old.points[1].compressed());
  EXPECT_TRUE(read_old.compression_effects.empty());
}

TEST(CompressionTables, AColumnAndATableWithTheConclusions) {
  const SweepReport r = report_of(
      {one_device(), cpoint(kNone, 10.0, 0.05), cpoint(kFp16, 8.0, 0.05), cpoint(kBf16, 9.0)});
  const std::string tables = format_sweep_tables(r);
  // The model's table: a compression column, a cell per row ("-" on one device).
  const std::vector<std::string> header = testing_util::lines_with(tables, "samples/s [95% CI]");
  ASSERT_EQ(header.size(), 1u);
  EXPECT_CONTAINS(header[0], "compression");
  const std::vector<std::string> rows = testing_util::lines_with(tables, "cpu:2      32");
  ASSERT_EQ(rows.size(), 3u) << tables;
  EXPECT_CONTAINS(rows[0], " none ");
  EXPECT_CONTAINS(rows[1], " fp16 ");
  EXPECT_CONTAINS(rows[2], " bf16 ");
  // The compression table: a row per setting, none first, then the conclusions.
  const size_t table = tables.find("gradient compression (medians per step");
  ASSERT_NE(table, std::string::npos) << tables;
  const std::string rest = tables.substr(table);
  EXPECT_CONTAINS(rest, "m cpu:2 batch 32\n");
  EXPECT_CONTAINS(rest, "MB all-reduced");
  EXPECT_CONTAINS(rest, "efficiency [CI]");
  const size_t none_row = rest.find(fmt::format("  {:>11} {:>14}", "none", "5.243"));
  const size_t fp16_row = rest.find(fmt::format("  {:>11} {:>14}", "fp16", "2.621"));
  ASSERT_NE(none_row, std::string::npos) << rest;
  ASSERT_NE(fp16_row, std::string::npos) << rest;
  EXPECT_LT(none_row, fp16_row);
  EXPECT_CONTAINS(rest, "80% [");  // none's efficiency against 8 ms on one device
  const CompressionEffect& e = r.compression_effects[0];
  EXPECT_CONTAINS(rest, "  " + compression_conclusion(e, 1) + "\n");
  EXPECT_CONTAINS(rest, "  " + compression_conclusion(e, 2) + "\n");
  EXPECT_LT(rest.find(compression_conclusion(e, 1)), rest.find(compression_conclusion(e, 2)));

  // Other caps are named in the effect's header; without compression, neither column nor
  // table.
  const SweepReport caps = report_of({cpoint(kNone, 10.0, 0.0, 5), cpoint(kFp16, 8.0, 0.0, 5)});
  EXPECT_CONTAINS(format_sweep_tables(caps), "m cpu:2 batch 32 bucket 5 MB\n");
  const std::string plain = format_sweep_tables(report_of({one_device(), cpoint(kNone, 10.0)}));
  EXPECT_EQ(plain.find("compression"), std::string::npos) << plain;
}

// Points of another precision are another effect, named as such in the tables, the JSON and
// their own precision's section of the page.
TEST(CompressionEffect, OtherPrecisionsAreAnotherEffect) {
  const auto in_bf16 = [](SweepPoint p) {
    p.precision = Precision::kBf16;
    p.precision_default = false;
    return p;
  };
  const SweepReport r = report_of({cpoint(kNone, 10.0), cpoint(kFp16, 8.0),
                                   in_bf16(cpoint(kNone, 6.0)), in_bf16(cpoint(kFp16, 5.0))});
  ASSERT_EQ(r.compression_effects.size(), 2u);
  EXPECT_EQ(r.compression_effects[1].label(), "m cpu:2 batch 32 in bf16");
  EXPECT_NEAR(r.compression_effects[1].settings[1].step_ms, 5.0, 1e-9);
  EXPECT_EQ(to_json(r)["compression_effects"][1]["precision"], "bf16");
  const std::string tables = format_sweep_tables(r);
  EXPECT_EQ(testing_util::lines_with(tables, "m cpu:2 batch 32 in bf16").size(), 1u) << tables;
  EXPECT_EQ(testing_util::lines_with(tables, "m cpu:2 batch 32").size(), 2u) << tables;
  for (const html::ModelView& m : html::models_of(r)) {
    ASSERT_EQ(m.compression_effects.size(), 1u) << m.name;
    EXPECT_EQ(m.compression_effects[0]->precision, m.precision) << m.name;
  }
  // Other caps too are named before the precision, as in the points' names.
  const SweepReport caps =
      report_of({in_bf16(cpoint(kNone, 6.0, 0.0, 5)), in_bf16(cpoint(kFp16, 5.0, 0.0, 5))});
  EXPECT_CONTAINS(format_sweep_tables(caps), "\nm cpu:2 batch 32 bucket 5 MB in bf16\n");
}

TEST(CompressionView, TheChartsTakeTheUncompressedDefaultCapsPoint) {
  // Compressed first, then other caps, then the default: the default uncompressed one wins.
  const SweepReport r = report_of({one_device(), cpoint(kFp16, 8.0), cpoint(kNone, 9.0, 0.0, 5),
                                   cpoint(kNone, 10.0), cpoint(kBf16, 9.5)});
  const std::vector<html::ModelView> models = html::models_of(r);
  ASSERT_EQ(models.size(), 1u);
  const html::ModelView& m = models[0];
  EXPECT_EQ(m.all_points.size(), 5u);
  ASSERT_EQ(m.points.size(), 2u);
  EXPECT_EQ(m.at(2, 32), &r.points[3]);
  EXPECT_EQ(m.compression_effects.size(), 1u);
  // Uncompressed goes before the default caps: a compressed point at the default caps gives
  // way to an uncompressed one at other caps.
  const SweepReport other = report_of({cpoint(kFp16, 8.0), cpoint(kNone, 9.0, 0.0, 5)});
  EXPECT_EQ(html::models_of(other)[0].at(2, 32), &other.points[1]);
}

TEST(CompressionChart, ABarPerSettingAndTheConclusions) {
  const SweepReport r = report_of(
      {one_device(), cpoint(kNone, 10.0, 0.05), cpoint(kFp16, 8.0, 0.05), cpoint(kBf16, 9.0),
       one_device("plain"), cpoint(kNone, 10.0, 0.0, 25, 1, 0.5, "plain")});
  const std::vector<html::ModelView> models = html::models_of(r);
  const html::CompressionChartData d = html::prepare_compression(models.at(0));
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].label, "cpu:2, batch 32/device");
  ASSERT_EQ(d.groups[0].bars.size(), 3u);
  EXPECT_EQ(d.groups[0].bars[0].compression, kNone);
  EXPECT_EQ(d.groups[0].bars[1].compression, kFp16);
  EXPECT_NEAR(d.groups[0].bars[0].efficiency->value, 0.8, 0.02);
  EXPECT_NEAR(d.groups[0].bars[1].efficiency->value, 1.0, 0.02);
  EXPECT_EQ(d.compressions, (std::vector<GradCompression>{kNone, kFp16, kBf16}));
  EXPECT_GE(d.y_hi, 1.0);
  ASSERT_EQ(d.conclusions.size(), 2u);
  EXPECT_EQ(d.conclusions[0],
            "cpu:2, batch 32/device: " + compression_conclusion(r.compression_effects[0], 1));
  EXPECT_TRUE(d.missing.empty());

  const std::string svg = html::draw_compression(d);
  EXPECT_EQ(count_of(svg, "data-compression-bar="), 3u);
  EXPECT_EQ(count_of(svg, "data-compression=\"none\""), 1u);
  EXPECT_EQ(count_of(svg, "data-compression=\"fp16\""), 1u);
  EXPECT_EQ(count_of(svg, "data-compression=\"bf16\""), 1u);
  // A whisker per interval; bf16's steps all take 9 ms, so its interval has no width to draw.
  EXPECT_EQ(count_of(svg, "data-ci="), 2u);
  EXPECT_EQ(count_of(svg, "data-ci=\"bf16\""), 0u);
  // Bars in setting order, none's lower than fp16's (80% against 100%).
  const size_t none_bar = svg.find("data-compression=\"none\"");
  const size_t fp16_bar = svg.find("data-compression=\"fp16\"");
  EXPECT_LT(none_bar, fp16_bar);
  EXPECT_CONTAINS(svg.substr(none_bar, 200), "data-efficiency=\"0.8");

  // On the page: once per model with effects, the conclusions under it.
  const std::string page = format_sweep_html(r);
  EXPECT_EQ(count_of(page, "data-chart=\"compression\""), 1u);
  EXPECT_EQ(count_of(page, "data-compression-effect>"), 2u);
  for (const std::string& c : d.conclusions) EXPECT_CONTAINS(page, svg::escape(c));
  EXPECT_EQ(count_of(page, "data-compression-missing"), 0u);
  EXPECT_CONTAINS(page, "cpu:2, fp16 gradients");  // the points table's row
  EXPECT_CONTAINS(page, "cpu:2, bf16 gradients");
  const std::string plain = format_sweep_html(report_of({one_device(), cpoint(kNone, 10.0)}));
  EXPECT_EQ(count_of(plain, "data-chart=\"compression\""), 0u);
}

TEST(CompressionChart, WithoutAOneDevicePointNoBarsAndANote) {
  const SweepReport r = report_of({cpoint(kNone, 10.0), cpoint(kFp16, 8.0)});
  const html::CompressionChartData d = html::prepare_compression(html::models_of(r).at(0));
  ASSERT_EQ(d.missing.size(), 1u);
  EXPECT_CONTAINS(d.missing[0], "cpu:2, batch 32/device: no bar for none, fp16");
  const std::string svg = html::draw_compression(d);
  EXPECT_EQ(count_of(svg, "data-compression-bar="), 0u);
  EXPECT_EQ(count_of(svg, "data-missing="), 2u);
  const std::string page = format_sweep_html(r);
  EXPECT_EQ(count_of(page, "data-chart=\"compression\""), 1u);
  EXPECT_EQ(count_of(page, "data-compression-effect>"), 1u);
  EXPECT_EQ(count_of(page, "data-compression-missing>"), 1u);
}

}  // namespace
}  // namespace scalescope
