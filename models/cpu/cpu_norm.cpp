// PyTorch's BatchNorm2d on NHWC images in plain OpenMP loops rather than oneDNN's batch
// normalization primitive: oneDNN 2.6's backward (prop_kind::backward) always writes
// diff_src, so a layer whose input needs no gradient (din null) would need an activation-sized
// scratch of its own, or a second path whose parameter gradients differ from the full
// backward's in the last bits; and its statistics are summed in float. These loops sum in
// double, write din only when asked, and give the same bits whatever the thread count.
//
// A ReLU that follows the layer may run inside it (LayerBinding::activation and
// relu_backward): forward writes max(y, 0) as oneDNN's ReLU does, and backward first multiplies
// the gradient by (output > 0) as oneDNN's ReLU backward does, so that the fused layer gives
// the separate layers' values while saving a pass over memory in each direction.
//
// Reductions over the N·H·W pixels of each channel run over a number of pixel chunks fixed by
// the shape alone (not the thread count): each chunk sums its pixels in order into its own
// slot of per-channel partial sums, and the slots are then added (the training forward's
// statistics: merged as moments) in chunk order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "core/buffer.h"
#include "core/check.h"
#include "models/cpu/cpu_kernels.h"
#include "models/cpu/prefetch.h"
#include "models/cpu/vector_clones.h"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/norm_math.h"

namespace scalescope {
namespace {

// Up to this many chunks of at least kChunkPixels pixels each: enough to share the reductions
// among the cores of a CPU device, few enough that adding the slots up costs nothing.
constexpr int64_t kMaxChunks = 64;
constexpr int64_t kChunkPixels = 16;
// The element-wise passes' blocks of pixels: each thread's share in few calls of the row loops.
constexpr int64_t kBlockPixels = 64;

// The loops' rows: the C channels of one pixel, vectorised across channels (vector clones,
// models/cpu/vector_clones.h; each channel's values are summed in pixel order whatever the
// width, so every clone gives the same bits), n consecutive rows a call. `y` non-null: a fused
// ReLU's output, whose backward multiplies the gradient by (y > 0) as oneDNN's does, without a
// branch.

// The rows read the input and a fused ReLU's output as fp32, or as the model's saved bf16
// copies (exactly the fp32 values a restore would give), and forward writes its output as fp32
// or only as its saved bf16 copy (rounded as the model's save rounds).
template <class T>
[[gnu::always_inline]] inline float value(const T* p, int64_t c) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return kernel_math::bf16_to_float(p[c]);
  } else {
    return p[c];
  }
}
template <class O>
[[gnu::always_inline]] inline void store(O* p, int64_t c, float v) {
  if constexpr (std::is_same_v<O, uint16_t>) {
    p[c] = kernel_math::float_to_bf16(v);
  } else {
    p[c] = v;
  }
}

// Asks for the row kAhead values past offset o of each stream that is not null (the passes read
// activations written long before: models/cpu/prefetch.h).
template <class... T>
[[gnu::always_inline]] inline void fetch_rows_ahead(int64_t o, int64_t cs, const T*... streams) {
  ((streams != nullptr ? cpu_prefetch::prefetch_ahead(streams + o, cs) : void()), ...);
}

