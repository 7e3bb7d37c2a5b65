#include "core/check.h"
#include "models/cuda/cuda_kernels.h"

namespace scalescope {

std::unique_ptr<LayerKernel> make_cuda_embedding(const EmbeddingSpec& /*spec*/,
                                                 const LayerBinding& /*binding*/,
                                                 CudaDevice& /*device*/) {
  throw_error("EmbeddingSpec has no kernel yet");
}

std::unique_ptr<LayerKernel> make_cuda_position_embedding(const PositionEmbeddingSpec& /*spec*/,
                                                          const LayerBinding& /*binding*/,
                                                          CudaDevice& /*device*/) {
  throw_error("PositionEmbeddingSpec has no kernel yet");
}

}  // namespace scalescope
