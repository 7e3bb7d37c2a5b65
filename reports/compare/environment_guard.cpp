#include "reports/compare/environment_guard.h"

namespace scalescope {

namespace {

std::string or_none(const std::string& value) {
  return value.empty() ? "none" : value;
}

std::string gpu_names(const Environment& env) {
  if (env.gpus.empty()) return "none";
  std::string out;
  for (const GpuInfo& g : env.gpus) out += (out.empty() ? "" : ", ") + g.name;
  return out;
}

}  // namespace

std::vector<EnvironmentDifference> compare_environments(const Environment& baseline,
                                                        const Environment& current) {
  std::vector<EnvironmentDifference> out;
  const auto differ = [&out](const char* what, const std::string& a, const std::string& b) {
    if (a != b) out.push_back({what, a, b});
  };
  differ("GPU models", gpu_names(baseline), gpu_names(current));
  differ("GPU count", std::to_string(baseline.gpus.size()), std::to_string(current.gpus.size()));
  differ("CUDA driver", or_none(baseline.libraries.cuda_driver),
         or_none(current.libraries.cuda_driver));
  differ("CUDA runtime", or_none(baseline.libraries.cuda_runtime),
         or_none(current.libraries.cuda_runtime));
  differ("cuDNN", or_none(baseline.libraries.cudnn), or_none(current.libraries.cudnn));
  differ("NCCL", or_none(baseline.libraries.nccl), or_none(current.libraries.nccl));
  differ("oneDNN", or_none(baseline.libraries.onednn), or_none(current.libraries.onednn));
  differ("Gloo", or_none(baseline.libraries.gloo), or_none(current.libraries.gloo));
  differ("build type", or_none(baseline.build.build_type), or_none(current.build.build_type));
  differ("CPU model", or_none(baseline.host.cpu_model), or_none(current.host.cpu_model));
  differ("logical cores", std::to_string(baseline.host.logical_cores),
         std::to_string(current.host.logical_cores));
  differ("usable cores", std::to_string(baseline.host.usable_cores),
         std::to_string(current.host.usable_cores));
  return out;
}

}  // namespace scalescope
