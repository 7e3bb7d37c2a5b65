// The scalescope executable end to end: exit statuses and messages.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace {

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr
};

Result run(const std::string& args) {
  const std::string command = std::string(SCALESCOPE_BINARY) + " " + args + " 2>&1";
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) r.output += buffer.data();
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
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
  EXPECT_EQ(doc["schema_version"], "1.0");
  EXPECT_EQ(doc["model"]["name"], "dense-100");
  EXPECT_EQ(doc["model"]["params"], 7114);
  ASSERT_EQ(doc["steps"].size(), 12u);
  EXPECT_EQ(doc["steps"][11]["step"], 12);
  EXPECT_GT(doc["summary"]["step_ms_median"].get<double>(), 0.0);
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
      {"train --lr 0", "--lr 0"},
      {"train --load /nonexistent.safetensors --steps 1", "/nonexistent.safetensors"},
      {"frobnicate", "frobnicate"},
      {"train --data nowhere", "nowhere"},
      {"train --bucket-cap-mb 0", "--bucket-cap-mb 0"},
      {"train --devices cpu:0", "cpu:0"},
      {"train --epochs -1", "--epochs -1"},
      {"train --crop-padding -2", "--crop-padding -2"},
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

TEST(Cli, SweepBadInputIsRefusedBeforeAnythingRuns) {
  const std::string out = testing::TempDir() + "/cli_sweep_bad.json";
  std::remove(out.c_str());
  const auto fails = [&](const std::string& args, const std::string& message) {
    const Result r = run("sweep " + args + " -q -o " + out);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << args << "\n" << r.output;
  };
  fails("--models nosuchnet", "nosuchnet");
  fails("--devices cpu:1,x", "'x' is not a device count");
  fails("--batch 8,-1", "'-1' is not a positive batch size");
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
