// The sweep report: analysis of constructed samples with known answers, and strict JSON.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "reports/analysis/sweep_analysis.h"
#include "reports/html/page.h"
#include "reports/json_reader.h"
#include "reports/sweep_report.h"
#include "reports/writers/table.h"
#include "tests/reports/sweep_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

// A point whose every step takes `step_ms`, split into phases; buckets whose all-reduce
// takes alpha + beta · bus bytes.
SweepPoint constant_point(const std::string& model, int devices, ScalingMode mode, int64_t batch,
                          double step_ms, double alpha = 0.5, double beta = 1e-6) {
  return testing_util::make_point({.model = model,
                                   .devices = devices,
                                   .mode = mode,
                                   .batch = batch,
                                   .step_ms = step_ms,
                                   .alpha = alpha,
                                   .beta = beta});
}

using testing_util::make_point;
using testing_util::PointSpec;
using testing_util::report_of;

TEST(SweepReport, WeakScalingSpeedupAndEfficiency) {
  SweepReport r = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0),
                             constant_point("m", 2, ScalingMode::kWeak, 32, 12.5),
                             constant_point("m", 4, ScalingMode::kWeak, 32, 16.0)});
  const PointSummary& two = r.points[1].summary;
  EXPECT_DOUBLE_EQ(two.throughput.value, 64 * 1e3 / 12.5);
  ASSERT_TRUE(two.speedup && two.efficiency && two.loss);
  // Constant samples: every bootstrap resample gives the same value.
  EXPECT_DOUBLE_EQ(two.speedup->value, 1.6);
  EXPECT_DOUBLE_EQ(two.speedup->low, 1.6);
  EXPECT_DOUBLE_EQ(two.speedup->high, 1.6);
  EXPECT_DOUBLE_EQ(two.efficiency->value, 0.8);
  EXPECT_DOUBLE_EQ(r.points[2].summary.efficiency->value, 10.0 / 16.0);
  EXPECT_NEAR(two.loss->lost, 0.2, 1e-12);
  // 10% of 12.5 ms exposed all-reduce, none at one device: 0.1 of the step.
  EXPECT_NEAR(two.loss->share(LossCause::kAllReduce), 0.1, 1e-12);
  EXPECT_FALSE(r.points[0].summary.loss.has_value());
  // Of the 20% lost: exposed all-reduce 10%, compute 10 ms against the ideal 9 ms 8%, input
  // 2%. Input wait is 10% of the step on one device already: the step's finding follows.
  EXPECT_NEAR(two.loss->share(LossCause::kContention), 0.08, 1e-12);
  ASSERT_EQ(two.verdict.findings.size(), 3u);
  EXPECT_EQ(two.verdict.findings[0].kind, "communication-bound");
  EXPECT_EQ(two.verdict.findings[0].severity, "moderate");
  EXPECT_EQ(two.verdict.findings[1].kind, "contention");
  EXPECT_EQ(two.verdict.findings[2].kind, "input-bound");
  EXPECT_EQ(r.points[0].summary.verdict.top().kind, "input-bound");
  // Bus bandwidth: Σ bus bytes / Σ bucket time.
  const double bus = (1 << 20) + (4 << 20);  // × 2(N-1)/N = 1 at N = 2
  EXPECT_NEAR(*two.bus_bandwidth_gbps, bus / ((0.5 * 2 + 1e-6 * bus) * 1e6), 1e-9);
}

