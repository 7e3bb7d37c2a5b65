// The kernels of the simulated accelerator: the CPU backend's kernels (oneDNN and our
// loops), each call enqueued on the stream it names and run by that stream's worker when its
// turn comes, with its arguments captured at enqueue time, as a kernel launch captures them.
// No kernel runs on the host thread.
#pragma once

#include <memory>
#include <vector>

#include "models/kernels.h"

namespace scalescope {

class SimKernelBackend final : public KernelBackend {
 public:
  DeviceKind kind() const override { return DeviceKind::kSim; }
  std::vector<LibraryVersion> library_versions() const override;      // the CPU kernels'
  std::vector<Precision> precisions() const override;                 // the CPU kernels', and fp16
  std::string precision_note(Precision precision) const override;     // the CPU kernels'
  std::string precision_refusal(Precision precision) const override;  // the CPU kernels'
  // The CPU kernels' fusions.
  bool fuses_activation(const LayerSpec& layer, Activation activation) const override;
  bool fuses_relu_backward(const LayerSpec& producer) const override;
  bool fuses_relu_gradient(const LayerSpec& reader) const override;
  std::unique_ptr<LayerKernel> make_layer(const LayerSpec& spec, const LayerBinding& binding,
                                          Device& device) override;
  std::unique_ptr<LossKernel> make_loss(LossKind kind, const Shape& output,
                                        Device& device) override;
  std::unique_ptr<OptimizerKernel> make_optimizer(const OptimizerConfig& config, int64_t n,
                                                  Device& device) override;
  void add(float* out, const float* a, const float* b, int64_t count, bool relu,
           const kernel_math::HalfRow& saved, Stream& stream) override;
  void accumulate_relu_gradient(float* acc, const float* grads,
                                const kernel_math::ReluOutput& relu_output, int64_t count,
                                bool first, Stream& stream) override;
  void accumulate(float* acc, const float* grads, int64_t count, bool first,
                  Stream& stream) override;
  void compress(const float* grads, uint16_t* half, int64_t count, int replicas,
                kernel_math::HalfFormat format, Stream& stream) override;
  void decompress(const uint16_t* half, float* grads, int64_t count, kernel_math::HalfFormat format,
                  Stream& stream) override;
  void squared_norm(const float* values, int64_t count, double* out, Stream& stream) override;
  void unscale(float* grads, int64_t count, float inv_scale, float* found_inf,
               Stream& stream) override;
};

}  // namespace scalescope
