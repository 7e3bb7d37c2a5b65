// kernel_math/optimizer_math.h against the CPU optimizers over several steps (momentum and Adam's
// bias corrections exercised), bit for bit: weights and state. The CPU's Adam runs a SIMD body
// and a scalar tail, so the parameter count is not a multiple of any vector width.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "models/kernel_math/optimizer_math.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

constexpr int64_t kParams = 1037;
const std::vector<float> kLrs = {0.1f, 0.05f, 0.03f, 0.01f};

struct Steps {
  std::vector<float> w0;
  std::vector<std::vector<float>> grads;
};
Steps random_steps() {
  Steps r{random_floats(kParams, 61), {}};
  for (size_t t = 0; t < kLrs.size(); ++t) {
    r.grads.push_back(random_floats(kParams, 62 + t, -2.0f, 2.0f));
  }
  return r;
}

TEST(KernelMathOptimizer, SgdIsTheCpuOptimizerBitForBit) {
  const Steps run = random_steps();
  for (const float weight_decay : {0.0f, 0.01f}) {
    OptimizerConfig config{.kind = OptimizerKind::kSgd, .weight_decay = weight_decay};
    std::vector<float> w = run.w0;
    for (size_t t = 0; t < kLrs.size(); ++t) {
      for (int64_t i = 0; i < kParams; ++i)
        w[i] = km::sgd_step(w[i], run.grads[t][i], kLrs[t], weight_decay);
    }
    EXPECT_EQ(bit_mismatches(w, run_cpu_optimizer(config, run.w0, run.grads, kLrs).params), "")
        << "weight decay " << weight_decay;
  }
}

TEST(KernelMathOptimizer, SgdWithMomentumIsTheCpuOptimizerBitForBit) {
  const Steps run = random_steps();
  const OptimizerConfig config{
      .kind = OptimizerKind::kSgd, .weight_decay = 0.01f, .momentum = 0.9f};
  std::vector<float> w = run.w0;
  std::vector<float> v(kParams, 0.0f);
  for (size_t t = 0; t < kLrs.size(); ++t) {
    for (int64_t i = 0; i < kParams; ++i) {
      const km::SgdMomentumStep next = km::sgd_momentum_step(w[i], run.grads[t][i], v[i], kLrs[t],
                                                             config.weight_decay, config.momentum);
      w[i] = next.w;
      v[i] = next.v;
    }
  }
  const kernel_math_test::CpuOptimizerResult cpu =
      run_cpu_optimizer(config, run.w0, run.grads, kLrs);
  EXPECT_EQ(bit_mismatches(w, cpu.params), "");
  ASSERT_EQ(cpu.state.size(), 1u);
  EXPECT_EQ(bit_mismatches(v, cpu.state[0]), "") << "momentum";
}

TEST(KernelMathOptimizer, AdamIsTheCpuOptimizerBitForBit) {
  const Steps run = random_steps();
  for (const float weight_decay : {0.0f, 0.01f}) {
    const OptimizerConfig config{.kind = OptimizerKind::kAdam, .weight_decay = weight_decay};
    std::vector<float> w = run.w0;
    std::vector<float> m(kParams, 0.0f);
    std::vector<float> v(kParams, 0.0f);
    for (size_t t = 0; t < kLrs.size(); ++t) {
      const km::AdamScalars s =
          km::adam_scalars(kLrs[t], static_cast<int64_t>(t) + 1, config.weight_decay, config.beta1,
                           config.beta2, config.epsilon);
      for (int64_t i = 0; i < kParams; ++i) {
        const km::AdamStep next = km::adam_step(w[i], run.grads[t][i], m[i], v[i], s);
        w[i] = next.w;
        m[i] = next.m;
        v[i] = next.v;
      }
    }
    const kernel_math_test::CpuOptimizerResult cpu =
        run_cpu_optimizer(config, run.w0, run.grads, kLrs);
    EXPECT_EQ(bit_mismatches(w, cpu.params), "") << "weight decay " << weight_decay;
    ASSERT_EQ(cpu.state.size(), 2u);
    EXPECT_EQ(bit_mismatches(m, cpu.state[0]), "") << "exp_avg";
    EXPECT_EQ(bit_mismatches(v, cpu.state[1]), "") << "exp_avg_sq";
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