// The reductions' rows add two sums per channel, a and b (acc[c] and acc[cs + c]), row after
// row. Sums in memory made each row wait for the store of the row before (the adds' chain
// through acc: `perf annotate` of the bf16 passes), so full tiles of kTileChannels channels
// keep theirs in registers over the rows and add them to acc at the end; the channels past the
// last full tile add into acc row by row. The first pass over the rows asks for the rows ahead
// of the streams it reads (fetch_rows_ahead); the others find them in cache. REQUIRES: acc zero,
// so that adding a tile's sums once gives the bits of adding row by row (fill_slots zeroes each
// chunk's slot and calls once).
constexpr int64_t kTileChannels = 16;
template <class Add, class... T>
[[gnu::always_inline]] inline void tiled_row_sums(double* __restrict acc, int64_t cs, int64_t n,
                                                  const Add& add, const T*... streams) {
  int64_t c0 = 0;
  for (; c0 + kTileChannels <= cs; c0 += kTileChannels) {
    double a[kTileChannels] = {};
    double b[kTileChannels] = {};
    for (int64_t p = 0; p < n; ++p) {
      if (c0 == 0) fetch_rows_ahead(p * cs, cs, streams...);
#pragma omp simd
      for (int64_t c = 0; c < kTileChannels; ++c) add(a[c], b[c], p * cs, c0 + c);
    }
    for (int64_t c = 0; c < kTileChannels; ++c) {
      acc[c0 + c] += a[c];
      acc[cs + c0 + c] += b[c];
    }
  }
  for (int64_t p = 0; p < n; ++p) {
    if (c0 == 0) fetch_rows_ahead(p * cs, cs, streams...);
    for (int64_t c = c0; c < cs; ++c) add(acc[c], acc[cs + c], p * cs, c);
  }
}

// Σd and Σd² with d = x − shift, shift being the first row of the chunk: its moments from one
// read (the forward's statistics): as the shift is one of the chunk's values, a mean far from
// zero cancels no more than the chunk's own spread does (in double).
template <class T>
[[gnu::always_inline]] inline void shifted_sums(double* acc, const T* x, int64_t cs, int64_t n) {
  tiled_row_sums(
      acc, cs, n,
      [x](double& sum, double& squares, int64_t o, int64_t c) {
        const double d = static_cast<double>(value(x + o, c)) - value(x, c);
        sum += d;
        squares += d * d;
      },
      x);
}
SCALESCOPE_VECTOR_CLONES
void shifted_sum_rows(double* acc, const float* x, int64_t cs, int64_t n) {
  shifted_sums(acc, x, cs, n);
}
SCALESCOPE_VECTOR_CLONES
void shifted_sum_rows(double* acc, const uint16_t* x, int64_t cs, int64_t n) {
  shifted_sums(acc, x, cs, n);
}

// y = (x − shift)·scale + β, and with a fused ReLU max(y, 0) as oneDNN's (0 for NaN and −0).
template <class T, class O>
[[gnu::always_inline]] inline void normalized(O* __restrict y, const T* __restrict x,
                                              const float* __restrict shift,
                                              const float* __restrict scale,
                                              const float* __restrict beta, bool relu, int64_t cs) {
  if (relu) {
    for (int64_t c = 0; c < cs; ++c) {
      const float v = (value(x, c) - shift[c]) * scale[c] + beta[c];
      store(y, c, v > 0.0f ? v : 0.0f);
    }
  } else {
    for (int64_t c = 0; c < cs; ++c) store(y, c, (value(x, c) - shift[c]) * scale[c] + beta[c]);
  }
}
SCALESCOPE_VECTOR_CLONES
void normalize_rows(float* y, const float* x, const float* shift, const float* scale,
                    const float* beta, bool relu, int64_t cs, int64_t n) {
  for (int64_t p = 0; p < n; ++p) {
    fetch_rows_ahead(p * cs, cs, x);
    normalized(y + p * cs, x + p * cs, shift, scale, beta, relu, cs);
  }
}
SCALESCOPE_VECTOR_CLONES
void normalize_rows(float* y, const uint16_t* x, const float* shift, const float* scale,
                    const float* beta, bool relu, int64_t cs, int64_t n) {
  for (int64_t p = 0; p < n; ++p) {
    fetch_rows_ahead(p * cs, cs, x);
    normalized(y + p * cs, x + p * cs, shift, scale, beta, relu, cs);
  }
}
SCALESCOPE_VECTOR_CLONES
void normalize_rows(uint16_t* y, const uint16_t* x, const float* shift, const float* scale,
                    const float* beta, bool relu, int64_t cs, int64_t n) {
  for (int64_t p = 0; p < n; ++p) {
    fetch_rows_ahead(p * cs, cs, x);
    normalized(y + p * cs, x + p * cs, shift, scale, beta, relu, cs);
  }
}

