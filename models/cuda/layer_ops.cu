// Our kernels for the layers that cuDNN and cuBLAS do not cover or where matching the CPU
// kernels exactly matters more than a library call: bias, activations, layout transposes,
// explicit padding, max and global average pooling.
//
// Element-wise kernels use grid-stride loops with 64-bit indices (activations may pass 2^31
// elements) and a grid capped at kMaxBlocks: more blocks than the GPU holds at once buy
// nothing for memory-bound loops.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "models/cuda/cuda_ops.h"

namespace scalescope::cuda_ops {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;

unsigned grid_for(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

__device__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}
// std::min is a host function to nvcc (without --expt-relaxed-constexpr).
__device__ int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// ---- bias

__global__ void bias_add_kernel(float* y, const float* bias, int64_t count, int64_t channels) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) y[i] += bias[i % channels];
}

// Bias gradient: a block of kTileC × kTileR threads owns kTileC channels (consecutive, so a
// warp reads one coalesced row segment) and a range of rows; its row-threads sum strided rows,
// then one of them adds the kTileR sums in order. Blocks along y split the rows when they are
// many; their partial sums go to scratch and bias_grad_finish adds them in block order.
constexpr int kTileC = 32;
constexpr int kTileR = 8;
// Rows each block along y covers at least: fewer would make the second pass the larger one.
constexpr int64_t kMinRowsPerPart = 512;
constexpr int64_t kMaxParts = 128;

int64_t bias_grad_parts(int64_t rows) {
  return std::clamp<int64_t>((rows + kMinRowsPerPart - 1) / kMinRowsPerPart, 1, kMaxParts);
}

__global__ void bias_grad_kernel(const float* dy, float* out, int64_t rows, int64_t channels,
                                 int64_t rows_per_part) {
  __shared__ float sums[kTileR][kTileC + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileC + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_part;
  const int64_t end = min64(rows, begin + rows_per_part);
  float sum = 0.0f;
  if (c < channels) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kTileR) sum += dy[r * channels + c];
  }
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    float total = 0.0f;
    for (int j = 0; j < kTileR; ++j) total += sums[j][threadIdx.x];
    out[static_cast<int64_t>(blockIdx.y) * channels + c] = total;
  }
}

__global__ void bias_grad_finish_kernel(const float* partial, float* db, int64_t parts,
                                        int64_t channels) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    float total = 0.0f;
    for (int64_t p = 0; p < parts; ++p) total += partial[p * channels + c];
    db[c] = total;
  }
}

// ---- activations. Forward and backward follow oneDNN's eltwise definitions with alpha = 0
// (what the CPU kernels run): relu multiplies by 0 rather than returning 0, so NaN passes
// through both ways; its gradient is taken from y.

__global__ void relu_forward_kernel(const float* x, float* y, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : v * 0.0f;
  }
}
__global__ void tanh_forward_kernel(const float* x, float* y, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) y[i] = tanhf(x[i]);
}
__global__ void sigmoid_forward_kernel(const float* x, float* y, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) y[i] = 1.0f / (1.0f + expf(-x[i]));
}
__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const float d = dy[i];
    dx[i] = y[i] > 0.0f ? d : d * 0.0f;  // a NaN gradient stays NaN
  }
}
__global__ void tanh_backward_kernel(const float* y, const float* dy, float* dx, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const float v = y[i];
    dx[i] = dy[i] * (1.0f - v * v);
  }
}
__global__ void sigmoid_backward_kernel(const float* y, const float* dy, float* dx, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const float v = y[i];
    dx[i] = dy[i] * v * (1.0f - v);
  }
}

// ---- layout

// A kTile × kTile tile through shared memory (one padding column avoids bank conflicts), so
// that reads and writes are both coalesced. Every dimension is walked with a stride, so any
// size fits the grid limits.
constexpr int kTile = 32;
constexpr int kTileRows = 8;
constexpr unsigned kMaxGridYZ = 65535;

__global__ void transpose_kernel(const float* in, float* out, int64_t batches, int64_t rows,
                                 int64_t cols) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t plane = rows * cols;
  for (int64_t b = blockIdx.z; b < batches; b += gridDim.z) {
    const float* src = in + b * plane;
    float* dst = out + b * plane;
    for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile; r0 < rows;
         r0 += static_cast<int64_t>(gridDim.y) * kTile) {
      for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile; c0 < cols;
           c0 += static_cast<int64_t>(gridDim.x) * kTile) {
        for (int j = threadIdx.y; j < kTile; j += kTileRows) {
          const int64_t r = r0 + j;
          const int64_t c = c0 + threadIdx.x;
          if (r < rows && c < cols) tile[j][threadIdx.x] = src[r * cols + c];
        }
        __syncthreads();
        for (int j = threadIdx.y; j < kTile; j += kTileRows) {
          const int64_t c = c0 + j;
          const int64_t r = r0 + threadIdx.x;
          if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][j];
        }
        __syncthreads();  // the tile is refilled next
      }
    }
  }
}

