// The scalescope executable end to end: exit statuses and messages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "reports/analysis/sweep_analysis.h"
#include "tests/harness/cli/run_cli.h"

namespace {

using Result = scalescope::testing_util::CliResult;
using scalescope::testing_util::contains;
using scalescope::testing_util::read_json_file;

Result run(const std::string& args) {
  return scalescope::testing_util::run_cli(args);
}

TEST(Cli, ModelsListsTheZooWithCounts) {
  const Result r = run("models");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "282,250")) << r.output;
  EXPECT_TRUE(contains(r.output, "41,157,101")) << r.output;
  const Result j = run("models --json");
  ASSERT_EQ(j.status, 0) << j.output;
  const auto doc = nlohmann::json::parse(j.output);
  bool found = false;
  for (const auto& m : doc["models"]) {
    if (m["name"] == "gap-cnn") {
      found = true;
      EXPECT_EQ(m["params"], 1226);
      EXPECT_GT(m["forward_flops_per_sample"].get<int64_t>(), 0);
    }
  }
  EXPECT_TRUE(found);
}

TEST(Cli, TrainWritesARunFile) {
  const std::string out = testing::TempDir() + "/cli_run.json";
  const Result r = run("train --model dense-100 --batch 8 --steps 12 -q -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema_version"], "2.4");
  EXPECT_FALSE(doc.contains("layer_profile"));
  EXPECT_EQ(doc["model"]["name"], "dense-100");
  EXPECT_EQ(doc["model"]["params"], 7114);
  ASSERT_TRUE(doc.contains("kernels"));  // dense layers: oneDNN's inner products
  EXPECT_EQ(doc["kernels"][0]["pass"], "forward");
  EXPECT_EQ(doc["kernels"][0]["layout"], "NC");
  ASSERT_EQ(doc["steps"].size(), 12u);
  EXPECT_EQ(doc["steps"][11]["step"], 12);
  EXPECT_GT(doc["summary"]["step_ms_median"].get<double>(), 0.0);
}

TEST(Cli, TrainProfilesLayersWhenAsked) {
  const std::string out = testing::TempDir() + "/cli_layers.json";
  const Result r =
      run("train --model dense-100 --batch 8 --steps 6 --no-eval --profile-layers -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "layers of replica 0")) << r.output;
  EXPECT_TRUE(contains(r.output, "Dense(64)")) << r.output;
  const auto doc = read_json_file(out);
  ASSERT_EQ(doc["layer_profile"].size(), 3u);  // dense, ReLU, dense
  EXPECT_EQ(doc["layer_profile"][0]["forward_flops"], 8 * (2 * 100 * 64 + 64));
  EXPECT_GT(doc["layer_profile"][0]["backward_ms"].get<double>(), 0.0);
}

TEST(Cli, PipelineBenchReportsEachWorkerCount) {
  const std::string out = testing::TempDir() + "/cli_pipeline_bench.json";
  const Result r =
      run("pipeline-bench --model dense-100 --workers 1,2 --batch 32 --batches 20 -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["points"].size(), 2u);
  EXPECT_EQ(doc["points"][1]["workers"], 2);
  EXPECT_GT(doc["points"][0]["samples_per_second"].get<double>(), 0.0);
}

TEST(Cli, BadInputGivesAClearErrorAndNonZeroStatus) {
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"train --model resnet9", "unknown model 'resnet9'"},
      {"train --model cnn:depth=3", "no parameter 'depth'"},
      {"train --batch 0", "--batch 0"},
      {"train --batch -5", "--batch -5"},
      {"train --steps 0", "--steps 0"},
      {"train --batch abc", "--batch"},
      {"train --optimizer rmsprop", "rmsprop"},
      {"train --devices tpu:2", "tpu:2"},
      {"train --lr -1", "--lr -1"},
      {"train --load /nonexistent.safetensors --steps 1", "/nonexistent.safetensors"},
      {"frobnicate", "frobnicate"},
      {"train --data nowhere", "nowhere"},
      {"train --bucket-cap-mb 0", "--bucket-cap-mb 0"},
      {"train --devices cpu:0", "cpu:0"},
      // cuda:N counts GPUs in every command; the old index lists say what to write instead.
      {"train --devices cuda:0", "cuda:N means N GPUs"},
      {"train --devices cuda:0,1", "only a sweep takes"},
      {"collectives --devices cuda:0,1", "CUDA_VISIBLE_DEVICES"},
      {"profile --devices cuda:0 --model cifar-cnn", "cuda:N means N GPUs"},
      {"train --epochs -1", "--epochs -1"},
      {"train --crop-padding -2", "--crop-padding -2"},
      {"train --ranks-per-node 2 --steps 1", "--ranks-per-node 2: "},
      {"train --ranks-per-node -1", "--ranks-per-node"},
      {"train --network-interface nope0 --steps 1", "--network-interface nope0: "},
      {"collectives --network-interface nope0", "interfaces there: lo (127.0.0.1"},
      {"pipeline-bench --workers 0", "--workers 0"},
      {"pipeline-bench --data synthetic:device", "synthetic:device"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << c.args << " gave: " << r.output;
  }
}

}  // namespace