// Σdy and Σdy·(x − mean) over n rows (dy through the fused ReLU whose output is y, unless null).
template <class T>
[[gnu::always_inline]] inline void gradient_sums(double* acc, const T* x, const T* y,
                                                 const float* dy, const float* mean, int64_t cs,
                                                 int64_t n) {
  if (y != nullptr) {
    tiled_row_sums(
        acc, cs, n,
        [=](double& sum_dy, double& sum_dyx, int64_t o, int64_t c) {
          const float g = dy[o + c] * (value(y + o, c) > 0.0f ? 1.0f : 0.0f);
          sum_dy += g;
          sum_dyx += static_cast<double>(g) * (static_cast<double>(value(x + o, c)) - mean[c]);
        },
        x, y, dy);
  } else {
    tiled_row_sums(
        acc, cs, n,
        [=](double& sum_dy, double& sum_dyx, int64_t o, int64_t c) {
          sum_dy += dy[o + c];
          sum_dyx +=
              static_cast<double>(dy[o + c]) * (static_cast<double>(value(x + o, c)) - mean[c]);
        },
        x, dy);
  }
}
SCALESCOPE_VECTOR_CLONES
void gradient_sums_rows(double* acc, const float* x, const float* y, const float* dy,
                        const float* mean, int64_t cs, int64_t n) {
  gradient_sums(acc, x, y, dy, mean, cs, n);
}
SCALESCOPE_VECTOR_CLONES
void gradient_sums_rows(double* acc, const uint16_t* x, const uint16_t* y, const float* dy,
                        const float* mean, int64_t cs, int64_t n) {
  gradient_sums(acc, x, y, dy, mean, cs, n);
}

// dx = k·(dy − a − (x − mean)·b), as fp32 or rounded into its bf16 copy.
template <class T, class O>
[[gnu::always_inline]] inline void input_gradient(O* __restrict dx, const T* __restrict x,
                                                  const T* __restrict y, const float* __restrict dy,
                                                  const float* __restrict mean,
                                                  const float* __restrict k,
                                                  const float* __restrict a,
                                                  const float* __restrict b, int64_t cs) {
  if (y != nullptr) {
    for (int64_t c = 0; c < cs; ++c) {
      const float g = dy[c] * (value(y, c) > 0.0f ? 1.0f : 0.0f);
      store(dx, c, k[c] * (g - a[c] - (value(x, c) - mean[c]) * b[c]));
    }
  } else {
    for (int64_t c = 0; c < cs; ++c) {
      store(dx, c, k[c] * (dy[c] - a[c] - (value(x, c) - mean[c]) * b[c]));
    }
  }
}

// Over n rows.
template <class T, class O>
[[gnu::always_inline]] inline void input_gradient(O* dx, const T* x, const T* y, const float* dy,
                                                  const float* mean, const float* k, const float* a,
                                                  const float* b, int64_t cs, int64_t n) {
  for (int64_t o = 0; o < n * cs; o += cs) {
    fetch_rows_ahead(o, cs, x, y, dy);
    input_gradient(dx + o, x + o, y != nullptr ? y + o : nullptr, dy + o, mean, k, a, b, cs);
  }
}
SCALESCOPE_VECTOR_CLONES
void input_gradient_rows(float* dx, const float* x, const float* y, const float* dy,
                         const float* mean, const float* k, const float* a, const float* b,
                         int64_t cs, int64_t n) {
  input_gradient(dx, x, y, dy, mean, k, a, b, cs, n);
}
SCALESCOPE_VECTOR_CLONES
void input_gradient_rows(float* dx, const uint16_t* x, const uint16_t* y, const float* dy,
                         const float* mean, const float* k, const float* a, const float* b,
                         int64_t cs, int64_t n) {
  input_gradient(dx, x, y, dy, mean, k, a, b, cs, n);
}
SCALESCOPE_VECTOR_CLONES
void input_gradient_rows(uint16_t* dx, const uint16_t* x, const uint16_t* y, const float* dy,
                         const float* mean, const float* k, const float* a, const float* b,
                         int64_t cs, int64_t n) {
  input_gradient(dx, x, y, dy, mean, k, a, b, cs, n);
}

