// How a size reads in text: one place for the reports, the HTML page and the CLI.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace scalescope {

// "16.0 GiB": memory sizes of devices and hosts, to a tenth of a GiB.
inline std::string gib(int64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace scalescope
