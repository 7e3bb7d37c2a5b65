#include "core/check.h"
#include "models/cpu/cpu_kernels.h"

namespace scalescope {

std::unique_ptr<LayerKernel> make_cpu_embedding(const EmbeddingSpec& /*spec*/,
                                                const LayerBinding& /*binding*/,
                                                Device& /*device*/) {
  throw_error("EmbeddingSpec has no kernel yet");
}

std::unique_ptr<LayerKernel> make_cpu_position_embedding(const PositionEmbeddingSpec& /*spec*/,
                                                         const LayerBinding& /*binding*/,
                                                         Device& /*device*/) {
  throw_error("PositionEmbeddingSpec has no kernel yet");
}

}  // namespace scalescope
