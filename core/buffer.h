// DeviceBuffer: memory on one device, owned, move-only.
#pragma once

#include <cstddef>
#include <utility>

#include "core/device.h"

namespace scalescope {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device& device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device* device() const { return device_; }
  bool empty() const { return ptr_ == nullptr; }

  void swap(DeviceBuffer& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
  }

 private:
  Device* device_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Host memory for asynchronous copies to and from one device (pinned on CUDA), move-only.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(Device& device, size_t bytes)
      : device_(&device), ptr_(bytes > 0 ? device.allocate_host(bytes) : nullptr), bytes_(bytes) {}
  ~HostBuffer() {
    if (ptr_ != nullptr) device_->deallocate_host(ptr_);
  }
  HostBuffer(HostBuffer&& other) noexcept { swap(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    HostBuffer(std::move(other)).swap(*this);
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void swap(HostBuffer& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
  }

 private:
  Device* device_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace scalescope
