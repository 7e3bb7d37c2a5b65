// Parsing of device lists, in one place:
//   "cpu"        one CPU device          "cpu:4"      four CPU devices (replicas)
//   "cuda"       every GPU               "cuda:0,1"   GPUs 0 and 1
//   "4"          four devices of the default backend (GPUs when any exist, else CPU)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"

namespace scalescope {

struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;
  // The devices, in replica order (CPU devices are numbered 0..N-1).
  std::vector<int> indices;
  int count() const { return static_cast<int>(indices.size()); }
};

// Throws Error naming the text and what is accepted. Does not check availability.
DeviceSpec parse_device_spec(std::string_view text);
// Checks that the devices exist on this machine; throws Error naming the missing ones.
void check_devices_available(const DeviceSpec& spec);
std::string to_string(const DeviceSpec& spec);

}  // namespace scalescope
