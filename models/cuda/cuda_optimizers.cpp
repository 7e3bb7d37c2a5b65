// CUDA optimizers: one fused launch (optimizer_ops.cu) over the flat parameter buffer, with
// the scalars that do not depend on the element (Adam's bias corrections) computed on the
// host once per step, in double, exactly as the CPU kernels compute them.
#include <cstdint>
#include <memory>

#include "core/check.h"
#include "core/tensor.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_ops.h"
#include "models/kernel_math/optimizer_math.h"

namespace scalescope {
namespace {

// Zeroed on the device's default stream and waited for here: update() may run on any stream
// of the device, and the default stream is non-blocking, so nothing else would order the two.
Tensor zeroed_state(CudaDevice& device, int64_t n) {
  Tensor t(device, Shape{n});
  if (n == 0) return t;
  device.fill_zero(t.data(), t.bytes(), device.default_stream());
  device.default_stream().synchronize();
  return t;
}

class CudaSgd final : public OptimizerKernel {
 public:
  CudaSgd(const OptimizerConfig& config, int64_t n, CudaDevice& device)
      : config_(config),
        n_(n),
        // Without momentum there is no state (PyTorch keeps none either).
        momentum_(config.momentum > 0.0f ? zeroed_state(device, n) : Tensor()) {}

  void update(float* params, const float* grads, float lr, int64_t, Stream& stream) override {
    cuda_ops::sgd_update(params, grads, config_.momentum > 0.0f ? momentum_.data() : nullptr, n_,
                         lr, config_.weight_decay, config_.momentum, skip_flag_,
                         cuda_stream(stream));
  }

  std::vector<TensorView> state() const override {
    if (config_.momentum > 0.0f) return {momentum_.view()};
    return {};
  }

 private:
  OptimizerConfig config_;
  int64_t n_;
  Tensor momentum_;
};

class CudaAdam final : public OptimizerKernel {
 public:
  CudaAdam(const OptimizerConfig& config, int64_t n, CudaDevice& device)
      : config_(config),
        n_(n),
        exp_avg_(zeroed_state(device, n)),
        exp_avg_sq_(zeroed_state(device, n)) {}

  void update(float* params, const float* grads, float lr, int64_t step, Stream& stream) override {
    SS_CHECK(step >= 1, "Adam step {} must count from 1", step);
    const cuda_ops::AdamScalars scalars = kernel_math::adam_scalars(
        lr, step, config_.weight_decay, config_.beta1, config_.beta2, config_.epsilon);
    cuda_ops::adam_update(params, grads, exp_avg_.data(), exp_avg_sq_.data(), n_, scalars,
                          skip_flag_, cuda_stream(stream));
  }

  std::vector<TensorView> state() const override { return {exp_avg_.view(), exp_avg_sq_.view()}; }

 private:
  OptimizerConfig config_;
  int64_t n_;
  Tensor exp_avg_;
  Tensor exp_avg_sq_;
};

}  // namespace

std::unique_ptr<OptimizerKernel> make_cuda_optimizer(const OptimizerConfig& config, int64_t n,
                                                     CudaDevice& device) {
  SS_CHECK(n >= 0, "optimizer over {} parameters", n);
  ScopedCudaDevice scope(device.id().index);
  if (config.kind == OptimizerKind::kSgd) return std::make_unique<CudaSgd>(config, n, device);
  return std::make_unique<CudaAdam>(config, n, device);
}

void accumulate_into_cuda(float* acc, const float* grads, int64_t count, bool first,
                          Stream& stream) {
  if (count == 0) return;
  const cudaStream_t s = cuda_stream(stream);
  if (first) {
    SS_CHECK_CUDA(cudaMemcpyAsync(acc, grads, static_cast<size_t>(count) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, s));
    return;
  }
  cuda_ops::accumulate(acc, grads, count, s);
}

void add_into_cuda(float* out, const float* a, const float* b, int64_t count, bool relu,
                   const kernel_math::HalfRow& saved, Stream& stream) {
  cuda_ops::add(out, a, b, count, relu, saved, cuda_stream(stream));
}

void accumulate_relu_gradient_cuda(float* acc, const float* grads,
                                   const kernel_math::ReluOutput& relu_output, int64_t count,
                                   bool first, Stream& stream) {
  cuda_ops::accumulate_relu_gradient(acc, grads, relu_output, count, first, cuda_stream(stream));
}

void compress_gradients_cuda(const float* grads, uint16_t* half, int64_t count, int replicas,
                             kernel_math::HalfFormat format, Stream& stream) {
  cuda_ops::compress_gradients(grads, half, count, replicas, format, cuda_stream(stream));
}

void decompress_gradients_cuda(const uint16_t* half, float* grads, int64_t count,
                               kernel_math::HalfFormat format, Stream& stream) {
  cuda_ops::decompress_gradients(half, grads, count, format, cuda_stream(stream));
}

void unscale_gradients_cuda(float* grads, int64_t count, float inv_scale, float* found_inf,
                            Stream& stream) {
  const cudaStream_t s = cuda_stream(stream);
  SS_CHECK_CUDA(cudaMemsetAsync(found_inf, 0, sizeof(float), s));
  cuda_ops::unscale_gradients(grads, count, inv_scale, found_inf, s);
}

void squared_norm_cuda(const float* values, int64_t count, double* out, Stream& stream) {
  const cudaStream_t s = cuda_stream(stream);
  SS_CHECK_CUDA(cudaMemsetAsync(out, 0, sizeof(double), s));
  cuda_ops::add_squared_norm(values, count, out, s);
}

}  // namespace scalescope