// The case a new user met: exposed all-reduce 12.4% of the step at 2 devices, each replica's
// compute 22.9% of the step slower than one device's. The step rule said communication-bound;
// the table, the JSON and the loss breakdown now all lead with contention.
TEST(SweepReport, TheVerdictNamesTheLargestLossInTablesAndJson) {
  PointSpec one{.input = 0, .forward = 0.4, .backward = 0.5};
  PointSpec two = one;
  two.devices = 2;
  two.step_ms = 10.0 / (1.0 - 0.124 - 0.229);
  two.exposed = 0.124;
  two.backward = 0.4;
  SweepReport r = report_of({make_point(one), make_point(two)});
  r.config = {{"workers", 1}};
  r.environment.host.usable_cores = 2;
  r.points[1].threads_per_device = 1;
  analyze(r);
  const PointSummary& s = r.points[1].summary;
  ASSERT_TRUE(s.loss);
  EXPECT_NEAR(s.loss->share(LossCause::kContention), 0.229, 1e-9);
  EXPECT_NEAR(s.loss->share(LossCause::kAllReduce), 0.124, 1e-9);
  ASSERT_EQ(s.verdict.findings.size(), 2u);
  EXPECT_EQ(s.verdict.top().kind, "contention");
  EXPECT_EQ(s.verdict.top().severity, "high");
  EXPECT_NE(s.verdict.top().explanation.find(
                "2 replicas x (1 compute + 1 input + 2 communication threads) = 8 threads on 2"),
            std::string::npos);
  EXPECT_EQ(s.verdict.findings[1].kind, "communication-bound");

  const nlohmann::json j = to_json(r)["points"][1]["summary"];
  EXPECT_EQ(j["bottleneck"], "contention");
  EXPECT_EQ(j["verdict"][0]["kind"], "contention");
  EXPECT_EQ(j["verdict"][1]["kind"], "communication-bound");
  EXPECT_NEAR(j["efficiency_loss"]["compute_slowdown"].get<double>(), 0.229, 1e-9);
  const std::string tables = format_sweep_tables(r);
  EXPECT_NE(tables.find("contention (high)"), std::string::npos) << tables;
  EXPECT_EQ(tables.find("communication-bound"), std::string::npos) << tables;
  // Across processes the cores of rank 0 are not the replicas' only ones: no thread count.
  SweepReport across = r;
  across.cluster = ClusterInfo{};
  across.cluster->processes = 2;
  across.cluster->nodes = 2;
  across.cluster->replicas_per_process = 1;
  analyze(across);
  EXPECT_EQ(across.points[1].summary.verdict.top().kind, "contention");
  EXPECT_FALSE(across.points[1].summary.verdict.top().numbers.contains("threads"));
  // Read back, the report gives the same verdict (it is recomputed from the samples).
  const SweepReport back = sweep_report_from_json(to_json(r), "test");
  EXPECT_EQ(back.points[1].summary.verdict.top().kind, "contention");
  // The communication threads the run counted (a reducer thread beside shared memory's
  // all-reduce) replace the two a report before 1.14 is read with, and are kept.
  SweepReport counted = r;
  counted.points[1].communication_threads_per_device = 1;
  analyze(counted);
  EXPECT_CONTAINS(counted.points[1].summary.verdict.top().explanation,
                  "2 replicas x (1 compute + 1 input + 1 communication threads) = 6 threads on 2");
  EXPECT_EQ(
      sweep_report_from_json(to_json(counted), "test").points[1].communication_threads_per_device,
      1);
  EXPECT_FALSE(to_json(counted)["points"][0].contains("communication_threads_per_device"));
}

// A GPU point whose convolutions fell back to non-deterministic algorithms says so in the tables,
// one line naming the passes, and keeps them in its JSON.
TEST(SweepReport, NonDeterministicFallbacksAreALineOfTheTables) {
  SweepReport r = report_of({make_point({}), make_point({.devices = 2})});
  r.points[1].nondeterministic_fallbacks = {
      "conv2d(64, 7x7) backward-data (CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)",
      "conv2d(64, 3x3) backward-filter (CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0)"};
  analyze(r);
  const std::string tables = format_sweep_tables(r);
  EXPECT_CONTAINS(tables,
                  r.points[1].label() + ": " + kFallbackLead +
                      ": conv2d(64, 7x7) backward-data (CUDNN_CONVOLUTION_BWD_DATA_ALGO_0); "
                      "conv2d(64, 3x3) backward-filter");
  EXPECT_EQ(tables.find(r.points[0].label() + ": " + kFallbackLead), std::string::npos) << tables;
  const SweepReport back = sweep_report_from_json(to_json(r), "test");
  EXPECT_EQ(back.points[1].nondeterministic_fallbacks, r.points[1].nondeterministic_fallbacks);
  EXPECT_TRUE(back.points[0].nondeterministic_fallbacks.empty());
}

// `scalescope report` of a report without points printed nothing at all; it says so, as the
// HTML page does.
TEST(SweepReport, AReportWithoutPointsSaysSoInItsTables) {
  EXPECT_EQ(format_sweep_tables(report_of({})), "This report has no points yet.\n");
}

