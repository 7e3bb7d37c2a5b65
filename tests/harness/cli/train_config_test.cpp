// A run report's config block as a config file for `train`, and the run's facts beside it.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/harness/cli/run_cli.h"

namespace scalescope {
namespace {

using testing_util::contains;
using Result = testing_util::CliResult;

Result run(const std::string& args) {
  return testing_util::run_cli(args);
}

nlohmann::json read_json(const std::string& path) {
  return testing_util::read_json_file(path);
}

// A run report's config block is a config file for `train`: the same options, the same
// configuration (the same losses, step by step), and its values checked as a file's.
TEST(Cli, ARunsConfigIsAConfigFileForTrain) {
  const std::string dir = testing::TempDir();
  const std::string first = dir + "/cli_config_first.json";
  const Result r = run(
      "train --model dense-100 --devices cpu:2 --batch 4 --accumulate 2 --steps 6 --optimizer sgd "
      "--lr 0.05 --momentum 0.5 --no-overlap --grad-compression bf16 --seed 7 --eval-every 3 "
      "--warmup-steps 2 --threads 1 -q -o " +
      first);
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json run1 = read_json(first);
  EXPECT_EQ(run1["config"]["batch"], 4);
  EXPECT_EQ(run1["config"]["accumulate"], 2);
  EXPECT_EQ(run1["config"]["overlap"], false);
  EXPECT_EQ(run1["run"]["batch_per_device"], 4);
  EXPECT_EQ(run1["run"]["global_batch"], 16);  // 4 × 2 devices × 2 micro-batches
  EXPECT_EQ(run1["run"]["replicas"], 2);
  EXPECT_EQ(run1["run"]["communication_threads_per_device"], 1);  // the reducer's; shared memory

  const std::string config = dir + "/cli_config_block.json";
  std::ofstream(config) << run1["config"].dump(2);
  const std::string second = dir + "/cli_config_second.json";
  const Result again = run("train --config " + config + " -q -o " + second);
  ASSERT_EQ(again.status, 0) << again.output;
  const nlohmann::json run2 = read_json(second);
  EXPECT_EQ(run2["config"], run1["config"]);
  EXPECT_EQ(run2["run"], run1["run"]);
  ASSERT_EQ(run2["steps"].size(), run1["steps"].size());
  for (size_t i = 0; i < run1["steps"].size(); ++i) {
    EXPECT_EQ(run2["steps"][i]["loss"], run1["steps"][i]["loss"]) << "step " << i + 1;
  }
  // Flags over the file; a bad value named as the file gives it.
  const Result shorter = run("train --config " + config + " --steps 3 -q -o " + second);
  ASSERT_EQ(shorter.status, 0) << shorter.output;
  EXPECT_EQ(read_json(second)["steps"].size(), 3u);
  nlohmann::json bad = run1["config"];
  bad["batch"] = 0;
  std::ofstream(config) << bad.dump();
  const Result refused = run("train --config " + config + " -q");
  EXPECT_NE(refused.status, 0) << refused.output;
  EXPECT_TRUE(contains(refused.output, config + ": 'batch': 0 must be a positive number"))
      << refused.output;
}

// The communication threads a run started, as the contention analysis counts them: none on one
// device, the reducer's beside shared memory, and Gloo's event loop besides with Gloo.
TEST(Cli, ARunCountsItsCommunicationThreads) {
  const std::string out = testing::TempDir() + "/cli_comm_threads.json";
  for (const auto& [flags, threads] :
       std::vector<std::pair<std::string, int>>{{"--devices cpu:1", 0},
                                                {"--devices cpu:2", 1},
                                                {"--devices cpu:2 --cpu-collectives gloo", 2}}) {
    const Result r =
        run("train --model dense-100 --batch 4 --steps 2 --no-eval -q -o " + out + " " + flags);
    ASSERT_EQ(r.status, 0) << flags << ": " << r.output;
    EXPECT_EQ(read_json(out)["run"]["communication_threads_per_device"], threads) << flags;
  }
}

// Steps timed other than those after the warm-up asked for are said: a warm-up cut so that one
// step is timed, a run a target ended within its warm-up; none where the warm-up was kept.
TEST(Cli, AWarmUpThatLeavesTheTimedStepsShortIsSaid) {
  const std::string model = "train --model dense-100 --batch 4 -q ";
  const Result cut = run(model + "--steps 3 --no-eval");
  ASSERT_EQ(cut.status, 0) << cut.output;
  EXPECT_TRUE(contains(cut.output, "over 1 step,")) << cut.output;
  EXPECT_TRUE(contains(cut.output,
                       "note: 2 warm-up steps, not the 5 of --warmup-steps, so that 1 of the 3 "
                       "steps is timed\n"))
      << cut.output;
  const Result kept = run(model + "--steps 3 --warmup-steps 1 --no-eval");
  ASSERT_EQ(kept.status, 0) << kept.output;
  EXPECT_TRUE(contains(kept.output, "over 2 steps,")) << kept.output;
  EXPECT_FALSE(contains(kept.output, "warm-up")) << kept.output;
  const Result ended = run(model + "--steps 50 --eval-every 2 --until-loss 100");
  ASSERT_EQ(ended.status, 0) << ended.output;
  EXPECT_TRUE(contains(ended.output,
                       "note: the run ended at step 2, within its 5 warm-up steps: the summary "
                       "times every step, warm-up included\n"))
      << ended.output;
  EXPECT_TRUE(contains(ended.output, "over 2 steps,")) << ended.output;
}

}  // namespace
}  // namespace scalescope