TEST(Cli, SweepPrintsTablesAndWritesAReportThatReportReads) {
  const std::string out = testing::TempDir() + "/cli_sweep.json";
  const std::string config = testing::TempDir() + "/cli_sweep_config.json";
  std::ofstream(config) << R"({"models": ["dense-100"], "devices": "cpu:1,2", "batch": [8],
                              "repeats": 1, "steps": 3, "max_warmup_steps": 4, "threads": 1})";
  // The flag overrides the file's repeats.
  const Result r = run("sweep --config " + config + " --repeats 2 -q -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "dense-100 (weak scaling")) << r.output;
  EXPECT_TRUE(contains(r.output, "samples/s [95% CI]")) << r.output;
  EXPECT_TRUE(contains(r.output, "report written to " + out)) << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema"], "scalescope-sweep");
  EXPECT_EQ(doc["config"]["repeats"], 2);
  ASSERT_EQ(doc["points"].size(), 2u);
  EXPECT_EQ(doc["points"][1]["repeats"].size(), 2u);
  EXPECT_TRUE(contains(doc["environment"]["command_line"].get<std::string>(), "--repeats 2"));
  const Result again = run("report " + out);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(contains(again.output, "dense-100 (weak scaling")) << again.output;
}

// Points that fail are rows of the tables; a sweep of which no point ran measured nothing, and
// says so with its exit status (every GPU point of 75d88d7 failed, and the sweep exited 0).
TEST(Cli, ASweepWhosePointsAllFailedExitsOneAndKeepsItsReport) {
  const std::string out = testing::TempDir() + "/cli_sweep_failed.json";
  const std::string common =
      "sweep --devices cpu:1 --models dense-100 --repeats 1 --steps 3 "
      "--threads 1 --memory-limit-mb 0.5 -q -o " +
      out;
  // 0.5 MiB holds dense-100 at batch 8 but not its activations at batch 2000.
  const Result failed = run(common + " --batch 2000");
  EXPECT_EQ(failed.status, 1) << failed.output;
  EXPECT_TRUE(contains(failed.output, "none of the sweep's 1 points ran")) << failed.output;
  EXPECT_EQ(read_json_file(out)["points"][0]["status"], "failed");
  const Result some = run(common + " --batch 2000,8");
  EXPECT_EQ(some.status, 0) << some.output;
  EXPECT_TRUE(contains(some.output, "FAILED")) << some.output;
}

// Without --devices the sweep runs on the GPUs where any are visible, else on CPU devices,
// and its first line says which and why.
TEST(Cli, SweepWithoutDevicesSaysWhatItChoseAndWhy) {
  const std::string out = testing::TempDir() + "/cli_sweep_default.json";
  const Result r =
      run("sweep --models dense-100 --batch 8 --repeats 1 --steps 2 "
          "--max-warmup-steps 1 --threads 1 -o " +
          out);
  ASSERT_EQ(r.status, 0) << r.output;
  const bool gpus = !contains(run("devices").output, "no GPU:");
  EXPECT_EQ(r.output.rfind(gpus ? "sweep on cuda:1"
                                : "sweep on cpu:1,2 (no --devices given, "
                                  "and no GPU is visible (",
                           0),
            0u)
      << r.output;
  EXPECT_TRUE(contains(r.output, "models: dense-100\n")) << r.output;
}

TEST(Cli, SweepBadInputIsRefusedBeforeAnythingRuns) {
  const std::string out = testing::TempDir() + "/cli_sweep_bad.json";
  std::remove(out.c_str());
  const auto fails = [&](const std::string& args, const std::string& message) {
    const Result r = run("sweep " + args + " -q -o " + out);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << args << "\n" << r.output;
  };
  fails("--models nosuchnet", "nosuchnet");
  fails("--ranks-per-node 4", "runs 1; launch that many per node");
  fails("--devices cpu:1,x", "'x' is not a whole number");
  fails("--devices cuda:0,1", "asks for no GPU");
  fails("--batch 8,-1", "--batch -1 must be a positive number of samples");
  fails("--batch 8 --global-batch 16", "not both");
  fails("--global-batch 15 --devices cpu:1,2", "--global-batch 15 does not split evenly");
  fails("--config /nonexistent/ci.json", "/nonexistent/ci.json");
  fails("--resume /nonexistent/report.json", "/nonexistent/report.json");
  fails("--repeats 0", "--repeats 0");
  // Nothing ran, so nothing was written.
  EXPECT_FALSE(std::ifstream(out).good());
  const Result bad_report = run("report " + std::string(SCALESCOPE_BINARY));
  EXPECT_EQ(bad_report.status, 1);
  EXPECT_TRUE(contains(bad_report.output, "is not valid JSON")) << bad_report.output;
}

// ---------------------------------------------------------------------------------------
// compare and export: exit statuses on constructed reports (known answers) and real sweeps.

#include "reports/sweep_report.h"

namespace {

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
  };
  fails(base + " /nonexistent/cur.json", "/nonexistent/cur.json");
  fails(base + " " + std::string(SCALESCOPE_BINARY), "is not valid JSON");
  fails(base + " " + base + " --threshold 5", "--threshold item '5'");
  fails(base + " " + base + " --threshold throughput=3%,latency=4%", "'latency' is not a metric");
  fails(base + " " + base + " --threshold throughput=-3%", "throughput=-3%");
  fails(base + " " + base + " --alpha 0", "--alpha 0");
  fails(base + " " + base + " --min-phase-change 1", "--min-phase-change '1'");
  fails(base, "CURRENT");  // a usage error
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

TEST(Cli, ProfileWithoutNsysSaysWhatToInstall) {
  const Result r = run("profile --model dense-100 --nsys /nonexistent/nsys");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "/nonexistent/nsys is not an executable file")) << r.output;
  EXPECT_TRUE(contains(r.output, "Nsight Systems")) << r.output;
  std::string output;
  FILE* pipe = popen(
      ("PATH=/nonexistent " + std::string(SCALESCOPE_BINARY) + " profile --model dense-100 2>&1")
          .c_str(),
      "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  EXPECT_NE(pclose(pipe), 0);
  EXPECT_TRUE(contains(output, "nsys is not on PATH")) << output;
}

