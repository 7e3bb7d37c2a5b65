#include "core/cuda/cuda_device.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/backoff.h"
#include "core/check.h"
#include "core/log.h"

namespace scalescope {

ScopedCudaDevice::ScopedCudaDevice(int device) {
  SS_CHECK_CUDA(cudaGetDevice(&previous_));
  if (previous_ != device) SS_CHECK_CUDA(cudaSetDevice(device));
}

ScopedCudaDevice::~ScopedCudaDevice() {
  int current = -1;
  SS_CHECK_CUDA_LOG(cudaGetDevice(&current));
  if (previous_ >= 0 && current != previous_) SS_CHECK_CUDA_LOG(cudaSetDevice(previous_));
}

CurrentDevice::CurrentDevice(int device) noexcept {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    previous_ = -1;
    (void)cudaGetLastError();  // not sticky: keep it from surfacing in a later check
  }
  if (previous_ == device) {
    ok_ = true;
    return;
  }
  const cudaError_t status = cudaSetDevice(device);
  ok_ = status == cudaSuccess;
  if (!ok_) {
    SS_LOG_ERROR("CUDA error: cannot make cuda device {} current: {}", device,
                 cudaGetErrorString(status));
  }
}

CurrentDevice::~CurrentDevice() {
  if (ok_ && previous_ >= 0) SS_CHECK_CUDA_LOG(cudaSetDevice(previous_));
}

CudaStream::CudaStream(CudaDevice& device) : device_(device) {
  ScopedCudaDevice scope(device.id().index);
  SS_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {
    device_.allocator().register_stream(*this);
  } catch (...) {
    SS_CHECK_CUDA_LOG(cudaStreamDestroy(stream_));
    throw;
  }
}

CudaStream::~CudaStream() {
  if (stream_ == nullptr) return;
  device_.allocator().unregister_stream(*this);
  const CurrentDevice current(device_.id().index);
  SS_CHECK_CUDA_LOG(cudaStreamDestroy(stream_));
}

Device& CudaStream::device() const {
  return device_;
}

void CudaStream::synchronize() {
  SS_CHECK_CUDA(cudaStreamSynchronize(stream_));
}

bool CudaStream::idle() const {
  const cudaError_t status = cudaStreamQuery(stream_);
  if (status == cudaErrorNotReady) return false;
  // A failure is reported by the next synchronize (or checked call); not sticky here.
  if (status != cudaSuccess) (void)cudaGetLastError();
  return true;
}

cudaStream_t cuda_stream(Stream& stream) {
  auto* cuda = dynamic_cast<CudaStream*>(&stream);
  SS_CHECK(cuda != nullptr, "a CUDA operation was given a {} stream",
           to_string(stream.device().id()));
  return cuda->get();
}

CudaEvent::CudaEvent(int device, bool timing) : device_(device), timing_(timing) {
  ScopedCudaDevice scope(device);
  // With timing, the events that measure phases; without, the cheaper ordering events.
  SS_CHECK_CUDA(
      cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_ == nullptr) return;
  const CurrentDevice current(device_);
  SS_CHECK_CUDA_LOG(cudaEventDestroy(event_));
}

void CudaEvent::record(Stream& stream) {
  SS_CHECK_CUDA(cudaEventRecord(event_, cuda_stream(stream)));
}

void CudaEvent::wait_on(Stream& stream) const {
  SS_CHECK_CUDA(cudaStreamWaitEvent(cuda_stream(stream), event_, 0));
}

void CudaEvent::synchronize() const {
  SS_CHECK_CUDA(cudaEventSynchronize(event_));
}

bool CudaEvent::synchronize_for(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Backoff backoff;
  while (true) {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) {
      (void)cudaGetLastError();  // thrown here: not left pending for an unrelated later check
      SS_CHECK_CUDA(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    backoff.pause();
  }
}

bool CudaEvent::query() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaSuccess) return true;
  if (status != cudaErrorNotReady) (void)cudaGetLastError();
  return false;
}

double CudaEvent::elapsed_ms_since(const Event& start) const {
  const auto* other = dynamic_cast<const CudaEvent*>(&start);
  check_elapsed(other, timing_, other != nullptr && other->timing_);
  float ms = 0.0f;
  SS_CHECK_CUDA(cudaEventElapsedTime(&ms, other->event_, event_));
  return static_cast<double>(ms);
}

