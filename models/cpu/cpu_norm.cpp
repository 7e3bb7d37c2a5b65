// PLACEHOLDER while the CPU kernel is written (replaced before this lands).
#include "core/check.h"
#include "models/cpu/cpu_kernels.h"

namespace scalescope {

std::unique_ptr<LayerKernel> make_cpu_batch_norm(const BatchNorm2DSpec&, const LayerBinding&,
                                                 Device&) {
  throw_error("BatchNorm2D has no CPU kernel yet");
}

}  // namespace scalescope
