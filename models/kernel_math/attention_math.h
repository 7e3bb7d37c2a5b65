// GPT-2's causal self-attention (CausalSelfAttentionSpec) as the attention kernels compute it,
// in float as PyTorch's float softmax: the layout of the per-head copies and the per-row math of
// the causal scaled softmax over whole rows, forward and backward (the CUDA kernel's, which
// keeps the probabilities), and the same softmax over tiles of keys, keeping one value per
// row for backward (the CPU kernel's; see OnlineSoftmaxRow).
//
// Per sample the input is [S, 3D], q, k and v side by side; head h of q is columns
// [h·hd, (h + 1)·hd) of the first D (hd = D / heads), of k of the next D, of v of the last D.
// The CUDA kernel copies each of them into a head-major buffer [N, H, S, hd] (one [S, hd]
// matrix per sample and head, what batched GEMMs take) and the heads' outputs back into
// [S, D]; the CPU kernel reads them in place.
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
// column order; a warp adds as a tree, which differs in the last bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/element_loop.h"
#include "models/kernel_math/exp_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/host_device.h"
#include "models/kernel_math/int_divider.h"
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

// Score rows of `batches` matrices [rows, len], rows of query positions [first_query,
// first_query + rows) against keys [0, len): row r of the block is query first_query + r mod
// rows. The whole [N·H, S, S] is {N·H, S, 0, S}; a chunk of queries sees fewer keys.
struct ScoreBlock {
  int64_t batches = 0;
  int64_t rows = 0;
  int64_t first_query = 0;
  int64_t len = 0;
  SS_HOST_DEVICE int64_t count() const { return batches * rows; }
  SS_HOST_DEVICE int64_t query(int64_t r) const { return first_query + r % rows; }
};

// The divisions that split a head-major index into (n, h, pos, c): by hd, S and H, each of kind
// `Divider` (int_divider.h; the GPU kernels take IntDivider, which multiplies where nvcc would
// call a 64-bit division routine and a 32-bit sequence of about 20 instructions for each).
template <class Divider>
struct HeadDividers {
  Divider head_dim, seq, heads;
};
template <class Divider>
inline HeadDividers<Divider> head_dividers(const AttentionShape& s) {
  return {Divider{s.head_dim}, Divider{s.seq}, Divider{s.heads}};
}

// Where element `e` of a head-major buffer [N, H, S, hd] sits in a row-major [N, S, width]
// tensor whose columns [column, column + D) hold the heads side by side: q, k and v of the
// input are column 0, D and 2·D of width 3·D; the output is column 0 of width D.
template <class Divider>
SS_HOST_DEVICE inline int64_t head_major_to_rows(const AttentionShape& s,
                                                 const HeadDividers<Divider>& d, int64_t e,
                                                 int64_t width, int64_t column) {
  const int64_t head_row = d.head_dim(e);  // (n, h, pos) flattened
  const int64_t c = e - head_row * s.head_dim;
  const int64_t head = d.seq(head_row);  // (n, h) flattened
  const int64_t pos = head_row - head * s.seq;
  const int64_t n = d.heads(head);
  const int64_t h = head - n * s.heads;
  return (n * s.seq + pos) * width + column + h * s.head_dim + c;
}
// The same with plain division (host code and tests).
inline int64_t head_major_to_rows(const AttentionShape& s, int64_t e, int64_t width,
                                  int64_t column) {
  return head_major_to_rows(s, head_dividers<PlainDivider>(s), e, width, column);
}

// 1 / sqrt(hd), as nanoGPT's 1.0 / math.sqrt(k.size(-1)) rounded to float.
SS_HOST_DEVICE inline float attention_scale(int64_t head_dim) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(head_dim)));
}

// What a row's probabilities are made of: p_j = exp(scale·s_j − max) / sum, max the largest
// scaled score the query sees and sum that of the exponentials.
struct SoftmaxRowStats {
  float max = 0.0f;
  float sum = 0.0f;
};

// p_j from its unscaled score and the row's stats: the one expression forward and backward
// compute it with, so that a p recomputed from the scores is the forward's to the bit.
SS_HOST_DEVICE inline float softmax_probability(float score, float scale,
                                                const SoftmaxRowStats& stats) {
  return expf(score * scale - stats.max) / stats.sum;
}

