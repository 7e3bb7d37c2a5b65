// kernel_math/pool_math.h against the CPU's pooling kernels, bit for bit: max pooling's windows,
// its NaN rule and the element that receives a window's gradient when several tie (the CPU's
// loops), recorded by forward as an offset in the window, and global average pooling (oneDNN).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/random.h"
#include "models/kernel_math/pool_math.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

// A NaN of another payload than kNan: the two are different bits.
float other_nan() {
  return std::bit_cast<float>(0x7fc00001u);
}

// Values from a small set, so that most windows hold ties: equal values, +0 and -0 (equal but
// different bits) and NaNs of two payloads.
std::vector<float> tied_values(int64_t n, uint64_t seed) {
  const std::vector<float> pool = {1.0f, 1.0f, 1.0f, 0.5f, 0.0f, -0.0f, -1.0f, kNan, other_nan()};
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = pool[rng.below(pool.size())];
  return v;
}

// Padding included (PyTorch's, at most pool / 2): window o spans o·stride - pad onwards.
TEST(KernelMathPool, WindowsCoveringAnInputAreExactlyThoseThatContainIt) {
  for (int64_t in = 1; in <= 12; ++in) {
    for (int64_t pool = 1; pool <= 5; ++pool) {
      for (int64_t pad = 0; pad <= pool / 2; ++pad) {
        for (int64_t stride = 1; stride <= 4; ++stride) {
          if (in + 2 * pad < pool) continue;
          const int64_t out = (in + 2 * pad - pool) / stride + 1;
          for (int64_t i = 0; i < in; ++i) {
            const km::IndexRange r =
                km::pool_windows_covering(i, pool, km::PlainDivider{stride}, out, pad);
            const km::IndexRange fast =
                km::pool_windows_covering(i, pool, km::IntDivider{stride}, out, pad);
            ASSERT_TRUE(fast.begin == r.begin && fast.end == r.end);
            for (int64_t o = 0; o < out; ++o) {
              const int64_t start = o * stride - pad;
              const bool contains = start <= i && i < start + pool;
              ASSERT_EQ(o >= r.begin && o < r.end, contains)
                  << "in " << in << " pool " << pool << " stride " << stride << " pad " << pad
                  << " i " << i << " window " << o;
            }
          }
        }
      }
    }
  }
}

// The part of a padded window inside the image: never empty, and the whole window unpadded.
TEST(KernelMathPool, APaddedWindowIsItsPartInsideTheImage) {
  const km::PoolShape s{1, 6, 5, 1, 3, 3, 3, 2, 1};
  const km::PoolWindow first = km::pool_window(s, 0, 0);
  EXPECT_EQ(first.h0, 0);
  EXPECT_EQ(first.h1, 2);
  EXPECT_EQ(first.w0, 0);
  EXPECT_EQ(first.w1, 2);
  const km::PoolWindow last = km::pool_window(s, 2, 2);
  EXPECT_EQ(last.h0, 3);
  EXPECT_EQ(last.h1, 6);  // (6 + 2 - 3) / 2 + 1 = 3 rows of windows; the last ends inside
  EXPECT_EQ(last.w0, 3);
  EXPECT_EQ(last.w1, 5);  // hangs over the right edge by one
  const km::PoolShape unpadded{1, 6, 5, 1, 2, 2, 3, 2, 0};
  const km::PoolWindow whole = km::pool_window(unpadded, 1, 1);
  EXPECT_EQ(whole.h0, 2);
  EXPECT_EQ(whole.h1, 5);
  EXPECT_EQ(whole.w0, 2);
  EXPECT_EQ(whole.w1, 5);
}

// Padding is -inf in PyTorch: a window of -inf and padding takes -inf, from the image.
TEST(KernelMathPool, PaddingNeverWins) {
  const float inf = std::numeric_limits<float>::infinity();
  const km::PoolShape s{1, 2, 2, 1, 1, 1, 3, 2, 1};
  const std::vector<float> x = {-inf, -inf, -inf, -5.0f};
  EXPECT_EQ(km::max_pool_window_max(s, x.data(), 0, 0, 0, 0), -5.0f);
  const std::vector<float> all = {-inf, -inf, -inf, -inf};
  const float y = km::max_pool_window_max(s, all.data(), 0, 0, 0, 0);
  EXPECT_EQ(y, -inf);
  const km::Position p = km::max_pool_window_argmax(s, all.data(), 0, 0, 0, 0, y);
  EXPECT_EQ(p.h, 0);
  EXPECT_EQ(p.w, 0);
  // What forward records: offsets in the 3x3 window from its corner at (-1, -1), padding
  // included; none for a value the window does not hold.
  EXPECT_EQ(km::max_pool_window_choice(s, all.data(), 0, 0, 0, 0, y), 4);
  EXPECT_EQ(km::max_pool_window_choice(s, x.data(), 0, 0, 0, 0, -5.0f), 8);
  EXPECT_EQ(km::max_pool_window_choice(s, x.data(), 0, 0, 0, 0, 7.0f), km::kNoChoice);
}

