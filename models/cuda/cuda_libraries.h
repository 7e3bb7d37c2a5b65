// cuDNN and cuBLAS for the CUDA kernels: move-only owners of their handles and descriptors,
// and the handles one thread uses on one device (CudaLibraries).
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/cuda/cuda_device.h"
#include "core/precision.h"
#include "models/kernel_math/half_math.h"

namespace scalescope {

// A cuDNN handle of one device. The destructor makes the device current first.
class CudnnHandle {
 public:
  CudnnHandle() = default;
  // REQUIRES: `device` current.
  explicit CudnnHandle(int device);
  ~CudnnHandle();
  CudnnHandle(CudnnHandle&& other) noexcept { swap(other); }
  CudnnHandle& operator=(CudnnHandle&& other) noexcept {
    CudnnHandle(std::move(other)).swap(*this);
    return *this;
  }
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;

  cudnnHandle_t get() const { return handle_; }
  void swap(CudnnHandle& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(handle_, other.handle_);
  }

 private:
  int device_ = -1;
  cudnnHandle_t handle_ = nullptr;
};

// A cuBLAS handle of one device. The destructor makes the device current first.
class CublasHandle {
 public:
  CublasHandle() = default;
  // REQUIRES: `device` current.
  explicit CublasHandle(int device);
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept { swap(other); }
  CublasHandle& operator=(CublasHandle&& other) noexcept {
    CublasHandle(std::move(other)).swap(*this);
    return *this;
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }
  void swap(CublasHandle& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(handle_, other.handle_);
  }

 private:
  int device_ = -1;
  cublasHandle_t handle_ = nullptr;
};

// The compute type of cuBLAS's GEMMs on fp32 operands: strict fp32 under Precision::kFp32,
// TF32 on tensor cores under kTf32 (under bf16 and fp16 every GEMM multiplies 16-bit copies
// under CUBLAS_COMPUTE_32F).
// cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF is no substitute for 16-bit operands: on an H100 it ran
// fp32's kernels (no operand rounded, no time saved).
cublasComputeType_t gemm_compute_type(Precision precision);
const char* compute_type_name(cublasComputeType_t type);  // "CUBLAS_COMPUTE_32F_FAST_TF32", ...

// The type of a GEMM's operands: CUDA_R_16BF or CUDA_R_16F for 16-bit copies in that format
// (multiplied under CUBLAS_COMPUTE_32F), CUDA_R_32F without one.
cudaDataType_t gemm_operand_type(std::optional<kernel_math::HalfFormat> half);

// A cuDNN descriptor (tensor, filter, convolution). Descriptors are host-side structures that
// belong to no device, so unlike the handles their destructor needs no current device.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class CudnnDescriptor {
 public:
  CudnnDescriptor();  // creates one (throws Error when cuDNN cannot)
  ~CudnnDescriptor();
  CudnnDescriptor(CudnnDescriptor&& other) noexcept { std::swap(desc_, other.desc_); }
  CudnnDescriptor& operator=(CudnnDescriptor&& other) noexcept {
    std::swap(desc_, other.desc_);
    return *this;
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  T get() const { return desc_; }

 private:
  T desc_ = nullptr;
};

using TensorDescriptor = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                         cudnnDestroyTensorDescriptor>;
using FilterDescriptor = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                         cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                    cudnnDestroyConvolutionDescriptor>;

// The cuDNN and cuBLAS handles of one device for one thread (a replica is one thread owning
// one device), with the workspace cuBLAS runs in and the one its layers' passes share.
//
// Kernels share it through cuda_libraries(): each kernel holds a shared_ptr, so the handles
// live exactly as long as the kernels of that thread and device, and no CUDA object sits in
// a static or thread_local that would be destroyed after main (or after the CUDA runtime).
//
// Each call hands the handle over already bound to the caller's stream: the kernels of one
// handle may run on different streams, one call at a time (the thread's), so binding the
// stream per call is what makes that correct.
class CudaLibraries {
 public:
  // REQUIRES: called on the thread that will use it. Makes `device` current meanwhile.
  explicit CudaLibraries(CudaDevice& device);
  CudaLibraries(const CudaLibraries&) = delete;
  CudaLibraries& operator=(const CudaLibraries&) = delete;

  // The handle, bound to `stream` (cudnnSetStream / cublasSetStream when it changed). The
  // cuBLAS handle also gets our workspace again: cublasSetStream resets a handle to cuBLAS's
  // own workspace pool, which could allocate during a step. That one workspace serves every
  // stream: the layers' GEMMs run on the compute stream alone. GEMMs overlapping on two streams
  // would need one each (PyTorch keeps one per handle and stream).
  cudnnHandle_t cudnn(cudaStream_t stream);
  cublasHandle_t cublas(cudaStream_t stream);
  // The cuDNN handle as it is, for planning calls that enqueue no work (algorithm heuristics,
  // workspace sizes).
  cudnnHandle_t cudnn_for_planning() const { return cudnn_.get(); }

  // The workspace of the layers' passes, one per stream as PyTorch keeps its convolutions':
  // the passes enqueued on one stream run one after another, so they can share one buffer as
  // large as the largest pass's need, where a buffer per layer would add up over a deep model.
  // The cuDNN convolutions run in it, and attention keeps its transients there (its dP and
  // per-head copies, 12 × 8 × 12 × 1024² floats of dP alone for GPT-2 small at batch 8 if each
  // layer had its own). The device's compute stream (where training, evaluation and the tests
  // run every layer) has its buffer grown by reserve_workspace() when a kernel is planned, so
  // that a step allocates nothing; another stream gets its own at its first pass. A pass may
  // rely on nothing in it from an earlier pass.
  size_t workspace_bytes() const { return workspace_bytes_; }
  void reserve_workspace(size_t bytes);
  // REQUIRES: called on the thread of this object with the device current, before enqueuing
  // a pass that needs at most workspace_bytes() on `stream`.
  void* workspace(cudaStream_t stream);

 private:
  // A stream's workspace.
  struct StreamWorkspace {
    cudaStream_t stream = nullptr;
    DeviceBuffer buffer;
  };
  StreamWorkspace& workspace_of(cudaStream_t stream);

  CudaDevice& device_;
  size_t workspace_bytes_ = 0;
  std::vector<StreamWorkspace> workspaces_;
  // Declared before the handle, so destroyed after it: cuBLAS may use it until destroyed.
  DeviceBuffer cublas_workspace_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  cudaStream_t cudnn_stream_ = nullptr;
  cudaStream_t cublas_stream_ = nullptr;
  bool cudnn_bound_ = false;
  bool cublas_bound_ = false;
};

// The CudaLibraries of `device` for the calling thread: the one its kernels already share, or a
// new one. The thread remembers it only through a weak reference.
std::shared_ptr<CudaLibraries> cuda_libraries(CudaDevice& device);

}  // namespace scalescope
