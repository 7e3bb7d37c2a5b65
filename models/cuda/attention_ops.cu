// Kernels of GPT-2's causal self-attention (attention_ops.h): the copies between rows and
// head-major buffers, one element of the head-major buffer at a time (its reads and writes
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

// One element of the head-major buffer a thread, kElementsAhead read before any is written
// (for_each_element), the index split with `Divider`'s divisions. From fp32 rows or, under 16
// bits, the model's saved copy of them (their bits as they are, which is what rounding the
// widened values gives); into fp32 (FloatStore), rounded to 16 bits where the products read only
// that (HalfStore), or the 16-bit bits as read (BitsStore).
template <class Divider, class T, class Heads>
__global__ void to_heads_kernel(km::AttentionShape s, km::HeadDividers<Divider> d, const T* rows,
                                int64_t width, int64_t column, Heads heads) {
  for_each_element(
      s.head_elements(),
      [&](int64_t e) { return rows[km::head_major_to_rows(s, d, e, width, column)]; },
      [&](int64_t e, T v) { heads(e, v); });
}

// Into fp32 rows (FloatStore) or, under 16 bits, the model's saved copy of them (HalfStore).
template <class Divider, class Rows>
__global__ void from_heads_kernel(km::AttentionShape s, km::HeadDividers<Divider> d,
                                  const float* heads, Rows rows, int64_t width, int64_t column) {
  for_each_element(
      s.head_elements(), [&](int64_t e) { return heads[e]; },
      [&](int64_t e, float v) { rows(km::head_major_to_rows(s, d, e, width, column), v); });
}

// Calls launch(dividers, grid) for a for_each_element kernel over the head-major buffer, with
// the kind of division with_divider picks for its size, and checks the launch of `kernel`.
template <class Launch>
void over_head_elements(const km::AttentionShape& s, const char* kernel, const Launch& launch) {
  if (s.head_elements() == 0) return;
  with_divider(s.head_elements(), s.head_dim, [&](auto by) {
    launch(km::head_dividers<decltype(by)>(s), grid_for_elements(s.head_elements()));
  });
  check_launch(kernel);
}

template <class T, class Heads>
void launch_to_heads(const km::AttentionShape& s, const T* rows, int64_t width, int64_t column,
                     Heads heads, cudaStream_t stream) {
  over_head_elements(s, "to_heads_kernel", [&](auto d, unsigned grid) {
    to_heads_kernel<<<grid, kThreads, 0, stream>>>(s, d, rows, width, column, heads);
  });
}

template <class Rows>
void launch_from_heads(const km::AttentionShape& s, const float* heads, Rows rows, int64_t width,
                       int64_t column, cudaStream_t stream) {
  over_head_elements(s, "from_heads_kernel", [&](auto d, unsigned grid) {
    from_heads_kernel<<<grid, kThreads, 0, stream>>>(s, d, heads, rows, width, column);
  });
}

// Row r's share of a block's 16-bit copy, and of its fp32 results (none where null).
__device__ km::HalfRow half_row(const km::HalfRow& block, int64_t r, int64_t len) {
  return {block.at == nullptr ? nullptr : block.at + r * len, block.format};
}
__device__ float* fp32_row(float* block, int64_t r, int64_t len) {
  return block == nullptr ? nullptr : block + r * len;
}

__global__ void softmax_forward_kernel(km::ScoreBlock b, const float* scores, float* probs,
                                       float scale, km::HalfRow half, km::RowStatsAt stats) {
  const km::RowShare share{lane(), kWarp};
  for (int64_t r = first_warp(); r < b.count(); r += warp_stride()) {
    const km::SoftmaxRowStats row =
        km::causal_softmax_row(scores + r * b.len, fp32_row(probs, r, b.len), b.query(r), b.len,
                               scale, share, WarpReduce{}, half_row(half, r, b.len));
    if (stats.at != nullptr && share.first == 0) *stats(b, r) = row;
  }
}

