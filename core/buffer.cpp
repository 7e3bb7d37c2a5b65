#include "core/buffer.h"

namespace scalescope {

DeviceBuffer::DeviceBuffer(Device& device, size_t bytes) : device_(&device), bytes_(bytes) {
  if (bytes > 0) ptr_ = device.allocate(bytes);
}

DeviceBuffer::~DeviceBuffer() {
  // The device restores whatever it needs (its own device current) inside deallocate.
  if (ptr_ != nullptr) device_->deallocate(ptr_, bytes_);
}

}  // namespace scalescope