TEST(SweepReport, StrongScalingKeepsTheGlobalBatch) {
  SweepReport r = report_of({constant_point("m", 1, ScalingMode::kStrong, 64, 10.0),
                             constant_point("m", 2, ScalingMode::kStrong, 64, 6.25)});
  EXPECT_EQ(r.points[1].batch, 32);
  EXPECT_DOUBLE_EQ(r.points[1].summary.speedup->value, 1.6);
  EXPECT_DOUBLE_EQ(r.points[1].summary.efficiency->value, 0.8);
  EXPECT_NEAR(r.points[1].summary.loss->efficiency, 0.8, 1e-12);
}

TEST(SweepReport, TheAllReduceModelIsFittedAndProjected) {
  const double alpha = 0.25;
  const double beta = 2e-6;  // ms per byte: 0.5 GB/s
  SweepReport r = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0, alpha, beta),
                             constant_point("m", 2, ScalingMode::kWeak, 32, 12.0, alpha, beta),
                             constant_point("m", 4, ScalingMode::kWeak, 32, 14.0, alpha, beta)});
  ASSERT_EQ(r.communication.size(), 1u);
  const CommunicationAnalysis& c = r.communication[0];
  ASSERT_TRUE(c.fit.has_value()) << c.fit_error;
  EXPECT_NEAR(c.fit->alpha_ms, alpha, 1e-9);
  EXPECT_NEAR(c.fit->beta_ms_per_byte, beta, 1e-15);
  EXPECT_NEAR(c.fit->bus_bandwidth_gbps, 0.5, 1e-9);
  ASSERT_EQ(c.series.size(), 1u);
  EXPECT_EQ(c.series[0].measured_devices, 4);
  ASSERT_EQ(c.series[0].projections.size(), 3u);
  EXPECT_EQ(c.series[0].projections[0].devices, 8);
  // Projections only get worse from the measured 10/14 as the all-reduce grows.
  double previous = 10.0 / 14.0;
  for (const Projection& p : c.series[0].projections) {
    EXPECT_LE(p.efficiency, previous + 1e-12);
    previous = p.efficiency;
  }
  // Only one device measured: no model, and why.
  const SweepReport one = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0)});
  EXPECT_FALSE(one.communication[0].fit.has_value());
  EXPECT_CONTAINS(one.communication[0].fit_error, "no point ran on more than one device");
  EXPECT_CONTAINS(one.communication[0].fit_error, "--devices cpu:1,2)");
  // A point on two devices that failed: the advice is not to add what the sweep had.
  SweepPoint failed = constant_point("m", 2, ScalingMode::kWeak, 32, 12.0);
  failed.status = "failed";
  failed.error = "out of memory";
  failed.repeats.clear();
  const SweepReport lost =
      report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0), std::move(failed)});
  EXPECT_FALSE(lost.communication[0].fit.has_value());
  EXPECT_EQ(lost.communication[0].fit_error,
            "every point on more than one device failed, so none measured the all-reduce; each "
            "one's error is in its row");
  // One bucket size on one device count: the advice names what gives a second size.
  const SweepReport same = report_of({make_point({.devices = 1, .bucket_bytes = {3 << 19}}),
                                      make_point({.devices = 2, .bucket_bytes = {3 << 19}})});
  EXPECT_FALSE(same.communication[0].fit.has_value());
  EXPECT_CONTAINS(same.communication[0].fit_error,
                  "every all-reduce moved 1572864 bytes on 2 devices, one size cannot separate "
                  "latency from bandwidth; add a device count (each link carries 2(N-1)/N of "
                  "the buffer) or a --bucket-cap-mb below 1.5 (buckets of other sizes)");
  EXPECT_CONTAINS(format_sweep_tables(same), "--bucket-cap-mb below 1.5");
}

