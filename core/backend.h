// The runtime registry of backends. One binary holds every backend it was built with; which
// one runs is chosen when the program runs (`--devices cpu:4` works on a GPU machine too).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace scalescope {

struct BackendOptions {
  // CPU: threads each device's kernels use (0: all cores divided by the replica count).
  int cpu_threads = 0;
  // CPU: how many devices share the machine (divides the default thread count).
  int cpu_devices = 1;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual const char* name() const = 0;  // "cpu", "cuda"
  // Devices this backend can open now; 0 with a reason when unusable (no driver, no GPU).
  virtual int device_count() const = 0;
  virtual std::string unavailable_reason() const = 0;
  // Opens device `index`. CPU devices are logical: any index is valid, each is one replica.
  virtual std::unique_ptr<Device> open(int index, const BackendOptions& options) = 0;
};

// Backends built into this binary, CPU first. Holds factories only: no device or driver
// object lives in a static.
const std::vector<Backend*>& backends();
// The backend for `kind`; throws Error naming the kind when this build lacks it.
Backend& backend(DeviceKind kind);

}  // namespace scalescope
