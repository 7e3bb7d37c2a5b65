// The CUDA backend of core: one Device per GPU, streams and events mapping one to one on
// cudaStream_t / cudaEvent_t. Every destructor makes its device current for its calls and
// restores the thread's previous one. Device
// memory comes from the caching allocator (core/caching_allocator.h) over cudaMalloc.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "core/backend.h"
#include "core/caching_device.h"
#include "core/device.h"

namespace scalescope {

// Restores the previously current device when it goes out of scope.
class ScopedCudaDevice {
 public:
  explicit ScopedCudaDevice(int device);
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;

 private:
  int previous_ = -1;
};

// The same for paths that must not throw (destructors, memory given back): failures are
// logged, and ok() says whether the device could be made current. A destructor that left its
// own device current would move a thread that drives several GPUs onto the wrong one.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) noexcept;
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

  bool ok() const { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = false;
};

class CudaDevice;

// REQUIRES: destroyed before its device (it fences the device's freed memory while alive).
class CudaStream final : public Stream {
 public:
  // Non-blocking with respect to the legacy stream; registered with the device's allocator,
  // so that memory freed while this stream still has work queued is not reused too early.
  explicit CudaStream(CudaDevice& device);
  ~CudaStream() override;
  Device& device() const override;
  void synchronize() override;
  bool idle() const override;
  cudaStream_t get() const { return stream_; }

 private:
  CudaDevice& device_;
  cudaStream_t stream_ = nullptr;
};

class CudaEvent final : public Event {
 public:
  // `timing` false: cudaEventDisableTiming, for events that only order work.
  explicit CudaEvent(int device, bool timing = true);
  ~CudaEvent() override;
  void record(Stream& stream) override;
  void wait_on(Stream& stream) const override;
  void synchronize() const override;
  // Polls cudaEventQuery (core/backoff.h) until the event is reached, fails or the timeout
  // passes.
  bool synchronize_for(std::chrono::milliseconds timeout) const override;
  bool query() const override;
  double elapsed_ms_since(const Event& start) const override;
  cudaEvent_t get() const { return event_; }

 private:
  int device_;
  bool timing_;
  cudaEvent_t event_ = nullptr;
};

class CudaDevice final : public CachingDevice {
 public:
  explicit CudaDevice(int index);
  ~CudaDevice() override;

  DeviceId id() const override { return DeviceId{DeviceKind::kCuda, index_}; }
  std::string name() const override;
  std::string pci_bus_id() const override;
  void make_current() override;
  void start_profiler() override;
  void stop_profiler() override;
  // Pinned (page-locked) host memory from cudaMallocHost, uncached: staging buffers are
  // allocated once per run.
  void* allocate_host(size_t bytes) override;
  void deallocate_host(void* ptr) noexcept override;
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  std::unique_ptr<Event> create_ordering_event() override;
  // Three non-blocking streams of this device, created with it: compute (the default),
  // host-to-device copies, collectives.
  Stream& default_stream() override { return *default_stream_; }
  Stream& copy_stream() override { return *copy_stream_; }
  Stream& comm_stream() override { return *comm_stream_; }
  void copy_to_device(void* dst, const void* host_src, size_t bytes, Stream& stream) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes, Stream& stream) override;
  void copy_on_device(void* dst, const void* src, size_t bytes, Stream& stream) override;
  void fill_zero(void* dst, size_t bytes, Stream& stream) override;

 private:
  class Memory;  // cudaMalloc and cudaFree, for the caching allocator
  // The driver's view of the device's memory, for an out-of-memory error.
  std::string out_of_memory_details() const override;
  // The device's used memory (the driver's count, so other processes on the GPU add to it)
  // less what it was when this device was opened and what the allocator reserved.
  int64_t memory_outside_allocator() const override;

  int index_;
  int64_t used_when_opened_ = 0;  // the context, streams and whatever ran before
  std::unique_ptr<CudaStream> default_stream_;
  std::unique_ptr<CudaStream> copy_stream_;
  std::unique_ptr<CudaStream> comm_stream_;
};

// REQUIRES: `stream` is a CUDA stream; throws Error otherwise.
cudaStream_t cuda_stream(Stream& stream);

std::unique_ptr<Backend> make_cuda_backend();

}  // namespace scalescope