// All-reduces that take as long whatever their size: the table says there is no cost per byte,
// where it printed a bandwidth of 0.00 GB/s.
TEST(SweepReport, AFitWithoutACostPerByteSaysSoInTheTable) {
  const SweepReport r = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0),
                                   constant_point("m", 2, ScalingMode::kWeak, 32, 12.0, 0.5, 0.0),
                                   constant_point("m", 4, ScalingMode::kWeak, 32, 14.0, 0.5, 0.0)});
  const CommunicationAnalysis& c = r.communication[0];
  ASSERT_TRUE(c.fit.has_value()) << c.fit_error;
  EXPECT_NEAR(c.fit->alpha_ms, 0.5, 1e-9);
  EXPECT_EQ(c.fit->bus_bandwidth_gbps, 0.0);
  const std::string tables = format_sweep_tables(r);
  EXPECT_CONTAINS(tables,
                  "m all-reduce model: 0.500 ms, no cost per byte (the times do not grow with the "
                  "buckets' size)");
  EXPECT_EQ(tables.find("GB/s (r²"), std::string::npos) << tables;
}

TEST(SweepReport, AcrossNodesTheModelIsFittedOnTheCrossNodePointsAlone) {
  // Two devices inside a node at 2 GB/s; four across two nodes at 0.05 GB/s (their repeats
  // carry the split that runs across nodes record). A fit of both would describe neither.
  SweepPoint inside = constant_point("m", 2, ScalingMode::kWeak, 32, 12.0, 0.1, 5e-7);
  SweepPoint across = constant_point("m", 4, ScalingMode::kWeak, 32, 30.0, 2.0, 2e-5);
  AllReduceSplit split;
  split.nodes = 2;
  for (RepeatRecord& r : across.repeats) r.allreduce_split = split;
  const SweepReport r =
      report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0), inside, std::move(across)});
  const CommunicationAnalysis& c = r.communication[0];
  ASSERT_TRUE(c.fit.has_value()) << c.fit_error;
  EXPECT_TRUE(c.across_nodes);
  EXPECT_NEAR(c.fit->alpha_ms, 2.0, 1e-9);
  EXPECT_NEAR(c.fit->bus_bandwidth_gbps, 0.05, 1e-9);
  EXPECT_EQ(c.fit->samples, 2);  // the cross-node point's two buckets (medians per bucket)
  EXPECT_CONTAINS(format_sweep_tables(r), "m all-reduce model (points across nodes): 2.000 ms");
  EXPECT_TRUE(to_json(r)["communication"][0]["across_nodes"].get<bool>());
  // Inside one node only: every point, as before.
  EXPECT_FALSE(report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0), inside})
                   .communication[0]
                   .across_nodes);
}

TEST(SweepReport, JsonRoundTripKeepsSamplesAndAnalysis) {
  SweepReport r = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0),
                             constant_point("m", 2, ScalingMode::kWeak, 32, 12.5)});
  SweepPoint failed = constant_point("m", 4, ScalingMode::kWeak, 32, 1.0);
  failed.status = "failed";
  failed.error = "out of memory";
  failed.repeats.clear();
  r.points.push_back(failed);
  analyze(r);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["schema_version"], "1.21");
  EXPECT_TRUE(j["points"][2]["summary"].is_null());
  const SweepReport back = sweep_report_from_json(nlohmann::json::parse(j.dump()), "r.json");
  ASSERT_EQ(back.points.size(), 3u);
  EXPECT_EQ(back.points[1].repeats[1].steps[9].replicas[1][Phase::kBackward],
            r.points[1].repeats[1].steps[9].replicas[1][Phase::kBackward]);
  EXPECT_EQ(back.points[1].repeats[0].steps[0].bucket_ms,
            r.points[1].repeats[0].steps[0].bucket_ms);
  EXPECT_DOUBLE_EQ(back.points[1].summary.speedup->value, 1.6);
  EXPECT_EQ(back.points[2].error, "out of memory");
  EXPECT_EQ(to_json(back), j);
  // The tables name the failure and the numbers.
  const std::string tables = format_sweep_tables(back);
  EXPECT_CONTAINS(tables, "FAILED: out of memory");
  EXPECT_CONTAINS(tables, "1.60 [1.60, 1.60]");
}

