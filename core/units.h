// How a size reads in text: one place for the reports, the HTML page and the CLI.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace scalescope {

// "16.0 GiB": memory sizes of devices and hosts, to a tenth of a GiB.
inline std::string gib(int64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

// "10.27 GiB", "23.8 MiB", "192.1 KiB": planned and measured memory, where a tenth of a GiB
// is too coarse.
inline std::string memory_size(int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024.0 * 1024.0)
    return fmt::format("{:.2f} GiB", b / (1024.0 * 1024.0 * 1024.0));
  if (b >= 1024.0 * 1024.0) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024.0));
  return fmt::format("{:.1f} KiB", b / 1024.0);
}

// The largest size in MiB an option takes, 2^40 MiB (1 EiB): its bytes, 2^60, fit an int64_t,
// which a double of MiB past 2^43 would not (llround then returns a meaningless value).
inline constexpr double kMaxMiB = 1099511627776.0;

// The bytes of a size of `mib` MiB in (0, kMaxMiB], to the nearest byte and at least one.
inline int64_t mib_to_bytes(double mib) {
  return std::max<int64_t>(1, std::llround(std::min(mib, kMaxMiB) * 1024 * 1024));
}

}  // namespace scalescope