// A channel's count, mean and Σ(x − mean)² in double, merged a part at a time (Chan, Golub and
// LeVeque's pairwise update): the chunks' moments of one replica, and with --sync-batchnorm
// every replica's.
struct Moments64 {
  double count = 0.0, mean = 0.0, m2 = 0.0;
  void merge(double n, double part_mean, double part_m2) {
    const double delta = part_mean - mean;
    const double total = count + n;
    mean += delta * (n / total);
    m2 += part_m2 + delta * delta * (count * n / total);
    count = total;
  }
};

class BatchNormKernel final : public LayerKernel {
 public:
  BatchNormKernel(const BatchNorm2DSpec& spec, const LayerBinding& b, Device& device)
      : name_(describe(spec)),
        relu_(b.activation == Activation::kRelu),
        relu_backward_(b.relu_backward),
        eps_(spec.eps),
        momentum_(spec.momentum),
        pixels_(b.in[0] * b.in[1] * b.in[2]),
        channels_(b.in[3]),
        chunks_(std::clamp<int64_t>(pixels_ / kChunkPixels, 1, kMaxChunks)),
        gamma_(b.params[0].data),
        beta_(b.params[1].data),
        dgamma_(b.grads[0].data),
        dbeta_(b.grads[1].data),
        running_mean_(b.buffers[0].data),
        running_var_(b.buffers[1].data),
        batches_tracked_(b.buffers[2].data),
        partials_(device, static_cast<size_t>((chunks_ + 1) * 2 * channels_) * sizeof(double)),
        coefficients_(device, static_cast<size_t>(5 * channels_) * sizeof(float)),
        sync_group_(b.sync),
        sync_(device, static_cast<size_t>(
                          kernel_math::norm_sync_buffer_floats(channels_, b.sync.replicas)) *
                          sizeof(float)) {}

  void forward(const float* in, float* out, Stream&) override { forward_from(in, out); }

  // Under bf16 forward may read the saved copy of its input too (the values backward reads),
  // and write its output only as its saved copy where every reader reads only that (a
  // convolution's): no fp32 output, nor the model's pass rounding it.
  bool forwards_from_saved(kernel_math::HalfFormat format) const override {
    return reads_saved(format);
  }
  void forward_saved(const uint16_t* in, float* out, Stream&) override { forward_from(in, out); }
  SavedOutput forwards_into_saved(kernel_math::HalfFormat format) const override {
    return reads_saved(format) ? SavedOutput::kFromSavedInput : SavedOutput::kNo;
  }
  void forward_into_saved(const float*, const uint16_t* saved_in, uint16_t* out,
                          kernel_math::HalfFormat, Stream&) override {
    forward_from(saved_in, out);
  }

