#include "models/cpu/cpu_kernels.h"

#include <oneapi/dnnl/dnnl.h>

#include <string_view>

#include "core/check.h"

namespace scalescope {

CpuDevice& CpuKernelBackend::cpu(Device& device) {
  auto* cpu_device = dynamic_cast<CpuDevice*>(&device);
  SS_CHECK(cpu_device != nullptr, "CPU kernels asked for on {}", to_string(device.id()));
  return *cpu_device;
}

std::vector<LibraryVersion> CpuKernelBackend::library_versions() const {
  const dnnl_version_t* v = dnnl_version();
  std::string text = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
  // Distribution builds often have no hash ("N/A").
  if (v->hash != nullptr && *v->hash != '\0' && std::string_view(v->hash) != "N/A") {
    text += fmt::format(" ({})", v->hash);
  }
  return {{"onednn", text}};
}

}  // namespace scalescope
