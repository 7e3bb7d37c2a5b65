// SS_HOST_DEVICE marks a function compiled for both the host and the GPU: `__host__ __device__`
// under nvcc, nothing in a host-only compiler. The math of our CUDA kernels is written in such
// functions (models/kernel_math/) so that CPU tests run the same code in every build.
//
// Contract of those functions: every floating-point operation is rounded as written, as in the
// CPU kernels (built for baseline x86-64, which has no FMA instruction). So nvcc must compile
// them with --fmad=false, and host code that compares them bit for bit with the CPU kernels with
// -ffp-contract=off: no compiler may fuse a multiply and an add on its own. Where a fused
// multiply-add is meant, the code calls fmaf.
#pragma once

#if defined(__CUDACC__)
#define SS_HOST_DEVICE __host__ __device__
#else
#define SS_HOST_DEVICE
#endif

// Unrolls the loop after it fully in GPU code (its trip count a constant), so that an array the
// loop indexes stays in registers; nothing in host code, whose compiler knows no such pragma.
#if defined(__CUDA_ARCH__)
#define SS_UNROLL _Pragma("unroll")
#else
#define SS_UNROLL
#endif

// Vectorises the loop after it in host code built with OpenMP: a loop across a row's lanes,
// each lane's operations in the order written, so the bits are the scalar loop's (GCC otherwise
// keeps eight lanes in eight scalar registers); nothing under nvcc.
#if defined(_OPENMP) && !defined(__CUDACC__)
#define SS_HOST_SIMD _Pragma("omp simd")
#else
#define SS_HOST_SIMD
#endif

#include <cstdint>
#include <cstring>

namespace scalescope::kernel_math {

// A float's bits and back (no conversion): for comparisons and formats done on the bits.
SS_HOST_DEVICE inline uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}

SS_HOST_DEVICE inline float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float v = 0.0f;
  std::memcpy(&v, &bits, sizeof v);
  return v;
#endif
}

// And a double's.
SS_HOST_DEVICE inline uint64_t double_bits(double v) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(v));
#else
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}

SS_HOST_DEVICE inline double bits_double(uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double v = 0.0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
#endif
}

}  // namespace scalescope::kernel_math
