// A device whose memory comes from the caching allocator (GPUs, simulated devices): the
// allocator over the device's memory source, and Device's memory functions over it.
#pragma once

#include <memory>
#include <string>

#include "core/caching_allocator.h"
#include "core/device.h"

namespace scalescope {

class CachingDevice : public Device {
 public:
  // Through the allocator: a block freed earlier is reused when no queued work can still use
  // it, else the source is asked; when that runs out of memory, the cache is given back and
  // the source asked once more before Error (naming the size and the memory in use) is
  // thrown. memory_in_use() and peak_memory() count the sizes asked for, not the rounded
  // blocks.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) noexcept override;
  int64_t device_allocations() const override { return allocator_->device_allocations(); }
  int64_t memory_reserved() const override { return allocator_->reserved_bytes(); }
  void release_cached_memory() noexcept override { allocator_->release_cached(); }
  void set_wait_timeout(std::chrono::milliseconds timeout) override {
    allocator_->set_wait_timeout(timeout);
  }
  CachingAllocator& allocator() { return *allocator_; }

 protected:
  // `library` names the errors of a failed allocation ("CUDA"); `name` the device in logged
  // problems ("cuda device 0"). The source may refer to the derived device, which it is only asked
  // for once constructed. The derived device's streams register with allocator() and are
  // destroyed before it (they are its members; the allocator is this base's).
  CachingDevice(std::string library, std::string name,
                std::unique_ptr<CachingAllocator::Source> source);
  // What the system adds when memory runs out (a GPU driver's free memory); none by default.
  virtual std::string out_of_memory_details() const { return ""; }

 private:
  std::string library_;
  std::unique_ptr<CachingAllocator::Source> source_;
  std::unique_ptr<CachingAllocator> allocator_;  // after source_: destroyed before it
};

}  // namespace scalescope
