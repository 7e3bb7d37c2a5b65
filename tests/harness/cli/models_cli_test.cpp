// `scalescope models` end to end: the zoo, and the layers of the models named.
#include <fmt/format.h>
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

// With --batch, each layer's output as kept for backward: the layers' add up to the plan's
// saved activations, for a sequence and a graph, in fp32 and (on `sim`) in bf16.
TEST(Cli, ModelsListsWhatBackwardKeepsOfEachLayer) {
  struct Case {
    const char* args;
    const char* layer;  // a layer whose output backward reads
    int64_t kept;       // its bytes
  };
  const Case cases[] = {
      {"cifar-resnet:depth=20 --batch 64", "layer1.0.relu1", int64_t{64} * 32 * 32 * 16 * 4},
      {"cifar-resnet:depth=20 --batch 64 --devices sim:1 --precision bf16", "layer1.0.relu1",
       int64_t{64} * 32 * 32 * 16 * 2},
      {"cifar-cnn --batch 8", "1", int64_t{8} * 32 * 32 * 32 * 4},  // a sequence; conv 0 fused
  };
  for (const Case& c : cases) {
    const Result r = run(std::string("models --layers --json ") + c.args);
    ASSERT_EQ(r.status, 0) << r.output;
    const nlohmann::json m = nlohmann::json::parse(r.output)["models"][0];
    int64_t sum = 0;
    int64_t kept = -1;
    for (const auto& l : m["layer_list"]) {
      sum += l["saved_for_backward_bytes"].get<int64_t>();
      if (l["name"] == c.layer) kept = l["saved_for_backward_bytes"].get<int64_t>();
    }
    EXPECT_EQ(sum, m["memory"]["kept_activations_bytes"].get<int64_t>()) << c.args;
    EXPECT_EQ(kept, c.kept) << c.args;
  }
  const Result text = run("models cifar-resnet:depth=20 --layers --batch 64");
  EXPECT_TRUE(contains(text.output, "kept for backward and the kernel's own at batch 64 in fp32"))
      << text.output;
}

// With --batch, each layer's kernel's own memory: causal attention holds its softmax's row
// statistics alone (B·H·T floats, linear in T: no T×T matrix), on both backends; the layers'
// own is part of the kernels' own, the passes' shared scratch the rest.
TEST(Cli, ModelsListsEachLayersOwnKernelMemory) {
  for (const char* devices : {"cpu:1", "sim:1"}) {
    for (const int64_t seq : {128, 512}) {
      const std::string args = fmt::format(
          "models --layers --json gpt:layers=1,d=256,heads=4,seq={},vocab=256 "
          "--batch 4 --devices {}",
          seq, devices);
      const Result r = run(args);
      ASSERT_EQ(r.status, 0) << r.output;
      const nlohmann::json m = nlohmann::json::parse(r.output)["models"][0];
      int64_t own = 0;
      for (const auto& l : m["layer_list"]) {
        const int64_t bytes = l["kernel_bytes"].get<int64_t>();
        own += bytes;
        if (l["name"] == "transformer.h.0.attn") {
          EXPECT_EQ(bytes, 4 * 4 * seq * static_cast<int64_t>(sizeof(float))) << args;
        }
        if (l["layer"] == "Add") {
          EXPECT_EQ(bytes, 0) << args;
        }
      }
      EXPECT_GT(own, 0) << args;
      EXPECT_LE(own, m["memory"]["kernels_bytes"].get<int64_t>()) << args;
    }
  }
  const Result text = run("models gpt:preset=micro --layers --batch 2");
  EXPECT_TRUE(contains(text.output, "make up the rest of the kernels' own")) << text.output;
}

}  // namespace
