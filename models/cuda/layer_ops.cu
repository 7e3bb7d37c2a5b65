// Our kernels for the layers that cuDNN and cuBLAS do not cover or where matching the CPU
// kernels exactly matters more than a library call: bias, activations, layout transposes,
// explicit padding, max and global average pooling. Their math is in models/kernel_math/
// (tested on CPU against the CPU kernels); the kernels here map threads to elements, in the
// launch shape of models/cuda/launch_shape.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "models/cuda/cuda_ops.h"
#include "models/cuda/launch_shape.cuh"
#include "models/kernel_math/activation_math.h"
#include "models/kernel_math/bias_math.h"
#include "models/kernel_math/dropout_math.h"
#include "models/kernel_math/layout_math.h"
#include "models/kernel_math/pool_math.h"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;

// ---- bias

// y + bias into `out`: y itself (FloatStore), or its 16-bit copy (HalfStore).
template <class Divider, class Out>
__global__ void bias_add_kernel(const float* y, const float* bias, int64_t count,
                                Divider by_channels, Out out) {
  struct In {
    float y, bias;
  };
  for_each_element(
      count,
      [&](int64_t i) {
        return In{y[i], bias[km::bias_channel(i, by_channels)]};
      },
      [&](int64_t i, const In& in) { out(i, in.y + in.bias); });
}

template <class Out>
void launch_bias_add(const float* y, const float* bias, int64_t rows, int64_t channels, Out out,
                     cudaStream_t stream) {
  const int64_t count = rows * channels;
  if (count == 0) return;
  with_divider(count, channels, [&](auto by_channels) {
    bias_add_kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(y, bias, count, by_channels,
                                                                       out);
  });
  check_launch("bias_add_kernel");
}

// Bias gradient in bias_math.h's order: a block of kBiasTileChannels × kBiasTileRows threads owns
// kBiasTileChannels channels of one part (blockIdx.y) of the rows.
constexpr int kTileC = km::kBiasTileChannels;
constexpr int kTileR = km::kBiasTileRows;

__global__ void bias_grad_kernel(const float* dy, float* out, int64_t rows, int64_t channels,
                                 km::BiasGradPlan plan, km::BiasGradRead read) {
  __shared__ float sums[kTileR][kTileC + 1];  // one padding column avoids bank conflicts
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileC + threadIdx.x;
  const km::IndexRange part = km::bias_grad_part_rows(plan, rows, blockIdx.y);
  sums[threadIdx.y][threadIdx.x] =
      c < channels ? km::strided_column_sum(dy, channels, c, part.begin + threadIdx.y, part.end,
                                            kTileR, read)
                   : 0.0f;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    out[static_cast<int64_t>(blockIdx.y) * channels + c] =
        km::ordered_sum(&sums[0][threadIdx.x], kTileR, kTileC + 1);
  }
}

__global__ void bias_grad_finish_kernel(const float* partial, float* db, int64_t parts,
                                        int64_t channels) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    db[c] = km::ordered_sum(partial + c, parts, channels);
  }
}

// ---- activations: one kernel per kind and direction (the kind is a compile-time constant).

template <Activation kKind>
__global__ void activation_forward_kernel(const float* x, float* y, int64_t count) {
  for_each_element(
      count, [&](int64_t i) { return x[i]; },
      [&](int64_t i, float v) { y[i] = km::activation_forward(kKind, v); });
}

// GELU's gradient reads x, the others' y; the kind being a constant, the unread one is never
// loaded.
template <Activation kKind>
__global__ void activation_backward_kernel(const float* x, const float* y, const float* dy,
                                           float* dx, int64_t count) {
  constexpr bool kReadsX = kKind == Activation::kGelu;
  struct In {
    float x, y, dy;
  };
  for_each_element(
      count,
      [&](int64_t i) {
        return In{kReadsX ? x[i] : 0.0f, kReadsX ? 0.0f : y[i], dy[i]};
      },
      [&](int64_t i, const In& in) { dx[i] = km::activation_backward(kKind, in.x, in.y, in.dy); });
}

