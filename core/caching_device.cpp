#include "core/caching_device.h"

#include <fmt/format.h>

#include "core/error.h"

namespace scalescope {

CachingDevice::CachingDevice(std::string library, std::string name,
                             std::unique_ptr<CachingAllocator::Source> source)
    : library_(std::move(library)),
      source_(std::move(source)),
      allocator_(std::make_unique<CachingAllocator>(std::move(name), *source_)) {}

void* CachingDevice::allocate(size_t bytes) {
  count_allocation(bytes);
  std::string error;
  void* ptr = nullptr;
  try {
    ptr = allocator_->allocate(bytes, error);
  } catch (...) {
    count_deallocation(bytes);
    throw;
  }
  if (ptr != nullptr) return ptr;
  count_deallocation(bytes);
  throw OutOfMemoryError(
      fmt::format("out of memory: cannot allocate {} bytes (a block of {}) on {}: {}; {} bytes in "
                  "use, {} reserved{}",
                  bytes, CachingAllocator::round_size(bytes), to_string(id()), error,
                  memory_in_use(), allocator_->reserved_bytes(), out_of_memory_details()),
      library_, "allocate");
}

void CachingDevice::deallocate(void* ptr, size_t bytes) noexcept {
  if (ptr == nullptr) return;
  allocator_->deallocate(ptr);
  count_deallocation(bytes);
}

}  // namespace scalescope
