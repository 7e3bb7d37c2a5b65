// PLACEHOLDER until the oneDNN layers land.
#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
namespace scalescope {
std::unique_ptr<LayerKernel> make_cpu_layer(const LayerSpec&, const LayerBinding&, CpuDevice&) {
  throw_error("not yet");
}
}  // namespace scalescope
