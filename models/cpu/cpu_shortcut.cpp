// The option-A shortcut of CIFAR ResNets on the host, in plain OpenMP loops a pixel at a time
// (the CUDA kernel runs models/kernel_math/shortcut_math.h's element maps, which the tests
// compare with the same definition): a strided copy with zero channels has no oneDNN
// primitive.
#include <algorithm>

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

  // Pixel by pixel, each a run of channels: zeros, the strided input pixel's channels, zeros
  // (the same values as shortcut_source() element by element, without a division per element).
  void forward(const float* in, float* out, Stream&) override {
    const kernel_math::ShortcutShape s = shape_;
    const int64_t before = s.before();
    const int64_t pixels = out_count_ / s.out_c;
#pragma omp parallel for schedule(static)
    for (int64_t pixel = 0; pixel < pixels; ++pixel) {
      const int64_t ow = pixel % s.out_w;
      const int64_t oh = pixel / s.out_w % s.out_h;
      const int64_t n = pixel / (s.out_w * s.out_h);
      const float* x = in + ((n * s.in_h + oh * s.stride) * s.in_w + ow * s.stride) * s.in_c;
      float* y = out + pixel * s.out_c;
      std::fill(y, y + before, 0.0f);
      std::copy(x, x + s.in_c, y + before);
      std::fill(y + before + s.in_c, y + s.out_c, 0.0f);
    }
  }

  // The transpose: an input pixel on the stride grid takes its output pixel's middle channels,
  // every other input pixel zeros (shortcut_reader()'s values).
  void backward(const float*, const float*, const float* dout, float* din, Stream&) override {
    if (din == nullptr) return;  // no parameters
    const kernel_math::ShortcutShape s = shape_;
    const int64_t before = s.before();
    const int64_t pixels = in_count_ / s.in_c;
#pragma omp parallel for schedule(static)
    for (int64_t pixel = 0; pixel < pixels; ++pixel) {
      const int64_t iw = pixel % s.in_w;
      const int64_t ih = pixel / s.in_w % s.in_h;
      const int64_t n = pixel / (s.in_w * s.in_h);
      float* dx = din + pixel * s.in_c;
      if (ih % s.stride != 0 || iw % s.stride != 0) {
        std::fill(dx, dx + s.in_c, 0.0f);
        continue;
      }
      const float* dy =
          dout + ((n * s.out_h + ih / s.stride) * s.out_w + iw / s.stride) * s.out_c + before;
      std::copy(dy, dy + s.in_c, dx);
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