__global__ void gelu_forward_half_kernel(const uint16_t* x, uint16_t* y, int64_t count,
                                         km::HalfFormat format) {
  for_each_element(
      count, [&](int64_t i) { return x[i]; },
      [&](int64_t i, uint16_t v) {
        y[i] = km::to_half(km::gelu_forward(km::from_half(v, format)), format);
      });
}

__global__ void gelu_backward_half_kernel(const uint16_t* x, const float* dy, float* dx,
                                          int64_t count, km::HalfFormat format) {
  struct In {
    uint16_t x;
    float dy;
  };
  for_each_element(
      count,
      [&](int64_t i) {
        return In{x[i], dy[i]};
      },
      [&](int64_t i, const In& in) {
        dx[i] = km::gelu_backward(km::from_half(in.x, format), in.dy);
      });
}

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t count, bool relu,
                           km::HalfRow saved) {
  struct In {
    float a, b;
  };
  for_each_element(
      count,
      [&](int64_t i) {
        return In{a[i], b[i]};
      },
      [&](int64_t i, const In& in) {
        const float v = relu ? km::add_relu_forward(in.a, in.b) : in.a + in.b;
        out[i] = v;
        saved.store(i, v);
      });
}

__global__ void accumulate_relu_gradient_kernel(float* acc, const float* grads,
                                                km::ReluOutput relu_output, int64_t count,
                                                bool first) {
  struct In {
    float relu_output, grad, acc;
  };
  for_each_element(
      count,
      [&](int64_t i) {
        return In{relu_output[i], grads[i], first ? 0.0f : acc[i]};
      },
      [&](int64_t i, const In& in) {
        const float g = km::relu_gradient(in.relu_output, in.grad);
        acc[i] = first ? g : in.acc + g;
      });
}

__global__ void dropout_kernel(const float* x, float* y, int64_t count, float rate, float scale,
                               uint64_t seed, uint64_t pass) {
  for_each_element(
      count,
      [&](int64_t i) {
        const bool keep = km::dropout_keep(seed, pass, static_cast<uint64_t>(i), rate);
        return km::dropout_apply(x[i], keep, scale);
      },
      [&](int64_t i, float v) { y[i] = v; });
}

// ---- layout

// A kTile × kTile tile through shared memory (one padding column avoids bank conflicts), so
// that reads and writes are both coalesced. Every dimension is walked with a stride, so any
// size fits the grid limits.
constexpr int kTile = 32;
constexpr int kTileRows = 8;
constexpr unsigned kMaxGridYZ = 65535;

__global__ void transpose_kernel(const float* in, float* out, km::TransposeShape s) {
  __shared__ float tile[kTile][kTile + 1];
  for (int64_t b = blockIdx.z; b < s.batches; b += gridDim.z) {
    for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile; r0 < s.rows;
         r0 += static_cast<int64_t>(gridDim.y) * kTile) {
      for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile; c0 < s.cols;
           c0 += static_cast<int64_t>(gridDim.x) * kTile) {
        for (int j = threadIdx.y; j < kTile; j += kTileRows) {
          const int64_t r = r0 + j;
          const int64_t c = c0 + threadIdx.x;
          if (r < s.rows && c < s.cols)
            tile[j][threadIdx.x] = in[km::transpose_in_index(s, b, r, c)];
        }
        __syncthreads();
        for (int j = threadIdx.y; j < kTile; j += kTileRows) {
          const int64_t c = c0 + j;
          const int64_t r = r0 + threadIdx.x;
          if (r < s.rows && c < s.cols)
            out[km::transpose_out_index(s, b, r, c)] = tile[threadIdx.x][j];
        }
        __syncthreads();  // the tile is refilled next
      }
    }
  }
}

// ---- pooling

// One output value at a time, kElementsAhead found before any is written (for_each_element);
// each window's choice too where `choices` is given. `kSmall`: windows of at most kSmallPool²
// read at once (pool_math.h).
template <bool kSmall, class Divider>
__global__ void max_pool_forward_kernel(PoolShape s, km::PoolDividers<Divider> d, const float* x,
                                        float* y, uint16_t* choices) {
  for_each_element(
      s.batch * s.out_h * s.out_w * s.channels,
      [&](int64_t i) { return km::max_pool_output_by<kSmall>(s, d, x, i, choices != nullptr); },
      [&](int64_t i, const km::PoolOutput& out) {
        y[i] = out.maximum;
        if (choices != nullptr) choices[i] = out.choice;
      });
}

