// The collectives of CUDA replicas: NCCL for device memory, Gloo for host values.
#include <fmt/format.h>
#include <nccl.h>

#include "core/check.h"
#include "harness/collectives/collective_backends.h"
#include "harness/collectives/nccl_communicator.h"

namespace scalescope {
namespace {

class NcclDeviceGroup final : public DeviceCollectiveGroup {
 public:
  NcclDeviceGroup(int size, std::chrono::milliseconds timeout, ShareGroupId share_id,
                  int first_global_rank)
      : group_(size, timeout, std::move(share_id), first_global_rank) {}

  std::unique_ptr<Communicator> connect(int rank, int device_index, int global_rank, int world_size,
                                        std::unique_ptr<Communicator> host_comm) override {
    return group_.connect(rank, device_index, global_rank, world_size, std::move(host_comm));
  }
  std::unique_ptr<Communicator> split(Communicator& global, int color, int key,
                                      std::unique_ptr<Communicator> host_comm) override {
    auto* nccl = dynamic_cast<NcclCommunicator*>(&global);
    SS_CHECK(nccl != nullptr, "rank {}: a {} communicator is not NCCL's", global.rank(),
             global.backend_name());
    return nccl->split(color, key, std::move(host_comm));
  }
  void abort(const std::string& why) override { group_.abort(why); }

 private:
  NcclGroup group_;
};

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return kUnknownVersion;
  // NCCL >= 2.9 encodes 10000 * major + 100 * minor + patch, older ones 1000 * major + ...
  return v >= 20900 ? fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
                    : fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
}

class NcclCollectiveBackend final : public CollectiveBackend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::vector<LibraryVersion> library_versions() const override {
    return {gloo_version(), {"nccl", nccl_version()}};
  }
  const char* device_collectives() const override { return "NCCL"; }
  std::unique_ptr<DeviceCollectiveGroup> create_group(int size, std::chrono::milliseconds timeout,
                                                      ShareGroupId share_id,
                                                      int first_global_rank) const override {
    return std::make_unique<NcclDeviceGroup>(size, timeout, std::move(share_id), first_global_rank);
  }
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_nccl_collective_backend() {
  return std::make_unique<NcclCollectiveBackend>();
}

}  // namespace scalescope
