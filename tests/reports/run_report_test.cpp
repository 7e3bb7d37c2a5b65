#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "reports/analysis/stats.h"
#include "reports/run_report.h"
#include "tests/reports/json_round_trip.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

TEST(Stats, PercentilesInterpolateLikeNumpy) {
  const std::vector<double> v{4.0, 1.0, 3.0, 2.0};
  EXPECT_DOUBLE_EQ(median(v), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0.1), 1.3);
  EXPECT_DOUBLE_EQ(mean(v), 2.5);
  EXPECT_THROW(median(std::vector<double>{}), Error);
  EXPECT_THROW(percentile(v, 1.5), Error);
}

TEST(RunReport, SummaryLeavesOutWarmupSteps) {
  RunReport r;
  r.batch = 10;
  r.warmup_steps = 2;
  r.steps = {{1, 2.0, 100.0, 1.0, {}},
             {2, 1.5, 90.0, 1.0, {}},
             {3, 1.0, 10.0, 2.0, {}},
             {4, 0.8, 20.0, 2.0, {}},
             {5, 0.5, 30.0, 2.0, {}}};
  const RunSummary s = summarize(r);
  EXPECT_EQ(s.measured_steps, 3);
  EXPECT_DOUBLE_EQ(s.step_ms_median, 20.0);
  EXPECT_DOUBLE_EQ(s.compute_ms_median, 18.0);
  EXPECT_DOUBLE_EQ(s.samples_per_second, 500.0);
  EXPECT_DOUBLE_EQ(s.first_loss, 2.0);
  EXPECT_DOUBLE_EQ(s.last_loss, 0.5);
  const auto j = to_json(r);
  EXPECT_EQ(j["schema_version"], kRunSchemaVersion);
  EXPECT_EQ(j["steps"].size(), 5u);
  EXPECT_DOUBLE_EQ(j["summary"]["step_ms_median"].get<double>(), 20.0);
}

TEST(RunReport, WrittenFileParsesBack) {
  RunReport r;
  r.model = "dense-100";
  r.batch = 4;
  r.steps = {{1, 1.0, 5.0, 0.5, {}}};
  const std::string path = testing::TempDir() + "/run_report_test.json";
  write_run_report(path, r);
  const auto j = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(j["model"]["name"], "dense-100");
  EXPECT_EQ(j["summary"]["measured_steps"], 1);
}

// A convolution whose backward-data fell back to a non-deterministic algorithm: the kernels
// entry says why and under which limit, the report lists it among the fallbacks, the record
// reads back as written (across processes), and the summary gives it one line.
TEST(RunReport, AFallbackToANonDeterministicAlgorithmIsListedAndPrinted) {
  RunReport r;
  r.model = "resnet-50";
  r.deterministic = true;
  r.determinism = "preferred";
  r.conv_search = "benchmark";
  const std::string rule = "255328256 = max(shared 0, (2147483648 limit - 104857600 in use) / 8)";
  const KernelChoiceRecord data{.layer = 0,
                                .layer_name = "conv2d(64, 7x7)",
                                .pass = "backward-data",
                                .algorithm = "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0",
                                .math = "CUDNN_DEFAULT_MATH",
                                .layout = "NHWC",
                                .deterministic = false,
                                .workspace_bytes = 4096,
                                .workspace_limit_bytes = 255328256,
                                .workspace_limit_rule = rule,
                                .fallback = "no deterministic algorithm within 255328256 bytes"};
  KernelChoiceRecord forward = data;
  forward.pass = "forward";
  forward.algorithm = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM";
  forward.deterministic = true;
  forward.fallback = "";
  forward.measured_ms = 0.25;  // as cuDNN timed it (--conv-search benchmark)
  KernelChoiceRecord dense{.layer = 3,
                           .layer_name = "dense(10)",
                           .pass = "forward",
                           .algorithm = "gemm",
                           .math = "fp32",
                           .layout = "NC"};
  r.kernels = {forward, data, dense};

  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["run"]["determinism"], "preferred");
  EXPECT_EQ(j["kernels"][1]["fallback"], data.fallback);
  EXPECT_EQ(j["kernels"][1]["workspace_limit_bytes"], 255328256);
  EXPECT_EQ(j["kernels"][1]["workspace_limit_rule"], rule);
  EXPECT_FALSE(j["kernels"][0].contains("fallback"));
  EXPECT_EQ(j["run"]["conv_search"], "benchmark");
  EXPECT_EQ(j["kernels"][0]["measured_ms"], 0.25);
  EXPECT_FALSE(j["kernels"][1].contains("measured_ms"));           // never timed
  EXPECT_FALSE(j["kernels"][2].contains("workspace_limit_rule"));  // no limit applied
  EXPECT_EQ(j["nondeterministic_fallbacks"],
            nlohmann::json::parse(R"j([{"layer": 0, "layer_name": "conv2d(64, 7x7)",
                                       "pass": "backward-data",
                                       "algorithm": "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0",
                                       "why": "no deterministic algorithm within 255328256 bytes"}])j"));
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelChoiceRecord back = kernel_choice_from_json(JsonReader(j["kernels"][i], "kernels"));
    EXPECT_EQ(back.fallback, r.kernels[i].fallback);
    EXPECT_EQ(back.workspace_limit_bytes, r.kernels[i].workspace_limit_bytes);
    EXPECT_EQ(back.workspace_limit_rule, r.kernels[i].workspace_limit_rule);
    EXPECT_EQ(back.measured_ms, r.kernels[i].measured_ms);
  }
  nlohmann::json negative = j["kernels"][0];
  negative["measured_ms"] = -0.5;
  EXPECT_CONTAINS(
      testing_util::error_of([&] { kernel_choice_from_json(JsonReader(negative, "kernels")); }),
      "measured_ms");
  EXPECT_EQ(fallback_line(r),
            "not deterministic where no deterministic algorithm fits the workspace limit: "
            "conv2d(64, 7x7) backward-data (CUDNN_CONVOLUTION_BWD_DATA_ALGO_0) (the run report "
            "says why; --deterministic refuses instead)\n");

  r.kernels = {forward, dense};
  EXPECT_FALSE(to_json(r).contains("nondeterministic_fallbacks"));
  EXPECT_EQ(fallback_line(r), "");
}

