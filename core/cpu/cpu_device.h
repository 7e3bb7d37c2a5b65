// The CPU backend: a logical device per replica. Work enqueued on a CPU stream runs inline
// on the calling thread, so an event recorded after it reads the steady clock at the moment
// the work finished.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/backend.h"
#include "core/device.h"

namespace scalescope {

class CpuDevice final : public Device {
 public:
  // `plan_only`: BackendOptions::plan_only.
  CpuDevice(int index, int threads, bool plan_only = false);
  ~CpuDevice() override;

  DeviceId id() const override { return DeviceId{DeviceKind::kCpu, index_}; }
  std::string name() const override;
  void make_current() override;
  int threads() const override { return threads_; }
  bool host_accessible() const override { return true; }
  bool plans_only() const override { return plan_only_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) noexcept override;
  // Every allocate() is one aligned_alloc: no cache on CPU, where malloc's own free lists
  // already make a repeated allocation cheap and nothing synchronizes.
  int64_t device_allocations() const override {
    return allocations_.load(std::memory_order_relaxed);
  }
  void* allocate_host(size_t bytes) override;
  void deallocate_host(void* ptr) noexcept override;
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  Stream& default_stream() override { return *default_stream_; }
  void copy_to_device(void* dst, const void* host_src, size_t bytes, Stream& stream) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes, Stream& stream) override;
  void copy_on_device(void* dst, const void* src, size_t bytes, Stream& stream) override;
  void fill_zero(void* dst, size_t bytes, Stream& stream) override;

 private:
  int index_;
  int threads_;
  bool plan_only_;
  std::atomic<int64_t> allocations_{0};
  // The compute, copy and communication stream at once (Device's defaults): work runs
  // inline on the calling thread, so separate streams would order nothing differently.
  std::unique_ptr<Stream> default_stream_;
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace scalescope
