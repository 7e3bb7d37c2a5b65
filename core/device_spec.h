// Device lists, in one place. A list names a kind and how many devices of it:
//   "cpu"     one CPU device         "cpu:4"    four CPU devices (replicas)
//   "sim"     one simulated device   "sim:4"    four simulated accelerators
//   "cuda"    every visible GPU      "cuda:4"   four GPUs: the first four visible
//   "4"       four devices of the default kind (GPUs where any are visible, else CPU)
// As in every framework, which GPUs are visible is CUDA_VISIBLE_DEVICES's business: the count
// takes them in that order. A sweep's axis lists several counts of one kind ("cuda:1,2,4",
// "cpu:1,2", "1,2,4,8").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"

namespace scalescope {

struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;
  int devices = 1;  // replica r runs on device r of the kind (the r-th visible GPU)
  int count() const { return devices; }
};

// Throws Error naming the text and what is accepted; a list of counts is refused with a
// pointer to the sweep, and "cuda:0" with the meaning of the count. Does not check
// availability.
DeviceSpec parse_device_spec(std::string_view text);
// Checks that the devices exist on this machine; throws Error naming what is missing.
void check_devices_available(const DeviceSpec& spec);
std::string to_string(const DeviceSpec& spec);

// The device counts of a sweep: one kind, ascending unique counts.
struct DeviceAxis {
  DeviceKind kind = DeviceKind::kCpu;
  std::vector<int> counts;
};
// Throws Error naming a malformed count. REQUIRES: `text` is not empty (see
// default_device_axis for the sweep without a list).
DeviceAxis parse_device_axis(std::string_view text);
std::string to_string(const DeviceAxis& axis);  // "cuda:1,2,4"

// The axis of a sweep given no list, and why, in words for its first line: the GPUs where any
// are visible (1, 2, 4, ... up to and including all of them), else CPU devices 1 and 2 (1
// alone on one usable core); in a launch of several processes, CPU devices 1, 2, 4, ... up to
// one per process (each process's cores are its own or its node's, whichever its binding
// gives it: core/cpu_affinity.h). A plain function of what the backends report.
struct DefaultDevices {
  DeviceAxis axis;
  std::string reason;
};
DefaultDevices default_device_axis(int visible_gpus, int usable_cores,
                                   std::string_view no_gpu_reason, int processes = 1);
// The same, asking this machine's backends.
DefaultDevices default_device_axis(int processes = 1);

// CPU replicas that together run more compute threads than the cores their process may use
// take turns on those cores, so their step times measure that sharing, not the devices. The
// one rule behind a sweep's refusal without --oversubscribe, train's note and the scaling
// verdict's "oversubscribed" finding. Unknown cores (0) are never oversubscribed.
inline int64_t compute_threads(int replicas, int threads_per_replica) {
  return static_cast<int64_t>(replicas) * threads_per_replica;
}
inline bool oversubscribed(int replicas, int threads_per_replica, int usable_cores) {
  return usable_cores > 0 && compute_threads(replicas, threads_per_replica) > usable_cores;
}

}  // namespace scalescope