// Row `row`'s (the query position i's) SoftmaxRowStats over the unscaled scores s[len], this
// thread's share of the columns read once: a running maximum and the sum of exponentials
// rescaled to it as it grows, 8 columns at a time (all read before their exponentials); then the
// threads' maxima combined, and their sums rescaled to the row's.
// REQUIRES: every thread sharing the row calls this with the same arguments but its share.
template <class Reduce>
SS_HOST_DEVICE SoftmaxRowStats causal_softmax_stats(const float* s, int64_t row, int64_t len,
                                                    float scale, RowShare share,
                                                    const Reduce& reduce) {
  // 8 loads a lane in flight, not element_loop.h's 4: the pass does little else than read.
  constexpr int kStatsAhead = 8;
  const int64_t valid = row + 1 < len ? row + 1 : len;
  float m = -INFINITY;
  float sum = 0.0f;
  for (int64_t base = share.first; base < valid; base += kStatsAhead * share.step) {
    float v[kStatsAhead];
    SS_UNROLL
    for (int u = 0; u < kStatsAhead; ++u) {
      const int64_t j = base + u * share.step;
      v[u] = j < valid ? s[j] * scale : -INFINITY;  // past the mask: exp gives 0
    }
    float top = m;
    SS_UNROLL
    for (int u = 0; u < kStatsAhead; ++u) top = fmaxf(top, v[u]);
    sum = m == -INFINITY ? 0.0f : sum * expf(m - top);
    SS_UNROLL
    for (int u = 0; u < kStatsAhead; ++u) sum += expf(v[u] - top);
    m = top;
  }
  const float row_max = reduce.max(m);
  const float share_sum = m == -INFINITY ? 0.0f : sum * expf(m - row_max);
  return {row_max, static_cast<float>(reduce.sum(share_sum))};
}

// Row `row`'s probabilities from its stats: p[j] (unless p is null) and their 16-bit copy
// `half`, this thread's share of all len columns (masked ones 0); s and p may be the same
// memory, and each share's columns are read kElementsAhead at a time before any is written
// (element_loop.h's reason: written as one loop, a read could not pass the write before it).
SS_HOST_DEVICE inline void causal_softmax_from_stats_row(const float* s, float* p, int64_t row,
                                                         int64_t len, float scale,
                                                         SoftmaxRowStats stats, RowShare share,
                                                         HalfRow half = {}) {
  const int64_t valid = row + 1 < len ? row + 1 : len;
  for_each_element(
      share.first, share.step, len, [&](int64_t j) { return j < valid ? s[j] : 0.0f; },
      [&](int64_t j, float score) {
        const float v = j < valid ? softmax_probability(score, scale, stats) : 0.0f;
        if (p != nullptr) p[j] = v;
        half.store(j, v);
      });
}

// Row `row` of the causal scaled softmax: scores s[len] (unscaled) into probabilities p[len]
// and their 16-bit copy `half`, this thread's share of the columns; s and p may be the same
// memory, and with p null only the copy is written (what the products of a 16-bit forward
// read), s left as it was. Returns the row's stats, from which p can be recomputed
// (causal_softmax_from_stats_row, ProbabilitiesFromScores) with the same bits. The scores are
// read twice.
// REQUIRES: every thread sharing the row calls this with the same arguments but its share.
template <class Reduce>
SS_HOST_DEVICE SoftmaxRowStats causal_softmax_row(const float* s, float* p, int64_t row,
                                                  int64_t len, float scale, RowShare share,
                                                  const Reduce& reduce, HalfRow half = {}) {
  const SoftmaxRowStats stats = causal_softmax_stats(s, row, len, scale, share, reduce);
  causal_softmax_from_stats_row(s, p, row, len, scale, stats, share, half);
  return stats;
}

// Where the stats of row r of a ScoreBlock lie among a layer's [N·H, S] of them (kept from
// forward for backward: block row r is batch r / rows, query b.query(r)).
struct RowStatsAt {
  SoftmaxRowStats* at = nullptr;
  int64_t seq = 0;
  SS_HOST_DEVICE SoftmaxRowStats* operator()(const ScoreBlock& b, int64_t r) const {
    return at + (r / b.rows) * seq + b.query(r);
  }
};

