// Max pooling over NHWC images in plain OpenMP loops rather than oneDNN (MaxPoolKernel says why).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>

#include "models/cpu/cpu_kernels.h"
#include "models/cpu/vector_clones.h"

namespace scalescope {
namespace {

// The hot row functions are vector clones (models/cpu/vector_clones.h): measured in
// docs/performance.md.

// The shape of one pooling: which input pixels each output pixel's window covers.
struct PoolGeometry {
  int64_t pool, stride, pad;
  int64_t batch, in_h, in_w, channels, out_h, out_w;

  int64_t pixel(int64_t n, int64_t h, int64_t w, int64_t height, int64_t width) const {
    return ((n * height + h) * width + w) * channels;
  }

  // The part of window (oh, ow) inside the image, rows [h0, h1) and columns [w0, w1): padded
  // positions are -inf, which never wins, so they are skipped. pad <= pool / 2 (the spec's
  // check) leaves every window a pixel.
  struct Window {
    int64_t h0, h1, w0, w1;
  };
  Window window(int64_t oh, int64_t ow) const {
    const int64_t h = oh * stride - pad;
    const int64_t w = ow * stride - pad;
    return {std::max<int64_t>(h, 0), std::min(h + pool, in_h), std::max<int64_t>(w, 0),
            std::min(w + pool, in_w)};
  }

  // Whether the windows tile the image: every input pixel in exactly one window.
  bool tiles() const {
    return stride == pool && pad == 0 && in_h == out_h * pool && in_w == out_w * pool;
  }
};

// Output row (n, oh): each window's maximum. NaN wins, as in PyTorch, so that a diverged model
// shows it.
SCALESCOPE_VECTOR_CLONES
void max_row(const PoolGeometry& g, const float* in, float* out, int64_t n, int64_t oh) {
  const int64_t channels = g.channels;
  for (int64_t ow = 0; ow < g.out_w; ++ow) {
    float* __restrict o = out + g.pixel(n, oh, ow, g.out_h, g.out_w);
    const PoolGeometry::Window win = g.window(oh, ow);
    const float* first = in + g.pixel(n, win.h0, win.w0, g.in_h, g.in_w);
    std::copy(first, first + channels, o);
    for (int64_t h = win.h0; h < win.h1; ++h) {
      for (int64_t w = win.w0; w < win.w1; ++w) {
        const float* __restrict x = in + g.pixel(n, h, w, g.in_h, g.in_w);
        for (int64_t c = 0; c < channels; ++c) {
          o[c] = (x[c] > o[c] || x[c] != x[c]) ? x[c] : o[c];
        }
      }
    }
  }
}

// Channels handled together: the remaining gradient of a chunk lives on the stack.
constexpr int64_t kChunk = 64;

// d (+)= left where x is the window's maximum, which is then given away. The maximum is a copy
// of one of the inputs, so comparing bits finds it exactly (a NaN too), and integer masks keep
// the loop branch-free: GCC does not vectorize a float compare-and-select under its default
// -ftrapping-math. The pointers never alias. kRelu keeps d where x is positive only: bits in
// [1, +inf] (a NaN is not positive, as for the ReLU's backward). kStore writes d instead of
// adding to it (windows that tile the image: each pixel is written once).
template <bool kRelu, bool kStore>
[[gnu::always_inline]] inline void give_to_maximum(const float* __restrict x,
                                                   const float* __restrict maximum,
                                                   float* __restrict left, float* __restrict d,
                                                   int64_t len) {
  constexpr uint32_t kInfinity = 0x7f800000u;
  for (int64_t c = 0; c < len; ++c) {
    const uint32_t bits = std::bit_cast<uint32_t>(x[c]);
    const uint32_t hit = 0u - static_cast<uint32_t>(bits == std::bit_cast<uint32_t>(maximum[c]));
    const uint32_t keep = kRelu ? 0u - static_cast<uint32_t>(bits - 1u < kInfinity) : ~0u;
    const uint32_t l = std::bit_cast<uint32_t>(left[c]);
    const float given = std::bit_cast<float>(l & hit & keep);
    d[c] = kStore ? given : d[c] + given;
    left[c] = std::bit_cast<float>(l & ~hit);
  }
}

// Gives dout of output row (n, oh) to din at each window's maximum: the first pixel of the
// window (row-major) equal to the output, so a tie sends the gradient to one pixel only.
template <bool kRelu, bool kStore>
[[gnu::always_inline]] inline void scatter_row(const PoolGeometry& g, const float* in,
                                               const float* out, const float* dout, float* din,
                                               int64_t n, int64_t oh) {
  for (int64_t ow = 0; ow < g.out_w; ++ow) {
    const int64_t at = g.pixel(n, oh, ow, g.out_h, g.out_w);
    const PoolGeometry::Window win = g.window(oh, ow);
    for (int64_t c0 = 0; c0 < g.channels; c0 += kChunk) {
      const int64_t len = std::min(kChunk, g.channels - c0);
      float left[kChunk];  // gradient not yet given to a pixel
      std::copy(dout + at + c0, dout + at + c0 + len, left);
      for (int64_t h = win.h0; h < win.h1; ++h) {
        for (int64_t w = win.w0; w < win.w1; ++w) {
          const int64_t i = g.pixel(n, h, w, g.in_h, g.in_w) + c0;
          give_to_maximum<kRelu, kStore>(in + i, out + at + c0, left, din + i, len);
        }
      }
    }
  }
}

// scatter_row with the flags known, compiled for each vector width.
SCALESCOPE_VECTOR_CLONES
void scatter_row(const PoolGeometry& g, const float* in, const float* out, const float* dout,
                 float* din, int64_t n, int64_t oh, bool relu, bool store) {
  if (relu && store) {
    scatter_row<true, true>(g, in, out, dout, din, n, oh);
  } else if (relu) {
    scatter_row<true, false>(g, in, out, dout, din, n, oh);
  } else if (store) {
    scatter_row<false, true>(g, in, out, dout, din, n, oh);
  } else {
    scatter_row<false, false>(g, in, out, dout, din, n, oh);
  }
}

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
        g_{.pool = spec.pool,
           .stride = spec.stride,
           .pad = spec.pad,
           .batch = in[0],
           .in_h = in[1],
           .in_w = in[2],
           .channels = in[3],
           .out_h = out[1],
           .out_w = out[2]} {}