// One thread per input value, gathering from the windows that contain it: no atomics, so the
// result is deterministic. Each element's gradient is found before any is written
// (for_each_element), its index arithmetic with `Divider`'s divisions. `kTwo` (pool <=
// 2·stride): the elements' four candidate windows read before any is summed (pool_math.h);
// 80 registers a thread under the bound, nothing spilled (sm_90).
template <bool kTwo, class Divider>
__global__ void __launch_bounds__(kThreads, 3)
    max_pool_backward_kernel(PoolShape s, km::PoolDividers<Divider> d, const uint16_t* choices,
                             const float* dy, float* dx) {
  const int64_t count = s.batch * s.in_h * s.in_w * s.channels;
  if constexpr (kTwo) {
    for_each_element(
        count, [&](int64_t i) { return km::max_pool_candidates(s, d, choices, dy, i); },
        [&](int64_t i, const km::CandidateWindows& w) { dx[i] = km::max_pool_chosen_sum(w); });
  } else {
    for_each_element(
        count, [&](int64_t i) { return km::max_pool_input_grad_loops(s, d, choices, dy, i); },
        [&](int64_t i, float grad) { dx[i] = grad; });
  }
}

// One thread per (sample, channel): consecutive threads read consecutive channels.
__global__ void global_avg_pool_forward_kernel(const float* x, float* y, int64_t n, int64_t pixels,
                                               int64_t c) {
  const int64_t count = n * c;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    y[i] = km::global_avg_pool_mean(x, pixels, c, i / c, i % c);
  }
}

template <class Divider>
__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, int64_t n,
                                                int64_t pixels, int64_t c, Divider by_channels,
                                                Divider by_pixels) {
  for_each_element(
      n * pixels * c,
      [&](int64_t i) { return km::global_avg_pool_grad(dy, pixels, c, by_channels, by_pixels, i); },
      [&](int64_t i, float grad) { dx[i] = grad; });
}

}  // namespace

void bias_add(float* y, const float* bias, int64_t rows, int64_t channels, cudaStream_t stream) {
  launch_bias_add(y, bias, rows, channels, FloatStore{y}, stream);
}

void bias_add_to_half(const float* y, const float* bias, uint16_t* out, int64_t rows,
                      int64_t channels, km::HalfFormat format, cudaStream_t stream) {
  launch_bias_add(y, bias, rows, channels, HalfStore{out, format}, stream);
}

int64_t bias_grad_scratch(int64_t rows, int64_t channels) {
  const int64_t parts = km::bias_grad_plan(rows).parts;
  return parts > 1 ? parts * channels : 0;
}

void bias_grad(const float* dy, float* db, int64_t rows, int64_t channels, float* scratch,
               km::BiasGradRead read, cudaStream_t stream) {
  if (channels == 0) return;
  const km::BiasGradPlan plan = km::bias_grad_plan(rows);
  const dim3 grid(static_cast<unsigned>((channels + kTileC - 1) / kTileC),
                  static_cast<unsigned>(plan.parts));
  const dim3 block(kTileC, kTileR);
  bias_grad_kernel<<<grid, block, 0, stream>>>(dy, plan.parts > 1 ? scratch : db, rows, channels,
                                               plan, read);
  check_launch("bias_grad_kernel");
  if (plan.parts == 1) return;
  bias_grad_finish_kernel<<<grid_for(channels), kThreads, 0, stream>>>(scratch, db, plan.parts,
                                                                       channels);
  check_launch("bias_grad_finish_kernel");
}

void add(float* out, const float* a, const float* b, int64_t n, bool relu, const km::HalfRow& saved,
         cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<grid_for_elements(n), kThreads, 0, stream>>>(out, a, b, n, relu, saved);
  check_launch("add_kernel");
}