  // Synchronized: stage 0 gathers this replica's moments into its slot of the sync values
  // (kernel_math/norm_math.h's layout), stage 1 merges every replica's in rank order and
  // normalizes: one replica's stages are the unsynchronized forward.
  int sync_points(Pass pass) const override { return batch_norm_sync_points(pass); }
  TensorView sync_values(Pass pass) const override {
    return {sync_ptr(),
            Shape{pass == Pass::kForward
                      ? kernel_math::norm_forward_sync_floats(channels_, sync_group_.replicas)
                      : kernel_math::norm_backward_sync_floats(channels_)}};
  }
  void forward_stage(int stage, const float* in, float* out, Stream&) override {
    const int replicas = sync_group_.replicas;
    if (stage == 0) {
      float* slots = sync_ptr();
      std::fill(slots, slots + kernel_math::norm_forward_sync_floats(channels_, replicas), 0.0f);
      float* mine = kernel_math::norm_moments_slot(slots, channels_, sync_group_.rank);
      moments(in, mine, mine + channels_);
      return;
    }
    float* mean = saved_mean();
    double* squares = total_slot();
    for (int64_t c = 0; c < channels_; ++c) {
      Moments64 m;
      for (int q = 0; q < replicas; ++q) {
        const float* slot = kernel_math::norm_moments_slot(sync_ptr(), channels_, q);
        m.merge(static_cast<double>(pixels_), slot[c], slot[channels_ + c]);
      }
      mean[c] = static_cast<float>(m.mean);
      squares[c] = m.m2;
    }
    finish_forward(in, out, squares, replicas);
  }

  void forward_eval(const float* in, float* out, Stream&) override {
    float* scale = coefficient(0);
    for (int64_t c = 0; c < channels_; ++c) {
      scale[c] = static_cast<float>(gamma_[c] / std::sqrt(running_var_[c] + eps_));
    }
    normalize(in, out, running_mean_, scale);
  }

  // With x̂ = (x − mean)·invstd: dβ = Σdy, dγ = Σdy·x̂, and
  // dx = γ·invstd·(dy − dβ/M − x̂·dγ/M), from the statistics of the last training forward.
  void backward(const float* in, const float* out, const float* dout, float* din,
                Stream&) override {
    const double* sums = backward_sums(in, out, dout);
    finish_backward(in, out, dout, din, sums, 1);
  }

  // Under bf16 backward reads the saved copies of the input and of a fused ReLU's output.
  bool reads_saved(kernel_math::HalfFormat format) const override {
    return format == kernel_math::HalfFormat::kBf16;
  }
  void backward_saved(const uint16_t* in, const uint16_t* out, const float* dout, float* din,
                      Stream&) override {
    const double* sums = backward_sums(in, out, dout);
    finish_backward(in, out, dout, din, sums, 1);
  }
  // And may write its input's gradient as the bf16 copy a convolution's backward reads.
  bool writes_half_gradient(kernel_math::HalfFormat format) const override {
    return reads_saved(format);
  }
  void backward_into_half_gradient(const uint16_t* in, const uint16_t* out, const float* dout,
                                   uint16_t* din, Stream&) override {
    const double* sums = backward_sums(in, out, dout);
    finish_backward(in, out, dout, din, sums, 1);
  }

  // Synchronized: dβ and dγ stay this replica's; dx takes the sums of every replica's batch.
  void backward_stage(int stage, const float* in, const float* out, const float* dout, float* din,
                      Stream&) override {
    if (stage == 0) {
      to_sync(backward_sums(in, out, dout), 2 * channels_);
    } else {
      finish_backward(in, out, dout, din, from_sync(2 * channels_), sync_group_.replicas);
    }
  }