  void forward(const float* in, float* out, Stream&) override {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < g_.batch; ++n) {
      for (int64_t oh = 0; oh < g_.out_h; ++oh) max_row(g_, in, out, n, oh);
    }
  }

  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream&) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    const int64_t row = g_.in_w * g_.channels;
    if (g_.tiles()) {
      // Each window owns its pixels: written once, without clearing din first.
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t n = 0; n < g_.batch; ++n) {
        for (int64_t oh = 0; oh < g_.out_h; ++oh) {
          scatter_row(g_, in, out, dout, din, n, oh, relu_gradient_, true);
        }
      }
    } else if (g_.stride >= g_.pool) {
      // Windows do not overlap: output row oh owns input rows [oh·stride - pad,
      // (oh+1)·stride - pad) (the first one from 0, the last one up to H), so threads split
      // the rows without sharing a pixel.
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t n = 0; n < g_.batch; ++n) {
        for (int64_t oh = 0; oh < g_.out_h; ++oh) {
          const int64_t begin = oh == 0 ? 0 : oh * g_.stride - g_.pad;
          const int64_t end = oh + 1 == g_.out_h ? g_.in_h : (oh + 1) * g_.stride - g_.pad;
          float* band = din + g_.pixel(n, begin, 0, g_.in_h, g_.in_w);
          std::fill(band, band + (end - begin) * row, 0.0f);
          scatter_row(g_, in, out, dout, din, n, oh, relu_gradient_, false);
        }
      }
    } else {
      // Overlapping windows share pixels across output rows: one sample per thread.
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < g_.batch; ++n) {
        float* sample = din + g_.pixel(n, 0, 0, g_.in_h, g_.in_w);
        std::fill(sample, sample + g_.in_h * row, 0.0f);
        for (int64_t oh = 0; oh < g_.out_h; ++oh) {
          scatter_row(g_, in, out, dout, din, n, oh, relu_gradient_, false);
        }
      }
    }
  }

 private:
  bool relu_gradient_;
  PoolGeometry g_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_max_pool(const MaxPool2DSpec& spec,
                                               const LayerBinding& binding) {
  return std::make_unique<MaxPoolKernel>(spec, binding.in, binding.out, binding.relu_gradient);
}

}  // namespace scalescope