// Across nodes, the all-reduce share of the efficiency loss splits by the node-local
// all-reduce's time against the global one's; NVML's utilisation feeds the host-bound rule.
TEST(SweepReport, NodeSplitAndGpuUtilisationAreAnalysedAndKept) {
  SweepReport r = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0),
                             constant_point("m", 4, ScalingMode::kWeak, 32, 12.5)});
  // Repeats: 3 ms of 12 within the node (a quarter), then 6 of 12; the median is 3/8.
  const double node_ms[] = {3.0, 6.0};
  for (size_t i = 0; i < r.points[1].repeats.size() && i < 2; ++i) {
    r.points[1].repeats[i].allreduce_split = AllReduceSplit{
        .bytes = 4096, .nodes = 2, .repeats = 5, .global_ms = 12.0, .node_ms = node_ms[i]};
    r.points[1].repeats[i].gpu_util_percent = 40.0;
  }
  ASSERT_EQ(r.points[1].repeats.size(), 2u);
  analyze(r);
  const PointSummary& s = r.points[1].summary;
  ASSERT_TRUE(s.intra_node_fraction.has_value());
  EXPECT_DOUBLE_EQ(*s.intra_node_fraction, 0.375);
  ASSERT_TRUE(s.loss.has_value());
  const nlohmann::json j = to_json(r);
  const nlohmann::json& loss = j["points"][1]["summary"]["efficiency_loss"];
  const double allreduce = s.loss->share(LossCause::kAllReduce);
  EXPECT_DOUBLE_EQ(loss["allreduce_intra_node"].get<double>(), allreduce * 0.375);
  EXPECT_DOUBLE_EQ(loss["allreduce_inter_node"].get<double>(), allreduce * 0.625);
  EXPECT_FALSE(j["points"][0]["summary"]["efficiency_loss"].contains("allreduce_intra_node"));
  // The table shows the same split in its own columns.
  const std::string tables = format_sweep_tables(r);
  EXPECT_CONTAINS(tables, "all-reduce   intra   inter");
  EXPECT_CONTAINS(tables, fmt::format("{:>11} {:>7} {:>7}", fmt::format("{:.1f}%", 100 * allreduce),
                                      fmt::format("{:.1f}%", 100 * allreduce * 0.375),
                                      fmt::format("{:.1f}%", 100 * allreduce * 0.625)));
  EXPECT_EQ(format_sweep_tables(report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0),
                                           constant_point("m", 2, ScalingMode::kWeak, 32, 12.5)}))
                .find("intra"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(j["points"][1]["summary"]["utilization"]["gpu_util_percent"].get<double>(),
                   40.0);
  EXPECT_TRUE(j["points"][0]["summary"]["utilization"].is_null());
  // 60% of the step the GPU ran nothing: the host kept it waiting.
  bool host_bound = false;
  for (const Finding& f : s.verdict.findings) host_bound = host_bound || f.kind == "host-bound";
  EXPECT_TRUE(host_bound);
  // And resume reads it all back.
  const SweepReport back = sweep_report_from_json(nlohmann::json::parse(j.dump()), "r.json");
  ASSERT_TRUE(back.points[1].repeats[0].allreduce_split.has_value());
  EXPECT_EQ(back.points[1].repeats[0].allreduce_split->node_ms, 3.0);
  EXPECT_EQ(back.points[1].repeats[1].gpu_util_percent, 40.0);
  EXPECT_EQ(to_json(back), j);
  nlohmann::json bad = j;
  bad["points"][1]["repeats"][0]["gpu_util_percent"] = 140.0;
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(bad, "r.json"); }),
                  "140 is not a percentage");
}

