#include "models/cpu/cpu_kernels.h"

#include "core/check.h"

namespace scalescope {

CpuDevice& CpuKernelBackend::cpu(Device& device) {
  auto* cpu_device = dynamic_cast<CpuDevice*>(&device);
  SS_CHECK(cpu_device != nullptr, "CPU kernels asked for on {}", to_string(device.id()));
  return *cpu_device;
}

}  // namespace scalescope