// How causal_softmax_backward_row_of reads a row's probabilities: `load(j)` reads column j,
// and applying the reader to what it loaded gives p_j. KeptProbabilities reads p itself;
// ProbabilitiesFromScores recomputes it from the unscaled scores and the row's stats
// (softmax_probability: the forward's bits), without p ever written to memory.
struct KeptProbabilities {
  const float* p;
  SS_HOST_DEVICE float load(int64_t j) const { return p[j]; }
  SS_HOST_DEVICE float operator()(float loaded) const { return loaded; }
};
struct ProbabilitiesFromScores {
  const float* s;
  float scale;
  SoftmaxRowStats stats;
  SS_HOST_DEVICE float load(int64_t j) const { return s[j]; }
  SS_HOST_DEVICE float operator()(float score) const {
    return softmax_probability(score, scale, stats);
  }
};

// Backward of causal_softmax_row for row `row`: from the forward's probabilities (`probs`, a
// reader above) and their gradient dp[len], the gradient ds[len] of the unscaled scores and its
// 16-bit copy `half` (which must not overlap what probs reads); dp and ds may be the same memory,
// and with ds null only the copy is written. Masked columns get 0 whatever dp holds there.
// REQUIRES: every thread sharing the row calls this with the same arguments but its share.
template <class Probs, class Reduce>
SS_HOST_DEVICE void causal_softmax_backward_row_of(const Probs& probs, const float* dp, float* ds,
                                                   int64_t row, int64_t len, float scale,
                                                   RowShare share, const Reduce& reduce,
                                                   HalfRow half = {}) {
  const int64_t valid = row + 1 < len ? row + 1 : len;
  float dot = 0.0f;
  for (int64_t j = share.first; j < valid; j += share.step) dot += probs(probs.load(j)) * dp[j];
  dot = reduce.sum(dot);
  struct Read {
    float p, dp;
  };
  for_each_element(  // reads before writes, as causal_softmax_row's passes (ds may be dp)
      share.first, share.step, len,
      [&](int64_t j) {
        return j < valid ? Read{probs.load(j), dp[j]} : Read{0.0f, 0.0f};
      },
      [&](int64_t j, const Read& r) {
        const float v = j < valid ? (probs(r.p) * (r.dp - dot)) * scale : 0.0f;
        if (ds != nullptr) ds[j] = v;
        half.store(j, v);
      });
}

// The same from the probabilities p[len] themselves.
template <class Reduce>
SS_HOST_DEVICE void causal_softmax_backward_row(const float* p, const float* dp, float* ds,
                                                int64_t row, int64_t len, float scale,
                                                RowShare share, const Reduce& reduce,
                                                HalfRow half = {}) {
  causal_softmax_backward_row_of(KeptProbabilities{p}, dp, ds, row, len, scale, share, reduce,
                                 half);
}

// Flash attention's scheme: the keys may be taken a tile of columns at a time, no row of
// probabilities kept whole. Forward keeps, per query row, the running maximum of the scaled
// scores and the running sum of their exponentials; each new tile rescales what was
// accumulated (the output row too) by exp(old max − new max). The row's log-sum-exp,
// max + log(sum), is all that forward keeps for backward, which recomputes
// p = exp(scale·s − lse) tile by tile. (The CPU kernel's forward takes every key a query sees
// as one tile, so it never rescales; a kernel with less room per row, a GPU's, would.)
//
// The tile functions are written for compilers to vectorise: no library call or branch per
// element (vector_exp, exp_math.h; masked columns are computed and then replaced, as a vector
// would), and a tile row's maximum and sum taken in kTileLanes interleaved partial results
// combined in a fixed order, so that the bits depend on neither the vector width nor the
// thread count. A row is `width` columns, a multiple of kTileLanes: the
// caller's storage past the tile's keys (padding), which the functions set to 0.
inline constexpr int64_t kTileLanes = 8;

