// 16-bit floating-point formats for compressed gradient all-reduce (what DDP's fp16 and bf16
// communication hooks send): IEEE binary16 ("fp16": 5 exponent bits, 10 fraction bits) and
// bfloat16 ("bf16": float32's 8 exponent bits, 7 fraction bits), held in uint16_t so that the
// same code runs on hosts without a half type and in CUDA kernels.
//
// Conversions from float round to nearest, ties to even (as CUDA's __float2half_rn and
// __float2bfloat16_rn, and x86's VCVTPS2PH with rounding mode 0): values beyond the format's
// range become infinity, fp16 keeps subnormals, NaN stays NaN (quiet). A reduction adds in
// float and rounds each partial sum back to the format, as NCCL's and Gloo's half sums do.
#pragma once

#include <cstdint>
#include <type_traits>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

enum class HalfFormat { kFp16, kBf16 };

// Unit roundoff: the largest relative error of one rounding to the format (2^-11, 2^-8).
SS_HOST_DEVICE inline double unit_roundoff(HalfFormat f) {
  return f == HalfFormat::kFp16 ? 1.0 / 2048.0 : 1.0 / 256.0;
}

SS_HOST_DEVICE inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  // Adding 0x7fff (+1 when the kept part is odd) carries into the kept bits exactly when the
  // dropped half is above one half, or is one half and the kept part odd; an overflow of the
  // largest finite values carries into the exponent and gives infinity, as rounding should.
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

SS_HOST_DEVICE inline float bf16_to_float(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

SS_HOST_DEVICE inline uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // ≥ 65520: inf
  if (magnitude < 0x38800000u) {
    // Below 2^-14: a subnormal fp16 (or zero), in units of 2^-24. The float's significand
    // (with its implicit bit) shifted right, rounded to nearest even on the bits shifted out.
    if (magnitude < 0x33000000u) return sign;  // below 2^-25: rounds to zero
    const uint32_t exponent = magnitude >> 23;
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // 14..24
    const uint32_t kept = significand >> shift;
    const uint32_t dropped = significand & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    const uint32_t up = dropped > half || (dropped == half && (kept & 1u) != 0u) ? 1u : 0u;
    return static_cast<uint16_t>(sign | (kept + up));
  }
  // Normal: rebias the exponent (127 → 15) and round the 13 dropped fraction bits; a carry
  // out of the fraction steps the exponent, up to infinity, as it should.
  const uint32_t rebiased = magnitude - (112u << 23);
  const uint32_t rounding = 0xfffu + ((rebiased >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rebiased + rounding) >> 13));
}

// Selects, not branches: a GPU kernel reading 16-bit values in a loop can then issue the loads of
// several elements before it converts the first (with a branch on each value, every load waited
// for the one before it: the sm_90 SASS of the batch norm's 16-bit passes).
SS_HOST_DEVICE inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t fraction = (h & 0x3ffu) << 13;
  const uint32_t normal = ((exponent + 112u) << 23) | fraction;
  const uint32_t special = 0x7f800000u | fraction;  // inf, NaN
  // Zero or subnormal, fraction × 2^-24: 2^-14·(1 + fraction/1024) - 2^-14, exact in float
  // (both are multiples of 2^-24 below 2^-13), and no float subnormal on the way.
  const uint32_t tiny = float_bits(bits_float(0x38800000u | fraction) - bits_float(0x38800000u));
  const uint32_t magnitude = exponent == 0u ? tiny : (exponent == 0x1fu ? special : normal);
  return bits_float(sign | magnitude);
}

SS_HOST_DEVICE inline uint16_t to_half(float f, HalfFormat format) {
  return format == HalfFormat::kFp16 ? float_to_fp16(f) : float_to_bf16(f);
}

SS_HOST_DEVICE inline float from_half(uint16_t h, HalfFormat format) {
  return format == HalfFormat::kFp16 ? fp16_to_float(h) : bf16_to_float(h);
}

// Where a pass also writes its fp32 results rounded to 16 bits (the saved copy of an add's
// output, the operand of the product that reads a softmax's), in the same pass: to_half of each
// result, the bits a separate rounding pass would give. `at` null: nowhere.
struct HalfRow {
  uint16_t* at = nullptr;
  HalfFormat format = HalfFormat::kBf16;
  SS_HOST_DEVICE void store(int64_t j, float v) const {
    if (at != nullptr) at[j] = to_half(v, format);
  }
};

// The model's saved 16-bit copy of some values, read as the fp32 values it widens to (a
// restore's): a kernel templated on how it reads them (a const float*, or this) reads the copy
// in place, where a restore would first write the fp32 values out. `at` null: no values.
struct HalfValues {
  const uint16_t* at = nullptr;
  HalfFormat format = HalfFormat::kBf16;
  SS_HOST_DEVICE float operator[](int64_t i) const { return from_half(at[i], format); }
};
SS_HOST_DEVICE inline bool has_values(const float* values) {
  return values != nullptr;
}
SS_HOST_DEVICE inline bool has_values(const HalfValues& values) {
  return values.at != nullptr;
}

// HalfValues with the format a template argument: a GPU kernel instantiated for each format
// converts each value in a few instructions, where testing the format per value kept the fp16
// conversion's work (and, before it had no branches, its branches) in the bf16 kernels' loops.
template <HalfFormat F>
struct HalfValuesIn {
  const uint16_t* at = nullptr;
  SS_HOST_DEVICE float operator[](int64_t i) const { return from_half(at[i], F); }
  // The values from `offset` on, as a pointer's + gives (a row of a matrix).
  SS_HOST_DEVICE HalfValuesIn operator+(int64_t offset) const { return {at + offset}; }
};
template <HalfFormat F>
SS_HOST_DEVICE inline bool has_values(const HalfValuesIn<F>& values) {
  return values.at != nullptr;
}

// launch(std::integral_constant<HalfFormat, format>{}): the one place a launcher turns a
// run-time format into the template argument of HalfValuesIn and its kin.
template <class Launch>
void with_half_format(HalfFormat format, const Launch& launch) {
  if (format == HalfFormat::kFp16) {
    launch(std::integral_constant<HalfFormat, HalfFormat::kFp16>{});
  } else {
    launch(std::integral_constant<HalfFormat, HalfFormat::kBf16>{});
  }
}

// One gradient element as compression sends it: divided by the replica count first (in
// float), so that the sum over the replicas is the mean and cannot overflow where the
// gradients themselves do not.
SS_HOST_DEVICE inline uint16_t compress_gradient(float g, int replicas, HalfFormat format) {
  return to_half(g / static_cast<float>(replicas), format);
}

// One element of a reduction step: the two partial sums added in float, rounded back.
SS_HOST_DEVICE inline uint16_t half_sum(uint16_t a, uint16_t b, HalfFormat format) {
  return to_half(from_half(a, format) + from_half(b, format), format);
}

}  // namespace scalescope::kernel_math
