// The registration place of the collective backends: the only code of harness that asks which
// backends this build has.
#include "harness/collectives/collective_backends.h"

#include <fmt/format.h>
#include <gloo/config.h>

#include <string_view>

#include "core/build_info.h"
#include "core/check.h"
#include "harness/collectives/nccl_communicator.h"
#include "harness/collectives/sim_collectives.h"

namespace scalescope {
namespace {

// CPU replicas: their device memory is host memory, which Gloo reduces directly.
class GlooCollectiveBackend final : public CollectiveBackend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::vector<LibraryVersion> library_versions() const override { return {gloo_version()}; }
  const char* device_collectives() const override { return nullptr; }
  std::unique_ptr<DeviceCollectiveGroup> create_group(int, std::chrono::milliseconds, ShareGroupId,
                                                      int) const override {
    throw_error("CPU replicas have no device collectives: Gloo carries their collectives");
  }
};

std::vector<std::unique_ptr<CollectiveBackend>> make_collective_backends() {
  std::vector<std::unique_ptr<CollectiveBackend>> list;
  list.push_back(std::make_unique<GlooCollectiveBackend>());
  list.push_back(make_sim_collective_backend());
#if SCALESCOPE_WITH_CUDA
  list.push_back(make_nccl_collective_backend());
#endif
  return list;
}

// Factories without NCCL or CUDA state: safe in a function-local static.
const BackendRegistry<CollectiveBackend>& registry() {
  static const BackendRegistry<CollectiveBackend> table(make_collective_backends());
  return table;
}

}  // namespace

const std::vector<CollectiveBackend*>& collective_backends() {
  return registry().all();
}

CollectiveBackend& collective_backend(DeviceKind kind) {
  return registry().get(kind);
}

LibraryVersion gloo_version() {
  // The header's version; the package version tells which snapshot of Gloo it really is.
  std::string text =
      fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
  if (std::string_view(build_info::kGlooPackageVersion) != kUnknownVersion) {
    text += fmt::format(" (libgloo-dev {})", build_info::kGlooPackageVersion);
  }
  return {"gloo", text};
}

}  // namespace scalescope
