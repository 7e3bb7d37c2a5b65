#include "core/check.h"
#include "models/cpu/cpu_kernels.h"

namespace scalescope {

std::unique_ptr<LayerKernel> make_cpu_layer_norm(const LayerNormSpec& /*spec*/,
                                                 const LayerBinding& /*binding*/,
                                                 Device& /*device*/) {
  throw_error("LayerNormSpec has no kernel yet");
}

}  // namespace scalescope
