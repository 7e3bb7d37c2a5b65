// kernel_math/half_math.h: fp16 and bf16 conversions round to nearest even (against the
// compiler's _Float16 and a nearest-neighbour search over the format's values), every 16-bit
// value survives a round trip, and a compressed all-reduce of pre-divided gradients stays
// within the format's stated error of the float64 mean.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "models/kernel_math/half_math.h"
#include "tests/models/kernel_math/half_probes.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;
using km::HalfFormat;

bool is_nan_half(uint16_t h, HalfFormat f) {
  return std::isnan(km::from_half(h, f));
}

// The nearest bf16 to `x`, ties to the even one: of the two truncations around x. Beyond the
// largest finite value, infinity stands where 2^128 would (IEEE's overflow rule).
uint16_t nearest_bf16(float x) {
  const uint32_t u = km::float_bits(x);
  if (std::isinf(x)) return static_cast<uint16_t>(u >> 16);
  const auto below = static_cast<uint16_t>(u >> 16);  // toward zero
  const auto above = static_cast<uint16_t>(below + 1);
  const double lo = std::abs(static_cast<double>(x) - km::bf16_to_float(below));
  double above_value = km::bf16_to_float(above);
  if (std::isinf(above_value)) above_value = std::copysign(std::ldexp(1.0, 128), x);
  const double hi = std::abs(above_value - x);
  if (lo != hi) return lo < hi ? below : above;
  return (below & 1u) == 0u ? below : above;
}

TEST(HalfMath, EverySixteenBitValueRoundTrips) {
  for (HalfFormat f : {HalfFormat::kFp16, HalfFormat::kBf16}) {
    for (uint32_t h = 0; h <= 0xffffu; ++h) {
      const auto half = static_cast<uint16_t>(h);
      if (is_nan_half(half, f)) {
        EXPECT_TRUE(is_nan_half(km::to_half(km::from_half(half, f), f), f)) << h;
        continue;
      }
      ASSERT_EQ(km::to_half(km::from_half(half, f), f), half) << h;
    }
  }
}

TEST(HalfMath, Bf16RoundsToNearestEven) {
  for (float x : testing_util::half_probe_floats()) {
    ASSERT_EQ(km::float_to_bf16(x), nearest_bf16(x)) << x;
  }
  EXPECT_TRUE(std::isnan(km::bf16_to_float(km::float_to_bf16(NAN))));
  // The largest floats round past bf16's largest finite value to infinity.
  EXPECT_EQ(km::bf16_to_float(km::float_to_bf16(3.4e38f)), INFINITY);
}

#if defined(__FLT16_MAX__)
TEST(HalfMath, Fp16RoundsAsTheCompilersFloat16) {
  for (float x : testing_util::half_probe_floats()) {
    const _Float16 reference = static_cast<_Float16>(x);
    uint16_t expected;
    std::memcpy(&expected, &reference, sizeof expected);
    ASSERT_EQ(km::float_to_fp16(x), expected) << x;
  }
}
#endif

// Every fp16 value widens to the float it denotes: sign · 2^(e-15) · (1 + f/1024) for normals,
// sign · f · 2^-24 for zeros and subnormals (ldexp in double, exact), and infinities and NaNs
// keep their sign and fraction bits (a NaN's payload too).
TEST(HalfMath, EveryFp16ValueWidensToTheFloatItDenotes) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint32_t sign = h >> 15, exponent = (h >> 10) & 0x1fu, fraction = h & 0x3ffu;
    const uint32_t got = km::float_bits(km::fp16_to_float(static_cast<uint16_t>(h)));
    if (exponent == 0x1fu) {
      ASSERT_EQ(got, (sign << 31) | 0x7f800000u | (fraction << 13)) << h;
      continue;
    }
    const double magnitude =
        exponent == 0 ? std::ldexp(static_cast<double>(fraction), -24)
                      : std::ldexp(1.0 + fraction / 1024.0, static_cast<int>(exponent) - 15);
    const auto want = static_cast<float>(sign != 0 ? -magnitude : magnitude);
    ASSERT_EQ(got, km::float_bits(want)) << h;
#if defined(__FLT16_MAX__)
    _Float16 reference;
    const auto bits = static_cast<uint16_t>(h);
    std::memcpy(&reference, &bits, sizeof reference);
    ASSERT_EQ(got, km::float_bits(static_cast<float>(reference))) << h;
