// GPT-2's GELU on CPU in our own loops rather than oneDNN's eltwise: kernel_math's functions
// (x·σ(2u) with vector_exp, activation_math.h), vectorised, so that the CPU and CUDA kernels
// compute the same bits. oneDNN 2.6's gelu_tanh is bound by its arithmetic on a 2-core AVX-512
// machine (its backward took 2.6 times its ReLU's on the same bytes); and under bf16 and fp16
// both passes read the model's saved 16-bit copies themselves, where the model would restore
// the input into fp32 first.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "models/cpu/cpu_half.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/prefetch.h"
#include "models/cpu/vector_clones.h"
#include "models/kernel_math/activation_math.h"

namespace scalescope {
namespace {

namespace km = kernel_math;

// Elements per task: 16 KiB of fp32, which stays in a core's L1 or L2 between the 16-bit
// conversion and the math.
constexpr int64_t kChunk = 4096;

// The spans read their inputs ahead of the loop (prefetch.h): a GELU's input was written by
// the layer before long ago in backward, and its forward's input comes from a product.
SCALESCOPE_VECTOR_CLONES void gelu_forward_span(const float* x, float* y, int64_t n) {
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) y[i] = km::gelu_forward(x[i]);
      },
      x);
}

SCALESCOPE_VECTOR_CLONES void gelu_backward_span(const float* x, const float* dy, float* dx,
                                                 int64_t n) {
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) dx[i] = km::gelu_backward(x[i], dy[i]);
      },
      x, dy);
}

// bf16's conversions are bit arithmetic, which vectorises with the math: one pass, no fp32 in
// memory. (fp16's go through cpu_half.cpp's F16C loops a task at a time instead.)
SCALESCOPE_VECTOR_CLONES void gelu_forward_bf16_span(const uint16_t* x, uint16_t* y, int64_t n) {
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          y[i] = km::float_to_bf16(km::gelu_forward(km::bf16_to_float(x[i])));
      },
      x);
}

SCALESCOPE_VECTOR_CLONES void gelu_backward_bf16_span(const uint16_t* x, const float* dy, float* dx,
                                                      int64_t n) {
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          dx[i] = km::gelu_backward(km::bf16_to_float(x[i]), dy[i]);
      },
      x, dy);
}

// The same gradient rounded into the bf16 copy a dense layer's backward reads, as that copy's
// own rounding would: the fp32 gradient never reaches memory. A block's fp32 values wait in
// a buffer on the stack between two loops: the rounding inside the math's loop made it spill
// registers and ran slower than the math and its fp32 stores.
SCALESCOPE_VECTOR_CLONES void gelu_backward_bf16_to_bf16_span(const uint16_t* x, const float* dy,
                                                              uint16_t* dx, int64_t n) {
  alignas(64) float block[cpu_prefetch::kBlock];
  cpu_prefetch::in_prefetched_blocks(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          block[i - begin] = km::gelu_backward(km::bf16_to_float(x[i]), dy[i]);
        for (int64_t i = begin; i < end; ++i) dx[i] = km::float_to_bf16(block[i - begin]);
      },
      x, dy);
}

class GeluKernel final : public LayerKernel {
 public:
  GeluKernel(int64_t numel, std::optional<km::HalfFormat> format)
      : numel_(numel), format_(format) {}

  void forward(const float* in, float* out, Stream&) override {
    each_task([&](int64_t at, int64_t len) { gelu_forward_span(in + at, out + at, len); });
  }

  void backward(const float* in, const float*, const float* dout, float* din, Stream&) override {
    if (din == nullptr) return;  // no parameters: nothing to do without the input's gradient
    each_task(
        [&](int64_t at, int64_t len) { gelu_backward_span(in + at, dout + at, din + at, len); });
  }

  // Under bf16 and fp16 (the format the kernel was built under), from the saved copy of the
  // input into the saved copy of the output, as autocast runs GELU on a 16-bit tensor: the
  // fp32 forward of the widened input, rounded as the model's save rounds.
  SavedOutput forwards_into_saved(km::HalfFormat format) const override {
    return format_ == format ? SavedOutput::kFromSavedInput : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          km::HalfFormat format, Stream&) override {
    if (format == km::HalfFormat::kBf16) {
      each_task(
          [&](int64_t at, int64_t len) { gelu_forward_bf16_span(saved_in + at, out + at, len); });
      return;
    }
    each_widened_task(saved_in, format, [&](int64_t at, int64_t len, float* x) {
      gelu_forward_span(x, x, len);
      compress_half_span(x, out + at, len, 1, format);
    });
  }

  // Backward from the saved copy of the input: the fp32 backward of the restored values.
  bool reads_saved(km::HalfFormat format) const override { return format_ == format; }
  void backward_saved(const uint16_t* in, const uint16_t*, const float* dout, float* din,
                      Stream&) override {
    if (din == nullptr) return;
    if (format_ == km::HalfFormat::kBf16) {
      each_task([&](int64_t at, int64_t len) {
        gelu_backward_bf16_span(in + at, dout + at, din + at, len);
      });
      return;
    }
    each_widened_task(in, *format_, [&](int64_t at, int64_t len, const float* x) {
      gelu_backward_span(x, dout + at, din + at, len);
    });
  }

  // Under bf16 the gradient may leave as the bf16 copy the layer before (a dense layer, c_fc)
  // reads, where that layer would round the fp32 gradient itself.
  bool writes_half_gradient(km::HalfFormat format) const override {
    return format_ == format && format == km::HalfFormat::kBf16;
  }
  void backward_into_half_gradient(const uint16_t* in, const uint16_t*, const float* dout,
                                   uint16_t* din, Stream&) override {
    each_task([&](int64_t at, int64_t len) {
      gelu_backward_bf16_to_bf16_span(in + at, dout + at, din + at, len);
    });
  }

 private:
  int64_t chunks() const { return (numel_ + kChunk - 1) / kChunk; }

  // task(at, len) for each task of kChunk values, on the threads.
  template <class Task>
  void each_task(const Task& task) const {
    const int64_t n = numel_;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks(); ++c) task(c * kChunk, std::min(kChunk, n - c * kChunk));
  }

  // The same, task(at, len, x) given `half`'s values [at, at + len) widened into x, a thread's
  // kChunk floats.
  template <class Task>
  void each_widened_task(const uint16_t* half, km::HalfFormat format, const Task& task) const {
    const int64_t n = numel_;
#pragma omp parallel
    {
      thread_local std::vector<float> x;
      x.resize(kChunk);
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks(); ++c) {
        const int64_t at = c * kChunk, len = std::min(kChunk, n - at);
        decompress_half_span(half + at, x.data(), len, format);
        task(at, len, x.data());
      }
    }
  }

  int64_t numel_;
  std::optional<km::HalfFormat> format_;  // of the saved copies it reads, under bf16 and fp16
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_gelu(int64_t numel) {
  return std::make_unique<GeluKernel>(numel, half_format(precision()));
}

}  // namespace scalescope
