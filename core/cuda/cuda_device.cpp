#include "core/cuda/cuda_device.h"

#include <cuda_profiler_api.h>

#include "core/check.h"

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

CudaStream::CudaStream(Device& device) : device_(device) {
  ScopedCudaDevice scope(device.id().index);
  SS_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() {
  if (stream_ == nullptr) return;
  SS_CHECK_CUDA_LOG(cudaSetDevice(device_.id().index));
  SS_CHECK_CUDA_LOG(cudaStreamDestroy(stream_));
}

void CudaStream::synchronize() {
  SS_CHECK_CUDA(cudaStreamSynchronize(stream_));
}

cudaStream_t cuda_stream(Stream& stream) {
  auto* cuda = dynamic_cast<CudaStream*>(&stream);
  SS_CHECK(cuda != nullptr, "a CUDA operation was given a {} stream",
           to_string(stream.device().id()));
  return cuda->get();
}

CudaEvent::CudaEvent(int device) : device_(device) {
  ScopedCudaDevice scope(device);
  SS_CHECK_CUDA(cudaEventCreate(&event_));  // with timing: these events also measure phases
}

CudaEvent::~CudaEvent() {
  if (event_ == nullptr) return;
  SS_CHECK_CUDA_LOG(cudaSetDevice(device_));
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

double CudaEvent::elapsed_ms_since(const Event& start) const {
  const auto* other = dynamic_cast<const CudaEvent*>(&start);
  SS_CHECK(other != nullptr, "elapsed time between events of different backends");
  float ms = 0.0f;
  SS_CHECK_CUDA(cudaEventElapsedTime(&ms, other->event_, event_));
  return static_cast<double>(ms);
}

CudaDevice::CudaDevice(int index) : index_(index) {
  ScopedCudaDevice scope(index);
  default_stream_ = std::make_unique<CudaStream>(*this);
}

CudaDevice::~CudaDevice() = default;

std::string CudaDevice::name() const {
  cudaDeviceProp prop{};
  SS_CHECK_CUDA(cudaGetDeviceProperties(&prop, index_));
  return fmt::format("{} (cuda:{})", prop.name, index_);
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

void* CudaDevice::allocate(size_t bytes) {
  count_allocation(bytes);
  ScopedCudaDevice scope(index_);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    count_deallocation(bytes);
    throw Error("CUDA", "cudaMalloc",
                fmt::format("cannot allocate {} bytes on cuda:{}: {}", bytes, index_,
                            cudaGetErrorString(status)));
  }
  return ptr;
}

void CudaDevice::deallocate(void* ptr, size_t bytes) noexcept {
  if (ptr == nullptr) return;
  SS_CHECK_CUDA_LOG(cudaSetDevice(index_));
  SS_CHECK_CUDA_LOG(cudaFree(ptr));
  count_deallocation(bytes);
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
  return std::make_unique<CudaEvent>(index_);
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

namespace {

class CudaBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  const char* name() const override { return "cuda"; }
  int device_count() const override {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
  }
  std::string unavailable_reason() const override {
    int n = 0;
    const cudaError_t status = cudaGetDeviceCount(&n);
    if (status != cudaSuccess)
      return fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(status));
    return n == 0 ? "no GPU found" : "";
  }
  std::unique_ptr<Device> open(int index, const BackendOptions&) override {
    const int n = device_count();
    SS_CHECK(index >= 0 && index < n, "GPU {} does not exist ({} usable{})", index, n,
             n == 0 ? ": " + unavailable_reason() : std::string());
    return std::make_unique<CudaDevice>(index);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  return std::make_unique<CudaBackend>();
}

}  // namespace scalescope
