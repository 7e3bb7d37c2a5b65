#include "core/check.h"
#include "models/cuda/cuda_kernels.h"

namespace scalescope {

std::unique_ptr<LayerKernel> make_cuda_attention(const CausalSelfAttentionSpec& /*spec*/,
                                                 const LayerBinding& /*binding*/,
                                                 CudaDevice& /*device*/) {
  throw_error("CausalSelfAttentionSpec has no kernel yet");
}

}  // namespace scalescope