void accumulate_relu_gradient(float* acc, const float* grads,
                              const kernel_math::ReluOutput& relu_output, int64_t n, bool first,
                              cudaStream_t stream) {
  if (n == 0) return;
  accumulate_relu_gradient_kernel<<<grid_for_elements(n), kThreads, 0, stream>>>(
      acc, grads, relu_output, n, first);
  check_launch("accumulate_relu_gradient_kernel");
}

void activation_forward(Activation kind, const float* x, float* y, int64_t count,
                        cudaStream_t stream) {
  if (count == 0) return;
  const auto launch = [&](auto kernel) {
    kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(x, y, count);
  };
  switch (kind) {
    case Activation::kRelu:
      launch(activation_forward_kernel<Activation::kRelu>);
      break;
    case Activation::kTanh:
      launch(activation_forward_kernel<Activation::kTanh>);
      break;
    case Activation::kSigmoid:
      launch(activation_forward_kernel<Activation::kSigmoid>);
      break;
    case Activation::kGelu:
      launch(activation_forward_kernel<Activation::kGelu>);
      break;
  }
  check_launch("activation_forward_kernel");
}

void activation_backward(Activation kind, const float* x, const float* y, const float* dy,
                         float* dx, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  const auto launch = [&](auto kernel) {
    kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(x, y, dy, dx, count);
  };
  switch (kind) {
    case Activation::kRelu:
      launch(activation_backward_kernel<Activation::kRelu>);
      break;
    case Activation::kTanh:
      launch(activation_backward_kernel<Activation::kTanh>);
      break;
    case Activation::kSigmoid:
      launch(activation_backward_kernel<Activation::kSigmoid>);
      break;
    case Activation::kGelu:
      launch(activation_backward_kernel<Activation::kGelu>);
      break;
  }
  check_launch("activation_backward_kernel");
}

void gelu_forward_half(const uint16_t* x, uint16_t* y, int64_t count,
                       kernel_math::HalfFormat format, cudaStream_t stream) {
  if (count == 0) return;
  gelu_forward_half_kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(x, y, count, format);
  check_launch("gelu_forward_half_kernel");
}

void gelu_backward_half(const uint16_t* x, const float* dy, float* dx, int64_t count,
                        kernel_math::HalfFormat format, cudaStream_t stream) {
  if (count == 0) return;
  gelu_backward_half_kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(x, dy, dx, count,
                                                                               format);
  check_launch("gelu_backward_half_kernel");
}

void dropout(const float* x, float* y, int64_t count, float rate, float scale, uint64_t seed,
             uint64_t pass, cudaStream_t stream) {
  if (count == 0) return;
  dropout_kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(x, y, count, rate, scale, seed,
                                                                    pass);
  check_launch("dropout_kernel");
}

void transpose(const float* in, float* out, int64_t batches, int64_t rows, int64_t cols,
               cudaStream_t stream) {
  if (batches == 0 || rows == 0 || cols == 0) return;
  const auto tiles = [](int64_t size, int64_t cap) {
    return static_cast<unsigned>(std::min<int64_t>((size + kTile - 1) / kTile, cap));
  };
  const dim3 grid(tiles(cols, kMaxBlocks), tiles(rows, kMaxGridYZ),
                  static_cast<unsigned>(std::min<int64_t>(batches, kMaxGridYZ)));
  const dim3 block(kTile, kTileRows);
  transpose_kernel<<<grid, block, 0, stream>>>(in, out, km::TransposeShape{batches, rows, cols});
  check_launch("transpose_kernel");
}

void extend_nhwc(const float* in, float* out, int64_t n, int64_t h, int64_t w, int64_t c,
                 int64_t extra_h, int64_t extra_w, cudaStream_t stream) {
  const int64_t count = n * (h + extra_h) * (w + extra_w) * c;
  if (count == 0) return;
  const km::ExtendShape s{n, h, w, c, h + extra_h, w + extra_w};
  with_divider(count, c, [&](auto by) {
    using Divider = decltype(by);
    using From = IndexFrom<km::ExtendShape, km::NhwcDividers<Divider>, km::extend_source<Divider>>;
    gather_or_zero(From{s, km::extended_dividers<Divider>(s)}, count, in, out, stream);
  });
  check_launch("gather_or_zero_kernel (zero extension)");
}