// fp16 repeats keep their loss scaling (resume reads it back, strictly), and the tables name
// the steps it skipped, telling the measured ones from the warm-up's.
TEST(SweepReport, Fp16RepeatsKeepTheStepsTheirLossScalingSkipped) {
  SweepReport r = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0),
                             constant_point("m", 2, ScalingMode::kWeak, 32, 12.5)});
  r.points[1].repeats[0].warmup_steps = 5;
  r.points[1].repeats[0].loss_scaling = LossScalingRecord{.initial_scale = 65536.0,
                                                          .growth_factor = 2.0,
                                                          .backoff_factor = 0.5,
                                                          .growth_interval = 2000,
                                                          .final_scale = 8192.0,
                                                          .skipped_steps = {1, 2, 9}};
  r.points[1].repeats[1].loss_scaling = r.points[1].repeats[0].loss_scaling;
  r.points[1].repeats[1].loss_scaling->skipped_steps.clear();
  const nlohmann::json j = to_json(r);
  const SweepReport back = sweep_report_from_json(nlohmann::json::parse(j.dump()), "r.json");
  ASSERT_TRUE(back.points[1].repeats[0].loss_scaling.has_value());
  EXPECT_EQ(back.points[1].repeats[0].loss_scaling->skipped_steps, (std::vector<int64_t>{1, 2, 9}));
  EXPECT_FALSE(back.points[0].repeats[0].loss_scaling.has_value());
  EXPECT_EQ(to_json(back), j);
  const std::string tables = format_sweep_tables(r);
  EXPECT_CONTAINS(tables,
                  "(repeat 1): fp16's loss scaling skipped step 1, 2, 9 (1 of them "
                  "measured); the scale ended at 8192");
  EXPECT_EQ(tables.find("(repeat 2)"), std::string::npos);
  nlohmann::json bad = j;
  bad["points"][1]["repeats"][0]["loss_scaling"]["skipped_steps"] = {3, 2};
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(bad, "r.json"); }),
                  "step 2 out of order");
  bad = j;
  bad["points"][1]["repeats"][0]["loss_scaling"]["final_scale"] = 0.0;
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(bad, "r.json"); }),
                  "must be positive");
}

TEST(SweepReport, ReadingIsStrictAndNamesTheKey) {
  const SweepReport r = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0)});
  const nlohmann::json good = to_json(r);
  const auto error = [&](const std::function<void(nlohmann::json&)>& damage) {
    nlohmann::json j = good;
    damage(j);
    return testing_util::error_of([&] { sweep_report_from_json(j, "r.json"); });
  };
  EXPECT_EQ(error([](nlohmann::json&) {}), "<no error thrown>");
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j["points"][0]["repeats"][0].erase("step_ms"); }),
                  "r.json: missing key 'points[0].repeats[0].step_ms'");
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j["points"][0]["devices"] = "one"; }),
                  "'points[0].devices' must be an integer");
  EXPECT_CONTAINS(
      error([](nlohmann::json& j) { j["points"][0]["repeats"][0]["step_ms"][3] = "x"; }),
      "points[0].repeats[0].step_ms");
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j["schema"] = "scalescope-run"; }),
                  "not a sweep report");
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j["schema_version"] = "2.0"; }),
                  "schema version 2.0");
  EXPECT_CONTAINS(error([](nlohmann::json& j) { j["points"][0]["status"] = "maybe"; }), "maybe");
  EXPECT_CONTAINS(error([](nlohmann::json& j) {
                    j["points"][0]["repeats"][0]["replicas"][0]["step_ms"].erase(0);
                  }),
                  "9 values for 10 steps");
}

// Without a point on more than one device, the advice to add one names the devices the sweep
// ran on: a GPU sweep is told to add GPUs, not CPU devices.
TEST(SweepReport, TheAllReduceAdviceNamesTheSweepsDevices) {
  for (const std::string kind : {"cpu", "sim", "cuda"}) {
    SweepPoint one = constant_point("m", 1, ScalingMode::kWeak, 32, 10.0);
    one.device_kind = kind;
    one.device_spec = kind + ":1";
    const SweepReport r = report_of({one});
    EXPECT_CONTAINS(r.communication[0].fit_error,
                    "add one (e.g. --devices " + kind + ":1,2) to measure the all-reduce");
    EXPECT_CONTAINS(format_sweep_tables(r), "--devices " + kind + ":1,2)");
  }
}

