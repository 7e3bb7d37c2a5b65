// The outputs of compare: a terminal table and a pull-request comment.
#include "reports/compare/format.h"

#include <gtest/gtest.h>

#include "tests/reports/compare/compare_fixtures.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using compare_testing::changed;
using compare_testing::compare;
using compare_testing::pair_report;
using compare_testing::PointSpec;

TEST(CompareFormat, EnvironmentDifferencesAreNamedAtTheTop) {
  PointSpec spec;
  SweepReport base = pair_report(spec);
  SweepReport cur = base;
  EXPECT_TRUE(compare(base, cur).environment.empty());
  base.environment.host.cpu_model = "Xeon A";
  cur.environment.host.cpu_model = "EPYC B";
  cur.environment.host.logical_cores = 64;
  cur.environment.libraries.nccl = "2.28.3";
  GpuInfo gpu;
  gpu.name = "NVIDIA H100 80GB HBM3";
  cur.environment.gpus = {gpu, gpu};
  cur.environment.build.build_type = "Debug";
  base.environment.build.build_type = "Release";
  // Facts that do not change the numbers are not differences.
  cur.environment.host.hostname = "another-runner";
  cur.environment.captured_at = "2027-01-01T00:00:00Z";
  const Comparison c = compare(base, cur);
  std::vector<std::string> what;
  for (const EnvironmentDifference& d : c.environment) what.push_back(d.what);
  EXPECT_EQ(what, (std::vector<std::string>{"GPU models", "GPU count", "NCCL", "build type",
                                            "CPU model", "logical cores"}));
  EXPECT_EQ(c.environment[0].baseline, "none");
  EXPECT_EQ(c.environment[0].current, "NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3");
  EXPECT_EQ(c.environment[2].baseline, "none");
  const std::string table = format_comparison_table(c);
  EXPECT_LT(table.find("WARNING: the environments differ"), table.find("m cpu:1 batch 32"));
  EXPECT_CONTAINS(table, "CPU model      Xeon A  ->  EPYC B");
  const std::string md = format_comparison_markdown(c);
  EXPECT_LT(md.find("> [!WARNING]"), md.find("| metric |"));
  EXPECT_CONTAINS(md, "> - CPU model: `Xeon A` → `EPYC B`");
}

TEST(CompareFormat, MarkdownIsAPullRequestComment) {
  const Comparison c = changed({}, 11.0, 2);
  const std::string md = format_comparison_markdown(c);
  // The verdict first, then the table of what moved, then the details.
  EXPECT_EQ(md.rfind("## :x: scalescope compare: regression\n", 0), 0u) << md;
  EXPECT_CONTAINS(md, "| point | metric | baseline | current | change | threshold | p | verdict |");
  EXPECT_CONTAINS(md, "| m cpu:2 batch 32 | throughput (samples/s) | ");
  EXPECT_CONTAINS(md, "| <0.001 | :red_circle: regressed |");
  EXPECT_CONTAINS(md, "<details><summary>All metrics of the 2 compared points</summary>");
  EXPECT_CONTAINS(md, "Baseline `base.json` (scalescope test");
  EXPECT_LT(md.find("| point |"), md.find("<details>"));
  // Only regressions and improvements are in the first table: the unchanged one-device point
  // is in the details only.
  EXPECT_EQ(md.find("| m cpu:1 batch 32 |"), std::string::npos);
  EXPECT_CONTAINS(md, "**m cpu:1 batch 32** (24 vs 24 measured steps)");
}

}  // namespace
}  // namespace scalescope
