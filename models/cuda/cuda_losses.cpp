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

// A sequence's logits [S, K] are S rows of one sample (loss_rows): the kernels run over rows,
// and a sample's loss (and its share of correct predictions) is the mean over its rows.
class CudaLoss final : public LossKernel {
 public:
  CudaLoss(LossKind kind, const LossRows& rows, CudaDevice& device)
      : kind_(kind),
        batch_(rows.rows),
        classes_(rows.classes),
        positions_(static_cast<double>(rows.positions)),
        // Planned here so that a step allocates nothing (the CPU loss's per_sample_ too).
        per_sample_(device, static_cast<size_t>(rows.rows) * sizeof(double)) {}

  void forward_backward(const float* output, const float* labels, float scale, float* loss,
                        float* dout, Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    const double row_scale = scale / positions_;
    cuda_ops::loss_per_sample(kind_, output, labels, row_scale, batch_, classes_, per_sample(),
                              dout, s);
    cuda_ops::sum_to_float(per_sample(), batch_, row_scale, loss, s);
  }

  void forward(const float* output, const float* labels, float scale, float* loss,
               Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    const double row_scale = scale / positions_;
    cuda_ops::loss_per_sample(kind_, output, labels, row_scale, batch_, classes_, per_sample(),
                              nullptr, s);
    cuda_ops::sum_to_float(per_sample(), batch_, row_scale, loss, s);
  }

  void count_correct(const float* output, const float* labels, float* correct,
                     Stream& stream) override {
    const cudaStream_t s = cuda_stream(stream);
    cuda_ops::correct_per_sample(kind_, output, labels, batch_, classes_, per_sample(), s);
    cuda_ops::sum_to_float(per_sample(), batch_, 1.0 / positions_, correct, s);
  }

 private:
  double* per_sample() const { return static_cast<double*>(per_sample_.data()); }

  LossKind kind_;
  int64_t batch_;
  int64_t classes_;
  double positions_;
  DeviceBuffer per_sample_;
};

}  // namespace

std::unique_ptr<LossKernel> make_cuda_loss(LossKind kind, const Shape& output, CudaDevice& device) {
  return std::make_unique<CudaLoss>(kind, loss_rows(kind, output), device);
}

}  // namespace scalescope
