// Our kernels for token and position embeddings; the token ids are read through
// kernel_math/embedding_math.h, as the CPU kernels read them.
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "models/cuda/cuda_ops.h"
#include "models/cuda/embedding_ops.h"
#include "models/cuda/launch_shape.cuh"
#include "models/kernel_math/embedding_math.h"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;

// Element i of the [tokens, dim] output: its token t = i / dim and column i − t·dim by
// `Divider`'s division (int_divider.h), as the element-wise kernels (for_each_element).
template <class Divider>
__global__ void embedding_forward_kernel(const float* ids, const float* weight, float* out,
                                         int64_t tokens, int64_t vocab, int64_t dim,
                                         Divider by_dim) {
  for_each_element(
      tokens * dim,
      [&](int64_t i) {
        const int64_t t = by_dim(i);
        return weight[km::token_row(ids[t], vocab) * dim + (i - t * dim)];
      },
      [&](int64_t i, float v) { out[i] = v; });
}

// The sort's keys (token rows) and values (positions).
__global__ void token_keys_kernel(const float* ids, int* keys, int* positions, int64_t tokens,
                                  int64_t vocab) {
  for (int64_t t = first_index(); t < tokens; t += grid_stride()) {
    keys[t] = static_cast<int>(km::token_row(ids[t], vocab));
    positions[t] = static_cast<int>(t);
  }
}

// Thread (sorted index i, column c): where a run of one token starts at i, the run's rows are
// added in position order (the sort is stable) into that token's gradient row.
template <class Divider>
__global__ void embedding_grad_kernel(const int* keys, const int* positions, const float* dout,
                                      float* grad, int64_t tokens, int64_t dim, Divider by_dim) {
  for (int64_t i = first_index(); i < tokens * dim; i += grid_stride()) {
    const int64_t sorted = by_dim(i);
    const int64_t c = i - sorted * dim;
    const int key = keys[sorted];
    if (sorted > 0 && keys[sorted - 1] == key) continue;
    float sum = 0.0f;
    for (int64_t j = sorted; j < tokens && keys[j] == key; ++j) {
      sum += dout[static_cast<int64_t>(positions[j]) * dim + c];
    }
    grad[static_cast<int64_t>(key) * dim + c] = sum;
  }
}

template <class Divider>
__global__ void position_forward_kernel(const float* in, const float* weight, float* out,
                                        int64_t batch, int64_t row, Divider by_row) {
  for_each_element(
      batch * row, [&](int64_t i) { return in[i] + weight[by_row.remainder(i)]; },
      [&](int64_t i, float v) { out[i] = v; });
}

__global__ void position_backward_kernel(const float* dout, float* grad, int64_t batch,
                                         int64_t row) {
  for (int64_t j = first_index(); j < row; j += grid_stride()) {
    float sum = 0.0f;
    for (int64_t n = 0; n < batch; ++n) sum += dout[n * row + j];
    grad[j] = sum;
  }
}

// Bits of the largest token row, which bound the radix sort's passes.
int key_bits(int64_t vocab) {
  int bits = 1;
  while ((int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

// The scratch: keys, sorted keys, positions, sorted positions (ints), then CUB's storage.
size_t int_arrays_bytes(int64_t tokens) {
  const size_t bytes = 4 * static_cast<size_t>(tokens) * sizeof(int);
  return (bytes + 255) / 256 * 256;
}

}  // namespace

void embedding_forward(const float* ids, const float* weight, float* out, int64_t tokens,
                       int64_t vocab, int64_t dim, cudaStream_t stream) {
  if (tokens == 0) return;
  with_divider(tokens * dim, dim, [&](auto by_dim) {
    embedding_forward_kernel<<<grid_for_elements(tokens * dim), kThreads, 0, stream>>>(
        ids, weight, out, tokens, vocab, dim, by_dim);
  });
  check_launch("embedding_forward_kernel");
}

size_t embedding_backward_scratch(int64_t tokens, int64_t vocab) {
  size_t cub_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, static_cast<const int*>(nullptr),
                                  static_cast<int*>(nullptr), static_cast<const int*>(nullptr),
                                  static_cast<int*>(nullptr), static_cast<int>(tokens), 0,
                                  key_bits(vocab));
  return int_arrays_bytes(tokens) + cub_bytes;
}

cudaError_t embedding_backward(const float* ids, const float* dout, float* grad, int64_t tokens,
                               int64_t vocab, int64_t dim, void* scratch, size_t scratch_bytes,
                               cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  int* keys = static_cast<int*>(scratch);
  int* sorted_keys = keys + tokens;
  int* positions = sorted_keys + tokens;
  int* sorted_positions = positions + tokens;
  token_keys_kernel<<<grid_for(tokens), kThreads, 0, stream>>>(ids, keys, positions, tokens, vocab);
  check_launch("token_keys_kernel");
  void* cub_storage = static_cast<char*>(scratch) + int_arrays_bytes(tokens);
  size_t cub_bytes = scratch_bytes - int_arrays_bytes(tokens);
  const cudaError_t sorted = cub::DeviceRadixSort::SortPairs(
      cub_storage, cub_bytes, keys, sorted_keys, positions, sorted_positions,
      static_cast<int>(tokens), 0, key_bits(vocab), stream);
  if (sorted != cudaSuccess) return sorted;
  with_divider(tokens * dim, dim, [&](auto by_dim) {
    embedding_grad_kernel<<<grid_for(tokens * dim), kThreads, 0, stream>>>(
        sorted_keys, sorted_positions, dout, grad, tokens, dim, by_dim);
  });
  check_launch("embedding_grad_kernel");
  return cudaSuccess;
}

void position_embedding_forward(const float* in, const float* weight, float* out, int64_t batch,
                                int64_t row, cudaStream_t stream) {
  if (batch * row == 0) return;
  with_divider(batch * row, row, [&](auto by_row) {
    position_forward_kernel<<<grid_for_elements(batch * row), kThreads, 0, stream>>>(
        in, weight, out, batch, row, by_row);
  });
  check_launch("position_forward_kernel");
}

void position_embedding_backward(const float* dout, float* grad, int64_t batch, int64_t row,
                                 cudaStream_t stream) {
  if (batch * row == 0) return;
  position_backward_kernel<<<grid_for(row), kThreads, 0, stream>>>(dout, grad, batch, row);
  check_launch("position_backward_kernel");
}

}  // namespace scalescope::cuda_ops