__global__ void softmax_from_stats_kernel(km::ScoreBlock b, const float* scores, float* probs,
                                          float scale, km::HalfRow half, km::RowStatsAt stats) {
  const km::RowShare share{lane(), kWarp};
  for (int64_t r = first_warp(); r < b.count(); r += warp_stride()) {
    km::causal_softmax_from_stats_row(scores + r * b.len, fp32_row(probs, r, b.len), b.query(r),
                                      b.len, scale, *stats(b, r), share, half_row(half, r, b.len));
  }
}

// From the probabilities in `probs`, or (stats.at not null) from the scores there and the rows'
// stats.
__global__ void softmax_backward_kernel(km::ScoreBlock b, const float* probs,
                                        const float* grad_probs, float* grad_scores, float scale,
                                        km::HalfRow half, km::RowStatsAt stats) {
  const km::RowShare share{lane(), kWarp};
  for (int64_t r = first_warp(); r < b.count(); r += warp_stride()) {
    const float* row = probs + r * b.len;
    const auto backward = [&](const auto& read) {
      km::causal_softmax_backward_row_of(read, grad_probs + r * b.len,
                                         fp32_row(grad_scores, r, b.len), b.query(r), b.len, scale,
                                         share, WarpReduce{}, half_row(half, r, b.len));
    };
    if (stats.at != nullptr) {
      backward(km::ProbabilitiesFromScores{row, scale, *stats(b, r)});
    } else {
      backward(km::KeptProbabilities{row});
    }
  }
}

// Blocks of kThreads threads, kThreads / 32 rows each.
unsigned grid_for_rows(int64_t rows) {
  return grid_for(rows * kWarp);
}

}  // namespace

void to_heads(const km::AttentionShape& s, const float* rows, int64_t width, int64_t column,
              float* heads, cudaStream_t stream) {
  launch_to_heads(s, rows, width, column, FloatStore{heads}, stream);
}

void to_half_heads(const km::AttentionShape& s, const float* rows, int64_t width, int64_t column,
                   const km::HalfRow& heads, cudaStream_t stream) {
  launch_to_heads(s, rows, width, column, HalfStore{heads.at, heads.format}, stream);
}

void half_rows_to_heads(const km::AttentionShape& s, const uint16_t* rows, int64_t width,
                        int64_t column, uint16_t* heads, cudaStream_t stream) {
  launch_to_heads(s, rows, width, column, BitsStore{heads}, stream);
}

void from_heads(const km::AttentionShape& s, const float* heads, float* rows, int64_t width,
                int64_t column, cudaStream_t stream) {
  launch_from_heads(s, heads, FloatStore{rows}, width, column, stream);
}

void from_heads_to_half(const km::AttentionShape& s, const float* heads, uint16_t* rows,
                        km::HalfFormat format, int64_t width, int64_t column, cudaStream_t stream) {
  launch_from_heads(s, heads, HalfStore{rows, format}, width, column, stream);
}

void causal_softmax_forward(const km::ScoreBlock& b, const float* scores, float* probs, float scale,
                            const km::HalfRow& half, const km::RowStatsAt& stats,
                            cudaStream_t stream) {
  if (b.count() == 0) return;
  softmax_forward_kernel<<<grid_for_rows(b.count()), kThreads, 0, stream>>>(b, scores, probs, scale,
                                                                            half, stats);
  check_launch("softmax_forward_kernel");
}

void causal_softmax_from_stats(const km::ScoreBlock& b, const float* scores, float* probs,
                               float scale, const km::HalfRow& half, const km::RowStatsAt& stats,
                               cudaStream_t stream) {
  if (b.count() == 0) return;
  softmax_from_stats_kernel<<<grid_for_rows(b.count()), kThreads, 0, stream>>>(b, scores, probs,
                                                                               scale, half, stats);
  check_launch("softmax_from_stats_kernel");
}

void causal_softmax_backward(const km::ScoreBlock& b, const float* probs, const float* grad_probs,
                             float* grad_scores, float scale, const km::HalfRow& half,
                             const km::RowStatsAt& stats, cudaStream_t stream) {
  if (b.count() == 0) return;
  softmax_backward_kernel<<<grid_for_rows(b.count()), kThreads, 0, stream>>>(
      b, probs, grad_probs, grad_scores, scale, half, stats);
  check_launch("softmax_backward_kernel");
}

}  // namespace scalescope::cuda_ops
