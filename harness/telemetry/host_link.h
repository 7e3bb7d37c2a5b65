// The link between the host and a device: how fast copies cross it from pinned (page-locked)
// host memory, which a DMA engine reads directly, and from pageable memory, which the driver
// first stages through a pinned buffer of its own. A batch staged from pageable memory moves
// at the second rate, which is why the trainer stages through pinned memory.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

#include "core/device.h"

namespace scalescope {

struct HostLinkBandwidth {
  size_t bytes = 0;  // per copy
  int repeats = 0;   // timed copies per direction and memory kind, after one untimed
  // Medians over the repeats, in GB/s (10^9 bytes per second).
  double h2d_pinned_gbps = 0.0;
  double h2d_pageable_gbps = 0.0;
  double d2h_pinned_gbps = 0.0;
  double d2h_pageable_gbps = 0.0;
  std::string error;  // why nothing was measured (the rates are then 0)
};

// Times copies of `bytes` each way on the device's copy stream, from the host clock around
// each copy and the stream's synchronisation (what a caller waiting for a copy sees).
// Never throws: a failure is in `error`. REQUIRES: the device current on this thread.
HostLinkBandwidth measure_host_link(Device& device, size_t bytes, int repeats);

nlohmann::json to_json(const HostLinkBandwidth& b);

}  // namespace scalescope