// fp16 runs end with a line on the loss scale and the steps it skipped; other runs without.
TEST(RunReport, TheLossScalingLineNamesTheScaleAndTheSkippedSteps) {
  RunReport r;
  EXPECT_EQ(loss_scaling_line(r), "");
  r.loss_scaling = LossScalingRecord{.initial_scale = 65536,
                                     .growth_factor = 2,
                                     .backoff_factor = 0.5,
                                     .growth_interval = 2000,
                                     .final_scale = 16384,
                                     .skipped_steps = {1, 7}};
  EXPECT_EQ(loss_scaling_line(r),
            "loss scaling: scale 16384 after the last step (from 65536); 2 steps skipped for "
            "overflow (1, 7)\n");
  r.loss_scaling->skipped_steps = {3};
  EXPECT_CONTAINS(loss_scaling_line(r), "; 1 step skipped for overflow (3)\n");
  r.loss_scaling->skipped_steps.clear();
  r.loss_scaling->final_scale = 131072;
  EXPECT_EQ(loss_scaling_line(r),
            "loss scaling: scale 131072 after the last step (from 65536); no step skipped\n");
}

// The run report's records that are read back (across processes, in sweep reports): every key
// written is read into its field.
TEST(RunReport, EveryKeyOfItsRecordsRoundTrips) {
  using testing_util::expect_round_trip;
  const GpuUtilization gpu{.host = "node7",
                           .pci_bus_id = "00000000:18:00.0",
                           .samples = 40,
                           .failed_samples = 2,
                           .mean_gpu_util_percent = 81.5,
                           .max_gpu_util_percent = 99.0,
                           .mean_memory_util_percent = 40.25,
                           .max_memory_used_bytes = int64_t{3} << 30,
                           .error = "NVML_ERROR_TIMEOUT on 2 readings"};
  expect_round_trip(to_json(gpu), to_json(GpuUtilization{}),
                    to_json(gpu_utilization_from_json(JsonReader(to_json(gpu), "gpu"))));

  const KernelChoiceRecord kernel{.layer = 4,
                                  .layer_name = "conv2d(64, 7x7)",
                                  .pass = "backward-data",
                                  .algorithm = "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0",
                                  .math = "CUDNN_DEFAULT_MATH",
                                  .layout = "NHWC",
                                  .deterministic = false,
                                  .workspace_bytes = 4096,
                                  .workspace_limit_bytes = 255328256,
                                  .workspace_limit_rule = "255328256 = max(shared 0, 2 GB / 8)",
                                  .fallback = "no deterministic algorithm within the limit"};
  expect_round_trip(to_json(kernel), to_json(KernelChoiceRecord{}),
                    to_json(kernel_choice_from_json(JsonReader(to_json(kernel), "kernel"))));

  const TargetRecord target{.metric = "accuracy",
                            .value = 0.75,
                            .reached = true,
                            .step = 50,
                            .samples = 3200,
                            .epochs = 0.32,
                            .train_ms = 770.0,
                            .wall_ms = 1980.0};
  expect_round_trip(to_json(target), to_json(TargetRecord{}),
                    to_json(target_from_json(JsonReader(to_json(target), "target"))));

  const EvalRecord eval{.epoch = 2, .step = 150, .loss = 1.25, .accuracy = 0.5};
  expect_round_trip(to_json(eval), to_json(EvalRecord{}),
                    to_json(eval_from_json(JsonReader(to_json(eval), "eval"))));

  const AllReduceSplit split{
      .bytes = 1 << 20, .nodes = 2, .repeats = 5, .global_ms = 4.0, .node_ms = 1.5};
  expect_round_trip(to_json(split), to_json(AllReduceSplit{}),
                    to_json(split_from_json(JsonReader(to_json(split), "split"))));
}

}  // namespace
}  // namespace scalescope