TEST(Cli, ProfileRunsThePointUnderNsysWithTheCaptureRange) {
  // A stand-in for nsys that logs its arguments, runs the profiled command and leaves the
  // report file nsys would.
  const std::string dir = testing::TempDir() + "/fake_nsys_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string log = dir + "/args.log";
  {
    std::ofstream script(dir + "/nsys");
    script << "#!/bin/sh\necho \"$@\" > '" << log << "'\nout=''\n"
           << "while [ $# -gt 0 ]; do case \"$1\" in --output=*) out=\"${1#--output=}\"; shift;;"
           << " profile|--*) shift;; *) break;; esac; done\n"
           << "\"$@\" || exit $?\ntouch \"$out.nsys-rep\"\n";
  }
  std::filesystem::permissions(dir + "/nsys", std::filesystem::perms::owner_all);
  const std::string out = dir + "/point.json";
  const Result r =
      run("profile --model dense-100 --devices cpu:2 --batch 8 --steps 6 "
          "--profile-steps 2:4 --threads 1 --name " +
          dir + "/prof -o " + out + " --nsys " + dir + "/nsys");
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(log);
  const std::string args((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* flag : {"profile --trace=cuda,nvtx,osrt", "--capture-range=nvtx",
                           "--nvtx-capture=profile@scalescope", "--capture-range-end=stop",
                           "--profile-steps 2:4", "--repeats 1"}) {
    EXPECT_TRUE(contains(args, flag)) << flag << " missing from: " << args;
  }
  std::ifstream report(out);
  const auto doc = nlohmann::json::parse(report);
  ASSERT_EQ(doc["points"].size(), 1u);
  EXPECT_EQ(doc["points"][0]["profile"], dir + "/prof.nsys-rep");
  EXPECT_TRUE(contains(r.output, "Nsight Systems report: " + dir + "/prof.nsys-rep")) << r.output;

  const Result bad = run("profile --model dense-100 --profile-steps 5:2 --nsys " + dir + "/nsys");
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(contains(bad.output, "--profile-steps 5:2")) << bad.output;
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------------
// collectives: the all-reduce benchmark end to end.

TEST(Cli, CollectivesPrintsATableAndWritesJson) {
  const std::string out = testing::TempDir() + "/cli_collectives.json";
  std::remove(out.c_str());
  const Result r =
      run("collectives --devices cpu:2 --max-bytes 64K --warmup-iters 1 --iters 3 --json " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "busbw")) << r.output;
  EXPECT_TRUE(contains(r.output, "ranks combined by max")) << r.output;
  EXPECT_TRUE(contains(r.output, "Wrong values      : 0 OK")) << r.output;
  EXPECT_TRUE(contains(r.output, "the harness's α-β fit can start from this measurement"))
      << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema"], "scalescope-collectives");
  EXPECT_EQ(doc["ranks"], 2);
  EXPECT_EQ(doc["devices"], "cpu:2");
  EXPECT_TRUE(doc["environment"].contains("host"));
  ASSERT_EQ(doc["sizes"].size(), 14u);  // 8 B .. 64 KiB, factor 2
  EXPECT_EQ(doc["sizes"][0]["bytes"], 8);
  EXPECT_EQ(doc["sizes"][13]["bytes"], 65536);
  for (const auto& s : doc["sizes"]) {
    EXPECT_GT(s["time_us"].get<double>(), 0.0);
    EXPECT_GE(s["busbw_gbps"].get<double>(), 0.0);
    EXPECT_EQ(s["wrong"], 0);
  }
  EXPECT_GT(doc["sizes"][13]["busbw_gbps"].get<double>(), 0.0);
  EXPECT_TRUE(doc["alpha_beta"].is_object());
}

TEST(Cli, CollectivesBadFlagsAreRefusedBeforeAnythingRuns) {
  const std::string out = testing::TempDir() + "/cli_collectives_bad.json";
  std::remove(out.c_str());
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"--min-bytes 6", "--min-bytes 6"},
      {"--max-bytes 12Q", "'12Q'"},
      {"--max-bytes lots", "'lots'"},
      {"--min-bytes 1M --max-bytes 64K", "--max-bytes 65536"},
      {"--factor 1", "--factor 1"},
      {"--iters 0", "--iters 0"},
      {"--warmup-iters -1", "--warmup-iters -1"},
      {"--op max", "'max'"},
      {"--devices cuda:64", "cuda"},  // no machine has 65 GPUs (or a CPU-only build)
      {"--devices cpu:0", "cpu:0"},
      {"--timeout 0", "--timeout 0"},
  };
  for (const Case& c : cases) {
    const Result r = run("collectives " + c.args + " --json " + out);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, "#wrong")) << c.args << " ran: " << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << c.args << " gave: " << r.output;
  }
  EXPECT_FALSE(std::ifstream(out).good());
  const Result usage = run("collectives --iters many");
  EXPECT_EQ(usage.status, 2) << usage.output;
  EXPECT_TRUE(contains(usage.output, "many")) << usage.output;
}