 private:
  void check_training_pixels() const {
    SS_CHECK(pixels_ > 1,
             "{}: batch norm in training needs more than one value per channel, got {} "
             "(batch × height × width)",
             name_, pixels_);
  }
  // This replica's moments from one read of x: each chunk's sums of the deviations from its
  // first pixel, the chunks' moments then merged in chunk order, all in double; written as the
  // floats a sync point carries (mean[c], m2[c] = Σ(x − mean)²), which the unsynchronized
  // forward takes too, so that one replica's synchronized stages are its bits.
  template <class T>
  void moments(const T* in, float* mean, float* m2) {
    check_training_pixels();
    const int64_t cs = channels_;
    const double* slots = fill_slots(
        [&](double* acc, int64_t p, int64_t n) { shifted_sum_rows(acc, in + p * cs, cs, n); });
    for (int64_t c = 0; c < cs; ++c) {
      Moments64 m;
      for (int64_t s = 0; s < chunks_; ++s) {
        const int64_t begin = chunk_begin(s);
        const double n = static_cast<double>(chunk_begin(s + 1) - begin);
        const double d = slots[s * 2 * cs + c];
        m.merge(n, value(in + begin * cs, c) + d / n, slots[s * 2 * cs + cs + c] - d * d / n);
      }
      mean[c] = static_cast<float>(m.mean);
      m2[c] = static_cast<float>(m.m2);
    }
  }
  template <class T, class O>
  void finish_forward(const T* in, O* out, const double* squares, int replicas) {
    const double m = static_cast<double>(pixels_) * replicas;
    const float* mean = saved_mean();
    float* invstd = saved_invstd();
    float* scale = coefficient(0);
    for (int64_t c = 0; c < channels_; ++c) {
      const double var = squares[c] / m;
      invstd[c] = static_cast<float>(1.0 / std::sqrt(var + eps_));
      scale[c] = gamma_[c] * invstd[c];
      // PyTorch's update: the running variance moves towards the unbiased variance.
      running_mean_[c] = static_cast<float>((1.0 - momentum_) * running_mean_[c] +
                                            momentum_ * static_cast<double>(mean[c]));
      running_var_[c] =
          static_cast<float>((1.0 - momentum_) * running_var_[c] + momentum_ * var * m / (m - 1.0));
    }
    batches_tracked_[0] += 1.0f;
    normalize(in, out, mean, scale);
  }
  template <class T, class O>
  void forward_from(const T* in, O* out) {
    float* m2 = coefficient(1);
    moments(in, saved_mean(), m2);
    double* squares = total_slot();
    for (int64_t c = 0; c < channels_; ++c) squares[c] = m2[c];
    finish_forward(in, out, squares, 1);
  }

  // Σdy and Σdy·(x − mean) per channel, over this replica's pixels; writes dβ and dγ.
  template <class T>
  const double* backward_sums(const T* in, const T* out, const float* dout) {
    const float* mean = saved_mean();
    const float* invstd = saved_invstd();
    const int64_t cs = channels_;
    double* sums = reduce([&](double* acc, int64_t p, int64_t n) {
      gradient_sums_rows(acc, in + p * cs, relu_backward_ ? out + p * cs : nullptr, dout + p * cs,
                         mean, cs, n);
    });
    for (int64_t c = 0; c < cs; ++c) {
      dbeta_[c] = static_cast<float>(sums[c]);
      dgamma_[c] = static_cast<float>(sums[cs + c] * invstd[c]);
    }
    return sums;
  }
  template <class T, class O>
  void finish_backward(const T* in, const T* out, const float* dout, O* din, const double* sums,
                       int replicas) {
    const float* invstd = saved_invstd();
    const int64_t cs = channels_;
    const double m = static_cast<double>(pixels_) * replicas;
    float* k = coefficient(0);  // γ·invstd
    float* a = coefficient(1);  // Σdy/M
    float* b = coefficient(2);  // invstd·Σdy·x̂/M
    for (int64_t c = 0; c < cs; ++c) {
      k[c] = gamma_[c] * invstd[c];
      a[c] = static_cast<float>(sums[c] / m);
      b[c] = static_cast<float>(invstd[c] * (sums[cs + c] * invstd[c]) / m);
    }
    if (din == nullptr) return;  // first layer: nobody needs the input's gradient
    const float* mean = saved_mean();
    over_pixels([&](int64_t p, int64_t n) {
      input_gradient_rows(din + p * cs, in + p * cs, relu_backward_ ? out + p * cs : nullptr,
                          dout + p * cs, mean, k, a, b, cs, n);
    });
  }

