// Training a GPT decoder data-parallel: without batch norm, N replicas are one replica on the
// global batch (the mirrored equivalence), on CPU replicas over either collective and on
// simulated devices; the tied token table stays one tensor on every replica; and on a real
// text the model learns more than the text's byte frequencies.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "harness/trainer/trainer.h"
#include "tests/harness/trainer/train_helpers.h"

namespace scalescope {
namespace {

constexpr const char* kTinyGpt = "gpt:layers=2,d=32,heads=2,seq=16,vocab=64";
// A text every Debian system has (base-files), 35,149 bytes.
constexpr const char* kText = "/usr/share/common-licenses/GPL-3";

// SGD with momentum, as the equivalence with PyTorch is stated. Not Adam: the gradient of the
// key's bias in c_attn is zero in exact arithmetic (it adds q·b_k to every score of a row, which
// the softmax cancels), so its computed value is rounding noise of either sign, and Adam,
// dividing by its own magnitude, turns that noise into steps of the full learning rate (5e-2
// relative differences after 4 steps between 1 and 2 replicas, where SGD's are 2e-6).
TrainOptions gpt_run(const std::string& devices, int64_t batch) {
  TrainOptions o = testing_util::short_run(kTinyGpt, devices, batch, 4);
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.1f;
  o.optimizer.momentum = 0.9f;
  o.check_every = 1;
  o.bucket_cap_mb = 0.02;  // several buckets, overlapping backward
  return o;
}

struct MirroredCase {
  const char* devices;
  bool gloo;
  int jitter_us;
};

class GptMirrored : public testing::TestWithParam<MirroredCase> {};

TEST_P(GptMirrored, ReplicasMatchOneReplicaOnTheGlobalBatch) {
  const MirroredCase c = GetParam();
  TrainOptions many = gpt_run(c.devices, 4);
  many.cpu_shared_memory = !c.gloo;
  const int replicas = c.devices[4] - '0';
  const auto reference = testing_util::trained_weights(gpt_run("cpu:1", 4 * replicas), "one");
  setenv("SCALESCOPE_SIM_JITTER_US", std::to_string(c.jitter_us).c_str(), 1);
  const auto mirrored = testing_util::trained_weights(many, "many");
  unsetenv("SCALESCOPE_SIM_JITTER_US");
  EXPECT_LT(testing_util::worst_difference(mirrored, reference), 1e-4);
  // The checkpoint names the tied table twice, with one value.
  const NamedTensor* wte = nullptr;
  const NamedTensor* head = nullptr;
  for (const NamedTensor& t : mirrored) {
    if (t.name == "transformer.wte.weight") wte = &t;
    if (t.name == "lm_head.weight") head = &t;
  }
  ASSERT_TRUE(wte != nullptr && head != nullptr);
  EXPECT_EQ(wte->data, head->data);
  // And training moved the weights: the comparison is not of two initialisations.
  TrainOptions untrained = gpt_run("cpu:1", 4 * replicas);
  untrained.optimizer.lr = 1e-12f;
  EXPECT_GT(testing_util::worst_difference(testing_util::trained_weights(untrained, "initial"),
                                           reference),
            1e-2);
}

INSTANTIATE_TEST_SUITE_P(Devices, GptMirrored,
                         testing::Values(MirroredCase{"cpu:2", false, 0},
                                         MirroredCase{"cpu:4", true, 0},
                                         MirroredCase{"sim:2", false, 300}),
                         [](const testing::TestParamInfo<MirroredCase>& info) {
                           return std::string(info.param.devices).substr(0, 3) +
                                  std::string(1, info.param.devices[4]) +
                                  (info.param.gloo ? "Gloo" : "");
                         });

TEST(GptTrainer, ReplicasStayIdenticalAndEveryStepIsChecked) {
  EXPECT_EQ(train(gpt_run("cpu:2", 4)).consistency_checks, 4);
}

// Dropout draws the same masks on every replica (as DDP ranks seeded alike), so the replicas
// stay identical; and it is applied: the run differs from one without it.
TEST(GptTrainer, WithDropoutReplicasStayIdenticalAndTrainOtherwise) {
  TrainOptions o = gpt_run("cpu:2", 4);
  o.model = fmt::format("{},dropout=0.2", kTinyGpt);
  EXPECT_EQ(train(o).consistency_checks, 4);
  const auto with = testing_util::trained_weights(o, "dropout");
  const auto without = testing_util::trained_weights(gpt_run("cpu:2", 4), "no-dropout");
  EXPECT_GT(testing_util::worst_difference(with, without), 1e-3);
}

// The entropy of the file's bytes, in nats: the loss of the best model that ignores context.
double unigram_entropy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<char, double> counts;
  for (const char b : bytes) counts[b] += 1.0;
  double h = 0.0;
  for (const auto& [b, n] : counts) {
    const double p = n / static_cast<double>(bytes.size());
    h -= p * std::log(p);
  }
  return h;
}

// gpt:preset=micro on GPL-3's bytes, 200 steps of 16 sequences (Adam, lr 3e-3): the loss on the
// held-out last tenth of the file falls clearly below the unigram entropy (3.17 nats), which a
// model must use its context to beat. Measured: 2.72 at step 200 (2.52 at 300).
TEST(GptTrainer, LearnsTextBelowItsUnigramEntropy) {
  if (!std::ifstream(kText).good()) GTEST_SKIP() << kText << " is missing";
  const double entropy = unigram_entropy(kText);
  ASSERT_NEAR(entropy, 3.17, 0.01);
  TrainOptions o = testing_util::short_run("gpt:preset=micro", "cpu:1", 16, 200);
  o.threads = 2;
  o.data.spec = std::string("text:") + kText;
  o.optimizer.lr = 3e-3f;
  o.eval = true;
  const RunReport report = train(o);
  ASSERT_FALSE(report.evals.empty());
  EXPECT_LT(report.evals.back().loss, entropy - 0.25);
}

}  // namespace
}  // namespace scalescope