__global__ void extend_kernel(const float* in, float* out, int64_t n, int64_t h, int64_t w,
                              int64_t c, int64_t eh, int64_t ew) {
  const int64_t count = n * eh * ew * c;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t ch = i % c;
    const int64_t x = (i / c) % ew;
    const int64_t y = (i / (c * ew)) % eh;
    const int64_t s = i / (c * ew * eh);
    out[i] = (y < h && x < w) ? in[((s * h + y) * w + x) * c + ch] : 0.0f;
  }
}

__global__ void crop_kernel(const float* extended, float* out, int64_t n, int64_t h, int64_t w,
                            int64_t c, int64_t eh, int64_t ew) {
  const int64_t count = n * h * w * c;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t ch = i % c;
    const int64_t x = (i / c) % w;
    const int64_t y = (i / (c * w)) % h;
    const int64_t s = i / (c * w * h);
    out[i] = extended[((s * eh + y) * ew + x) * c + ch];
  }
}

// ---- pooling

__device__ int64_t pixel(const PoolShape& s, int64_t n, int64_t y, int64_t x, int64_t height,
                         int64_t width) {
  return ((n * height + y) * width + x) * s.channels;
}

// One thread per output value; the comparison is the CPU kernel's, so that NaN wins and the
// same input is chosen.
__global__ void max_pool_forward_kernel(PoolShape s, const float* x, float* y) {
  const int64_t count = s.batch * s.out_h * s.out_w * s.channels;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t c = i % s.channels;
    const int64_t ow = (i / s.channels) % s.out_w;
    const int64_t oh = (i / (s.channels * s.out_w)) % s.out_h;
    const int64_t n = i / (s.channels * s.out_w * s.out_h);
    float best = x[pixel(s, n, oh * s.stride, ow * s.stride, s.in_h, s.in_w) + c];
    for (int64_t kh = 0; kh < s.pool; ++kh) {
      for (int64_t kw = 0; kw < s.pool; ++kw) {
        const float v = x[pixel(s, n, oh * s.stride + kh, ow * s.stride + kw, s.in_h, s.in_w) + c];
        best = (v > best || v != v) ? v : best;
      }
    }
    y[i] = best;
  }
}

// One thread per input value, gathering from the windows that contain it (no atomics, so the
// result is deterministic): a window gives its gradient to its first input whose bits equal
// the window's output (a NaN included), as the CPU kernel does, and the contributions add in
// the CPU's order (output rows, then columns, ascending) starting from zero.
__global__ void max_pool_backward_kernel(PoolShape s, const float* x, const float* y,
                                         const float* dy, float* dx) {
  const int64_t count = s.batch * s.in_h * s.in_w * s.channels;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t c = i % s.channels;
    const int64_t w = (i / s.channels) % s.in_w;
    const int64_t h = (i / (s.channels * s.in_w)) % s.in_h;
    const int64_t n = i / (s.channels * s.in_w * s.in_h);
    // Windows oh with oh·stride <= h < oh·stride + pool, and likewise for columns.
    const int64_t oh_begin = h < s.pool ? 0 : (h - s.pool) / s.stride + 1;
    const int64_t oh_end = min64(s.out_h, h / s.stride + 1);
    const int64_t ow_begin = w < s.pool ? 0 : (w - s.pool) / s.stride + 1;
    const int64_t ow_end = min64(s.out_w, w / s.stride + 1);
    float grad = 0.0f;
    for (int64_t oh = oh_begin; oh < oh_end; ++oh) {
      for (int64_t ow = ow_begin; ow < ow_end; ++ow) {
        const int64_t o = pixel(s, n, oh, ow, s.out_h, s.out_w) + c;
        const unsigned target = __float_as_uint(y[o]);
        // The first position of the window holding the maximum.
        int64_t at_h = -1;
        int64_t at_w = -1;
        for (int64_t kh = 0; kh < s.pool && at_h < 0; ++kh) {
          for (int64_t kw = 0; kw < s.pool; ++kw) {
            const int64_t ih = oh * s.stride + kh;
            const int64_t iw = ow * s.stride + kw;
            if (__float_as_uint(x[pixel(s, n, ih, iw, s.in_h, s.in_w) + c]) == target) {
              at_h = ih;
              at_w = iw;
              break;
            }
          }
        }
        if (at_h == h && at_w == w) grad += dy[o];
      }
    }
    dx[i] = grad;
  }
}

// One thread per (sample, channel): consecutive threads read consecutive channels.
__global__ void global_avg_pool_forward_kernel(const float* x, float* y, int64_t n, int64_t pixels,
                                               int64_t c) {
  const int64_t count = n * c;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t ch = i % c;
    const float* sample = x + (i / c) * pixels * c;
    float sum = 0.0f;
    for (int64_t p = 0; p < pixels; ++p) sum += sample[p * c + ch];
    y[i] = sum / static_cast<float>(pixels);
  }
}