void crop_nhwc(const float* extended, float* out, int64_t n, int64_t h, int64_t w, int64_t c,
               int64_t extra_h, int64_t extra_w, cudaStream_t stream) {
  const int64_t count = n * h * w * c;
  if (count == 0) return;
  const km::ExtendShape s{n, h, w, c, h + extra_h, w + extra_w};
  with_divider(count, c, [&](auto by) {
    using Divider = decltype(by);
    using From = IndexFrom<km::ExtendShape, km::NhwcDividers<Divider>, km::crop_source<Divider>>;
    gather_or_zero(From{s, km::image_dividers<Divider>(s)}, count, extended, out, stream);
  });
  check_launch("gather_or_zero_kernel (crop)");
}

void copy_pitched_rows(const float* from, int64_t from_pitch, float* to, int64_t to_pitch,
                       int64_t width, int64_t rows, cudaStream_t stream) {
  const int64_t count = rows * to_pitch;
  if (count == 0) return;
  const km::PitchedRows s{width, from_pitch, to_pitch};
  with_divider(count, to_pitch, [&](auto by) {
    using Divider = decltype(by);
    using From = IndexFrom<km::PitchedRows, Divider, km::pitched_row_source<Divider>>;
    gather_or_zero(From{s, by}, count, from, to, stream);
  });
  check_launch("gather_or_zero_kernel (pitched rows)");
}

void max_pool_forward(const PoolShape& s, const float* x, float* y, uint16_t* choices,
                      cudaStream_t stream) {
  const int64_t count = s.batch * s.out_h * s.out_w * s.channels;
  if (count == 0) return;
  // One kind of division for both tensors' indices, picked by the larger.
  const int64_t in_count = s.batch * s.in_h * s.in_w * s.channels;
  with_divider(std::max(count, in_count), s.stride, [&](auto by_stride) {
    const auto d = km::pool_dividers<decltype(by_stride)>(s);
    const unsigned grid = grid_for_elements(count);
    if (s.pool <= km::kSmallPool) {
      max_pool_forward_kernel<true><<<grid, kThreads, 0, stream>>>(s, d, x, y, choices);
    } else {
      max_pool_forward_kernel<false><<<grid, kThreads, 0, stream>>>(s, d, x, y, choices);
    }
  });
  check_launch("max_pool_forward_kernel");
}

void max_pool_backward(const PoolShape& s, const uint16_t* choices, const float* dy, float* dx,
                       cudaStream_t stream) {
  const int64_t count = s.batch * s.in_h * s.in_w * s.channels;
  if (count == 0) return;
  // with_divider picks the kind of division by the tensor's size; every divider is of that kind.
  with_divider(count, s.stride, [&](auto by_stride) {
    const auto d = km::pool_dividers<decltype(by_stride)>(s);
    const unsigned grid = grid_for_elements(count);
    if (s.pool <= 2 * s.stride) {
      max_pool_backward_kernel<true><<<grid, kThreads, 0, stream>>>(s, d, choices, dy, dx);
    } else {
      max_pool_backward_kernel<false><<<grid, kThreads, 0, stream>>>(s, d, choices, dy, dx);
    }
  });
  check_launch("max_pool_backward_kernel");
}

void global_avg_pool_forward(const float* x, float* y, int64_t n, int64_t pixels, int64_t c,
                             cudaStream_t stream) {
  const int64_t count = n * c;
  if (count == 0) return;
  global_avg_pool_forward_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, n, pixels, c);
  check_launch("global_avg_pool_forward_kernel");
}

void global_avg_pool_backward(const float* dy, float* dx, int64_t n, int64_t pixels, int64_t c,
                              cudaStream_t stream) {
  const int64_t count = n * pixels * c;
  if (count == 0) return;
  with_divider(count, c, [&](auto by_channels) {
    using Divider = decltype(by_channels);
    global_avg_pool_backward_kernel<<<grid_for_elements(count), kThreads, 0, stream>>>(
        dy, dx, n, pixels, c, by_channels, Divider{pixels});
  });
  check_launch("global_avg_pool_backward_kernel");
}

}  // namespace scalescope::cuda_ops
