// The 16-bit passes of gradient compression on host memory: the casts around the all-reduce
// and the element sum of its reduction. Each format gets its own loop, free of the per-element
// format test, so that the compiler vectorises it (bf16 is bit arithmetic); fp16 uses the CPU's
// F16C conversions where it has them (x86-64's baseline does not), eight values at a time.
//
// The results are kernel_math's (half_math.h) bit for bit for every value but NaN, which stays
// a NaN (F16C keeps the payload's top bits where kernel_math writes the canonical quiet NaN):
// VCVTPS2PH with rounding mode 0 rounds to nearest even, keeps subnormals and overflows to
// infinity, as float_to_fp16 does (with MXCSR as the process keeps it: no flush-to-zero).
// HalfMath's tests hold the two to the same bits.
#include <cstdint>

#include "models/cpu/cpu_half.h"
#include "models/cpu/vector_clones.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace scalescope {
namespace {

namespace km = kernel_math;

#if defined(__x86_64__)
#define SS_F16C __attribute__((target("avx,f16c")))

// CPUID says F16C and AVX, and the OS saves the YMM registers (XCR0 bits 1 and 2).
// (Clang 16's __builtin_cpu_supports knows no "f16c".)
bool has_f16c() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    if ((c & bit_F16C) == 0 || (c & bit_AVX) == 0 || (c & bit_OSXSAVE) == 0) return false;
    uint32_t low = 0, high = 0;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    return (low & 6u) == 6u;
  }();
  return yes;
}

// Returns how many leading elements it did (a multiple of 8); the caller does the rest.
SS_F16C int64_t compress_fp16_f16c(const float* in, uint16_t* out, int64_t n, float divisor) {
  const __m256 d = _mm256_set1_ps(divisor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_div_ps(_mm256_loadu_ps(in + i), d);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

SS_F16C int64_t decompress_fp16_f16c(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  return i;
}

SS_F16C int64_t sum_fp16_f16c(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_add_ps(x, y), _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

SS_F16C int64_t round_fp16_f16c(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  return i;
}
#else
bool has_f16c() {
  return false;
}
int64_t compress_fp16_f16c(const float*, uint16_t*, int64_t, float) {
  return 0;
}
int64_t decompress_fp16_f16c(const uint16_t*, float*, int64_t) {
  return 0;
}
int64_t sum_fp16_f16c(const uint16_t*, const uint16_t*, uint16_t*, int64_t) {
  return 0;
}
int64_t round_fp16_f16c(const float*, float*, int64_t) {
  return 0;
}
#endif

// bf16's loops are bit arithmetic, vector clones (vector_clones.h): 16 values at a time where
// the baseline has 4, the same bits. Dividing by one changes no value, NaNs included (the
// rounding quiets them either way): a pass that rounds without averaging skips the division.
SCALESCOPE_VECTOR_CLONES void compress_bf16_span(const float* in, uint16_t* out, int64_t n,
                                                 float divisor) {
  if (divisor == 1.0f) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = km::float_to_bf16(in[i]);
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = km::float_to_bf16(in[i] / divisor);
}

SCALESCOPE_VECTOR_CLONES void decompress_bf16_span(const uint16_t* in, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = km::bf16_to_float(in[i]);
}

}  // namespace

void compress_half_span(const float* in, uint16_t* out, int64_t n, int replicas,
                        km::HalfFormat format) {
  const auto divisor = static_cast<float>(replicas);
  if (format == km::HalfFormat::kBf16) {
    compress_bf16_span(in, out, n, divisor);
    return;
  }
  const int64_t done = has_f16c() ? compress_fp16_f16c(in, out, n, divisor) : 0;
  for (int64_t i = done; i < n; ++i) out[i] = km::float_to_fp16(in[i] / divisor);
}

void decompress_half_span(const uint16_t* in, float* out, int64_t n, km::HalfFormat format) {
  if (format == km::HalfFormat::kBf16) {
    decompress_bf16_span(in, out, n);
    return;
  }
  const int64_t done = has_f16c() ? decompress_fp16_f16c(in, out, n) : 0;
  for (int64_t i = done; i < n; ++i) out[i] = km::fp16_to_float(in[i]);
}

void sum_half_span(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n,
                   km::HalfFormat format) {
  if (format == km::HalfFormat::kBf16) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      out[i] = km::float_to_bf16(km::bf16_to_float(a[i]) + km::bf16_to_float(b[i]));
    }
    return;
  }
  const int64_t done = has_f16c() ? sum_fp16_f16c(a, b, out, n) : 0;
  for (int64_t i = done; i < n; ++i) out[i] = km::half_sum(a[i], b[i], format);
}

void round_to_fp16_span(const float* in, float* out, int64_t n) {
  const int64_t done = has_f16c() ? round_fp16_f16c(in, out, n) : 0;
  for (int64_t i = done; i < n; ++i) out[i] = km::fp16_to_float(km::float_to_fp16(in[i]));
}

}  // namespace scalescope
