// kernel_math/int_divider.h: division by a multiply-high, an add and a shift equals integer
// division for every divisor and value below 2^31: all values below 2^15 for the divisors a
// shape gives (1 to 2048), and the values near powers of two, multiples of the divisor and the
// limit, and random ones, for divisors up to the limit.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "models/kernel_math/int_divider.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

void expect_divides(int64_t d, const std::vector<int64_t>& values) {
  const km::IntDivider divide(d);
  for (const int64_t n : values) {
    if (n < 0 || n >= km::IntDivider::kLimit) continue;
    ASSERT_EQ(divide(n), n / d) << n << " / " << d;
    ASSERT_EQ(divide.remainder(n), n % d) << n << " % " << d;
  }
}

// Values worth trying for divisor d: around multiples of d, around powers of two, near the
// limit, and random.
std::vector<int64_t> edge_values(int64_t d, Rng& rng) {
  std::vector<int64_t> v;
  for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{1000}, km::IntDivider::kLimit / d,
                    km::IntDivider::kLimit / d - 1}) {
    for (int64_t delta = -2; delta <= 2; ++delta) v.push_back(k * d + delta);
  }
  for (int bit = 0; bit <= 31; ++bit) {
    for (int64_t delta = -2; delta <= 2; ++delta) v.push_back((int64_t{1} << bit) + delta);
  }
  for (int i = 0; i < 200; ++i)
    v.push_back(static_cast<int64_t>(rng.below(km::IntDivider::kLimit)));
  return v;
}

TEST(KernelMathIntDivider, DividesEveryValueBelowTheLimitAsIntegerDivision) {
  std::vector<int64_t> small(1 << 15);
  for (int64_t n = 0; n < (1 << 15); ++n) small[static_cast<size_t>(n)] = n;
  Rng rng(90);
  for (int64_t d = 1; d <= 2048; ++d) {
    expect_divides(d, small);
    expect_divides(d, edge_values(d, rng));
  }
  for (int bit = 11; bit <= 30; ++bit) {
    for (int64_t delta : {-1, 0, 1, 3}) {
      const int64_t d = (int64_t{1} << bit) + delta;
      expect_divides(d, edge_values(d, rng));
    }
  }
  for (int i = 0; i < 2000; ++i) {
    const int64_t d = 1 + static_cast<int64_t>(rng.below(km::IntDivider::kLimit - 1));
    expect_divides(d, edge_values(d, rng));
  }
  expect_divides(km::IntDivider::kLimit - 1, edge_values(km::IntDivider::kLimit - 1, rng));
}

}  // namespace
}  // namespace scalescope::kernel_math_test
