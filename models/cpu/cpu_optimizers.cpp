// PLACEHOLDER until the CPU optimizers land.
#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
namespace scalescope {
std::unique_ptr<OptimizerKernel> make_cpu_optimizer(const OptimizerConfig&, int64_t, CpuDevice&) {
  throw_error("not yet");
}
}  // namespace scalescope
