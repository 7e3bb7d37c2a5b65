// kernel_math/activation_math.h against the CPU's activation kernels (oneDNN eltwise) on the same
// inputs, special values included: ReLU and every backward bit for bit, tanh and sigmoid forward
// within a few ulps (each side evaluates its own approximation of tanh and exp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "models/kernel_math/activation_math.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"

namespace scalescope::kernel_math_test {
namespace {

constexpr float kDenormal = std::numeric_limits<float>::denorm_min();
// glibc's and oneDNN's tanhf and expf are each within 2 ulps of the true value.
constexpr int64_t kForwardUlps = 4;

// Random values over the range where tanh and sigmoid saturate, then the special ones.
std::vector<float> inputs() {
  std::vector<float> x = random_floats(4000, 11, -12.0f, 12.0f);
  x.insert(x.end(), {kNan, -kNan, 0.0f, -0.0f, kInf, -kInf, kDenormal, -kDenormal, 1e-8f, -1e-8f,
                     88.0f, -88.0f, -90.0f, -104.0f, 9.0f, -9.0f});
  return x;
}

std::vector<float> forward(Activation kind, const std::vector<float>& x) {
  std::vector<float> y;
  for (float v : x) y.push_back(kernel_math::activation_forward(kind, v));
  return y;
}

std::vector<float> backward(Activation kind, const std::vector<float>& y,
                            const std::vector<float>& dy) {
  std::vector<float> dx;
  for (size_t i = 0; i < y.size(); ++i) {
    dx.push_back(kernel_math::activation_backward(kind, y[i], dy[i]));
  }
  return dx;
}

// The CPU's outputs for `x` as y, with NaN, infinite and signed-zero outputs mixed in (backward
// must take whatever y it is given), and gradients with NaN and signed zeros among them.
struct BackwardInputs {
  std::vector<float> y, dy;
};
BackwardInputs backward_inputs(const std::vector<float>& cpu_y) {
  BackwardInputs in{cpu_y, random_floats(static_cast<int64_t>(cpu_y.size()), 12, -3.0f, 3.0f)};
  const std::vector<float> special = {kNan, -kNan, 0.0f, -0.0f, kInf, -kInf, -1.0f, 1.0f};
  for (size_t i = 0; i < special.size(); ++i) {
    in.y[i] = special[i];
    in.dy[special.size() + i] = special[i];
  }
  return in;
}

struct CpuActivation {
  std::vector<float> x, y, dx;
  BackwardInputs back;
};
CpuActivation run_cpu(Activation kind) {
  CpuActivation r{inputs(), {}, {}, {}};
  CpuLayer layer(ActivationSpec{kind}, Shape{1, static_cast<int64_t>(r.x.size())});
  r.y = layer.forward(r.x);
  r.back = backward_inputs(r.y);
  r.dx = layer.backward(r.x, r.back.y, r.back.dy);
  return r;
}

TEST(KernelMathActivation, ReluIsTheCpuKernelBitForBit) {
  const CpuActivation cpu = run_cpu(Activation::kRelu);
  EXPECT_EQ(bit_mismatches(forward(Activation::kRelu, cpu.x), cpu.y), "");
  EXPECT_EQ(bit_mismatches(backward(Activation::kRelu, cpu.back.y, cpu.back.dy), cpu.dx), "");
}

// The CPU kernel's rules, spelled out: NaN and -0 map to +0, a NaN or negative gradient passes
// where y > 0 (or y is NaN) and is multiplied by 0 elsewhere.
TEST(KernelMathActivation, ReluMapsNanToZeroAsTheCpuKernel) {
  EXPECT_EQ(bit_mismatches(forward(Activation::kRelu, {kNan, -kNan, -0.0f, -2.0f, 3.0f}),
                           {0.0f, 0.0f, 0.0f, 0.0f, 3.0f}),
            "");
  EXPECT_EQ(bit_mismatches(backward(Activation::kRelu, {0.0f, 0.0f, -1.0f, 2.0f, kNan},
                                    {kNan, -2.0f, 5.0f, -3.0f, 4.0f}),
                           {kNan, -0.0f, 0.0f, -3.0f, 4.0f}),
            "");
}

TEST(KernelMathActivation, TanhIsTheCpuKernelWithinUlpsAndItsBackwardBitForBit) {
  const CpuActivation cpu = run_cpu(Activation::kTanh);
  EXPECT_EQ(ulp_mismatches(forward(Activation::kTanh, cpu.x), cpu.y, kForwardUlps), "");
  EXPECT_TRUE(std::isnan(kernel_math::activation_forward(Activation::kTanh, kNan)));
  // oneDNN forms 1 - y² with one fused multiply-add where the CPU has FMA (AVX2, AVX-512).
  if (!__builtin_cpu_supports("fma")) GTEST_SKIP() << "this CPU has no FMA";
  EXPECT_EQ(bit_mismatches(backward(Activation::kTanh, cpu.back.y, cpu.back.dy), cpu.dx), "");
}

TEST(KernelMathActivation, SigmoidIsTheCpuKernelWithinUlpsAndItsBackwardBitForBit) {
  const CpuActivation cpu = run_cpu(Activation::kSigmoid);
  EXPECT_EQ(ulp_mismatches(forward(Activation::kSigmoid, cpu.x), cpu.y, kForwardUlps), "");
  EXPECT_TRUE(std::isnan(kernel_math::activation_forward(Activation::kSigmoid, kNan)));
  EXPECT_EQ(bit_mismatches(backward(Activation::kSigmoid, cpu.back.y, cpu.back.dy), cpu.dx), "");
}

}  // namespace
}  // namespace scalescope::kernel_math_test
