// Deterministic random numbers: the same seed gives the same values on every machine,
// backend and thread count (values are generated on the host, never by a library whose
// sequence could change).
#pragma once

#include <cmath>
#include <cstdint>

namespace scalescope {

// SplitMix64: small, fast, and fully specified.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // A generator for stream `stream` of `seed`, independent of the others.
  Rng(uint64_t seed, uint64_t stream) : state_(mix(seed ^ mix(stream + 0x632be59bd9b4e019ULL))) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    return mix(z);
  }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint64_t below(uint64_t n) { return next() % n; }
  // Standard normal (Box-Muller).
  float normal() {
    const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

}  // namespace scalescope
