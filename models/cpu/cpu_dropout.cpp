// Dropout on the host: kernel_math/dropout_math.h's mask, in an OpenMP loop.
#include <algorithm>

#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
#include "models/kernel_math/dropout_math.h"

namespace scalescope {
namespace {

class DropoutKernel final : public LayerKernel {
 public:
  DropoutKernel(const DropoutSpec& spec, const LayerBinding& b)
      : rate_(spec.rate),
        scale_(1.0f / (1.0f - spec.rate)),
        seed_(spec.seed),
        count_(b.in.numel()) {}

  // Each training forward draws the next pass's mask; the backward that follows applies it.
  void forward(const float* in, float* out, Stream&) override {
    ++pass_;
    apply(in, out);
  }
  void forward_eval(const float* in, float* out, Stream&) override {
    std::copy(in, in + count_, out);
  }
  void backward(const float*, const float*, const float* dout, float* din, Stream&) override {
    if (din != nullptr) apply(dout, din);
  }

 private:
  void apply(const float* x, float* y) const {
    const uint64_t pass = pass_;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count_; ++i) {
      const bool keep = kernel_math::dropout_keep(seed_, pass, static_cast<uint64_t>(i), rate_);
      y[i] = kernel_math::dropout_apply(x[i], keep, scale_);
    }
  }

  float rate_, scale_;
  uint64_t seed_;
  int64_t count_;
  uint64_t pass_ = 0;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_dropout(const DropoutSpec& spec,
                                              const LayerBinding& binding) {
  return std::make_unique<DropoutKernel>(spec, binding);
}

}  // namespace scalescope
