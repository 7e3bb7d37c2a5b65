#include "core/check.h"
#include "models/cpu/cpu_kernels.h"

namespace scalescope {

std::unique_ptr<LayerKernel> make_cpu_attention(const CausalSelfAttentionSpec& /*spec*/,
                                                const LayerBinding& /*binding*/,
                                                Device& /*device*/) {
  throw_error("CausalSelfAttentionSpec has no kernel yet");
}

}  // namespace scalescope
