#include "models/cuda/cuda_kernels.h"

#include "core/check.h"
#include "models/cuda/cublas_on_demand.h"
#include "models/cuda/cuda_libraries.h"

namespace scalescope {
namespace {

// "major.minor.patch" from a library's getProperty (cudnnGetProperty, cublasGetProperty),
// which answers `ok` on success.
template <typename Status, typename GetProperty>
std::string property_version(GetProperty get_property, Status ok) {
  int major = 0, minor = 0, patch = 0;
  if (get_property(MAJOR_VERSION, &major) != ok || get_property(MINOR_VERSION, &minor) != ok ||
      get_property(PATCH_LEVEL, &patch) != ok) {
    return kUnknownVersion;
  }
  return fmt::format("{}.{}.{}", major, minor, patch);
}

// The loaded cuBLAS's version, or where this process has not loaded it (no GPU work yet), the
// version of the headers it was built with: loading cuBLAS only to ask would cost every run,
// CPU runs included, the 151 MB that loading it on demand saves.
std::string cublas_version() {
  if (cublas_loaded()) return property_version(cublasGetProperty, CUBLAS_STATUS_SUCCESS);
  return fmt::format("{}.{}.{} (headers; not loaded)", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR,
                     CUBLAS_VER_PATCH);
}

}  // namespace

CudaDevice& CudaKernelBackend::cuda(Device& device) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  SS_CHECK(cuda_device != nullptr, "CUDA kernels asked for on {}", to_string(device.id()));
  return *cuda_device;
}

std::vector<LibraryVersion> CudaKernelBackend::library_versions() const {
  // Library calls that need no device: they answer on machines without a GPU too.
  return {{"cudnn", property_version(cudnnGetProperty, CUDNN_STATUS_SUCCESS)},
          {"cublas", cublas_version()}};
}

std::string CudaKernelBackend::precision_note(Precision precision) const {
  if (precision != Precision::kBf16 && precision != Precision::kFp16) return "";
  return fmt::format(
      "GPUs compute {0} in the dense layers, convolutions and attention's products: cuBLAS and "
      "cuDNN multiply {0} copies of their operands with fp32 accumulation (a convolution's "
      "results rounded to {0}, as cuDNN writes them); norms, activations, softmax and the loss "
      "in fp32; the activations backward reads are kept in {0}",
      to_string(precision));
}

}  // namespace scalescope
