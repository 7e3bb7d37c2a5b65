// What the trainer's tests share: training a run to a checkpoint and reading its weights
// back, and comparing two sets of weights.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/trainer/trainer.h"
#include "models/checkpoint.h"

namespace scalescope::testing_util {

// The weights `o` ends with (its checkpoint, read back); no evaluation.
inline std::vector<NamedTensor> trained_weights(TrainOptions o, const std::string& name,
                                                const TrainHooks& hooks = {}) {
  // Unique per process: ctest runs the cases of a binary in parallel processes.
  o.save =
      ::testing::TempDir() + "/weights_" + std::to_string(::getpid()) + "_" + name + ".safetensors";
  o.eval = false;
  train(o, hooks);
  std::vector<NamedTensor> w = read_safetensors(o.save).tensors;
  std::remove(o.save.c_str());
  std::remove(optimizer_state_path(o.save).c_str());
  return w;
}

// Worst relative difference, |x - y| / (1e-3 + |y|), over every weight; fails the test when
// the two sets do not have the same tensors.
inline double worst_difference(const std::vector<NamedTensor>& a,
                               const std::vector<NamedTensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t t = 0; t < std::min(a.size(), b.size()); ++t) {
    EXPECT_EQ(a[t].name, b[t].name);
    EXPECT_EQ(a[t].data.size(), b[t].data.size());
    for (size_t i = 0; i < std::min(a[t].data.size(), b[t].data.size()); ++i) {
      const double x = a[t].data[i];
      const double y = b[t].data[i];
      worst = std::max(worst, std::abs(x - y) / (1e-3 + std::abs(y)));
    }
  }
  return worst;
}

// A short run without evaluation, one thread per device.
inline TrainOptions short_run(const std::string& model, const std::string& devices, int64_t batch,
                              int64_t steps) {
  TrainOptions o;
  o.model = model;
  o.devices = devices;
  o.batch = batch;
  o.steps = steps;
  o.threads = 1;
  o.eval = false;
  return o;
}

// The small run the equivalence tests train: dense-100 for 6 steps on one thread per device,
// SGD with momentum or Adam, with buckets small enough that several overlap backward.
inline TrainOptions equivalence_options(OptimizerKind optimizer, bool overlap) {
  TrainOptions o;
  o.model = "dense-100";
  o.steps = 6;
  o.threads = 1;
  o.optimizer.kind = optimizer;
  o.optimizer.lr = optimizer == OptimizerKind::kSgd ? 0.05f : 1e-3f;
  o.optimizer.momentum = optimizer == OptimizerKind::kSgd ? 0.9f : 0.0f;
  o.overlap = overlap;
  o.first_bucket_mb = 0.001;
  o.bucket_cap_mb = 0.01;
  return o;
}

// Each step's loss, in order.
inline std::vector<double> losses(const RunReport& r) {
  std::vector<double> out;
  for (const StepRecord& s : r.steps) out.push_back(s.loss);
  return out;
}

// From the same weights and batches, the 16-bit run's losses follow fp32's within 5e-2 while not
// being fp32's (its kernels did compute on 16-bit copies), and it learns.
inline void expect_follows_fp32(const RunReport& half, const RunReport& fp32) {
  const std::vector<double> a = losses(fp32);
  const std::vector<double> b = losses(half);
  ASSERT_EQ(a.size(), b.size());
  double differs = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 5e-2 * std::abs(a[i])) << "step " << i + 1;
    differs = std::max(differs, std::abs(b[i] - a[i]));
  }
  EXPECT_GT(differs, 1e-6);
  EXPECT_LT(b.back(), b.front());
}

inline bool identical(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t t = 0; t < a.size(); ++t) {
    if (a[t].name != b[t].name || a[t].data != b[t].data) return false;
  }
  return true;
}

}  // namespace scalescope::testing_util