TEST(Cli, DevicesListsTheCpuAndSaysWhatIsMissing) {
  const Result r = run("devices");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "cpu:N")) << r.output;
  EXPECT_TRUE(contains(r.output, "usable")) << r.output;
  EXPECT_TRUE(contains(r.output, "CUDA runtime")) << r.output;
  // Without a GPU the reason is CUDA's, and NVML's is given beside it.
  if (contains(r.output, "no GPU:")) {
    EXPECT_TRUE(contains(r.output, "; NVML: ")) << r.output;
  } else {
    EXPECT_TRUE(contains(r.output, "GPU 0")) << r.output;
  }
}

TEST(Cli, DevicesJsonHasTheSameFacts) {
  const Result r = run("devices --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["cpu"]["device"], "cpu");
  EXPECT_GT(doc["cpu"]["usable_cores"].get<int>(), 0);
  EXPECT_GT(doc["cpu"]["memory_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(doc["gpus"].is_array());
  EXPECT_TRUE(doc["peer_access"].is_array());
  EXPECT_TRUE(doc["nvml"]["loaded"].is_boolean());
  for (const char* key : {"driver", "cuda_runtime", "cudnn", "nccl", "cublas", "onednn", "gloo"}) {
    EXPECT_TRUE(doc["versions"].contains(key)) << key;
  }
  if (doc["gpus"].empty()) {
    EXPECT_TRUE(doc["gpu_error"].is_string());
    EXPECT_FALSE(doc["gpu_error"].get<std::string>().empty());
  }
  if (!doc["nvml"]["loaded"].get<bool>()) {
    EXPECT_TRUE(doc["nvml"]["error"].is_string());
  }
}

// ---------------------------------------------------------------------------------------
// What a new user reads: messages for bad values, and what train says about what it ran.

// A bad value is the user's to fix: the message names it and what would be accepted, without
// the source line a developer needs (which --verbose adds).
TEST(Cli, UsageErrorsReadWithoutASourceLocation) {
  for (const std::string args :
       {"train --lr -1", "train --steps 0", "train --global-batch 7 --devices cpu:2",
        "sweep --batch 8,-1 -q", "sweep --global-batch 15 --devices cpu:1,2 -q",
        "train --devices cuda:0,1", "sweep --devices cuda:0 -q",
        "train --load /nonexistent/ckpt.safetensors --steps 1 -q",
        "train --data cifar10:/nonexistent --steps 1 -q",
        "train --data idx:/nonexistent --steps 1 -q"}) {
    const Result r = run(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "scalescope: error: ")) << args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, ".cpp:")) << args << " gave: " << r.output;
  }
  EXPECT_EQ(run("train --lr -1").output,
            "scalescope: error: --lr -1 must be 0 or a positive number\n");
  const Result verbose = run("train --lr -1 --verbose");
  EXPECT_EQ(verbose.status, 1);
  EXPECT_TRUE(
      contains(verbose.output, "--lr -1 must be 0 or a positive number at option_schema.cpp:"))
      << verbose.output;
  // The sweep reads its arguments again with its own options: --verbose is not among them.
  const Result sweep = run("--verbose sweep --batch 8,-1 -q");
  EXPECT_TRUE(contains(sweep.output, "--batch -1 must be a positive number of samples at "))
      << sweep.output;
}

