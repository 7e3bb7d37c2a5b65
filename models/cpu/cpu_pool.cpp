// Max pooling over NHWC images in plain OpenMP loops rather than oneDNN (MaxPoolKernel says why).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>

#include "models/cpu/cpu_kernels.h"

namespace scalescope {
namespace {

// Max pooling in plain loops over NHWC, not oneDNN: oneDNN 2.6's AVX2 max pooling for
// training (the variant that records a workspace of argmax indices) measured 3.6 ms forward
// and 2.5 ms backward on cifar-cnn's first pool (64x32x32x32, 2 threads; 0.9 ms forward for
// its inference variant), these loops 0.34 ms and 0.57 ms. They need no workspace: backward
// finds each window's maximum again by comparing `in` with `out` (the values of the last
// forward, by contract).
class MaxPoolKernel final : public LayerKernel {
 public:
  MaxPoolKernel(const MaxPool2DSpec& spec, const Shape& in, const Shape& out, bool relu_gradient)
      : relu_gradient_(relu_gradient),
        pool_(spec.pool),
        stride_(spec.stride),
        pad_(spec.pad),
        batch_(in[0]),
        in_h_(in[1]),
        in_w_(in[2]),
        channels_(in[3]),
        out_h_(out[1]),
        out_w_(out[2]) {}

