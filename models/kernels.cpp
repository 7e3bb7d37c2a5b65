#include "models/kernels.h"

#include "core/check.h"
#include "models/cpu/cpu_kernels.h"

namespace scalescope {

KernelBackend& kernel_backend(DeviceKind kind) {
  // Stateless dispatchers: safe as function-local statics.
  static CpuKernelBackend cpu;
  if (kind == DeviceKind::kCpu) return cpu;
  // The CUDA kernels (models/cuda) come with the GPU backend issue; until then a CUDA device
  // can be opened but not trained on, and says so.
  throw_error(fmt::format("this scalescope has no {} layer kernels yet; use --devices cpu:N",
                          to_string(kind)));
}

}  // namespace scalescope
