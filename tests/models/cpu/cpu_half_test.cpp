// models/cpu/cpu_half.h: the vectorised 16-bit passes (F16C for fp16 where the CPU has it)
// give kernel_math's scalar bits for every value but NaN, at every length (the vector body and
// the scalar tail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "models/cpu/cpu_half.h"
#include "models/kernel_math/half_math.h"
#include "tests/models/kernel_math/half_probes.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

// The conversions' probe set, NaN, and small gradients (fp16's subnormal range after the
// division).
std::vector<float> probe_floats() {
  std::vector<float> out = testing_util::half_probe_floats();
  out.push_back(NAN);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> small(-1e-4f, 1e-4f);
  for (int i = 0; i < 100000; ++i) out.push_back(small(rng));
  return out;
}

void expect_same(uint16_t got, uint16_t want, km::HalfFormat f, size_t i) {
  if (std::isnan(km::from_half(want, f))) {
    EXPECT_TRUE(std::isnan(km::from_half(got, f))) << "element " << i;
  } else {
    ASSERT_EQ(got, want) << "element " << i << " value " << km::from_half(want, f);
  }
}

class HalfSpan : public testing::TestWithParam<km::HalfFormat> {};

TEST_P(HalfSpan, CompressGivesTheScalarBits) {
  const km::HalfFormat f = GetParam();
  const std::vector<float> in = probe_floats();
  for (const int replicas : {1, 2, 3}) {
    std::vector<uint16_t> out(in.size());
    compress_half_span(in.data(), out.data(), static_cast<int64_t>(in.size()), replicas, f);
    for (size_t i = 0; i < in.size(); ++i) {
      expect_same(out[i], km::compress_gradient(in[i], replicas, f), f, i);
    }
  }
}

TEST_P(HalfSpan, DecompressAndSumGiveTheScalarBits) {
  const km::HalfFormat f = GetParam();
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> widened(all.size());
  decompress_half_span(all.data(), widened.data(), static_cast<int64_t>(all.size()), f);
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = km::from_half(all[i], f);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(widened[i])) << i;
    } else {
      ASSERT_EQ(km::float_bits(widened[i]), km::float_bits(want)) << i;
    }
  }
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> any(0, 65535);
  std::vector<uint16_t> a(all.size());
  std::vector<uint16_t> b(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    a[i] = all[i];
    b[i] = static_cast<uint16_t>(any(rng));
  }
  std::vector<uint16_t> sum(all.size());
  sum_half_span(a.data(), b.data(), sum.data(), static_cast<int64_t>(all.size()), f);
  for (size_t i = 0; i < all.size(); ++i) expect_same(sum[i], km::half_sum(a[i], b[i], f), f, i);
}

// Lengths around the 8-wide vector body: the tail is done one by one, and nothing past n is
// written.
TEST_P(HalfSpan, EveryLengthDoesExactlyItsElements) {
  const km::HalfFormat f = GetParam();
  for (int64_t n = 0; n <= 35; ++n) {
    std::vector<float> in(static_cast<size_t>(n) + 1);
    for (int64_t i = 0; i <= n; ++i) in[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i + 1);
    for (const int replicas : {1, 2}) {
      std::vector<uint16_t> out(static_cast<size_t>(n) + 1, 0xabcd);
      compress_half_span(in.data(), out.data(), n, replicas, f);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(out[static_cast<size_t>(i)],
                  km::compress_gradient(in[static_cast<size_t>(i)], replicas, f))
            << "n " << n << " element " << i << " replicas " << replicas;
      }
      EXPECT_EQ(out[static_cast<size_t>(n)], 0xabcd) << "n " << n << " replicas " << replicas;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfSpan,
                         testing::Values(km::HalfFormat::kFp16, km::HalfFormat::kBf16),
                         [](const testing::TestParamInfo<km::HalfFormat>& info) {
                           return info.param == km::HalfFormat::kFp16 ? "Fp16" : "Bf16";
                         });

// Emulated fp16's rounding: the scalar round trip's bits at every length around the vector
// body (infinity beyond fp16's range), in place or not, nothing past n written.
TEST(RoundToFp16Span, GivesTheScalarRoundTripsBits) {
  const std::vector<float> in = probe_floats();
  std::vector<float> out(in.size() + 1, 42.0f);
  for (const int64_t n : {int64_t{0}, int64_t{7}, int64_t{9}, static_cast<int64_t>(in.size())}) {
    round_to_fp16_span(in.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(i);
      const float want = km::fp16_to_float(km::float_to_fp16(in[k]));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(out[k])) << i;
      } else {
        ASSERT_EQ(km::float_bits(out[k]), km::float_bits(want)) << i << " of " << n;
      }
    }
    EXPECT_EQ(out[static_cast<size_t>(n)], 42.0f) << "n " << n;  // longer n come later
  }
  std::vector<float> same = {1.0f / 3.0f, 70000.0f, -1e-8f};
  round_to_fp16_span(same.data(), same.data(), 3);
  EXPECT_EQ(same[0], km::fp16_to_float(km::float_to_fp16(1.0f / 3.0f)));
  EXPECT_TRUE(std::isinf(same[1]));
  EXPECT_EQ(same[2], km::fp16_to_float(km::float_to_fp16(-1e-8f)));
}

}  // namespace
}  // namespace scalescope