  void forward(const float* in, float* out, Stream&) override {
    const int64_t c_size = channels_;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < batch_; ++n) {
      for (int64_t oh = 0; oh < out_h_; ++oh) {
        for (int64_t ow = 0; ow < out_w_; ++ow) {
          float* o = out + pixel(n, oh, ow, out_h_, out_w_);
          const Window win = window(oh, ow);
          const float* first = in + pixel(n, win.h0, win.w0, in_h_, in_w_);
          std::copy(first, first + c_size, o);
          for (int64_t h = win.h0; h < win.h1; ++h) {
            for (int64_t w = win.w0; w < win.w1; ++w) {
              const float* x = in + pixel(n, h, w, in_h_, in_w_);
              // NaN wins, as in PyTorch, so that a diverged model shows it.
              for (int64_t c = 0; c < c_size; ++c) {
                o[c] = (x[c] > o[c] || x[c] != x[c]) ? x[c] : o[c];
              }
            }
          }
        }
      }
    }
  }

  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream&) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    const int64_t row = in_w_ * channels_;
    if (stride_ >= pool_) {
      // Windows do not overlap: output row oh owns input rows [oh·stride - pad,
      // (oh+1)·stride - pad) (the first one from 0, the last one up to H), so threads split
      // the rows without sharing a pixel.
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t n = 0; n < batch_; ++n) {
        for (int64_t oh = 0; oh < out_h_; ++oh) {
          const int64_t begin = oh == 0 ? 0 : oh * stride_ - pad_;
          const int64_t end = oh + 1 == out_h_ ? in_h_ : (oh + 1) * stride_ - pad_;
          float* band = din + pixel(n, begin, 0, in_h_, in_w_);
          std::fill(band, band + (end - begin) * row, 0.0f);
          scatter_row(in, out, dout, din, n, oh);
        }
      }
    } else {
      // Overlapping windows share pixels across output rows: one sample per thread.
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < batch_; ++n) {
        float* sample = din + pixel(n, 0, 0, in_h_, in_w_);
        std::fill(sample, sample + in_h_ * row, 0.0f);
        for (int64_t oh = 0; oh < out_h_; ++oh) scatter_row(in, out, dout, din, n, oh);
      }
    }
  }

 private:
  // Channels handled together: the remaining gradient of a chunk lives on the stack.
  static constexpr int64_t kChunk = 64;

  int64_t pixel(int64_t n, int64_t h, int64_t w, int64_t height, int64_t width) const {
    return ((n * height + h) * width + w) * channels_;
  }

  // The part of window (oh, ow) inside the image, rows [h0, h1) and columns [w0, w1): padded
  // positions are -inf, which never wins, so they are skipped. pad <= pool / 2 (the spec's
  // check) leaves every window a pixel.
  struct Window {
    int64_t h0, h1, w0, w1;
  };
  Window window(int64_t oh, int64_t ow) const {
    const int64_t h = oh * stride_ - pad_;
    const int64_t w = ow * stride_ - pad_;
    return {std::max<int64_t>(h, 0), std::min(h + pool_, in_h_), std::max<int64_t>(w, 0),
            std::min(w + pool_, in_w_)};
  }

  void scatter_row(const float* in, const float* out, const float* dout, float* din, int64_t n,
                   int64_t oh) const {
    if (relu_gradient_) {
      scatter_row<true>(in, out, dout, din, n, oh);
    } else {
      scatter_row<false>(in, out, dout, din, n, oh);
    }
  }

  // Adds dout of output row (n, oh) to din at each window's maximum: the first pixel of the
  // window (row-major) equal to the output, so a tie sends the gradient to one pixel only.
  // kRelu: `in` is a ReLU's output, and the gradient goes on through that ReLU (kept only
  // where the maximum is positive, as the ReLU's backward would).
  template <bool kRelu>
  void scatter_row(const float* in, const float* out, const float* dout, float* din, int64_t n,
                   int64_t oh) const {
    for (int64_t ow = 0; ow < out_w_; ++ow) {
      const int64_t at = pixel(n, oh, ow, out_h_, out_w_);
      for (int64_t c0 = 0; c0 < channels_; c0 += kChunk) {
        const int64_t len = std::min(kChunk, channels_ - c0);
        const float* o = out + at + c0;
        float left[kChunk];  // gradient not yet given to a pixel
        std::copy(dout + at + c0, dout + at + c0 + len, left);
        const Window win = window(oh, ow);
        for (int64_t h = win.h0; h < win.h1; ++h) {
          for (int64_t w = win.w0; w < win.w1; ++w) {
            const int64_t i = pixel(n, h, w, in_h_, in_w_) + c0;
            add_at_maximum<kRelu>(in + i, o, left, din + i, len);
          }
        }
      }
    }
  }

  // d += left where x is the window's maximum, which is then given away. The maximum is a
  // copy of one of the inputs, so comparing bits finds it exactly (a NaN too), and integer
  // masks keep the loop branch-free: GCC does not vectorize a float compare-and-select
  // under its default -ftrapping-math. The pointers never alias. kRelu keeps d where x is
  // positive only: bits in [1, +inf] (a NaN is not positive, as for the ReLU's backward).
  template <bool kRelu>
  static void add_at_maximum(const float* __restrict x, const float* __restrict maximum,
                             float* __restrict left, float* __restrict d, int64_t len) {
    constexpr uint32_t kInfinity = 0x7f800000u;
    for (int64_t c = 0; c < len; ++c) {
      const uint32_t bits = std::bit_cast<uint32_t>(x[c]);
      const uint32_t hit = 0u - static_cast<uint32_t>(bits == std::bit_cast<uint32_t>(maximum[c]));
      const uint32_t keep = kRelu ? 0u - static_cast<uint32_t>(bits - 1u < kInfinity) : ~0u;
      const uint32_t l = std::bit_cast<uint32_t>(left[c]);
      d[c] += std::bit_cast<float>(l & hit & keep);
      left[c] = std::bit_cast<float>(l & ~hit);
    }
  }

  bool relu_gradient_;
  int64_t pool_, stride_, pad_;
  int64_t batch_, in_h_, in_w_, channels_, out_h_, out_w_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_max_pool(const MaxPool2DSpec& spec,
                                               const LayerBinding& binding) {
  return std::make_unique<MaxPoolKernel>(spec, binding.in, binding.out, binding.relu_gradient);
}

}  // namespace scalescope