// Four buckets whose times a line does not explain (r² 0.2): the fit stays in the report,
// marked not reliable and saying why, and nothing is projected from it.
TEST(SweepReport, AFitThatDoesNotExplainTheTimesProjectsNothing) {
  const std::vector<int64_t> buckets = {1 << 20, 2 << 20, 3 << 20, 4 << 20};
  SweepPoint two = make_point({.devices = 2, .step_ms = 12.0, .bucket_bytes = buckets});
  for (RepeatRecord& rep : two.repeats) {
    for (StepRecord& s : rep.steps) s.bucket_ms = {3.0, 1.0, 3.0, 1.0};
  }
  const SweepReport r = report_of({make_point({.bucket_bytes = buckets}), two});
  const nlohmann::json c = to_json(r)["communication"][0];
  ASSERT_TRUE(c["fit"].is_object());
  EXPECT_NEAR(c["fit"]["r_squared"].get<double>(), 0.2, 1e-9);
  EXPECT_FALSE(c["fit"].value("reliable", true));
  EXPECT_TRUE(c["series"].empty()) << c.dump();
  EXPECT_CONTAINS(c.value("projection_note", ""), "not reliable: r² 0.200, below the 0.9");
  const std::string tables = format_sweep_tables(r);
  EXPECT_CONTAINS(tables, "(r² 0.200, 4 bucket samples)\n  not reliable: r² 0.200");
  EXPECT_EQ(tables.find("projected efficiency"), std::string::npos) << tables;
  const std::string page = format_sweep_html(r);
  EXPECT_CONTAINS(page, "Not reliable: r² 0.200");
  EXPECT_EQ(page.find("data-projected"), std::string::npos);
  // The same buckets on a line: reliable, and projected.
  const SweepReport line =
      report_of({make_point({.bucket_bytes = buckets}),
                 make_point({.devices = 2, .step_ms = 12.0, .bucket_bytes = buckets})});
  const nlohmann::json fitted = to_json(line)["communication"][0];
  EXPECT_TRUE(fitted["fit"].value("reliable", false));
  EXPECT_EQ(fitted["series"][0]["projections"].size(), 3u);
  EXPECT_CONTAINS(format_sweep_tables(line), "projected efficiency, batch 32:  4 devices");
}

// CPU devices share the cores of their machine: two devices of one thread on 2 usable cores
// cannot become four there, on 6 cores the projection stops at 4, and across processes (more
// nodes bring more cores) it goes on, saying why.
TEST(SweepReport, CpuProjectionsStopAtTheCoresTheDevicesWouldShare) {
  const auto communication = [](int cores, int processes) {
    // Three bucket sizes on a line: a fit reliable enough to project from.
    const std::vector<int64_t> buckets = {1 << 20, 2 << 20, 4 << 20};
    SweepReport r =
        report_of({make_point({.bucket_bytes = buckets}),
                   make_point({.devices = 2, .step_ms = 12.0, .bucket_bytes = buckets})});
    r.environment.host.usable_cores = cores;
    for (SweepPoint& p : r.points) p.threads_per_device = 1;
    if (processes > 1) {
      r.cluster = ClusterInfo{};
      r.cluster->processes = processes;
      r.cluster->nodes = processes;
      r.cluster->replicas_per_process = 1;
    }
    analyze(r);
    return std::pair(to_json(r)["communication"][0], format_sweep_tables(r));
  };
  const auto [two, two_table] = communication(2, 1);
  EXPECT_TRUE(two["series"].empty()) << two.dump();
  EXPECT_EQ(two.value("projection_note", ""),
            "no projection: 4 cpu devices × 1 thread would need 4 cores, and this machine may "
            "use 2 (more devices here would share them, which the all-reduce model does not "
            "describe)");
  EXPECT_CONTAINS(two_table, "  no projection: 4 cpu devices × 1 thread would need 4 cores");
  EXPECT_EQ(two_table.find("projected efficiency"), std::string::npos) << two_table;
  const auto [six, six_table] = communication(6, 1);
  ASSERT_EQ(six["series"].size(), 1u);
  ASSERT_EQ(six["series"][0]["projections"].size(), 1u);
  EXPECT_EQ(six["series"][0]["projections"][0]["devices"], 4);
  EXPECT_CONTAINS(six.value("projection_note", ""), "projected up to 4: 8 cpu devices");
  const auto [many, many_table] = communication(16, 1);
  EXPECT_EQ(many["series"][0]["projections"].size(), 3u);
  EXPECT_EQ(many.value("projection_note", "none"), "");
  const auto [across, across_table] = communication(2, 2);
  EXPECT_EQ(across["series"][0]["projections"].size(), 3u);
  EXPECT_CONTAINS(across.value("projection_note", ""), "projected past one machine's cores");
}

