#include "harness/telemetry/host_link.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"

namespace scalescope {
namespace {

// The median rate of `repeats` timed runs of `copy` (after one untimed: first-touch costs).
template <class Copy>
double median_gbps(Stream& stream, size_t bytes, int repeats, Copy&& copy) {
  copy();
  stream.synchronize();
  std::vector<double> rates;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    copy();
    stream.synchronize();
    const std::chrono::duration<double> s = std::chrono::steady_clock::now() - start;
    rates.push_back(s.count() > 0.0 ? static_cast<double>(bytes) / s.count() / 1e9 : 0.0);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

HostLinkBandwidth measure_host_link(Device& device, size_t bytes, int repeats) {
  HostLinkBandwidth b;
  b.bytes = bytes;
  b.repeats = std::max(1, repeats);
  try {
    DeviceBuffer on_device(device, bytes);
    HostBuffer pinned(device, bytes);
    std::vector<char> pageable(bytes);
    // Written once, so that no copy reads pages the kernel has not mapped yet.
    std::memset(pinned.data(), 1, bytes);
    std::memset(pageable.data(), 1, bytes);
    Stream& s = device.copy_stream();
    const auto to_device = [&](const void* src) {
      return [&, src] { device.copy_to_device(on_device.data(), src, bytes, s); };
    };
    const auto to_host = [&](void* dst) {
      return [&, dst] { device.copy_to_host(dst, on_device.data(), bytes, s); };
    };
    b.h2d_pinned_gbps = median_gbps(s, bytes, b.repeats, to_device(pinned.data()));
    b.h2d_pageable_gbps = median_gbps(s, bytes, b.repeats, to_device(pageable.data()));
    b.d2h_pinned_gbps = median_gbps(s, bytes, b.repeats, to_host(pinned.data()));
    b.d2h_pageable_gbps = median_gbps(s, bytes, b.repeats, to_host(pageable.data()));
  } catch (const Error& e) {
    b = HostLinkBandwidth{.bytes = bytes, .repeats = b.repeats, .error = e.what()};
  }
  return b;
}

nlohmann::json to_json(const HostLinkBandwidth& b) {
  if (!b.error.empty()) return {{"error", b.error}};
  return {{"bytes", b.bytes},
          {"repeats", b.repeats},
          {"h2d_pinned_gbps", b.h2d_pinned_gbps},
          {"h2d_pageable_gbps", b.h2d_pageable_gbps},
          {"d2h_pinned_gbps", b.d2h_pinned_gbps},
          {"d2h_pageable_gbps", b.d2h_pageable_gbps}};
}

}  // namespace scalescope
