// kernel_math/activation_math.h against the CPU's activation kernels (oneDNN eltwise) on the same
// inputs, special values included: ReLU and the backward of ReLU, tanh and sigmoid bit for bit,
// tanh and sigmoid forward within a few ulps (each side evaluates its own approximation of tanh
// and exp); GELU, both ways, the CPU kernel's bits and close to a float64 evaluation of PyTorch's
// formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "models/cpu/cpu_kernels.h"
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

std::vector<float> backward(Activation kind, const std::vector<float>& x,
                            const std::vector<float>& y, const std::vector<float>& dy) {
  std::vector<float> dx;
  for (size_t i = 0; i < y.size(); ++i) {
    dx.push_back(kernel_math::activation_backward(kind, x[i], y[i], dy[i]));
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
  EXPECT_EQ(bit_mismatches(backward(Activation::kRelu, cpu.x, cpu.back.y, cpu.back.dy), cpu.dx),
            "");
}

// The CPU kernel's rules, spelled out: NaN and -0 map to +0, a NaN or negative gradient passes
// where y > 0 (or y is NaN) and is multiplied by 0 elsewhere.
TEST(KernelMathActivation, ReluMapsNanToZeroAsTheCpuKernel) {
  EXPECT_EQ(bit_mismatches(forward(Activation::kRelu, {kNan, -kNan, -0.0f, -2.0f, 3.0f}),
                           {0.0f, 0.0f, 0.0f, 0.0f, 3.0f}),
            "");
  EXPECT_EQ(
      bit_mismatches(backward(Activation::kRelu, std::vector<float>(5, 1.0f),
                              {0.0f, 0.0f, -1.0f, 2.0f, kNan}, {kNan, -2.0f, 5.0f, -3.0f, 4.0f}),
                     {kNan, -0.0f, 0.0f, -3.0f, 4.0f}),
      "");
}

// A graph's add with its ReLU fused in (kernels.h's add_into, accumulate_relu_gradient_into):
// the CPU's ops give the separate ReLU layer's bits both ways, specials included, and so do
// kernel_math's functions, which the GPU's kernels run.
TEST(KernelMathActivation, AnAddWithItsReluIsTheReluLayerBitForBit) {
  const CpuActivation relu = run_cpu(Activation::kRelu);
  const auto n = static_cast<int64_t>(relu.x.size());
  // relu.x = a + b exactly: b = 0 keeps NaN, infinities and signed zeros as they are.
  const std::vector<float> zeros(relu.x.size(), 0.0f);
  std::vector<float> out(relu.x.size());
  add_into_cpu(out.data(), relu.x.data(), zeros.data(), n, true);
  EXPECT_EQ(bit_mismatches(out, relu.y), "");
  for (size_t i = 0; i < out.size(); ++i) out[i] = kernel_math::add_relu_forward(relu.x[i], 0.0f);
  EXPECT_EQ(bit_mismatches(out, relu.y), "");
  add_into_cpu(out.data(), relu.x.data(), relu.x.data(), n, false);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(bit_mismatches({out[i]}, {relu.x[i] * 2}), "");

  const kernel_math::ReluOutput kept{relu.back.y.data()};
  std::vector<float> acc(relu.x.size(), 7.0f);
  accumulate_relu_gradient_cpu(acc.data(), relu.back.dy.data(), kept, n, true);
  EXPECT_EQ(bit_mismatches(acc, relu.dx), "");
  for (size_t i = 0; i < acc.size(); ++i)
    acc[i] = kernel_math::relu_gradient(relu.back.y[i], relu.back.dy[i]);
  EXPECT_EQ(bit_mismatches(acc, relu.dx), "");
  std::vector<float> sum(relu.x.size(), 0.25f);
  accumulate_relu_gradient_cpu(sum.data(), relu.back.dy.data(), kept, n, false);
  for (size_t i = 0; i < sum.size(); ++i) {
    ASSERT_EQ(bit_mismatches({sum[i]}, {0.25f + relu.dx[i]}), "") << i;
  }
}

// Under bf16 and fp16 the add writes its output's saved copy in its own pass (kernels.h's
// add_into with `saved`): the fp32 output as without, and the copy to_half of each value (the
// model's save's bits, kernel_math::HalfRow's on a GPU), across the CPU's blocks of 4096 values.
TEST(KernelMathActivation, AnAddWritesItsSavedCopyAsTheSaveWould) {
  std::vector<float> a = random_floats(3 * 4096 + 17, 5, -70000.0f, 70000.0f);
  const std::vector<float> b = random_floats(a.size(), 6, -2.0f, 2.0f);
  a.insert(a.begin(), {kNan, 0.0f, -0.0f, kInf, -kInf, kDenormal, 65520.0f, 1.0f + 0x1p-9f});
  a.resize(b.size());
  const auto n = static_cast<int64_t>(a.size());
  for (const auto format : {kernel_math::HalfFormat::kBf16, kernel_math::HalfFormat::kFp16}) {
    for (const bool relu : {false, true}) {
      SCOPED_TRACE(fmt::format("{} relu {}",
                               format == kernel_math::HalfFormat::kBf16 ? "bf16" : "fp16", relu));
      std::vector<float> plain(a.size());
      add_into_cpu(plain.data(), a.data(), b.data(), n, relu);
      std::vector<float> out(a.size());
      std::vector<uint16_t> saved(a.size(), 0x7fff);
      add_into_cpu(out.data(), a.data(), b.data(), n, relu, {saved.data(), format});
      EXPECT_EQ(bit_mismatches(out, plain), "");
      std::vector<float> rounded, want;
      for (size_t i = 0; i < a.size(); ++i) {
        rounded.push_back(kernel_math::from_half(saved[i], format));
        want.push_back(kernel_math::from_half(kernel_math::to_half(plain[i], format), format));
      }
      EXPECT_EQ(bit_mismatches(rounded, want), "");
    }
  }
}

// Under bf16 and fp16 the mask reads the saved 16-bit copy of the ReLU's output as it is: the
// bits of the same op on the values a restore gives, NaNs and signed zeros included.
TEST(KernelMathActivation, TheAddsReluMaskReadsASavedCopyAsItsRestore) {
  const CpuActivation relu = run_cpu(Activation::kRelu);
  const auto n = static_cast<int64_t>(relu.x.size());
  for (const auto format : {kernel_math::HalfFormat::kBf16, kernel_math::HalfFormat::kFp16}) {
    std::vector<uint16_t> saved;
    std::vector<float> restored;
    for (const float y : relu.back.y) {
      saved.push_back(kernel_math::to_half(y, format));
      restored.push_back(kernel_math::from_half(saved.back(), format));
    }
    for (const bool first : {true, false}) {
      std::vector<float> want(relu.x.size(), 0.5f);
      std::vector<float> got = want;
      accumulate_relu_gradient_cpu(want.data(), relu.back.dy.data(),
                                   kernel_math::ReluOutput{restored.data()}, n, first);
      accumulate_relu_gradient_cpu(got.data(), relu.back.dy.data(),
                                   kernel_math::ReluOutput{nullptr, saved.data(), format}, n,
                                   first);
      EXPECT_EQ(bit_mismatches(got, want), "") << (first ? "first" : "adding");
    }
  }
}

TEST(KernelMathActivation, TanhIsTheCpuKernelWithinUlpsAndItsBackwardBitForBit) {
  const CpuActivation cpu = run_cpu(Activation::kTanh);
  EXPECT_EQ(ulp_mismatches(forward(Activation::kTanh, cpu.x), cpu.y, kForwardUlps), "");
  EXPECT_TRUE(std::isnan(kernel_math::activation_forward(Activation::kTanh, kNan)));
  // oneDNN forms 1 - y² with one fused multiply-add where the CPU has FMA (AVX2, AVX-512).
  if (!__builtin_cpu_supports("fma")) GTEST_SKIP() << "this CPU has no FMA";
  EXPECT_EQ(bit_mismatches(backward(Activation::kTanh, cpu.x, cpu.back.y, cpu.back.dy), cpu.dx),
            "");
}

TEST(KernelMathActivation, SigmoidIsTheCpuKernelWithinUlpsAndItsBackwardBitForBit) {
  const CpuActivation cpu = run_cpu(Activation::kSigmoid);
  EXPECT_EQ(ulp_mismatches(forward(Activation::kSigmoid, cpu.x), cpu.y, kForwardUlps), "");
  EXPECT_TRUE(std::isnan(kernel_math::activation_forward(Activation::kSigmoid, kNan)));
  EXPECT_EQ(bit_mismatches(backward(Activation::kSigmoid, cpu.x, cpu.back.y, cpu.back.dy), cpu.dx),
            "");
}

// Failures where |got - want| > tolerance (per element), or one is NaN and the other not; ""
// if none.
std::string close_mismatches(const std::vector<float>& got, const std::vector<double>& want,
                             const std::vector<double>& tolerance) {
  std::string report;
  for (size_t i = 0; i < got.size() && report.size() < 800; ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    if (std::isnan(got[i]) != std::isnan(want[i]) || diff > tolerance[i]) {
      report += fmt::format("[{}] = {}, expected {} (difference {})\n", i, got[i], want[i], diff);
    }
  }
  return report;
}

// GELU's inputs: where it bends, where its tails flatten, and the signed zeros and NaN (an
// infinity meets 0·inf in the formula, in PyTorch's as here).
std::vector<float> gelu_inputs() {
  std::vector<float> x = random_floats(4000, 13, -10.0f, 10.0f);
  const std::vector<float> near = random_floats(2000, 14, -3.0f, 3.0f);
  x.insert(x.end(), near.begin(), near.end());
  x.insert(x.end(), {0.0f, -0.0f, kNan, kDenormal, -kDenormal, 1e-8f, -1e-8f, -0.75f, 5.0f});
  return x;
}

// PyTorch's definition in float64: y = 0.5·x·(1 + tanh(k·(x + 0.044715·x³))) and dy/dx.
double gelu64(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double gelu64_derivative(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

TEST(KernelMathActivation, GeluIsPyTorchsFormulaAndTheCpuKernelsBits) {
  const std::vector<float> x = gelu_inputs();
  const std::vector<float> dy = random_floats(static_cast<int64_t>(x.size()), 15, -3.0f, 3.0f);
  std::vector<double> want_y, want_dx;
  for (size_t i = 0; i < x.size(); ++i) {
    want_y.push_back(gelu64(x[i]));
    want_dx.push_back(gelu64_derivative(x[i]) * dy[i]);
  }
  // Float rounding inside the formula (x³, then 1 + tanh near -1) is relative to x's size, so
  // the bounds are a few float ulps of 1 times |x| + 1.
  std::vector<double> forward_tolerance, backward_tolerance;
  for (float v : x) {
    const double scale = std::isnan(v) ? 0.0 : (std::abs(static_cast<double>(v)) + 1.0) * 6e-8;
    forward_tolerance.push_back(4.0 * scale);
    backward_tolerance.push_back(4.0 * scale * 3.0);  // |dy| <= 3
  }
  const std::vector<float> y = forward(Activation::kGelu, x);
  EXPECT_EQ(close_mismatches(y, want_y, forward_tolerance), "");
  EXPECT_EQ(close_mismatches(backward(Activation::kGelu, x, y, dy), want_dx, backward_tolerance),
            "");
  EXPECT_EQ(bit_mismatches(forward(Activation::kGelu, {0.0f, -0.0f, 1e30f}), {0.0f, -0.0f, 1e30f}),
            "");

  // The CPU kernel runs these functions in its vectorised loops: the same bits.
  CpuLayer layer(ActivationSpec{Activation::kGelu}, Shape{1, static_cast<int64_t>(x.size())});
  const std::vector<float> cpu_y = layer.forward(x);
  EXPECT_EQ(bit_mismatches(cpu_y, y), "");
  EXPECT_EQ(bit_mismatches(layer.backward(x, cpu_y, dy), backward(Activation::kGelu, x, y, dy)),
            "");
}

// Where float runs out: σ(2u) is 0 below x ≈ -10.4 (exp(−2u) overflows to +inf), where the
// forward is -0 and the gradient 0 rather than NaN (inf · 0), as PyTorch's float formula gives;
// above, the tails are x and 1.
TEST(KernelMathActivation, GelusTailsStayFinite) {
  for (const float x : {-11.0f, -30.0f, -1e10f}) {
    EXPECT_EQ(kernel_math::gelu_forward(x), 0.0f) << x;
    EXPECT_TRUE(std::signbit(kernel_math::gelu_forward(x))) << x;
    EXPECT_EQ(kernel_math::gelu_backward(x, 1.0f), 0.0f) << x;
  }
  for (const float x : {11.0f, 30.0f, 1e10f}) {
    EXPECT_EQ(kernel_math::gelu_forward(x), x) << x;
    EXPECT_EQ(kernel_math::gelu_backward(x, 2.0f), 2.0f) << x;
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
