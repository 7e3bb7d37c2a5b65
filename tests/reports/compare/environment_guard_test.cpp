// The environment guard: which facts of two environments count as a difference.
#include "reports/compare/environment_guard.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace scalescope {
namespace {

std::vector<std::string> differences(const Environment& a, const Environment& b) {
  std::vector<std::string> out;
  for (const EnvironmentDifference& d : compare_environments(a, b)) out.push_back(d.what);
  return out;
}

TEST(EnvironmentGuard, NamesWhatChangesTheNumbersAndBothValues) {
  Environment base;
  EXPECT_TRUE(compare_environments(base, base).empty());
  Environment cur = base;
  base.host.cpu_model = "Xeon A";
  cur.host.cpu_model = "EPYC B";
  cur.host.usable_cores = 3;
  cur.libraries.cuda_driver = "550.54";
  cur.libraries.cudnn = "9.1.0";
  cur.libraries.gloo = "0.5";
  GpuInfo gpu;
  gpu.name = "NVIDIA A100";
  cur.gpus = {gpu};
  const std::vector<EnvironmentDifference> d = compare_environments(base, cur);
  EXPECT_EQ(differences(base, cur),
            (std::vector<std::string>{"GPU models", "GPU count", "CUDA driver", "cuDNN", "Gloo",
                                      "CPU model", "usable cores"}));
  EXPECT_EQ(d[0].baseline, "none");
  EXPECT_EQ(d[0].current, "NVIDIA A100");
  EXPECT_EQ(d[1].baseline, "0");
  EXPECT_EQ(d[1].current, "1");
  EXPECT_EQ(d[2].baseline, "none");
  EXPECT_EQ(d[2].current, "550.54");
  EXPECT_EQ(d[5].baseline, "Xeon A");
  EXPECT_EQ(d[5].current, "EPYC B");
}

TEST(EnvironmentGuard, FactsThatDoNotChangeTheNumbersAreNotDifferences) {
  Environment base;
  Environment cur = base;
  cur.host.hostname = "another-runner";
  cur.captured_at = "2027-01-01T00:00:00Z";
  cur.command_line = "scalescope sweep --devices cpu:2";
  cur.build.git_commit = std::string(40, 'b');
  EXPECT_TRUE(compare_environments(base, cur).empty());
}

}  // namespace
}  // namespace scalescope
