// export: each format holds what its consumer reads (Google Benchmark's JSON for compare.py,
// github-action-benchmark's custom tools, Bencher Metric Format). That compare.py really reads
// the gbench export is tested end to end by export_consumers.py.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "reports/analysis/sweep_analysis.h"
#include "reports/writers/export.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using nlohmann::json;

// Repeat r, step i takes base_ms * (1 + r / 10) + i / 100: known medians per repeat.
SweepPoint point(int devices, ScalingMode mode, int64_t batch, double base_ms, int repeats = 3,
                 int steps = 5) {
  return testing_util::make_point(
      {.model = "cnn:width=2",
       .devices = devices,
       .mode = mode,
       .batch = batch,
       .repeats = repeats,
       .steps = steps,
       .step_time = [base_ms](int r, int i) { return base_ms * (1.0 + r / 10.0) + i / 100.0; },
       .input = 0.0,
       .forward = 0.5,
       .backward = 0.5,
       .exposed = 0.0,
       .bucket_bytes = {}});
}

SweepReport sample_report() {
  SweepReport r;
  r.tool_version = "0.1.0";
  r.created = "2026-01-31T12:34:56Z";
  r.config = json::object();
  r.environment.host.hostname = "runner-7";
  r.environment.host.logical_cores = 16;
  r.environment.build.build_type = "Release";
  SweepPoint failed = point(4, ScalingMode::kWeak, 32, 1.0);
  failed.status = "failed";
  failed.error = "out of memory";
  failed.repeats.clear();
  r.points = {point(1, ScalingMode::kWeak, 32, 10.0), point(2, ScalingMode::kWeak, 32, 12.0),
              failed, point(2, ScalingMode::kStrong, 64, 6.0, 1)};
  r.complete = true;
  analyze(r);
  return r;
}

TEST(Export, BenchmarkNamesSayModelDevicesAndBatch) {
  const SweepReport r = sample_report();
  EXPECT_EQ(benchmark_name(r.points[0]), "cnn:width=2/cpu:1/batch:32");
  EXPECT_EQ(benchmark_name(r.points[3]), "cnn:width=2/cpu:2/global_batch:64");
  EXPECT_CONTAINS(testing_util::error_of([] { parse_export_format("csv"); }),
                  "export format 'csv' is not known (accepted: gbench, ");
  EXPECT_CONTAINS(testing_util::error_of([] { parse_github_metric("loss"); }), "'loss'");
}

// The points of a sweep over precisions, bucket caps and compression have names of their own
// in every format: a tracker keyed by name (Bencher's object) loses none of them.
TEST(Export, PointsThatDifferBeyondDevicesAndBatchHaveNamesOfTheirOwn) {
  SweepReport r = sample_report();
  SweepPoint bf16 = point(2, ScalingMode::kWeak, 32, 6.0);
  bf16.precision = Precision::kBf16;
  bf16.precision_default = false;
  SweepPoint capped = point(2, ScalingMode::kWeak, 32, 11.0);
  capped.bucket_cap_mb = 5;
  capped.first_bucket_mb = 0.5;
  SweepPoint compressed = point(2, ScalingMode::kWeak, 32, 11.5);
  compressed.grad_compression = GradCompression::kBf16;
  r.points.insert(r.points.end(), {bf16, capped, compressed});
  analyze(r);
  EXPECT_EQ(benchmark_name(r.points[4]), "cnn:width=2/cpu:2/batch:32/precision:bf16");
  EXPECT_EQ(benchmark_name(r.points[5]),
            "cnn:width=2/cpu:2/batch:32/bucket_cap_mb:5/first_bucket_mb:0.5");
  EXPECT_EQ(benchmark_name(r.points[6]), "cnn:width=2/cpu:2/batch:32/grad_compression:bf16");
  EXPECT_EQ(benchmark_name(r.points[1]), "cnn:width=2/cpu:2/batch:32");  // the default's as before
  const json bencher = to_bencher_json(r);
  EXPECT_EQ(bencher.size(), 6u);  // every point that ran
  EXPECT_NEAR(bencher.at("cnn:width=2/cpu:2/batch:32/precision:bf16")
                  .at("throughput")
                  .at("value")
                  .get<double>(),
              r.points[4].summary.throughput.value, 1e-9);
  std::set<std::string> names;
  for (const json& e : to_github_action_benchmark_json(r, GithubMetric::kThroughput)) {
    names.insert(e.at("name").get<std::string>());
  }
  EXPECT_EQ(names.size(), 6u);
}