#endif
  }
}

TEST(HalfMath, Fp16EdgesOfTheRange) {
  EXPECT_EQ(km::float_to_fp16(65504.0f), 0x7bffu);  // largest finite
  EXPECT_EQ(km::float_to_fp16(65519.99f), 0x7bffu);
  EXPECT_EQ(km::float_to_fp16(65520.0f), 0x7c00u);  // the tie goes to the even: infinity
  EXPECT_EQ(km::float_to_fp16(-1e9f), 0xfc00u);
  EXPECT_EQ(km::float_to_fp16(5.9604645e-08f), 0x0001u);   // 2^-24, the smallest subnormal
  EXPECT_EQ(km::float_to_fp16(2.9802322e-08f), 0x0000u);   // 2^-25: the tie goes to zero
  EXPECT_EQ(km::float_to_fp16(2.98023259e-08f), 0x0001u);  // just above it
  EXPECT_EQ(km::float_to_fp16(-0.0f), 0x8000u);
  EXPECT_EQ(km::fp16_to_float(0x0001u), 5.9604645e-08f);
  EXPECT_EQ(km::fp16_to_float(0x03ffu), 1023 * 5.9604645e-08f);
  EXPECT_TRUE(std::isnan(km::fp16_to_float(km::float_to_fp16(NAN))));
}

// A ring all-reduce's sums in one element: replica r's compressed value added to the running
// sum in rank order, each sum rounded to the format; the result decompressed.
float compressed_mean(const std::vector<float>& grads, HalfFormat f) {
  const int n = static_cast<int>(grads.size());
  uint16_t sum = km::compress_gradient(grads[0], n, f);
  for (int r = 1; r < n; ++r) sum = km::half_sum(sum, km::compress_gradient(grads[r], n, f), f);
  return km::from_half(sum, f);
}

// |computed - mean| <= γ(n+1) Σ|g|/n + (n+1) s/2, γ(k) = k u / (1 - k u): n roundings of
// the inputs and n - 1 of the partial sums, each at most u relative (the float division and
// float additions before them are exact to far below u) or, among fp16's subnormals, half
// their spacing s = 2^-24 absolute.
TEST(HalfMath, CompressedAllReduceIsWithinTheFormatsErrorOfTheFloat64Mean) {
  std::mt19937 rng(11);
  std::normal_distribution<float> gradient(0.0f, 1e-3f);
  for (HalfFormat f : {HalfFormat::kFp16, HalfFormat::kBf16}) {
    const double u = km::unit_roundoff(f);
    for (int n : {2, 3, 8}) {
      double worst = 0.0;  // of |error| / bound
      for (int element = 0; element < 5000; ++element) {
        std::vector<float> grads(static_cast<size_t>(n));
        double mean = 0.0;
        double magnitude = 0.0;
        for (float& g : grads) {
          g = gradient(rng);
          mean += static_cast<double>(g) / n;
          magnitude += std::abs(static_cast<double>(g)) / n;
        }
        const double subnormal = f == HalfFormat::kFp16 ? std::ldexp(1.0, -25) : 0.0;
        const double bound = (n + 1) * u / (1 - (n + 1) * u) * magnitude + (n + 1) * subnormal;
        const double error = std::abs(compressed_mean(grads, f) - mean);
        ASSERT_LE(error, bound) << "n " << n << " element " << element;
        worst = std::max(worst, error / bound);
      }
      // The bound is not vacuous: some elements come within a few times of it.
      EXPECT_GT(worst, 0.05) << "n " << n;
    }
  }
}

TEST(HalfMath, PreDivisionKeepsAnFp16SumFinite) {
  // Eight replicas' gradients of 2^15: their sum overflows fp16 (largest 65504), their
  // mean does not (and every partial sum of the divided values is exact).
  const std::vector<float> grads(8, 32768.0f);
  uint16_t undivided = km::float_to_fp16(grads[0]);
  for (size_t r = 1; r < grads.size(); ++r) {
    undivided = km::half_sum(undivided, km::float_to_fp16(grads[r]), HalfFormat::kFp16);
  }
  EXPECT_EQ(km::fp16_to_float(undivided), INFINITY);
  EXPECT_EQ(compressed_mean(grads, HalfFormat::kFp16), 32768.0f);
}

}  // namespace
}  // namespace scalescope::kernel_math_test
