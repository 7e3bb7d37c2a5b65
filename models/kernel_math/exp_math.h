// exp(x) written for compilers to vectorise: plain arithmetic and selects, no library call or
// branch per element, so that a loop of it runs 16 floats at a time on AVX-512 and a GPU's
// kernel computes the same bits as the host (no FMA contraction on either side: the CPU files
// that use it build with -ffp-contract=off, nvcc with --fmad=false). The attention's tiles
// (attention_math.h) and GELU (activation_math.h) use it.
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

}  // namespace scalescope::kernel_math
