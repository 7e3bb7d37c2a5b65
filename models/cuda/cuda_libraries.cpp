#include "models/cuda/cuda_libraries.h"

#include <algorithm>
#include <source_location>
#include <utility>
#include <vector>

#include "core/check.h"
#include "models/cuda/cuda_ops.h"

namespace scalescope {
namespace {

// cuBLAS's recommended workspace on Hopper (4 MiB suffices before it); allocated once per
// thread and device, so the size hardly matters next to the activations.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

}  // namespace

void check_launch(const char* kernel, std::source_location where) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw Error("CUDA", fmt::format("{}<<<...>>>", kernel),
              fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status)), where);
}

cublasComputeType_t gemm_compute_type(Precision precision) {
  return precision == Precision::kFp32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
}

cudaDataType_t gemm_operand_type(std::optional<kernel_math::HalfFormat> half) {
  if (!half) return CUDA_R_32F;
  return *half == kernel_math::HalfFormat::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
}

const char* compute_type_name(cublasComputeType_t type) {
  switch (type) {
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return "CUBLAS_COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_32F:
      return "CUBLAS_COMPUTE_32F";
    default:
      return "another cuBLAS compute type";
  }
}

CudnnHandle::CudnnHandle(int device) : device_(device) {
  SS_CHECK_CUDNN(cudnnCreate(&handle_));
}

CudnnHandle::~CudnnHandle() {
  if (handle_ == nullptr) return;
  const CurrentDevice current(device_);
  SS_CHECK_CUDNN_LOG(cudnnDestroy(handle_));
}

CublasHandle::CublasHandle(int device) : device_(device) {
  SS_CHECK_CUBLAS(cublasCreate(&handle_));
  // Explicit rather than assumed: scalars (alpha, beta) come from host memory, and TF32 is
  // chosen per GEMM through its compute type (kernels built under different allow_tf32()
  // settings share this handle), so the handle's own math mode stays the default.
  SS_CHECK_CUBLAS(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
  SS_CHECK_CUBLAS(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

CublasHandle::~CublasHandle() {
  if (handle_ == nullptr) return;
  const CurrentDevice current(device_);
  SS_CHECK_CUBLAS_LOG(cublasDestroy(handle_));
}

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
CudnnDescriptor<T, Create, Destroy>::CudnnDescriptor() {
  SS_CHECK_CUDNN(Create(&desc_));
}

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
CudnnDescriptor<T, Create, Destroy>::~CudnnDescriptor() {
  if (desc_ != nullptr) SS_CHECK_CUDNN_LOG(Destroy(desc_));
}

template class CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                               cudnnDestroyTensorDescriptor>;
template class CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                               cudnnDestroyFilterDescriptor>;
template class CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                               cudnnDestroyConvolutionDescriptor>;

CudaLibraries::CudaLibraries(CudaDevice& device)
    : device_(device), cublas_workspace_(device, kCublasWorkspaceBytes) {
  const int index = device.id().index;
  ScopedCudaDevice scope(index);
  cudnn_ = CudnnHandle(index);
  cublas_ = CublasHandle(index);
}

cudnnHandle_t CudaLibraries::cudnn(cudaStream_t stream) {
  if (!cudnn_bound_ || stream != cudnn_stream_) {
    SS_CHECK_CUDNN(cudnnSetStream(cudnn_.get(), stream));
    cudnn_stream_ = stream;
    cudnn_bound_ = true;
  }
  return cudnn_.get();
}

cublasHandle_t CudaLibraries::cublas(cudaStream_t stream) {
  if (!cublas_bound_ || stream != cublas_stream_) {
    SS_CHECK_CUBLAS(cublasSetStream(cublas_.get(), stream));
    SS_CHECK_CUBLAS(
        cublasSetWorkspace(cublas_.get(), cublas_workspace_.data(), cublas_workspace_.bytes()));
    cublas_stream_ = stream;
    cublas_bound_ = true;
  }
  return cublas_.get();
}

CudaLibraries::StreamWorkspace& CudaLibraries::workspace_of(cudaStream_t stream) {
  for (StreamWorkspace& w : workspaces_) {
    if (w.stream == stream) return w;
  }
  return workspaces_.emplace_back(StreamWorkspace{stream, DeviceBuffer()});
}

void CudaLibraries::reserve_workspace(size_t bytes) {
  workspace_bytes_ = std::max(workspace_bytes_, bytes);
  // A smaller buffer freed here is fenced by the allocator against the passes still queued.
  StreamWorkspace& compute = workspace_of(cuda_stream(device_.default_stream()));
  if (compute.buffer.bytes() < workspace_bytes_)
    compute.buffer = DeviceBuffer(device_, workspace_bytes_);
}

void* CudaLibraries::workspace(cudaStream_t stream) {
  StreamWorkspace& w = workspace_of(stream);
  if (w.buffer.bytes() < workspace_bytes_) w.buffer = DeviceBuffer(device_, workspace_bytes_);
  return w.buffer.data();
}

std::shared_ptr<CudaLibraries> cuda_libraries(CudaDevice& device) {
  // Weak references only: destroying this list at thread exit destroys no handle, so it is
  // safe whenever it happens (the last kernel destroys the handles, with its device current).
  // Keyed by the Device object, not the GPU index: the workspace is allocated from (and
  // counted by) that object, so the kernels of another Device of the same GPU get their own.
  thread_local std::vector<std::pair<const Device*, std::weak_ptr<CudaLibraries>>> known;
  std::erase_if(known, [](const auto& entry) { return entry.second.expired(); });
  for (const auto& [owner, weak] : known) {
    if (owner != &device) continue;
    if (std::shared_ptr<CudaLibraries> libraries = weak.lock()) return libraries;
  }
  auto libraries = std::make_shared<CudaLibraries>(device);
  known.emplace_back(&device, libraries);
  return libraries;
}

}  // namespace scalescope
