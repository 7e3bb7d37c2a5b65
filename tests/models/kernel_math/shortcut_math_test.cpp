// kernel_math/shortcut_math.h: the index maps of the option-A shortcut against its definition
// (output pixel (oh, ow) is input pixel (oh·stride, ow·stride); output channel c is input
// channel c - before, before = (out_c - in_c) / 2; zeros elsewhere), over odd and even sizes,
// and backward's map as forward's transpose.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "models/kernel_math/shortcut_math.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

struct Sizes {
  int64_t batch, in_h, in_w, in_c, out_c, stride;
};

km::ShortcutShape shape_of(const Sizes& z) {
  // PadShortcutSpec's output: ceil(in / stride) pixels along each axis.
  return {z.in_h,
          z.in_w,
          z.in_c,
          (z.in_h + z.stride - 1) / z.stride,
          (z.in_w + z.stride - 1) / z.stride,
          z.out_c,
          z.stride};
}

// The input index output element (n, oh, ow, c) copies, or -1, from the definition.
int64_t defined_source(const km::ShortcutShape& s, int64_t n, int64_t oh, int64_t ow, int64_t c) {
  const int64_t before = (s.out_c - s.in_c) / 2;
  const int64_t ic = c - before;
  if (ic < 0 || ic >= s.in_c) return -1;
  const int64_t ih = oh * s.stride;
  const int64_t iw = ow * s.stride;
  return ((n * s.in_h + ih) * s.in_w + iw) * s.in_c + ic;
}

std::vector<Sizes> sizes() {
  return {{2, 8, 8, 4, 8, 2},   {1, 7, 5, 3, 7, 2}, {2, 6, 9, 2, 2, 3},
          {3, 5, 5, 16, 32, 2}, {1, 1, 1, 1, 3, 2}, {2, 4, 6, 2, 6, 1}};
}

template <class Divider>
class KernelMathShortcut : public ::testing::Test {};
// Plain division, and the GPU kernels' IntDivider.
using Dividers = ::testing::Types<km::PlainDivider, km::IntDivider>;
TYPED_TEST_SUITE(KernelMathShortcut, Dividers);

TYPED_TEST(KernelMathShortcut, ForwardCopiesTheStridedPixelsIntoTheMiddleChannels) {
  for (const Sizes& z : sizes()) {
    const km::ShortcutShape s = shape_of(z);
    const auto d = km::shortcut_dividers<TypeParam>(s);
    int64_t i = 0;
    for (int64_t n = 0; n < z.batch; ++n)
      for (int64_t oh = 0; oh < s.out_h; ++oh)
        for (int64_t ow = 0; ow < s.out_w; ++ow)
          for (int64_t c = 0; c < s.out_c; ++c, ++i)
            ASSERT_EQ(km::shortcut_source(s, d, i), defined_source(s, n, oh, ow, c))
                << "in " << z.in_h << "x" << z.in_w << "x" << z.in_c << " -> " << z.out_c
                << " stride " << z.stride << ", output " << i;
  }
}

// Every input element is read by at most one output element (forward is a partial
// permutation), and shortcut_reader names exactly that element: the transpose of forward.
TYPED_TEST(KernelMathShortcut, BackwardIsTheTransposeOfForward) {
  for (const Sizes& z : sizes()) {
    const km::ShortcutShape s = shape_of(z);
    const auto d = km::shortcut_dividers<TypeParam>(s);
    const int64_t in_count = z.batch * s.in_h * s.in_w * s.in_c;
    const int64_t out_count = z.batch * s.out_h * s.out_w * s.out_c;
    std::vector<int64_t> reader(static_cast<size_t>(in_count), -1);
    for (int64_t o = 0; o < out_count; ++o) {
      const int64_t from = km::shortcut_source(s, d, o);
      if (from < 0) continue;
      ASSERT_LT(from, in_count);
      ASSERT_EQ(reader[static_cast<size_t>(from)], -1) << "input " << from << " read twice";
      reader[static_cast<size_t>(from)] = o;
    }
    for (int64_t i = 0; i < in_count; ++i) {
      ASSERT_EQ(km::shortcut_reader(s, d, i), reader[static_cast<size_t>(i)])
          << "in " << z.in_h << "x" << z.in_w << "x" << z.in_c << " stride " << z.stride
          << ", input " << i;
    }
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