// One sample, one channel, a 2×2 window over a 2×2 image: the first bit-equal element wins.
TEST(KernelMathPool, ATieGivesTheGradientToTheFirstEqualElement) {
  const km::PoolShape s{1, 2, 2, 1, 1, 1, 2, 1};
  const auto argmax = [&](std::vector<float> x) {
    const km::Position p = km::max_pool_window_argmax(
        s, x.data(), 0, 0, 0, 0, km::max_pool_window_max(s, x.data(), 0, 0, 0, 0));
    return p.h * 2 + p.w;
  };
  EXPECT_EQ(argmax({1.0f, 3.0f, 3.0f, 3.0f}), 1);
  EXPECT_EQ(argmax({2.0f, 2.0f, 2.0f, 2.0f}), 0);
  EXPECT_EQ(argmax({-0.0f, 0.0f, -1.0f, -0.0f}), 0);  // the maximum is the first zero, -0
  EXPECT_EQ(argmax({0.0f, kNan, 5.0f, 1.0f}), 1);     // NaN wins
  // The maximum is the last NaN; the gradient goes to the first element with its bits.
  EXPECT_EQ(argmax({1.0f, other_nan(), 2.0f, kNan}), 3);
  EXPECT_EQ(argmax({kNan, 1.0f, other_nan(), kNan}), 0);
}

struct PoolCase {
  MaxPool2DSpec spec;
  Shape in;
};

// The GPU kernels' decomposition: one output element per thread forward, recording its window's
// choice, one input element per thread backward, reading the choices.
void expect_max_pool_matches_cpu(const PoolCase& c, const std::vector<float>& x) {
  CpuLayer cpu(c.spec, c.in);
  const Shape& o = cpu.out_shape();
  const km::PoolShape s{c.in[0], c.in[1],     c.in[2],       c.in[3],   o[1],
                        o[2],    c.spec.pool, c.spec.stride, c.spec.pad};
  std::vector<float> y(static_cast<size_t>(o.numel()));
  std::vector<uint16_t> choices(y.size());
  const auto plain = km::pool_dividers<km::PlainDivider>(s);
  const auto fast = km::pool_dividers<km::IntDivider>(s);
  for (size_t i = 0; i < y.size(); ++i) {
    const auto at = static_cast<int64_t>(i);
    const km::PoolOutput out = km::max_pool_output(s, plain, x.data(), at, true);
    // With IntDivider's division (the GPU's below 2^31 elements), and without recording.
    const km::PoolOutput fast_out = km::max_pool_output(s, fast, x.data(), at, true);
    ASSERT_EQ(std::bit_cast<uint32_t>(fast_out.maximum), std::bit_cast<uint32_t>(out.maximum));
    ASSERT_EQ(fast_out.choice, out.choice) << "window " << i;
    ASSERT_EQ(km::max_pool_output(s, fast, x.data(), at, false).choice, km::kNoChoice);
    y[i] = out.maximum;
    choices[i] = out.choice;
    const km::Nhwc p = km::nhwc_coords(at, s.out_h, s.out_w, s.channels);
    // An offset inside the window, of an element inside the image.
    ASSERT_LT(choices[i], s.pool * s.pool) << "window " << i;
    const int64_t h = p.h * s.stride - s.pad + choices[i] / s.pool;
    const int64_t w = p.w * s.stride - s.pad + choices[i] % s.pool;
    ASSERT_TRUE(h >= 0 && h < s.in_h && w >= 0 && w < s.in_w) << "window " << i;
  }
  const std::vector<float> cpu_y = cpu.forward(x);
  EXPECT_EQ(bit_mismatches(y, cpu_y), "") << describe(c.spec) << " forward";
  // NaNs included: backward finds the maximum by its bits.
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(cpu_y[i])) << "y[" << i << "]";
  }

  // Gradients of exponents 2^-12 to 2^12 apart, so that sums of several of them round and the
  // order of additions shows in the bits.
  std::vector<float> dy = random_floats(o.numel(), 41);
  for (size_t i = 0; i < dy.size(); ++i)
    dy[i] = std::ldexp(dy[i], static_cast<int>(i * 7 % 25) - 12);
  const std::vector<float> cpu_dx = cpu.backward(x, cpu_y, dy);
  // With either division: the GPU takes IntDivider's below 2^31 elements.
  std::vector<float> dx(x.size()), fast_dx(x.size());
  for (size_t i = 0; i < dx.size(); ++i) {
    const auto at = static_cast<int64_t>(i);
    dx[i] = km::max_pool_input_grad(s, plain, choices.data(), dy.data(), at);
    fast_dx[i] = km::max_pool_input_grad(s, fast, choices.data(), dy.data(), at);
  }
  EXPECT_EQ(bit_mismatches(dx, cpu_dx), "") << describe(c.spec) << " backward";
  EXPECT_EQ(bit_mismatches(fast_dx, cpu_dx), "") << describe(c.spec) << " backward, IntDivider";
}