TEST(Export, GbenchIsGoogleBenchmarkJson) {
  const json j = to_gbench_json(sample_report());
  const json& ctx = j.at("context");
  EXPECT_EQ(ctx.at("date"), "2026-01-31T12:34:56+00:00");
  EXPECT_EQ(ctx.at("host_name"), "runner-7");
  EXPECT_EQ(ctx.at("num_cpus"), 16);
  EXPECT_TRUE(ctx.at("mhz_per_cpu").is_number());
  EXPECT_TRUE(ctx.at("caches").is_array());
  EXPECT_EQ(ctx.at("library_build_type"), "release");
  const json& b = j.at("benchmarks");
  // 3 repeats + 4 aggregates, twice; the failed point; one repeat and no aggregates.
  ASSERT_EQ(b.size(), 7u + 7u + 1u + 1u);
  const std::string name = "cnn:width=2/cpu:2/batch:32";
  std::vector<json> runs;
  std::map<std::string, json> aggregates;
  for (const json& e : b) {
    for (const char* key :
         {"name", "run_name", "run_type", "repetitions", "threads", "iterations", "real_time",
          "cpu_time", "time_unit", "family_index", "per_family_instance_index"}) {
      EXPECT_TRUE(e.contains(key)) << key << " in " << e.dump();
    }
    EXPECT_EQ(e.at("time_unit"), "ms");
    if (e.at("run_name") != name) continue;
    if (e.at("run_type") == "iteration") runs.push_back(e);
    if (e.at("run_type") == "aggregate") aggregates[e.at("aggregate_name")] = e;
  }
  ASSERT_EQ(runs.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(runs[r].at("name"), name);
    EXPECT_EQ(runs[r].at("repetition_index"), r);
    EXPECT_EQ(runs[r].at("repetitions"), 3);
    EXPECT_EQ(runs[r].at("iterations"), 5);  // the repeat's measured steps
    const double median_ms = 12.0 * (1.0 + r / 10.0) + 0.02;
    EXPECT_NEAR(runs[r].at("real_time").get<double>(), median_ms, 1e-9);
    EXPECT_EQ(runs[r].at("cpu_time"), runs[r].at("real_time"));
    EXPECT_NEAR(runs[r].at("items_per_second").get<double>(), 64 * 1e3 / median_ms, 1e-6);
  }
  ASSERT_EQ(aggregates.size(), 4u);
  EXPECT_EQ(aggregates.at("mean").at("name"), name + "_mean");
  EXPECT_EQ(aggregates.at("mean").at("iterations"), 3);  // Google Benchmark: the repetitions
  EXPECT_NEAR(aggregates.at("mean").at("real_time").get<double>(), 13.22, 1e-9);
  EXPECT_NEAR(aggregates.at("median").at("real_time").get<double>(), 13.22, 1e-9);
  EXPECT_NEAR(aggregates.at("stddev").at("real_time").get<double>(), 1.2, 1e-9);
  EXPECT_EQ(aggregates.at("cv").at("aggregate_unit"), "percentage");
  EXPECT_EQ(aggregates.at("median").at("aggregate_unit"), "time");
  // The two weak points of the model are one family; the strong one another.
  EXPECT_EQ(runs[0].at("family_index"), 0);
  EXPECT_EQ(runs[0].at("per_family_instance_index"), 1);
  // Failed: reported per benchmark, as Google Benchmark does.
  const json& failed = b.at(14);
  EXPECT_EQ(failed.at("name"), "cnn:width=2/cpu:4/batch:32");
  EXPECT_EQ(failed.at("error_occurred"), true);
  EXPECT_EQ(failed.at("error_message"), "out of memory");
  const json& strong = b.at(15);
  EXPECT_EQ(strong.at("name"), "cnn:width=2/cpu:2/global_batch:64");
  EXPECT_EQ(strong.at("family_index"), 1);
  EXPECT_EQ(strong.at("repetitions"), 1);
}

