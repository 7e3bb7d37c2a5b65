#include "models/cuda/cuda_kernels.h"

#include "core/check.h"

namespace scalescope {

CudaDevice& CudaKernelBackend::cuda(Device& device) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  SS_CHECK(cuda_device != nullptr, "CUDA kernels asked for on {}", to_string(device.id()));
  return *cuda_device;
}

}  // namespace scalescope
