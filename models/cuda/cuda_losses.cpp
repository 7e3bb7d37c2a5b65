// CUDA losses: per-sample values and gradients in loss_ops.cu, then one fixed-order sum, all
// on the caller's stream; the loss stays in device memory.
#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_ops.h"

namespace scalescope {
namespace {

class CudaLoss final : public LossKernel {
 public:
  CudaLoss(LossKind kind, int64_t batch, int64_t classes, CudaDevice& device)
      : kind_(kind),
        batch_(batch),
        classes_(classes),
        // Planned here so that a step allocates nothing (the CPU loss's per_sample_ too).
        per_sample_(device, static_cast<size_t>(batch) * sizeof(double)) {}

  void forward_backward(const float* output, const float* labels, float scale, float* loss,
                        float* dout, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    cuda_ops::loss_per_sample(kind_, output, labels, scale, batch_, classes_, per_sample(), dout,
                              s);
    cuda_ops::sum_to_float(per_sample(), batch_, scale, loss, s);
  }

  void forward(const float* output, const float* labels, float scale, float* loss,
               Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    cuda_ops::loss_per_sample(kind_, output, labels, scale, batch_, classes_, per_sample(), nullptr,
                              s);
    cuda_ops::sum_to_float(per_sample(), batch_, scale, loss, s);
  }

  void count_correct(const float* output, const float* labels, float* correct,
                     Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    cuda_ops::correct_per_sample(kind_, output, labels, batch_, classes_, per_sample(), s);
    cuda_ops::sum_to_float(per_sample(), batch_, 1.0, correct, s);
  }

 private:
  double* per_sample() const { return static_cast<double*>(per_sample_.data()); }

  LossKind kind_;
  int64_t batch_;
  int64_t classes_;
  DeviceBuffer per_sample_;
};

}  // namespace

std::unique_ptr<LossKernel> make_cuda_loss(LossKind kind, const Shape& output, CudaDevice& device) {
  SS_CHECK(output.rank() == 2 && output[0] > 0 && output[1] > 0,
           "{} takes a model output of shape [batch, classes], not {}", to_string(kind),
           output.to_string());
  SS_CHECK(kind != LossKind::kBinaryCrossEntropy || output[1] == 1,
           "binary cross-entropy takes one probability per sample ([batch, 1]), not {}",
           output.to_string());
  return std::make_unique<CudaLoss>(kind, output[0], output[1], device);
}

}  // namespace scalescope