__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, int64_t n,
                                                int64_t pixels, int64_t c) {
  const int64_t count = n * pixels * c;
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const int64_t ch = i % c;
    const int64_t sample = i / (pixels * c);
    dx[i] = dy[sample * c + ch] / static_cast<float>(pixels);
  }
}

}  // namespace

void bias_add(float* y, const float* bias, int64_t rows, int64_t channels, cudaStream_t stream) {
  const int64_t count = rows * channels;
  if (count == 0) return;
  bias_add_kernel<<<grid_for(count), kThreads, 0, stream>>>(y, bias, count, channels);
  check_launch("bias_add_kernel");
}

int64_t bias_grad_scratch(int64_t rows, int64_t channels) {
  const int64_t parts = bias_grad_parts(rows);
  return parts > 1 ? parts * channels : 0;
}

void bias_grad(const float* dy, float* db, int64_t rows, int64_t channels, float* scratch,
               cudaStream_t stream) {
  if (channels == 0) return;
  const int64_t parts = bias_grad_parts(rows);
  const int64_t rows_per_part = (rows + parts - 1) / parts;
  const dim3 grid(static_cast<unsigned>((channels + kTileC - 1) / kTileC),
                  static_cast<unsigned>(parts));
  const dim3 block(kTileC, kTileR);
  bias_grad_kernel<<<grid, block, 0, stream>>>(dy, parts > 1 ? scratch : db, rows, channels,
                                               rows_per_part);
  check_launch("bias_grad_kernel");
  if (parts == 1) return;
  bias_grad_finish_kernel<<<grid_for(channels), kThreads, 0, stream>>>(scratch, db, parts,
                                                                       channels);
  check_launch("bias_grad_finish_kernel");
}

void activation_forward(Activation kind, const float* x, float* y, int64_t count,
                        cudaStream_t stream) {
  if (count == 0) return;
  switch (kind) {
    case Activation::kRelu:
      relu_forward_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, count);
      check_launch("relu_forward_kernel");
      return;
    case Activation::kTanh:
      tanh_forward_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, count);
      check_launch("tanh_forward_kernel");
      return;
    case Activation::kSigmoid:
      sigmoid_forward_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, count);
      check_launch("sigmoid_forward_kernel");
      return;
  }
}

void activation_backward(Activation kind, const float* y, const float* dy, float* dx, int64_t count,
                         cudaStream_t stream) {
  if (count == 0) return;
  switch (kind) {
    case Activation::kRelu:
      relu_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(y, dy, dx, count);
      check_launch("relu_backward_kernel");
      return;
    case Activation::kTanh:
      tanh_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(y, dy, dx, count);
      check_launch("tanh_backward_kernel");
      return;
    case Activation::kSigmoid:
      sigmoid_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(y, dy, dx, count);
      check_launch("sigmoid_backward_kernel");
      return;
  }
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
  transpose_kernel<<<grid, block, 0, stream>>>(in, out, batches, rows, cols);
  check_launch("transpose_kernel");
}

void extend_nhwc(const float* in, float* out, int64_t n, int64_t h, int64_t w, int64_t c,
                 int64_t extra_h, int64_t extra_w, cudaStream_t stream) {
  const int64_t count = n * (h + extra_h) * (w + extra_w) * c;
  if (count == 0) return;
  extend_kernel<<<grid_for(count), kThreads, 0, stream>>>(in, out, n, h, w, c, h + extra_h,
                                                          w + extra_w);
  check_launch("extend_kernel");
}

void crop_nhwc(const float* extended, float* out, int64_t n, int64_t h, int64_t w, int64_t c,
               int64_t extra_h, int64_t extra_w, cudaStream_t stream) {
  const int64_t count = n * h * w * c;
  if (count == 0) return;
  crop_kernel<<<grid_for(count), kThreads, 0, stream>>>(extended, out, n, h, w, c, h + extra_h,
                                                        w + extra_w);
  check_launch("crop_kernel");
}

void max_pool_forward(const PoolShape& s, const float* x, float* y, cudaStream_t stream) {
  const int64_t count = s.batch * s.out_h * s.out_w * s.channels;
  if (count == 0) return;
  max_pool_forward_kernel<<<grid_for(count), kThreads, 0, stream>>>(s, x, y);
  check_launch("max_pool_forward_kernel");
}

void max_pool_backward(const PoolShape& s, const float* x, const float* y, const float* dy,
                       float* dx, cudaStream_t stream) {
  const int64_t count = s.batch * s.in_h * s.in_w * s.channels;
  if (count == 0) return;
  max_pool_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(s, x, y, dy, dx);
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
  global_avg_pool_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(dy, dx, n, pixels, c);
  check_launch("global_avg_pool_backward_kernel");
}

}  // namespace scalescope::cuda_ops
