#include "core/check.h"
#include "models/cuda/cuda_kernels.h"

namespace scalescope {

std::unique_ptr<LayerKernel> make_cuda_layer_norm(const LayerNormSpec& /*spec*/,
                                                  const LayerBinding& /*binding*/,
                                                  CudaDevice& /*device*/) {
  throw_error("LayerNormSpec has no kernel yet");
}

}  // namespace scalescope
