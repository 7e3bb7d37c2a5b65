// `scalescope models` end to end: the zoo, and the layers of the models named.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/harness/cli/run_cli.h"

namespace {

using Result = scalescope::testing_util::CliResult;
using scalescope::testing_util::contains;

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

TEST(Cli, ModelsListsTheLayersOfTheModelsNamed) {
  const Result r = run("models gpt:preset=micro --layers");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "gpt:preset=micro, layer by layer")) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "transformer.h.1.attn.c_attn    Dense(384)                    "
                       "64x384               49,536     6.32 MFLOP  10.6%"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "lm_head's weight is transformer.wte's")) << r.output;
  EXPECT_FALSE(contains(r.output, "Model specs:")) << "the zoo's grammar, for one model";
  const Result j = run("models cifar-resnet:depth=20 --layers --json");
  ASSERT_EQ(j.status, 0) << j.output;
  const nlohmann::json m = nlohmann::json::parse(j.output)["models"][0];
  ASSERT_EQ(m["layer_list"].size(), m["layers"].get<size_t>());
  EXPECT_EQ(m["layer_list"][0]["name"], "conv1");
  EXPECT_EQ(m["layer_list"][0]["params"], 432);
  EXPECT_EQ(m["layer_list"][0]["output_shape"], nlohmann::json({32, 32, 16}));
  const Result none = run("models --layers");
  EXPECT_EQ(none.status, 1);
  EXPECT_TRUE(contains(none.output, "--layers lists the layers of the models named"))
      << none.output;
}

}  // namespace
