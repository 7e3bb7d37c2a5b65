#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "reports/run_report.h"
#include "reports/stats.h"

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

}  // namespace
}  // namespace scalescope
