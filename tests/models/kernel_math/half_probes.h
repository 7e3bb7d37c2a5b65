// Floats that exercise the 16-bit conversions (kernel_math/half_math.h): the format edges,
// 200,000 random bit patterns and halfway cases of both formats; no NaN (NaN payloads are
// checked apart).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "models/kernel_math/half_math.h"

namespace scalescope::testing_util {

// Floats of every exponent, sign and fraction pattern the conversions branch on.
inline std::vector<float> half_probe_floats() {
  std::vector<float> out = {0.0f,
                            -0.0f,
                            1.0f,
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            65536.0f,
                            6.103515625e-05f,
                            5.9604645e-08f,
                            2.9802322e-08f,
                            2.98023259e-08f,
                            3.0e38f,
                            INFINITY,
                            -INFINITY};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = kernel_math::bits_float(bits(rng));
    if (!std::isnan(f)) out.push_back(f);
  }
  // Ties: exactly halfway between neighbours (the dropped bits 1 followed by zeros).
  for (uint32_t top = 0; top < 0x8000u; top += 37) {
    out.push_back(kernel_math::bits_float((top << 16) | 0x8000u));  // bf16 ties
    out.push_back(
        kernel_math::bits_float(((top & 0x3fffu) << 13) | 0x38000000u | 0x1000u));  // fp16
  }
  std::erase_if(out, [](float f) { return std::isnan(f); });  // NaN payloads: checked apart
  return out;
}

}  // namespace scalescope::testing_util