std::vector<PoolCase> pool_cases() {
  return {
      {{2, 2}, Shape{2, 5, 7, 3}},   // odd sizes: the last row and column belong to no window
      {{3, 2}, Shape{2, 7, 6, 2}},   // overlapping windows
      {{2, 1}, Shape{3, 4, 4, 1}},   // overlapping, stride 1
      {{3, 1}, Shape{1, 6, 5, 2}},   // every inner pixel in nine windows
      {{2, 3}, Shape{2, 8, 7, 2}},   // gaps between windows
      {{2, 2}, Shape{1, 4, 6, 70}},  // more channels than the CPU's chunk of 64
      // PyTorch's padding: border windows partly outside the image, overlapping or not.
      {{3, 2, 1}, Shape{2, 8, 6, 3}},   // ImageNet ResNets' stem pool, even sizes
      {{3, 2, 1}, Shape{2, 7, 5, 2}},   // odd sizes
      {{3, 1, 1}, Shape{1, 5, 4, 2}},   // "same"-sized output
      {{2, 2, 1}, Shape{2, 5, 4, 2}},   // non-overlapping windows with padding
      {{3, 3, 1}, Shape{1, 7, 8, 2}},   // gaps
      {{5, 2, 2}, Shape{1, 6, 7, 2}},   // padding two
      {{3, 2, 1}, Shape{1, 4, 5, 70}},  // chunks of channels
      {{1, 1}, Shape{1, 3, 4, 2}},      // windows of one pixel
      {{1, 2}, Shape{1, 5, 4, 2}},      // ... and a gap between them
      {{2, 2}, Shape{1, 3, 2, 2}},      // one output row and column
      {{3, 2, 1}, Shape{1, 2, 3, 2}},   // one output row
      {{4, 2}, Shape{1, 7, 6, 2}},      // larger than 3×3, two windows an axis
      {{5, 3, 2}, Shape{1, 8, 9, 2}},
      {{4, 4}, Shape{1, 8, 9, 2}},
  };
}

TEST(KernelMathPool, MaxPoolIsTheCpuKernelBitForBitWithTiesAndNans) {
  for (const PoolCase& c : pool_cases()) {
    expect_max_pool_matches_cpu(c, tied_values(c.in.numel(), 42));
  }
}

TEST(KernelMathPool, MaxPoolIsTheCpuKernelBitForBitOnRandomValues) {
  for (const PoolCase& c : pool_cases()) {
    expect_max_pool_matches_cpu(c, random_floats(c.in.numel(), 43));
  }
}

TEST(KernelMathPool, GlobalAveragePoolIsTheCpuKernelBitForBit) {
  for (const Shape& in : {Shape{2, 3, 5, 4}, Shape{3, 7, 7, 64}, Shape{4, 5, 3, 17}}) {
    CpuLayer cpu(GlobalAvgPoolSpec{}, in);
    const int64_t pixels = in[1] * in[2];
    const std::vector<float> x = random_floats(in.numel(), 44);
    std::vector<float> y;
    for (int64_t n = 0; n < in[0]; ++n) {
      for (int64_t c = 0; c < in[3]; ++c) {
        y.push_back(km::global_avg_pool_mean(x.data(), pixels, in[3], n, c));
      }
    }
    const std::vector<float> cpu_y = cpu.forward(x);
    EXPECT_EQ(bit_mismatches(y, cpu_y), "") << in.to_string();

    const std::vector<float> dy = random_floats(in[0] * in[3], 45);
    // With either division: the GPU takes IntDivider's below 2^31 elements.
    std::vector<float> dx, fast_dx;
    const km::IntDivider by_channels(in[3]), by_pixels(pixels);
    for (int64_t i = 0; i < in.numel(); ++i) {
      dx.push_back(km::global_avg_pool_grad(dy.data(), pixels, in[3], km::PlainDivider{in[3]},
                                            km::PlainDivider{pixels}, i));
      fast_dx.push_back(
          km::global_avg_pool_grad(dy.data(), pixels, in[3], by_channels, by_pixels, i));
    }
    const std::vector<float> cpu_dx = cpu.backward(x, cpu_y, dy);
    EXPECT_EQ(bit_mismatches(dx, cpu_dx), "") << in.to_string();
    EXPECT_EQ(bit_mismatches(fast_dx, cpu_dx), "") << in.to_string() << ", IntDivider";
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
