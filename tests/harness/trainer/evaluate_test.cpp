// Evaluation: shards add up to the whole dataset, and replicas evaluate together what one
// replica would.
#include <gtest/gtest.h>

#include "core/cpu/cpu_device.h"
#include "harness/trainer/evaluate.h"
#include "harness/trainer/trainer.h"
#include "models/zoo.h"

namespace scalescope {
namespace {

TEST(Evaluation, ShardsAddUpToTheWholeDataset) {
  const ModelDef def = make_model("dense-100");
  const RunData data = open_run_data(DataOptions{}, def, 1);
  CpuDevice dev(0, 1);
  Model model(def, data.sample_shape, dev, 1);
  const EvalResult whole = evaluate(model, *data.eval, data.eval_transforms, 64, 1);
  EvalSums total;
  for (int shard = 0; shard < 3; ++shard) {
    const EvalSums s = evaluate_shard(model, *data.eval, data.eval_transforms, 64, 1, shard, 3);
    total.loss += s.loss;
    total.correct += s.correct;
    total.samples += s.samples;
  }
  EXPECT_EQ(total.samples, data.eval->size());
  EXPECT_EQ(whole.samples, data.eval->size());
  EXPECT_NEAR(total.result().loss, whole.loss, 1e-6 * whole.loss);
  EXPECT_DOUBLE_EQ(total.result().accuracy, whole.accuracy);
  EXPECT_GT(whole.accuracy, 0.0);
}

TEST(Evaluation, ReplicasEvaluateTogetherWhatOneReplicaWould) {
  TrainOptions o;
  o.model = "dense-100";
  o.steps = 5;
  o.threads = 1;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.05f;
  TrainOptions one = o;
  one.batch = 16;
  TrainOptions two = o;
  two.devices = "cpu:2";
  two.batch = 8;
  const RunReport a = train(one);
  const RunReport b = train(two);
  ASSERT_EQ(a.evals.size(), 1u);
  ASSERT_EQ(b.evals.size(), 1u);
  EXPECT_NEAR(b.evals[0].loss, a.evals[0].loss, 1e-4 * a.evals[0].loss);
  // Weights equal up to rounding: at most a borderline sample may change class.
  EXPECT_NEAR(b.evals[0].accuracy, a.evals[0].accuracy, 1e-3);
}

}  // namespace
}  // namespace scalescope
