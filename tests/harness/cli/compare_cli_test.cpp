// compare and export end to end: exit statuses on constructed reports (known answers) and on
// real sweeps.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "reports/analysis/sweep_analysis.h"
#include "reports/sweep_report.h"
#include "tests/harness/cli/run_cli.h"

namespace {

using Result = scalescope::testing_util::CliResult;
using scalescope::testing_util::contains;

Result run(const std::string& args) {
  return scalescope::testing_util::run_cli(args);
}

// A one- and a two-device point whose steps take `step_ms` (the one-device 0.8 of it) with a
// deterministic ±1% jitter, written to `path`.
void write_report(const std::string& path, double step_ms, const std::string& cpu = "cpu-a") {
  scalescope::SweepReport r;
  r.tool_version = "test";
  r.created = "2026-01-01T00:00:00Z";
  r.config = nlohmann::json::object();
  r.environment.host.cpu_model = cpu;
  r.complete = true;
  for (const int devices : {1, 2}) {
    scalescope::SweepPoint p;
    p.model = "m";
    p.device_kind = "cpu";
    p.devices = devices;
    p.device_spec = "cpu:" + std::to_string(devices);
    p.batch = 16;
    p.global_batch = 16 * devices;
    scalescope::RepeatRecord rep;
    for (int i = 0; i < 16; ++i) {
      scalescope::StepRecord s;
      s.step = i + 1;
      s.step_ms = step_ms * (devices == 1 ? 0.8 : 1.0) * (1.0 + 0.01 * ((i * 7) % 11 - 5) / 5.0);
      scalescope::PhaseTimes t;
      t[scalescope::Phase::kForward] = 0.4 * s.step_ms;
      t[scalescope::Phase::kBackward] = 0.6 * s.step_ms;
      t.step_ms = s.step_ms;
      s.replicas.assign(static_cast<size_t>(devices), t);
      rep.steps.push_back(s);
    }
    p.repeats = {rep, rep};
    r.points.push_back(p);
  }
  scalescope::analyze(r);
  scalescope::write_sweep_report(path, r);
}

}  // namespace

TEST(Cli, CompareExitStatusSaysWhetherARegressionHappened) {
  const std::string dir = testing::TempDir();
  const std::string base = dir + "/cli_compare_base.json";
  const std::string slow = dir + "/cli_compare_slow.json";
  const std::string fast = dir + "/cli_compare_fast.json";
  const std::string md = dir + "/cli_compare.md";
  write_report(base, 10.0);
  write_report(slow, 11.0);
  write_report(fast, 9.0);
  const Result same = run("compare " + base + " " + base);
  EXPECT_EQ(same.status, 0) << same.output;
  EXPECT_TRUE(contains(same.output, "no regression: 0 metrics regressed")) << same.output;
  std::remove(md.c_str());
  const Result regressed = run("compare " + base + " " + slow + " --markdown " + md);
  EXPECT_EQ(regressed.status, 1) << regressed.output;
  EXPECT_TRUE(contains(regressed.output, "REGRESSED")) << regressed.output;
  EXPECT_TRUE(contains(regressed.output, "REGRESSION: ")) << regressed.output;
  std::ifstream in(md);
  const std::string comment((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(comment, "## :x: scalescope compare: regression")) << comment;
  EXPECT_TRUE(contains(comment, "| m cpu:2 batch 16 | throughput (samples/s) |")) << comment;
  const Result improved = run("compare " + base + " " + fast);
  EXPECT_EQ(improved.status, 0) << improved.output;
  EXPECT_TRUE(contains(improved.output, "improved")) << improved.output;
  // A threshold above the change lets it through.
  const Result lenient = run("compare " + base + " " + slow + " --threshold 15%");
  EXPECT_EQ(lenient.status, 0) << lenient.output;
  const Result per_metric = run("compare " + base + " " + slow +
                                " --threshold throughput=15%,step_time=15% "
                                "--threshold efficiency=15%,phases=15%");
  EXPECT_EQ(per_metric.status, 0) << per_metric.output;
}

TEST(Cli, CompareBadInputIsStatusTwo) {
  const std::string dir = testing::TempDir();
  const std::string base = dir + "/cli_compare_bad_base.json";
  const std::string other = dir + "/cli_compare_other_cpu.json";
  write_report(base, 10.0);
  write_report(other, 10.0, "cpu-b");
  const auto fails = [&](const std::string& args, const std::string& message) {
    const Result r = run("compare " + args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << args << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << args << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, ".cpp:")) << args << "\n" << r.output;
  };
  fails(base + " /nonexistent/cur.json", "/nonexistent/cur.json");
  fails(base + " " + std::string(SCALESCOPE_BINARY), "is not valid JSON");
  fails(base + " " + base + " --threshold 5", "--threshold item '5'");
  fails(base + " " + base + " --threshold throughput=3%,latency=4%", "'latency' is not a metric");
  fails(base + " " + base + " --threshold throughput=-3%", "throughput=-3%");
  fails(base + " " + base + " --alpha 0", "--alpha 0");
  fails(base + " " + base + " --min-phase-change 1", "--min-phase-change '1'");
  fails(base, "CURRENT");  // a usage error
  // No point in common: passed as "no regression ... of 0 points compared".
  const std::string none = dir + "/cli_compare_no_points.json";
  nlohmann::json emptied = nlohmann::json::parse(scalescope::read_file(base));
  emptied["points"] = nlohmann::json::array();
  scalescope::write_file_atomic(none, emptied.dump());
  fails(base + " " + none, "no point ran in both");
  const Result nothing = run("compare " + base + " " + none);
  EXPECT_TRUE(contains(nothing.output, "NOTHING COMPARED")) << nothing.output;
  // The error after the table it points to, also through a pipe.
  EXPECT_LT(nothing.output.find("NOTHING COMPARED"), nothing.output.find("no point ran in both"))
      << nothing.output;
  // Environments: a warning at the top, or with --strict an error.
  const Result warned = run("compare " + base + " " + other);
  EXPECT_EQ(warned.status, 0) << warned.output;
  EXPECT_LT(warned.output.find("WARNING: the environments differ"),
            warned.output.find("m cpu:1 batch 16"))
      << warned.output;
  EXPECT_TRUE(contains(warned.output, "CPU model      cpu-a  ->  cpu-b")) << warned.output;
  fails(base + " " + other + " --strict", "--strict: the environments of");
  fails(base + " " + other + " --strict", "CPU model 'cpu-a' vs 'cpu-b'");
  const Result strict_same = run("compare " + base + " " + base + " --strict");
  EXPECT_EQ(strict_same.status, 0) << strict_same.output;
}