  // The sums a sync point all-reduces travel as floats (what the communicators carry).
  float* sync_ptr() const { return static_cast<float*>(sync_.data()); }
  void to_sync(const double* sums, int64_t count) {
    for (int64_t i = 0; i < count; ++i) sync_ptr()[i] = static_cast<float>(sums[i]);
  }
  const double* from_sync(int64_t count) {
    double* total = total_slot();
    for (int64_t i = 0; i < count; ++i) total[i] = sync_ptr()[i];
    return total;
  }
  // The 2·C doubles after the chunks' slots: a reduction's total.
  double* total_slot() const {
    return static_cast<double*>(partials_.data()) + chunks_ * 2 * channels_;
  }

  // Runs rows(acc, p, n) over each chunk's n pixels from p, acc being the chunk's slot of
  // per-channel partial sums (2·C doubles, zeroed); returns the slots.
  template <class Rows>
  double* fill_slots(const Rows& rows) {
    const int64_t width = 2 * channels_;
    double* slots = static_cast<double*>(partials_.data());
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < chunks_; ++s) {
      double* acc = slots + s * width;
      std::fill(acc, acc + width, 0.0);
      rows(acc, chunk_begin(s), chunk_begin(s + 1) - chunk_begin(s));
    }
    return slots;
  }
  int64_t chunk_begin(int64_t s) const {
    return pixels_ * s / chunks_;
  }

  // fill_slots, and the sums over all chunks, added in chunk order.
  template <class Rows>
  double* reduce(const Rows& rows) {
    const int64_t width = 2 * channels_;
    const double* slots = fill_slots(rows);
    double* total = total_slot();
    std::copy(slots, slots + width, total);
    for (int64_t s = 1; s < chunks_; ++s) {
      for (int64_t i = 0; i < width; ++i) total[i] += slots[s * width + i];
    }
    return total;
  }

  // out = (x − shift)·scale + β, channel by channel (and the fused ReLU).
  template <class T, class O>
  void normalize(const T* in, O* out, const float* shift, const float* scale) const {
    const int64_t cs = channels_;
    over_pixels([&](int64_t p, int64_t n) {
      normalize_rows(out + p * cs, in + p * cs, shift, scale, beta_, relu_, cs, n);
    });
  }

  // Runs rows(p, n) over the pixels in blocks of n = kBlockPixels (the last one shorter), the
  // blocks shared among the threads: one call of a row loop per block, not per pixel.
  template <class Rows>
  void over_pixels(const Rows& rows) const {
    const int64_t blocks = (pixels_ + kBlockPixels - 1) / kBlockPixels;
#pragma omp parallel for schedule(static)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t p = block * kBlockPixels;
      rows(p, std::min(kBlockPixels, pixels_ - p));
    }
  }

  // Per-channel floats owned here: the mean and invstd saved by the last training forward for
  // backward, and two scratch rows for coefficients of the pass at hand.
  float* coefficient(int64_t i) const {
    return static_cast<float*>(coefficients_.data()) + i * channels_;
  }
  float* saved_mean() const {
    return coefficient(3);
  }
  float* saved_invstd() const {
    return coefficient(4);
  }

  std::string name_;
  bool relu_;           // forward applies the ReLU that follows
  bool relu_backward_;  // backward's dout is that ReLU's output gradient
  double eps_, momentum_;
  int64_t pixels_, channels_, chunks_;
  const float* gamma_;
  const float* beta_;
  float* dgamma_;
  float* dbeta_;
  float* running_mean_;
  float* running_var_;
  float* batches_tracked_;
  DeviceBuffer partials_;      // chunks_ + 1 slots of 2·C doubles: the chunks', then the total
  DeviceBuffer coefficients_;  // 5·C floats, see coefficient()
  SyncGroup sync_group_;
  DeviceBuffer sync_;  // what a sync point all-reduces (sync_values)
};

}  // namespace

std::unique_ptr<LayerKernel> make_cpu_batch_norm(const BatchNorm2DSpec& spec,
                                                 const LayerBinding& binding, Device& device) {
  return std::make_unique<BatchNormKernel>(spec, binding, device);
}

}  // namespace scalescope
