#include "core/backend.h"

#include "core/check.h"
#include "core/cpu/cpu_device.h"
#if SCALESCOPE_WITH_CUDA
#include "core/cuda/cuda_device.h"
#endif

namespace scalescope {
namespace {

std::vector<std::unique_ptr<Backend>> make_backends() {
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(make_cpu_backend());
#if SCALESCOPE_WITH_CUDA
  list.push_back(make_cuda_backend());
#endif
  return list;
}

}  // namespace

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
    case DeviceKind::kSim:
      return "sim";
  }
  return "?";
}

std::string to_string(const DeviceId& id) {
  return fmt::format("{}:{}", to_string(id.kind), id.index);
}

void Device::throw_memory_limit(size_t bytes, int64_t in_use) const {
  throw_error(fmt::format(
      "out of memory: allocating {} bytes on {} with {} in use would pass its limit of {} bytes",
      bytes, to_string(id()), in_use, limit_));
}

const std::vector<Backend*>& backends() {
  // Backend objects are factories with no driver state, so a function-local static is safe.
  static const std::vector<std::unique_ptr<Backend>> owned = make_backends();
  static const std::vector<Backend*> view = [] {
    std::vector<Backend*> v;
    for (const auto& b : owned) v.push_back(b.get());
    return v;
  }();
  return view;
}

Backend& backend(DeviceKind kind) {
  for (Backend* b : backends()) {
    if (b->kind() == kind) return *b;
  }
  throw_error(
      fmt::format("this scalescope was built without the {} backend (rebuild with "
                  "-DSCALESCOPE_WITH_CUDA=ON on a machine with the CUDA toolkit)",
                  to_string(kind)));
}

}  // namespace scalescope