// One replica without accumulation computes one batch size's gradient: train says that the
// noise scale cannot be estimated and what would make it estimable, and so does the run file.
TEST(Cli, TrainSaysWhyTheNoiseScaleWasNotEstimated) {
  const std::string out = testing::TempDir() + "/cli_noise_one.json";
  const Result one =
      run("train --model dense-100 --batch 8 --steps 4 -q --noise-scale --devices cpu:1 -o " + out);
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_TRUE(contains(one.output,
                       "noise scale: not estimated: one replica without accumulation computes "
                       "the gradient of one batch size only, and the noise scale compares two: "
                       "run on more devices, or with --accumulate 2 or more\n"))
      << one.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_TRUE(contains(doc["noise_scale"]["unavailable"].get<std::string>(),
                       "run on more devices, or with --accumulate 2 or more"))
      << doc["noise_scale"];
  // Two micro-batches give two batch sizes: an estimate (or why the steps gave none).
  const Result two =
      run("train --model dense-100 --batch 8 --steps 6 -q --noise-scale --accumulate 2");
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_TRUE(contains(two.output, "noise scale: B_noise ") ||
              contains(two.output, "noise scale: none over 6 steps"))
      << two.output;
}

// A CPU device's threads are its share of the cores; a GPU runs none of its own, nor does the
// simulated device that stands for one (its threads are the simulation's): the summary gives
// threads per device on CPU devices only.
TEST(Cli, TrainGivesThreadsPerDeviceOnCpuDevicesOnly) {
  const Result cpu = run("train --model dense-100 --batch 8 --steps 2 -q --devices cpu:1");
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  EXPECT_TRUE(contains(cpu.output, "/device), global batch 8")) << cpu.output;
  const Result sim = run("train --model dense-100 --batch 8 --steps 2 -q --devices sim:1");
  ASSERT_EQ(sim.status, 0) << sim.output;
  EXPECT_TRUE(contains(sim.output, "dense-100 on sim:1, global batch 8")) << sim.output;
  EXPECT_FALSE(contains(sim.output, "/device)")) << sim.output;
}
