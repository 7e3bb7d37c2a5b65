// The CUDA backend of core: one Device per GPU, streams and events mapping one to one on
// cudaStream_t / cudaEvent_t. Every destructor makes its device current first.
//
// Status: compiled on every CUDA build; has not yet run on a GPU (see the GPU issue).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "core/backend.h"
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

class CudaStream final : public Stream {
 public:
  explicit CudaStream(Device& device);  // non-blocking with respect to the legacy stream
  ~CudaStream() override;
  Device& device() const override { return device_; }
  void synchronize() override;
  cudaStream_t get() const { return stream_; }

 private:
  Device& device_;
  cudaStream_t stream_ = nullptr;
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(int device);
  ~CudaEvent() override;
  void record(Stream& stream) override;
  void wait_on(Stream& stream) const override;
  void synchronize() const override;
  double elapsed_ms_since(const Event& start) const override;
  cudaEvent_t get() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index);
  ~CudaDevice() override;

  DeviceId id() const override { return DeviceId{DeviceKind::kCuda, index_}; }
  std::string name() const override;
  void make_current() override;
  void start_profiler() override;
  void stop_profiler() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) noexcept override;
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
  std::unique_ptr<CudaStream> default_stream_;
};

// REQUIRES: `stream` is a CUDA stream; throws Error otherwise.
cudaStream_t cuda_stream(Stream& stream);

std::unique_ptr<Backend> make_cuda_backend();

}  // namespace scalescope
