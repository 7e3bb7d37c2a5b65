// Division of 32-bit unsigned values by a divisor fixed before a launch, as a multiply-high, an
// add and a shift (Granlund and Montgomery's method, which PyTorch's IntDivider uses for its
// index arithmetic too). A GPU has no integer divide instruction: nvcc's 32-bit division is a
// sequence of about 20 instructions, so a kernel that turns each flat index into coordinates
// and window ranges (max pooling's backward makes about ten divisions an element) is bound by
// them rather than by memory.
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

class IntDivider {
 public:
  // Values this divides exactly (the sum below must not pass 32 bits), and its divisors.
  static constexpr int64_t kLimit = int64_t{1} << 31;

  IntDivider() = default;
  // REQUIRES: 1 <= divisor < kLimit (the launchers' shapes, checked where they choose this).
  explicit IntDivider(int64_t divisor) : divisor_(static_cast<uint32_t>(divisor)) {
    while ((uint64_t{1} << shift_) < divisor_) ++shift_;
    // magic = floor(2^32 · (2^shift − d) / d) + 1, which fits in 32 bits since 2^shift < 2d.
    magic_ = static_cast<uint32_t>(
        ((uint64_t{1} << 32) * ((uint64_t{1} << shift_) - divisor_)) / divisor_ + 1);
  }

  // n / divisor for 0 <= n < kLimit.
  SS_HOST_DEVICE int64_t operator()(int64_t n) const {
    const uint32_t u = static_cast<uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(u, magic_);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{u} * magic_) >> 32);
#endif
    return static_cast<int64_t>((high + u) >> shift_);
  }
  // n % divisor, for 0 <= n < kLimit.
  SS_HOST_DEVICE int64_t remainder(int64_t n) const {
    return n - (*this)(n)*divisor_;
  }

 private:
  uint32_t divisor_ = 1;
  uint32_t magic_ = 1;
  uint32_t shift_ = 0;
};

// Plain division, where the values may pass IntDivider::kLimit.
struct PlainDivider {
  int64_t divisor = 1;
  SS_HOST_DEVICE int64_t operator()(int64_t n) const { return n / divisor; }
  SS_HOST_DEVICE int64_t remainder(int64_t n) const { return n % divisor; }
};

}  // namespace scalescope::kernel_math