TEST(Cli, CompareAndExportRealSweeps) {
  const std::string dir = testing::TempDir();
  const std::string report = dir + "/cli_compare_sweep.json";
  const Result sweep =
      run("sweep --models dense-100 --devices cpu:1,2 --batch 8 --repeats 2 --steps 4 "
          "--max-warmup-steps 4 --threads 1 -q -o " +
          report);
  ASSERT_EQ(sweep.status, 0) << sweep.output;
  const Result same = run("compare " + report + " " + report);
  EXPECT_EQ(same.status, 0) << same.output;
  EXPECT_TRUE(contains(same.output, "dense-100 cpu:2 batch 8  (8 vs 8 measured steps)"))
      << same.output;
  // Four steps per repeat, two repeats: 8 on a side, enough for the test not to be weak.
  EXPECT_FALSE(contains(same.output, "the test is weak")) << same.output;

  const std::string gbench = dir + "/cli_export_gbench.json";
  const Result g = run("export " + report + " --format gbench -o " + gbench);
  ASSERT_EQ(g.status, 0) << g.output;
  std::ifstream gin(gbench);
  const auto gdoc = nlohmann::json::parse(gin);
  EXPECT_TRUE(gdoc.contains("context"));
  EXPECT_EQ(gdoc["benchmarks"][0]["name"], "dense-100/cpu:1/batch:8");
  // Standard output by default.
  const Result b = run("export " + report + " --format bencher");
  ASSERT_EQ(b.status, 0) << b.output;
  const auto bdoc = nlohmann::json::parse(b.output);
  EXPECT_GT(bdoc["dense-100/cpu:2/batch:8"]["latency"]["value"].get<double>(), 0.0);
  const Result gh =
      run("export " + report + " --format github-action-benchmark --metric step-time");
  ASSERT_EQ(gh.status, 0) << gh.output;
  const auto ghdoc = nlohmann::json::parse(gh.output);
  EXPECT_EQ(ghdoc[1]["unit"], "ms");

  const Result bad_format = run("export " + report + " --format csv");
  EXPECT_EQ(bad_format.status, 2) << bad_format.output;
  EXPECT_TRUE(contains(bad_format.output, "csv")) << bad_format.output;
  const Result bad_metric = run("export " + report + " --format bencher --metric step-time");
  EXPECT_NE(bad_metric.status, 0) << bad_metric.output;
  EXPECT_TRUE(contains(bad_metric.output, "github-action-benchmark only")) << bad_metric.output;
}
