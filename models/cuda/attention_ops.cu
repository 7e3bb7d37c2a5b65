// Kernels of GPT-2's causal self-attention (attention_ops.h): the copies between rows and
// head-major buffers, one thread per element of the head-major buffer (its reads and writes
// are runs of hd consecutive floats), and the causal softmax, one warp per score row, its
// lanes sharing the columns. The row reductions are a warp's shuffle tree, fixed by the launch
// shape alone: deterministic, and different from the CPU's serial sums only in the last bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "models/cuda/attention_ops.h"
#include "models/cuda/cuda_ops.h"
#include "models/cuda/launch_shape.cuh"

namespace scalescope::cuda_ops {
namespace {

namespace km = kernel_math;

__global__ void to_heads_kernel(km::AttentionShape s, const float* rows, int64_t width,
                                int64_t column, float* heads) {
  const int64_t count = s.head_elements();
  for (int64_t e = first_index(); e < count; e += grid_stride()) {
    heads[e] = rows[km::head_major_to_rows(s, e, width, column)];
  }
}

// to_heads_kernel's copy rounded to 16 bits, where the products read only that.
__global__ void to_half_heads_kernel(km::AttentionShape s, const float* rows, int64_t width,
                                     int64_t column, km::HalfRow heads) {
  const int64_t count = s.head_elements();
  for (int64_t e = first_index(); e < count; e += grid_stride()) {
    heads.store(e, rows[km::head_major_to_rows(s, e, width, column)]);
  }
}

__global__ void from_heads_kernel(km::AttentionShape s, const float* heads, float* rows,
                                  int64_t width, int64_t column) {
  const int64_t count = s.head_elements();
  for (int64_t e = first_index(); e < count; e += grid_stride()) {
    rows[km::head_major_to_rows(s, e, width, column)] = heads[e];
  }
}

// Row r's share of a block's 16-bit copy, and of its fp32 results (none where null).
__device__ km::HalfRow half_row(const km::HalfRow& block, int64_t r, int64_t len) {
  return {block.at == nullptr ? nullptr : block.at + r * len, block.format};
}
__device__ float* fp32_row(float* block, int64_t r, int64_t len) {
  return block == nullptr ? nullptr : block + r * len;
}

__global__ void softmax_forward_kernel(km::ScoreBlock b, const float* scores, float* probs,
                                       float scale, km::HalfRow half) {
  const km::RowShare share{lane(), kWarp};
  for (int64_t r = first_warp(); r < b.count(); r += warp_stride()) {
    km::causal_softmax_row(scores + r * b.len, fp32_row(probs, r, b.len), b.query(r), b.len, scale,
                           share, WarpReduce{}, half_row(half, r, b.len));
  }
}

__global__ void softmax_backward_kernel(km::ScoreBlock b, const float* probs,
                                        const float* grad_probs, float* grad_scores, float scale,
                                        km::HalfRow half) {
  const km::RowShare share{lane(), kWarp};
  for (int64_t r = first_warp(); r < b.count(); r += warp_stride()) {
    km::causal_softmax_backward_row(probs + r * b.len, grad_probs + r * b.len,
                                    fp32_row(grad_scores, r, b.len), b.query(r), b.len, scale,
                                    share, WarpReduce{}, half_row(half, r, b.len));
  }
}

// Blocks of kThreads threads, kThreads / 32 rows each.
unsigned grid_for_rows(int64_t rows) {
  return grid_for(rows * kWarp);
}

}  // namespace

void to_heads(const km::AttentionShape& s, const float* rows, int64_t width, int64_t column,
              float* heads, cudaStream_t stream) {
  if (s.head_elements() == 0) return;
  to_heads_kernel<<<grid_for(s.head_elements()), kThreads, 0, stream>>>(s, rows, width, column,
                                                                        heads);
  check_launch("to_heads_kernel");
}

void to_half_heads(const km::AttentionShape& s, const float* rows, int64_t width, int64_t column,
                   const km::HalfRow& heads, cudaStream_t stream) {
  if (s.head_elements() == 0) return;
  to_half_heads_kernel<<<grid_for(s.head_elements()), kThreads, 0, stream>>>(s, rows, width, column,
                                                                             heads);
  check_launch("to_half_heads_kernel");
}

void from_heads(const km::AttentionShape& s, const float* heads, float* rows, int64_t width,
                int64_t column, cudaStream_t stream) {
  if (s.head_elements() == 0) return;
  from_heads_kernel<<<grid_for(s.head_elements()), kThreads, 0, stream>>>(s, heads, rows, width,
                                                                          column);
  check_launch("from_heads_kernel");
}

void causal_softmax_forward(const km::ScoreBlock& b, const float* scores, float* probs, float scale,
                            const km::HalfRow& half, cudaStream_t stream) {
  if (b.count() == 0) return;
  softmax_forward_kernel<<<grid_for_rows(b.count()), kThreads, 0, stream>>>(b, scores, probs, scale,
                                                                            half);
  check_launch("softmax_forward_kernel");
}

void causal_softmax_backward(const km::ScoreBlock& b, const float* probs, const float* grad_probs,
                             float* grad_scores, float scale, const km::HalfRow& half,
                             cudaStream_t stream) {
  if (b.count() == 0) return;
  softmax_backward_kernel<<<grid_for_rows(b.count()), kThreads, 0, stream>>>(
      b, probs, grad_probs, grad_scores, scale, half);
  check_launch("softmax_backward_kernel");
}

}  // namespace scalescope::cuda_ops
