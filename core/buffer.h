// Owned memory of one device, move-only: DeviceBuffer (device memory) and HostBuffer (host
// memory that copies to and from the device can use asynchronously; pinned on CUDA).
#pragma once

#include <cstddef>
#include <utility>

#include "core/device.h"

namespace scalescope {
namespace detail {

struct DeviceMemory {
  static void* allocate(Device& device, size_t bytes) { return device.allocate(bytes); }
  static void release(Device& device, void* ptr, size_t bytes) noexcept {
    device.deallocate(ptr, bytes);
  }
};

struct HostMemory {
  static void* allocate(Device& device, size_t bytes) { return device.allocate_host(bytes); }
  static void release(Device& device, void* ptr, size_t) noexcept { device.deallocate_host(ptr); }
};

template <class Memory>
class OwnedMemory {
 public:
  OwnedMemory() = default;
  OwnedMemory(Device& device, size_t bytes)
      : device_(&device),
        ptr_(bytes > 0 ? Memory::allocate(device, bytes) : nullptr),
        bytes_(bytes) {}
  // The device restores whatever it needs (its own device current) when releasing.
  ~OwnedMemory() {
    if (ptr_ != nullptr) Memory::release(*device_, ptr_, bytes_);
  }
  OwnedMemory(OwnedMemory&& other) noexcept { swap(other); }
  OwnedMemory& operator=(OwnedMemory&& other) noexcept {
    OwnedMemory(std::move(other)).swap(*this);
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device* device() const { return device_; }
  bool empty() const { return ptr_ == nullptr; }

  void swap(OwnedMemory& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
  }

 private:
  Device* device_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace detail

using DeviceBuffer = detail::OwnedMemory<detail::DeviceMemory>;
using HostBuffer = detail::OwnedMemory<detail::HostMemory>;

}  // namespace scalescope
