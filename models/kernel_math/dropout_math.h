// Dropout's mask as a function of (seed, pass, element) alone: a splitmix64 hash, no generator
// state. The CPU and GPU kernels therefore draw the same mask, backward recomputes forward's
// instead of storing it, and no mask depends on the thread count or launch shape.
#pragma once

#include <cstdint>

#include "models/kernel_math/host_device.h"

namespace scalescope::kernel_math {

SS_HOST_DEVICE inline uint64_t dropout_hash(uint64_t seed, uint64_t pass, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (pass + 1) + 0xd1b54a32d192ed03ULL * index;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Whether element `index` survives pass `pass`: a uniform of 24 bits (exact in float) at or
// above `rate`, so with probability 1 − rate.
SS_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t pass, uint64_t index, float rate) {
  return static_cast<float>(dropout_hash(seed, pass, index) >> 40) * 0x1.0p-24f >= rate;
}

// A survivor is scaled by 1 / (1 − rate) so that the expectation is unchanged (inverted dropout,
// as PyTorch's); forward and backward apply the same map.
SS_HOST_DEVICE inline float dropout_apply(float x, bool keep, float scale) {
  return keep ? x * scale : 0.0f;
}

}  // namespace scalescope::kernel_math