// A share whose bootstrap interval holds 0 is within measurement noise: the table puts it in
// parentheses and says why, and the JSON lists only the losses beyond noise.
TEST(SweepReport, LossSharesWithinNoiseAreMarkedAndNoFinding) {
  // Input waits 1 ms on one device and 10% of steps of 8 to 12 ms (median 10) on two: its
  // share is 0.1 - 1/step, around 0 and either side of it. The exposed all-reduce, 10% of
  // every step, is a loss beyond any noise.
  SweepPoint one = make_point({.step_ms = 10.0});
  SweepPoint two =
      make_point({.devices = 2, .step_time = [](int r, int i) { return 8.0 + (i + r) % 5; }});
  const SweepReport r = report_of({one, two});
  const nlohmann::json loss = to_json(r)["points"][1]["summary"]["efficiency_loss"];
  ASSERT_TRUE(loss.contains("intervals")) << loss.dump();
  const nlohmann::json& input = loss["intervals"]["input"];
  EXPECT_LT(input["low"].get<double>(), 0.0);
  EXPECT_GT(input["high"].get<double>(), 0.0);
  EXPECT_GT(loss["intervals"]["allreduce"]["low"].get<double>(), 0.05);
  const nlohmann::json beyond = loss.value("beyond_noise", nlohmann::json::array());
  EXPECT_NE(std::find(beyond.begin(), beyond.end(), "allreduce"), beyond.end()) << loss.dump();
  for (const char* noise : {"input", "stragglers"}) {
    EXPECT_EQ(std::find(beyond.begin(), beyond.end(), noise), beyond.end()) << noise;
  }
  const std::string tables = format_sweep_tables(r);
  const std::vector<std::string> rows = testing_util::lines_with(tables, "m cpu:2 batch 32");
  ASSERT_EQ(rows.size(), 1u) << tables;  // its row of the loss table
  // lost, allreduce, input, contention, stragglers, other: the all-reduce share alone is a
  // loss; stragglers are none at all, and compute got faster (no loss either).
  EXPECT_CONTAINS(rows[0], " 10.0%   (0.0%)    (-10.0%)      (0.0%)   (0.0%)");
  EXPECT_CONTAINS(tables, "(in parentheses: no finding; the share's 95% bootstrap interval");
}

// Found by tests/fuzz (corpus: tests/fuzz/corpus/sweep_report/). nlohmann reports a number
// beyond double's range as out_of_range, not parse_error: it escaped the reader as a non-Error.
TEST(SweepReport, ReadingANumberOverflowIsAnError) {
  const std::string path = testing::TempDir() + "/overflow.json";
  write_file_atomic(path, R"({"schema": "scalescope-sweep", "points": [1e999]})");
  EXPECT_CONTAINS(testing_util::error_of([&] { read_sweep_report(path); }), "is not valid JSON");
}

// Integers of 2^63 and more were read as int64 wrapped to negative values.
TEST(SweepReport, IntegersBeyondInt64AreRefused) {
  const SweepReport r = report_of({constant_point("m", 1, ScalingMode::kWeak, 32, 10.0)});
  nlohmann::json j = to_json(r);
  j["points"][0]["batch"] = uint64_t{1} << 63;
  EXPECT_CONTAINS(testing_util::error_of([&] { sweep_report_from_json(j, "r.json"); }),
                  "'points[0].batch' is out of range: 9223372036854775808");
  const nlohmann::json n = {{"n", uint64_t{18446744073709551615u}}};
  EXPECT_CONTAINS(testing_util::error_of([&] { JsonReader(n, "doc").int64("n"); }),
                  "'n' is out of range");
  EXPECT_EQ(JsonReader(nlohmann::json{{"n", INT64_MAX}}, "doc").int64("n"), INT64_MAX);
}

// A failed point's message may hold bytes that are not UTF-8 (an excerpt cut inside a
// character, a path): writing the report threw nlohmann's type_error 316.
TEST(SweepReport, WritingStringsThatAreNotUtf8ReplacesTheirBadBytes) {
  testing_util::PointSpec spec;
  SweepReport r = report_of({testing_util::failed_point(spec, "cut \xe2\x9c here \xff")});
  const std::string path = testing::TempDir() + "/not-utf8.json";
  write_sweep_report(path, r);
  const SweepReport back = read_sweep_report(path);
  ASSERT_EQ(back.points.size(), 1u);
  EXPECT_EQ(back.points[0].error, "cut \ufffd here \ufffd");
}

}  // namespace
}  // namespace scalescope
