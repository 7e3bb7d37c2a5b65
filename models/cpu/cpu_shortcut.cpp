// The option-A shortcut of CIFAR ResNets on the host, in plain OpenMP loops over the index
// maps of models/kernel_math/shortcut_math.h (the CUDA kernel runs the same maps): a strided
// copy with zero channels has no oneDNN primitive.
#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
#include "models/kernel_math/shortcut_math.h"

namespace scalescope {
namespace {

class PadShortcutKernel final : public LayerKernel {
 public:
  PadShortcutKernel(const PadShortcutSpec& spec, const LayerBinding& b)
      : shape_{b.in[1], b.in[2], b.in[3], b.out[1], b.out[2], b.out[3], spec.stride},
        in_count_(b.in.numel()),
        out_count_(b.out.numel()) {}

  void forward(const float* in, float* out, Stream&) override {
    const kernel_math::ShortcutShape s = shape_;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < out_count_; ++i) {
      const int64_t from = kernel_math::shortcut_source(s, i);
      out[i] = from < 0 ? 0.0f : in[from];
    }
  }

  void backward(const float*, const float*, const float* dout, float* din, Stream&) override {
    if (din == nullptr) return;  // no parameters
    const kernel_math::ShortcutShape s = shape_;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < in_count_; ++i) {
      const int64_t from = kernel_math::shortcut_reader(s, i);
      din[i] = from < 0 ? 0.0f : dout[from];
    }
  }

 private:
  kernel_math::ShortcutShape shape_;
  int64_t in_count_;
  int64_t out_count_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_pad_shortcut(const PadShortcutSpec& spec,
                                                   const LayerBinding& binding) {
  return std::make_unique<PadShortcutKernel>(spec, binding);
}

}  // namespace scalescope
