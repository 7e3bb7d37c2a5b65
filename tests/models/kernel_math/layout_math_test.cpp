// kernel_math/layout_math.h: NHWC coordinates, the transposes against the CPU's flatten kernel
// (NHWC <-> NCHW) and against the OHWI layout's definition (OIHW <-> OHWI), and the zero
// extension and crop by which the GPU's convolution gets TensorFlow's asymmetric "same" padding,
// against the CPU's convolution with that padding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "models/kernel_math/layout_math.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

// A value naming its position: a·1000 + b·100 + c·10 + d (exact in float).
float code(int64_t a, int64_t b, int64_t c, int64_t d) {
  return static_cast<float>(a * 1000 + b * 100 + c * 10 + d);
}

// The helpers below read and write with at(): an index out of bounds fails the test.
std::vector<float> transposed(const std::vector<float>& in, const km::TransposeShape& s) {
  std::vector<float> out(in.size(), NAN);
  for (int64_t b = 0; b < s.batches; ++b) {
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t c = 0; c < s.cols; ++c) {
        out.at(km::transpose_out_index(s, b, r, c)) = in.at(km::transpose_in_index(s, b, r, c));
      }
    }
  }
  return out;
}

// With plain division and with the GPU kernels' IntDivider alike.
TEST(KernelMathLayout, NhwcCoordinatesInvertTheIndex) {
  const int64_t n = 3, h = 4, w = 5, c = 6;
  const auto by = km::nhwc_dividers<km::IntDivider>(h, w, c);
  for (int64_t i = 0; i < n * h * w * c; ++i) {
    const km::Nhwc p = km::nhwc_coords(i, h, w, c);
    ASSERT_TRUE(p.n < n && p.h < h && p.w < w && p.c < c) << i;
    ASSERT_EQ(km::nhwc_index(p, h, w, c), i);
    const km::Nhwc q = km::nhwc_coords(i, by, h, w, c);
    ASSERT_TRUE(q.n == p.n && q.h == p.h && q.w == p.w && q.c == p.c) << i;
  }
}

// The GPU's flatten is transpose (N, H·W, C) forward and (N, C, H·W) backward.
TEST(KernelMathLayout, TransposesAreTheCpuFlattenKernel) {
  const Shape in{3, 4, 5, 7};
  CpuLayer flatten(FlattenSpec{}, in);
  const std::vector<float> x = random_floats(in.numel(), 21);
  const std::vector<float> y = flatten.forward(x);
  EXPECT_EQ(bit_mismatches(transposed(x, {3, 4 * 5, 7}), y), "");
  const std::vector<float> dy = random_floats(in.numel(), 22);
  EXPECT_EQ(bit_mismatches(transposed(dy, {3, 7, 4 * 5}), flatten.backward(x, y, dy)), "");
}

// The GPU's convolution transposes the weights OIHW -> OHWI, (O, I, KH·KW), and the weight
// gradient back, (O, KH·KW, I).
TEST(KernelMathLayout, TransposesConvertOihwAndOhwi) {
  const int64_t o_size = 3, i_size = 4, kh_size = 2, kw_size = 3;
  std::vector<float> oihw;
  for (int64_t o = 0; o < o_size; ++o)
    for (int64_t i = 0; i < i_size; ++i)
      for (int64_t kh = 0; kh < kh_size; ++kh)
        for (int64_t kw = 0; kw < kw_size; ++kw) oihw.push_back(code(o, i, kh, kw));
  const std::vector<float> ohwi = transposed(oihw, {o_size, i_size, kh_size * kw_size});
  size_t at = 0;
  for (int64_t o = 0; o < o_size; ++o)
    for (int64_t kh = 0; kh < kh_size; ++kh)
      for (int64_t kw = 0; kw < kw_size; ++kw)
        for (int64_t i = 0; i < i_size; ++i, ++at) {
          ASSERT_EQ(ohwi[at], code(o, i, kh, kw)) << "OHWI index " << at;
        }
  EXPECT_EQ(transposed(ohwi, {o_size, kh_size * kw_size, i_size}), oihw);
}

template <class Divider>
std::vector<float> extended(const std::vector<float>& in, const km::ExtendShape& s) {
  std::vector<float> out(
      static_cast<size_t>(s.batch * s.extended_height * s.extended_width * s.channels));
  const auto by = km::extended_dividers<Divider>(s);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t from = km::extend_source(s, by, static_cast<int64_t>(i));
    out[i] = from < 0 ? 0.0f : in.at(static_cast<size_t>(from));
  }
  return out;
}

template <class Divider>
std::vector<float> cropped(const std::vector<float>& ext, const km::ExtendShape& s) {
  std::vector<float> out(static_cast<size_t>(s.batch * s.height * s.width * s.channels));
  const auto by = km::image_dividers<Divider>(s);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = ext.at(km::crop_source(s, by, static_cast<int64_t>(i)));
  return out;
}

template <class Divider>
class KernelMathExtend : public ::testing::Test {};
using Dividers = ::testing::Types<km::PlainDivider, km::IntDivider>;
TYPED_TEST_SUITE(KernelMathExtend, Dividers);

