// PLACEHOLDER while the CUDA kernels are written (replaced before this lands).
#include "core/check.h"
#include "models/cuda/cuda_kernels.h"

namespace scalescope {

std::unique_ptr<LayerKernel> make_cuda_batch_norm(const BatchNorm2DSpec&, const LayerBinding&,
                                                  CudaDevice&) {
  throw_error("BatchNorm2D has no CUDA kernel yet");
}
std::unique_ptr<LayerKernel> make_cuda_pad_shortcut(const PadShortcutSpec&, const LayerBinding&) {
  throw_error("PadShortcut has no CUDA kernel yet");
}

}  // namespace scalescope
