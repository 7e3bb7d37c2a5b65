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

// The largest size in MiB an option takes, 2^40 MiB (1 EiB): its bytes, 2^60, fit an int64_t,
// which a double of MiB past 2^43 would not (llround then returns a meaningless value).
inline constexpr double kMaxMiB = 1099511627776.0;

// The bytes of a size of `mib` MiB in (0, kMaxMiB], to the nearest byte and at least one.
inline int64_t mib_to_bytes(double mib) {
  return std::max<int64_t>(1, std::llround(std::min(mib, kMaxMiB) * 1024 * 1024));
}

}  // namespace scalescope
