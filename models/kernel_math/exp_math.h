// exp(x) written for compilers to vectorise: plain arithmetic and selects, no library call or
// branch per element, so that a loop of it runs 16 floats at a time on AVX-512 and a GPU's
// kernel computes the same bits as the host (no FMA contraction on either side: the CPU files
// that use it build with -ffp-contract=off, nvcc with --fmad=false). The attention's tiles
// (attention_math.h) and GELU (activation_math.h) use the float one, the CPU's softmax
// cross-entropy (cpu_losses.cpp, in double) the double one.
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

// exp(x): Cephes' expf (Cody and Waite's reduction by n·ln 2 in two parts, a
// degree-5 polynomial on the rest, 2^n put into the exponent bits), within 2 ulp of expf over
// its normal range; 0 below −87.3 (where expf gives subnormals or 0), +inf above 88.0 (expf's
// own overflow is at 88.72), NaN for NaN.
SS_HOST_DEVICE inline float vector_exp(float x) {
  // Into the range the reduction takes; NaN, which fails every comparison, to its bottom, so
  // that the conversion to int below always has an int to give.
  const float low = x > -87.3f ? x : -87.3f;
  const float clamped = low < 88.0f ? low : 88.0f;
  // Round to nearest by adding and taking away 1.5·2^23 (no rounding instruction in
  // baseline x86-64); exact for |n| < 2^22.
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const float two_n = bits_float(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  const float e = y * two_n;
  const float high = x > 88.0f ? INFINITY : e;
  const float result = x < -87.3f ? 0.0f : high;
  return x == x ? result : x;  // NaN stays NaN
}

// exp(x) in double, the same way: Cody and Waite's reduction by n·ln 2 in two parts (Cephes'
// exp's), then exp of the rest, |r| <= ln 2 / 2, as its Taylor polynomial to degree 13 (the
// first term left out is below 2^-57 of the result) by Horner's rule, no division; within 1 ulp
// of exp over [-708, 709]; 0 below -708 (where exp gives 3.3e-308 at most, subnormals or 0),
// +inf above 709 (exp's own overflow is at 709.78), NaN for NaN. n comes out of the rounding's
// bits, so no conversion to an integer: 64-bit integer lanes are all AVX2 needs.
SS_HOST_DEVICE inline double vector_exp_f64(double x) {
  const double low = x > -708.0 ? x : -708.0;  // NaN to the bottom, as above
  const double clamped = low < 709.0 ? low : 709.0;
  // 1.5·2^52 + n, rounded to nearest: its low bits are n (two's complement) for |n| < 2^51.
  const double shifted = clamped * 1.4426950408889634 + 6755399441055744.0;
  const double n = shifted - 6755399441055744.0;
  double r = clamped - n * 6.93145751953125e-1;
  r = r - n * 1.42860682030941723212e-6;
  // 1/k! for k = 13 down to 2, then 1 + r·(1 + r·(...)).
  constexpr double kInverseFactorials[] = {
      1.6059043836821613e-10, 2.08767569878681e-09,   2.505210838544172e-08,  2.755731922398589e-07,
      2.7557319223985893e-06, 2.48015873015873e-05,   1.984126984126984e-04,  1.388888888888889e-03,
      8.333333333333333e-03,  4.1666666666666664e-02, 1.6666666666666666e-01, 0.5};
  double p = kInverseFactorials[0];
  SS_UNROLL
  for (int k = 1; k < 12; ++k) p = p * r + kInverseFactorials[k];
  p = p * r + 1.0;
  const double y = p * r + 1.0;
  const uint64_t biased = double_bits(shifted) - 0x4338000000000000ull + 1023u;
  const double e = y * bits_double(biased << 52);
  const double high = x > 709.0 ? INFINITY : e;
  const double result = x < -708.0 ? 0.0 : high;
  return x == x ? result : x;
}

}  // namespace scalescope::kernel_math
