// The registration place of core's device backends: the only code of core that asks which
// backends this build has.
#include "core/backend.h"

#include <algorithm>

#include "core/check.h"
#include "core/cpu/cpu_device.h"
#include "core/enum_names.h"
#include "core/sim/sim_device.h"
#if SCALESCOPE_WITH_CUDA
#include "core/cuda/cuda_device.h"
#endif

namespace scalescope {
namespace {

std::vector<std::unique_ptr<Backend>> make_backends() {
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(make_cpu_backend());
  list.push_back(make_sim_backend());
#if SCALESCOPE_WITH_CUDA
  list.push_back(make_cuda_backend());
#endif
  return list;
}

const BackendRegistry<Backend>& registry() {
  static const BackendRegistry<Backend> table(make_backends());
  return table;
}

}  // namespace

const char* to_string(DeviceKind kind) {
  static constexpr auto kNames = enum_names<DeviceKind>("cpu", "cuda", "sim");
  return kNames(kind).data();
}

std::string to_string(const DeviceId& id) {
  // Not "cuda:1", which as a device list means one GPU.
  return fmt::format("{} device {}", to_string(id.kind), id.index);
}

void Event::check_elapsed(const Event* start_as_mine, bool timing, bool start_timing) {
  SS_CHECK(start_as_mine != nullptr, "elapsed time between events of different backends");
  SS_CHECK(timing && start_timing,
           "elapsed time of an ordering event (created by create_ordering_event, without "
           "timing)");
}

namespace {

// "" or how much of the device's memory libraries hold outside the allocator.
std::string outside_share(int64_t outside) {
  if (outside <= 0) return "";
  return fmt::format(
      " and {} bytes held by libraries outside scalescope's allocator (NCCL's "
      "buffers, cuBLAS's workspaces)",
      outside);
}

}  // namespace

void Device::throw_memory_limit(size_t bytes, int64_t in_use) const {
  throw OutOfMemoryError(fmt::format(
      "out of memory: allocating {} bytes on {} with {} in use{} would pass its limit of {} bytes",
      bytes, to_string(id()), in_use, outside_share(outside_.load(std::memory_order_relaxed)),
      limit_));
}

int64_t Device::count_outside_memory() {
  const int64_t outside = std::max<int64_t>(memory_outside_allocator(), 0);
  outside_.store(outside, std::memory_order_relaxed);
  const int64_t in_use = memory_in_use();
  if (limit_ > 0 && in_use + outside > limit_) {
    throw OutOfMemoryError(
        fmt::format("out of memory: {} holds {} bytes{}, more than its limit of {} bytes",
                    to_string(id()), in_use, outside_share(outside), limit_));
  }
  return outside;
}

PeerAccess Backend::peer_access(int a, int b) const {
  return {false, fmt::format("{} devices are not physical: no peer access between {}:{} and {}:{}",
                             name(), name(), a, name(), b)};
}

std::string missing_backend_message(DeviceKind kind) {
  // CUDA is the one backend a build may lack: saying how to get it needs no other kind.
  const std::string how = kind == DeviceKind::kCuda
                              ? "rebuild with -DSCALESCOPE_WITH_CUDA=ON on a machine with the "
                                "CUDA toolkit, cuDNN and NCCL; "
                              : "";
  return fmt::format(
      "this scalescope was built without the {} backend ({}use --devices cpu:N meanwhile)",
      to_string(kind), how);
}

const std::vector<Backend*>& backends() {
  return registry().all();
}

Backend* find_backend(DeviceKind kind) {
  return registry().find(kind);
}

Backend& backend(DeviceKind kind) {
  return registry().get(kind);
}

}  // namespace scalescope