TYPED_TEST(KernelMathExtend, AddsZerosBottomAndRightAndCropUndoesIt) {
  const km::ExtendShape s{2, 3, 4, 5, 4, 6};
  std::vector<float> x;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t h = 0; h < s.height; ++h)
      for (int64_t w = 0; w < s.width; ++w)
        for (int64_t c = 0; c < s.channels; ++c) x.push_back(code(n, h, w, c) + 1.0f);
  const std::vector<float> ext = extended<TypeParam>(x, s);
  for (size_t i = 0; i < ext.size(); ++i) {
    const km::Nhwc p =
        km::nhwc_coords(static_cast<int64_t>(i), s.extended_height, s.extended_width, s.channels);
    const bool inside = p.h < s.height && p.w < s.width;
    ASSERT_EQ(ext[i], inside ? code(p.n, p.h, p.w, p.c) + 1.0f : 0.0f) << i;
  }
  EXPECT_EQ(cropped<TypeParam>(ext, s), x);
}

// The padded lm_head's copies: y's chunk out of the GEMM's padded buffer and dy's chunk into
// it, as cudaMemcpy2D copies `width` values a row between the pitches (and the pads zero).
TYPED_TEST(KernelMathExtend, PitchedRowsCopyEachRowsValuesAndZeroThePads) {
  const int64_t rows = 3, width = 5, padded = 8;
  std::vector<float> tight;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) tight.push_back(code(0, 0, r, c) + 1.0f);
  const auto copy = [&](const std::vector<float>& from, const km::PitchedRows& s) {
    std::vector<float> to(static_cast<size_t>(rows * s.to_pitch), NAN);
    const TypeParam by_pitch{s.to_pitch};
    for (size_t i = 0; i < to.size(); ++i) {
      const int64_t at = km::pitched_row_source(s, by_pitch, static_cast<int64_t>(i));
      to[i] = at < 0 ? 0.0f : from.at(static_cast<size_t>(at));
    }
    return to;
  };
  const std::vector<float> pad = copy(tight, {width, width, padded});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < padded; ++c) {
      ASSERT_EQ(pad[static_cast<size_t>(r * padded + c)], c < width ? code(0, 0, r, c) + 1.0f : 0)
          << r << ", " << c;
    }
  }
  EXPECT_EQ(copy(pad, {width, padded, width}), tight);
}

// out[n, h, w, c] = in[n, h - top, w - left, c] where that is inside `in`, else 0: pads the
// top and left by `top` and `left` (and the rest up to out_h × out_w), or crops with negative ones.
std::vector<float> shifted(const std::vector<float>& in, const Shape& from, int64_t out_h,
                           int64_t out_w, int64_t top, int64_t left) {
  std::vector<float> out(static_cast<size_t>(from[0] * out_h * out_w * from[3]), 0.0f);
  for (size_t i = 0; i < out.size(); ++i) {
    km::Nhwc p = km::nhwc_coords(static_cast<int64_t>(i), out_h, out_w, from[3]);
    p.h -= top;
    p.w -= left;
    if (p.h < 0 || p.w < 0 || p.h >= from[1] || p.w >= from[2]) continue;
    out[i] = in[static_cast<size_t>(km::nhwc_index(p, from[1], from[2], from[3]))];
  }
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::abs(want[i]))) << what << "[" << i << "]";
  }
}

// The GPU's convolution runs cuDNN on the input extended by (after - before) rows and columns
// with symmetric padding `before`, and crops the data gradient back. That is a "valid"
// convolution of the extended input padded by `before` on every side, which must be the CPU's
// "same" convolution with TensorFlow's padding (the odd pixel after), forward and backward.
TEST(KernelMathLayout, ExtendAndCropGiveTheCpuSamePadding) {
  for (const Conv2DSpec spec :
       {Conv2DSpec{3, 3, 2, Padding::kSame}, Conv2DSpec{2, 4, 1, Padding::kSame},
        Conv2DSpec{3, 2, 2, Padding::kSame}}) {
    const Shape in{2, 7, 6, 3};
    const Pads ph = same_padding(in[1], spec.kernel, spec.stride);
    const Pads pw = same_padding(in[2], spec.kernel, spec.stride);
    const km::ExtendShape ext{
        in[0], in[1], in[2], in[3], in[1] + ph.after - ph.before, in[2] + pw.after - pw.before};
    const Shape ext_shape{in[0], ext.extended_height, ext.extended_width, in[3]};
    const Shape padded{in[0], ext.extended_height + 2 * ph.before,
                       ext.extended_width + 2 * pw.before, in[3]};
    const std::vector<std::vector<float>> params = {
        random_floats(spec.filters * in[3] * spec.kernel * spec.kernel, 31),
        random_floats(spec.filters, 32)};
    CpuLayer same(spec, in, params);
    CpuLayer valid(Conv2DSpec{spec.filters, spec.kernel, spec.stride, Padding::kValid}, padded,
                   params);
    ASSERT_EQ(valid.out_shape(), same.out_shape()) << describe(spec);

    const std::vector<float> x = random_floats(in.numel(), 33);
    const std::vector<float> x_padded = shifted(extended<km::IntDivider>(x, ext), ext_shape,
                                                padded[1], padded[2], ph.before, pw.before);
    const std::vector<float> y = same.forward(x);
    expect_near(valid.forward(x_padded), y, "forward");

    const std::vector<float> dy = random_floats(same.out_shape().numel(), 34);
    const std::vector<float> dx_padded = valid.backward(x_padded, y, dy);
    const std::vector<float> dx_ext =
        shifted(dx_padded, padded, ext.extended_height, ext.extended_width, -ph.before, -pw.before);
    expect_near(cropped<km::IntDivider>(dx_ext, ext), same.backward(x, y, dy), "input gradient");
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