TEST(Export, GithubActionBenchmarkCustomTools) {
  const SweepReport r = sample_report();
  const json bigger = to_github_action_benchmark_json(r, GithubMetric::kThroughput);
  ASSERT_TRUE(bigger.is_array());
  ASSERT_EQ(bigger.size(), 3u);  // the failed point left out
  std::set<std::string> names;
  for (const json& e : bigger) {
    // The action's BenchmarkResult: name, unit and value required; range and extra strings.
    ASSERT_TRUE(e.at("name").is_string());
    ASSERT_TRUE(e.at("unit").is_string());
    ASSERT_TRUE(e.at("value").is_number());
    ASSERT_TRUE(e.at("range").is_string());
    ASSERT_TRUE(e.at("extra").is_string());
    EXPECT_EQ(e.size(), 5u);
    EXPECT_EQ(e.at("unit"), "samples/s");
    EXPECT_EQ(e.at("range").get<std::string>().rfind("± ", 0), 0u);
    names.insert(e.at("name").get<std::string>());
  }
  EXPECT_EQ(names.size(), 3u);
  EXPECT_DOUBLE_EQ(bigger[1].at("value").get<double>(), r.points[1].summary.throughput.value);
  EXPECT_CONTAINS(bigger[1].at("extra").get<std::string>(), "efficiency");
  const json smaller = to_github_action_benchmark_json(r, GithubMetric::kStepTime);
  ASSERT_EQ(smaller.size(), 3u);
  EXPECT_EQ(smaller[0].at("unit"), "ms");
  EXPECT_DOUBLE_EQ(smaller[0].at("value").get<double>(), r.points[0].summary.step_ms_median);
}

TEST(Export, BencherMetricFormat) {
  const SweepReport r = sample_report();
  const json j = to_bencher_json(r);
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.size(), 3u);
  EXPECT_FALSE(j.contains("cnn:width=2/cpu:4/batch:32"));
  for (const auto& [name, measures] : j.items()) {
    EXPECT_LE(name.size(), 1024u);  // Bencher's limit on a benchmark name
    ASSERT_TRUE(measures.is_object());
    for (const auto& [measure, metric] : measures.items()) {
      ASSERT_TRUE(metric.at("value").is_number()) << name << " " << measure;
      const double v = metric.at("value").get<double>();
      EXPECT_LE(metric.at("lower_value").get<double>(), v) << name << " " << measure;
      EXPECT_GE(metric.at("upper_value").get<double>(), v) << name << " " << measure;
    }
  }
  const json& two = j.at("cnn:width=2/cpu:2/batch:32");
  EXPECT_DOUBLE_EQ(two.at("throughput").at("value").get<double>(),
                   r.points[1].summary.throughput.value);
  // Bencher's latency measure is in nanoseconds.
  EXPECT_DOUBLE_EQ(two.at("latency").at("value").get<double>(),
                   r.points[1].summary.step_ms_median * 1e6);
  EXPECT_DOUBLE_EQ(two.at("efficiency").at("value").get<double>(),
                   r.points[1].summary.efficiency->value);
  EXPECT_FALSE(j.at("cnn:width=2/cpu:1/batch:32").contains("efficiency"));
}

}  // namespace
}  // namespace scalescope
