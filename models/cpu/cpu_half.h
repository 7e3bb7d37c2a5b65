// The 16-bit passes of gradient compression on host memory, on the calling thread (vectorised;
// cpu_half.cpp): the casts around a compressed all-reduce and the element sum of its
// reduction, for the CPU and simulated devices' kernels and for Gloo's reduce function; and
// the rounding of emulated fp16 operands.
#pragma once

#include <cstdint>

#include "models/kernel_math/half_math.h"

namespace scalescope {

// out[i] = in[i] / replicas rounded to the format (kernel_math::compress_gradient).
void compress_half_span(const float* in, uint16_t* out, int64_t n, int replicas,
                        kernel_math::HalfFormat format);
// out[i] = in[i] widened to float.
void decompress_half_span(const uint16_t* in, float* out, int64_t n,
                          kernel_math::HalfFormat format);
// out[i] = a[i] + b[i], added in float and rounded (kernel_math::half_sum).
// The same bits as kernel_math's functions for every value but NaN, which stays a NaN.
void sum_half_span(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n,
                   kernel_math::HalfFormat format);
// out[i] = in[i] rounded to the nearest fp16 value and widened back (infinity beyond fp16's
// range): what a kernel reading fp16 copies of its operands sees. `in` may be `out`.
void round_to_fp16_span(const float* in, float* out, int64_t n);

}  // namespace scalescope