// The GPU's memory from cudaMalloc, and its fences: the device's ordering events.
class CudaDevice::Memory final : public CachingAllocator::Source {
 public:
  // The index is its own: memory is given back while the allocator is destroyed, after
  // CudaDevice's members are gone.
  Memory(CudaDevice& device, int index) : device_(device), index_(index) {}
  void* allocate(size_t bytes, std::string& error) noexcept override {
    const CurrentDevice current(index_);
    if (!current.ok()) {
      error = fmt::format("cannot make cuda device {} current", index_);
      return nullptr;
    }
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaSuccess) return ptr;
    // Out of memory is not sticky; clear it so that a later SS_CHECK_LAUNCH does not report
    // it against an unrelated kernel.
    (void)cudaGetLastError();
    error = fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
    return nullptr;
  }
  void free(void* ptr, size_t) noexcept override {
    const CurrentDevice current(index_);
    SS_CHECK_CUDA_LOG(cudaFree(ptr));
  }
  std::unique_ptr<Event> make_fence() override { return device_.create_ordering_event(); }

 private:
  CudaDevice& device_;
  int index_;
};

CudaDevice::CudaDevice(int index)
    : CachingDevice("CUDA", to_string(DeviceId{DeviceKind::kCuda, index}),
                    std::make_unique<Memory>(*this, index)),
      index_(index) {
  ScopedCudaDevice scope(index);
  default_stream_ = std::make_unique<CudaStream>(*this);
  copy_stream_ = std::make_unique<CudaStream>(*this);
  comm_stream_ = std::make_unique<CudaStream>(*this);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  SS_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  used_when_opened_ = static_cast<int64_t>(total_bytes - free_bytes);
}

int64_t CudaDevice::memory_outside_allocator() const {
  ScopedCudaDevice scope(index_);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  SS_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int64_t used = static_cast<int64_t>(total_bytes - free_bytes);
  return std::max<int64_t>(used - used_when_opened_ - memory_reserved(), 0);
}

CudaDevice::~CudaDevice() = default;

std::string CudaDevice::name() const {
  cudaDeviceProp prop{};
  SS_CHECK_CUDA(cudaGetDeviceProperties(&prop, index_));
  return fmt::format("{} (cuda device {})", prop.name, index_);
}

std::string CudaDevice::pci_bus_id() const {
  char id[32] = {};
  SS_CHECK_CUDA(cudaDeviceGetPCIBusId(id, sizeof(id), index_));
  return id;
}

void CudaDevice::make_current() {
  SS_CHECK_CUDA(cudaSetDevice(index_));
}

void CudaDevice::start_profiler() {
  ScopedCudaDevice scope(index_);
  SS_CHECK_CUDA(cudaProfilerStart());
}

void CudaDevice::stop_profiler() {
  ScopedCudaDevice scope(index_);
  SS_CHECK_CUDA(cudaProfilerStop());
}

std::string CudaDevice::out_of_memory_details() const {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  try {
    ScopedCudaDevice scope(index_);
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      return fmt::format("; the driver reports {} of {} bytes free", free_bytes, total_bytes);
    }
    (void)cudaGetLastError();
  } catch (const Error&) {
    // The device could not be made current: the error above says enough.
  }
  return "";
}

void* CudaDevice::allocate_host(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t status = cudaMallocHost(&ptr, bytes);
  if (status != cudaSuccess) {
    throw Error("CUDA", "cudaMallocHost",
                fmt::format("cannot allocate {} bytes of pinned host memory: {}", bytes,
                            cudaGetErrorString(status)));
  }
  return ptr;
}

void CudaDevice::deallocate_host(void* ptr) noexcept {
  SS_CHECK_CUDA_LOG(cudaFreeHost(ptr));
}

std::unique_ptr<Stream> CudaDevice::create_stream() {
  return std::make_unique<CudaStream>(*this);
}
std::unique_ptr<Event> CudaDevice::create_event() {
  return std::make_unique<CudaEvent>(index_, /*timing=*/true);
}
std::unique_ptr<Event> CudaDevice::create_ordering_event() {
  return std::make_unique<CudaEvent>(index_, /*timing=*/false);
}

void CudaDevice::copy_to_device(void* dst, const void* host_src, size_t bytes, Stream& stream) {
  SS_CHECK_CUDA(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, cuda_stream(stream)));
}
void CudaDevice::copy_to_host(void* host_dst, const void* src, size_t bytes, Stream& stream) {
  SS_CHECK_CUDA(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, cuda_stream(stream)));
}
void CudaDevice::copy_on_device(void* dst, const void* src, size_t bytes, Stream& stream) {
  SS_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_stream(stream)));
}
void CudaDevice::fill_zero(void* dst, size_t bytes, Stream& stream) {
  SS_CHECK_CUDA(cudaMemsetAsync(dst, 0, bytes, cuda_stream(stream)));
}

}  // namespace scalescope
