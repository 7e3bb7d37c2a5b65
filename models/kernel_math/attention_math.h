// GPT-2's causal self-attention (CausalSelfAttentionSpec) as the attention kernels compute it:
// the layout of the per-head copies and the per-row math of the causal scaled softmax, forward
// and backward, in the CPU kernel's arithmetic (float, as PyTorch's float softmax).
//
// Per sample the input is [S, 3D], q, k and v side by side; head h of q is columns
// [h·hd, (h + 1)·hd) of the first D (hd = D / heads), of k of the next D, of v of the last D.
// The kernels copy each of them into a head-major buffer [N, H, S, hd] (one [S, hd] matrix per
// sample and head, what batched GEMMs take) and copy the heads' outputs back into [S, D].
//
// Row i of a score matrix s = q·kᵀ (unscaled) becomes, with scale = 1/sqrt(hd):
//   p[j] = exp(scale·s[j] − m) / Σ_{j' ≤ i} exp(scale·s[j'] − m) for j ≤ i (m = max_{j ≤ i}
//   scale·s[j], subtracted so that exp never overflows), and p[j] = 0 for j > i (masked);
// and backward, from p and dp = dL/dp:
//   ds[j] = (p[j]·(dp[j] − Σ_{j' ≤ i} p[j']·dp[j']))·scale for j ≤ i, 0 for j > i,
// the gradient with respect to s itself (the scale of the forward folded in).
//
// A row may be shared by several threads (a warp on the GPU, its lanes taking the columns
// first, first + step, ...): the row functions take the thread's share and a `reduce` that
// combines the threads' partial values. One thread with the whole row (SerialReduce) adds in
// column order, the CPU kernel's order; a warp adds as a tree, which differs in the last bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/host_device.h"
#include "models/kernel_math/row_reduce.h"

namespace scalescope::kernel_math {

// The sizes of one attention layer's batch.
struct AttentionShape {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  SS_HOST_DEVICE int64_t model_dim() const { return heads * head_dim; }
  // Elements of one head-major buffer [N, H, S, hd], also of an [N, S, D] tensor.
  SS_HOST_DEVICE int64_t head_elements() const { return batch * heads * seq * head_dim; }
  // Rows of the score matrices [N·H, S, S] (one per sample, head and query position).
  SS_HOST_DEVICE int64_t score_rows() const { return batch * heads * seq; }
};

// Where element `e` of a head-major buffer [N, H, S, hd] sits in a row-major [N, S, width]
// tensor whose columns [column, column + D) hold the heads side by side: q, k and v of the
// input are column 0, D and 2·D of width 3·D; the output is column 0 of width D.
SS_HOST_DEVICE inline int64_t head_major_to_rows(const AttentionShape& s, int64_t e, int64_t width,
                                                 int64_t column) {
  const int64_t c = e % s.head_dim;
  const int64_t pos = (e / s.head_dim) % s.seq;
  const int64_t h = (e / (s.head_dim * s.seq)) % s.heads;
  const int64_t n = e / (s.head_dim * s.seq * s.heads);
  return (n * s.seq + pos) * width + column + h * s.head_dim + c;
}

// 1 / sqrt(hd), as nanoGPT's 1.0 / math.sqrt(k.size(-1)) rounded to float.
SS_HOST_DEVICE inline float attention_scale(int64_t head_dim) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(head_dim)));
}

// Row `row` (the query position i) of the causal scaled softmax: scores s[len] (unscaled) into
// probabilities p[len], this thread's share of the columns; s and p may be the same memory.
// REQUIRES: every thread sharing the row calls this with the same arguments but its share.
template <class Reduce>
SS_HOST_DEVICE void causal_softmax_row(const float* s, float* p, int64_t row, int64_t len,
                                       float scale, RowShare share, const Reduce& reduce) {
  const int64_t valid = row + 1 < len ? row + 1 : len;
  float m = -INFINITY;
  for (int64_t j = share.first; j < valid; j += share.step) m = fmaxf(m, s[j] * scale);
  m = reduce.max(m);
  float sum = 0.0f;
  for (int64_t j = share.first; j < valid; j += share.step) {
    const float e = expf(s[j] * scale - m);
    p[j] = e;
    sum += e;
  }
  sum = reduce.sum(sum);
  for (int64_t j = share.first; j < len; j += share.step) p[j] = j < valid ? p[j] / sum : 0.0f;
}

// Backward of causal_softmax_row for row `row`: from the probabilities p[len] of the forward
// and their gradient dp[len], the gradient ds[len] of the unscaled scores; dp and ds may be
// the same memory. Masked columns get 0 whatever dp holds there.
// REQUIRES: every thread sharing the row calls this with the same arguments but its share.
template <class Reduce>
SS_HOST_DEVICE void causal_softmax_backward_row(const float* p, const float* dp, float* ds,
                                                int64_t row, int64_t len, float scale,
                                                RowShare share, const Reduce& reduce) {
  const int64_t valid = row + 1 < len ? row + 1 : len;
  float dot = 0.0f;
  for (int64_t j = share.first; j < valid; j += share.step) dot += p[j] * dp[j];
  dot = reduce.sum(dot);
  for (int64_t j = share.first; j < len; j += share.step) {
    ds[j] = j < valid ? (p[j] * (dp[j] - dot)) * scale : 0.0f;
  }
}

}  // namespace scalescope::kernel_math