// The fixed order in which a row's kTileLanes partial sums are combined.
SS_HOST_DEVICE inline float sum_lanes(const float* lane) {
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

struct OnlineSoftmaxRow {
  float max = -INFINITY;  // of scale·s over the columns seen so far
  float sum = 0.0f;       // of exp(scale·s − max) over them
  SS_HOST_DEVICE float log_sum_exp() const { return max + logf(sum); }
};

// The columns of query position `query` visible in a tile of `cols` keys from `key0` on.
SS_HOST_DEVICE inline int64_t causal_visible(int64_t cols, int64_t key0, int64_t query) {
  const int64_t visible = query - key0 + 1;
  return visible < 0 ? 0 : (visible < cols ? visible : cols);
}

// The columns of a row's lane groups (kTileLanes each) that hold a visible column: past them a
// row is all masked.
SS_HOST_DEVICE inline int64_t visible_lane_groups(int64_t visible) {
  return (visible + kTileLanes - 1) / kTileLanes * kTileLanes;
}

// One tile of row `query`: the unscaled scores s[width] of keys [key0, key0 + cols) become
// exp(scale·s − max) with the row's new maximum (0 where masked or past cols), and `row` takes
// them in. Returns the factor that what was accumulated for the row under the old maximum must
// be multiplied by (0 before the first tile, 1 when the maximum stays).
// REQUIRES: width a multiple of kTileLanes, cols <= width.
SS_HOST_DEVICE inline float online_softmax_tile(float* s, int64_t cols, int64_t width, int64_t key0,
                                                int64_t query, float scale, OnlineSoftmaxRow& row) {
  const int64_t visible = causal_visible(cols, key0, query);
  const int64_t live = visible_lane_groups(visible);
  // Loops over the row a lane group at a time, each taking what it writes into the lanes'
  // maximum or sum as it goes: on a CPU a separate pass re-reading the row stalled on the
  // stores the pass before had just made.
  // Past the groups with a visible column every p is 0, which changes no lane: not computed.
  float lane[kTileLanes];
  for (int64_t l = 0; l < kTileLanes; ++l) lane[l] = -INFINITY;
  for (int64_t j0 = 0; j0 < live; j0 += kTileLanes) {
    SS_HOST_SIMD
    for (int64_t l = 0; l < kTileLanes; ++l) {
      const float scaled = s[j0 + l] * scale;
      const float v = j0 + l < visible ? scaled : -INFINITY;
      s[j0 + l] = v;
      lane[l] = v > lane[l] ? v : lane[l];
    }
  }
  float max = row.max;
  for (int64_t l = 0; l < kTileLanes; ++l) max = lane[l] > max ? lane[l] : max;
  const float rescale = max == row.max ? 1.0f : expf(row.max - max);
  // Masked columns hold −inf: vector_exp gives them 0.
  for (int64_t l = 0; l < kTileLanes; ++l) lane[l] = 0.0f;
  for (int64_t j0 = 0; j0 < live; j0 += kTileLanes) {
    SS_HOST_SIMD
    for (int64_t l = 0; l < kTileLanes; ++l) {
      const float p = vector_exp(s[j0 + l] - max);
      s[j0 + l] = p;
      lane[l] += p;
    }
  }
  for (int64_t j = live; j < width; ++j) s[j] = 0.0f;
  row.sum = row.sum * rescale + sum_lanes(lane);
  row.max = max;
  return rescale;
}

// delta = Σ_c dout[c]·out[c] over a row's hd values, in column order: the Σ_j p[j]·dp[j] that
// attention_tile_backward_row needs, from the output instead of the probabilities. Each read
// through its type's operator[] (fp32 memory, or a 16-bit copy's HalfValues or HalfValuesIn).
template <class DOut, class Out>
SS_HOST_DEVICE inline float attention_row_delta(const DOut& dout, const Out& out, int64_t hd) {
  float delta = 0.0f;
  for (int64_t c = 0; c < hd; ++c) delta += dout[c] * out[c];
  return delta;
}

// Backward of one tile of row `query`, from the row's log-sum-exp and delta = Σ_j p[j]·dp[j]
// over the whole row (attention_row_delta): the unscaled scores s[width] become
// p = exp(scale·s − lse) and dp[width] becomes the gradient of the unscaled scores,
// p·(dp − delta)·scale (both 0 where masked or past cols, whatever dp holds there).
SS_HOST_DEVICE inline void attention_tile_backward_row(float* s, float* dp, int64_t cols,
                                                       int64_t width, int64_t key0, int64_t query,
                                                       float scale, float lse, float delta) {
  const int64_t visible = causal_visible(cols, key0, query);
  const int64_t live = visible_lane_groups(visible);
  // A lane group at a time, as online_softmax_tile: no scalar remainder where `live` is not a
  // multiple of the CPU's vector width, and past the visible groups only zeros.
  for (int64_t j0 = 0; j0 < live; j0 += kTileLanes) {
    SS_HOST_SIMD
    for (int64_t l = 0; l < kTileLanes; ++l) {
      const int64_t j = j0 + l;
      const float p = vector_exp(s[j] * scale - lse);
      const float ds = (p * (dp[j] - delta)) * scale;
      s[j] = j < visible ? p : 0.0f;
      dp[j] = j < visible ? ds : 0.0f;
    }
  }
  for (int64_t j = live; j < width; ++j) s[j] = dp[j] = 0.0f;
}

}  // namespace scalescope::kernel_math
