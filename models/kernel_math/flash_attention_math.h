// The CUDA attention's fused forward (models/cuda/flash_attention.cu) under bf16 and fp16: flash
// attention's scheme on tensor cores, one block of kWarps warps per kQueryRows queries of one
// sequence and head, each warp's kWarpRows queries against tiles of kKeyTile keys, the
// scores, probabilities and output rows in shared memory, none of them in global memory. What
// is here is what the kernel and the host test that replays it (flash_attention_test.cpp)
// share: the shared memory's layout, which key tiles a query tile reads, and the per-row math of
// a tile, a row shared by a pair of lanes.
//
// Per query row, over the key tiles in order (attention_math.h's OnlineSoftmaxRow):
//   max' = max(max, the tile's largest scaled score), rescale = exp(max − max'),
//   sum' = sum·rescale + Σ_j exp(scale·s_j − max'), out' = out·rescale + Σ_j p_j·v_j,
// with p_j = exp(scale·s_j − max') rounded to 16 bits for the product (autocast's P·V reads a
// 16-bit P). At the end out / sum is the row's output and {max, sum} its SoftmaxRowStats: what
// the chunked backward recomputes the probabilities from (cuda_attention.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "models/kernel_math/attention_math.h"
#include "models/kernel_math/half_math.h"
#include "models/kernel_math/host_device.h"
#include "models/kernel_math/row_reduce.h"

namespace scalescope::kernel_math {

struct FlashTiling {
  static constexpr int kWarps = 4;
  static constexpr int kWarpRows = 16;  // a tensor-core tile's rows
  static constexpr int kQueryRows = kWarps * kWarpRows;
  static constexpr int kKeyTile = 64;
  static constexpr int kThreads = kWarps * 32;
  // Each row of a warp's 16 is shared by two lanes: lane l takes row l / 2 and its columns
  // l % 2, l % 2 + 2, ... (interleaved). With scores kKeyTile + 4 floats apart, rows r and r + 8
  // share their banks: two-way conflicts, which no leading dimension the tensor cores' stores
  // allow (a multiple of 4 floats) avoids without skewing each row's columns.
  static constexpr int kLanesPerRow = 2;
};

// Head sizes the fused passes take: a whole number of the tensor cores' k-steps of 16, at
// most 128 (its shared memory grows with hd).
SS_HOST_DEVICE inline bool flash_supports(int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128;
}

// Query tiles of a sequence, and the key tiles query tile t reads: every key up to its last
// query (the causal mask), nothing past the sequence.
SS_HOST_DEVICE inline int64_t flash_query_tiles(int64_t seq) {
  return (seq + FlashTiling::kQueryRows - 1) / FlashTiling::kQueryRows;
}
SS_HOST_DEVICE inline int64_t flash_key_tiles(int64_t query_tile, int64_t seq) {
  const int64_t end = (query_tile + 1) * FlashTiling::kQueryRows;
  const int64_t last_query = (end < seq ? end : seq) - 1;
  return last_query / FlashTiling::kKeyTile + 1;
}

// The block's shared memory for head size HD, in bytes from its start: q, k and v tiles of
// 16-bit values ([rows][ld_heads]), then per warp its scores (fp32, [16][ld_scores]), its
// probabilities (16-bit, [16][ld_probs]) and its output rows (fp32, [16][ld_out]). Each leading
// dimension is padded past the row (the tensor cores' loads want a multiple of 16 bytes; the
// padding spreads rows over the banks), and every tile a warp loads or stores starts on a
// multiple of 32 bytes, as the tensor cores' loads and stores require.
template <int HD>
struct FlashLayout {
  static constexpr int kLdHeads = HD + 8;                      // 16-bit values
  static constexpr int kLdScores = FlashTiling::kKeyTile + 4;  // floats
  static constexpr int kLdProbs = FlashTiling::kKeyTile + 8;   // 16-bit values
  static constexpr int kLdOut = HD + 4;                        // floats
  static constexpr int64_t kHeadTileBytes = int64_t{FlashTiling::kQueryRows} * kLdHeads * 2;
  static constexpr int64_t kQ = 0;
  static constexpr int64_t kK = kQ + kHeadTileBytes;
  static constexpr int64_t kV = kK + kHeadTileBytes;
  static constexpr int64_t kScoresWarp = int64_t{FlashTiling::kWarpRows} * kLdScores * 4;
  static constexpr int64_t kProbsWarp = int64_t{FlashTiling::kWarpRows} * kLdProbs * 2;
  static constexpr int64_t kOutWarp = int64_t{FlashTiling::kWarpRows} * kLdOut * 4;
  static constexpr int64_t kScores = kV + kHeadTileBytes;
  static constexpr int64_t kProbs = kScores + FlashTiling::kWarps * kScoresWarp;
  static constexpr int64_t kOut = kProbs + FlashTiling::kWarps * kProbsWarp;
  static constexpr int64_t kBytes = kOut + FlashTiling::kWarps * kOutWarp;
  static_assert(FlashTiling::kKeyTile == FlashTiling::kQueryRows,
                "a head tile holds the block's queries or a tile of keys");
  static_assert(kHeadTileBytes % 32 == 0 && kScoresWarp % 32 == 0 && kProbsWarp % 32 == 0 &&
                    kOutWarp % 32 == 0 && (16 * kLdHeads * 2) % 32 == 0,
                "tiles on 32-byte boundaries");
};

// A warp's tiles in the forward's shared memory `smem` (FlashLayout): the kernel takes its
// pointers here and the host replay the same, so that the replay checks the kernel's own.
template <int HD>
struct FlashForwardTiles {
  using L = FlashLayout<HD>;
  unsigned char* smem;
  int warp;
  SS_HOST_DEVICE uint16_t* queries() const { return reinterpret_cast<uint16_t*>(smem + L::kQ); }
  SS_HOST_DEVICE uint16_t* keys() const { return reinterpret_cast<uint16_t*>(smem + L::kK); }
  SS_HOST_DEVICE uint16_t* values() const { return reinterpret_cast<uint16_t*>(smem + L::kV); }
  // The warp's kWarpRows queries within the block's.
  SS_HOST_DEVICE const uint16_t* warp_queries() const {
    return queries() + warp * FlashTiling::kWarpRows * L::kLdHeads;
  }
  SS_HOST_DEVICE float* scores() const {
    return reinterpret_cast<float*>(smem + L::kScores + warp * L::kScoresWarp);
  }
  SS_HOST_DEVICE uint16_t* probs() const {
    return reinterpret_cast<uint16_t*>(smem + L::kProbs + warp * L::kProbsWarp);
  }
  SS_HOST_DEVICE float* out() const {
    return reinterpret_cast<float*>(smem + L::kOut + warp * L::kOutWarp);
  }
};

// Lane `lane`'s row of its warp's kWarpRows, and its share of that row's columns.
SS_HOST_DEVICE inline int flash_lane_row(int lane) {
  return lane / FlashTiling::kLanesPerRow;
}
SS_HOST_DEVICE inline RowShare flash_lane_share(int lane) {
  return {lane % FlashTiling::kLanesPerRow, FlashTiling::kLanesPerRow};
}

// The columns of a key tile from key0 on that query sees: none past the sequence or for a query
// past it (the padding rows of the last query tile).
SS_HOST_DEVICE inline int64_t flash_visible(int64_t query, int64_t key0, int64_t seq) {
  if (query >= seq) return 0;
  const int64_t cols = seq - key0 < FlashTiling::kKeyTile ? seq - key0 : FlashTiling::kKeyTile;
  return causal_visible(cols, key0, query);
}

// The largest scaled score of this share of a tile row's `visible` columns (−inf for none).
SS_HOST_DEVICE inline float flash_share_max(const float* s, int64_t visible, float scale,
                                            RowShare share) {
  float m = -INFINITY;
  for (int64_t j = share.first; j < visible; j += share.step) m = fmaxf(m, s[j] * scale);
  return m;
}

// This share of a tile row's probabilities under the row's new maximum: exp(scale·s − max)
// rounded into p (0 for columns past `visible`, up to kKeyTile), and returned, the sum of their
// fp32 values.
SS_HOST_DEVICE inline float flash_share_probabilities(const float* s, HalfRow p, int64_t visible,
                                                      float scale, float max, RowShare share) {
  float sum = 0.0f;
  for (int64_t j = share.first; j < FlashTiling::kKeyTile; j += share.step) {
    const float v = j < visible ? expf(s[j] * scale - max) : 0.0f;
    sum += v;
    p.store(j, v);
  }
  return sum;
}

// What multiplies a row's sum and output when its maximum moves from `before` to `after`: 1 when
// it stays (also while both are −inf: nothing seen yet), 0 from −inf.
SS_HOST_DEVICE inline float flash_rescale(float before, float after) {
  return before == after ? 1.0f : expf(before - after);
}

// A row's running state after a tile whose share maxima combined to `tile_max` and whose
// shares' sums added to `tile_sum` (under the new maximum); returns the rescale of what the row
// accumulated before.
SS_HOST_DEVICE inline float flash_take_tile(SoftmaxRowStats& row, float new_max, float tile_sum) {
  const float rescale = flash_rescale(row.max, new_max);
  row.sum = row.sum * rescale + tile_sum;
  row.max = new_max;
  return rescale;
}

// The state a row starts from: no column seen.
SS_HOST_DEVICE inline SoftmaxRowStats flash_row_start() {
  return {-INFINITY, 0.0f};
}

// ---- backward (models/cuda/flash_attention_backward.cu)
//
// From q, k, v, dO, each row's stats and delta = Σ_c dO_c·O_c (attention_row_delta, O the
// layer's output as the model keeps it for backward: under 16 bits its saved copy):
//   p = softmax_probability(s, scale, stats) (the chunked backward's expression), dp = dO·vᵀ,
//   ds = (p·(dp − delta))·scale (causal_softmax_backward_row_of's), dV = Σ pᵀ·dO,
//   dK = Σ dsᵀ·q, dQ = Σ ds·k,
// p and ds rounded to 16 bits for the products, as the chunks round them. Two kernels, each
// writing what it computes once, in an order fixed by the shape (no atomics): one per key tile
// for its dK and dV over the query tiles that see it, one per query tile for its dQ over the
// key tiles it sees; both recompute the scores.

// The first query tile that sees key tile t: its own (the tiles are the same size), whose
// diagonal it shares; every later one sees all of it.
SS_HOST_DEVICE inline int64_t flash_first_query_tile(int64_t key_tile) {
  return key_tile;
}

// Whether `query` sees `key` (the causal mask, nothing past the sequence).
SS_HOST_DEVICE inline bool flash_sees(int64_t query, int64_t key, int64_t seq) {
  return query < seq && key <= query;
}

// What a tile element's p and ds need besides its score and dp: whether the query sees the key,
// and the query row's stats and delta.
struct FlashColumn {
  bool visible = false;
  SoftmaxRowStats stats;
  float delta = 0.0f;
};

// This share of a tile row of kKeyTile columns: its scores s and probabilities' gradient dp
// (fp32) into p's and ds's 16-bit copies (either may be without memory), 0 where the column is
// not visible. column(j) gives column j's FlashColumn: a dQ row's keys share one query's stats,
// a dK row's queries each have their own.
template <class Column>
SS_HOST_DEVICE inline void flash_backward_share(const float* s, const float* dp, HalfRow p,
                                                HalfRow ds, float scale, RowShare share,
                                                const Column& column) {
  for (int64_t j = share.first; j < FlashTiling::kKeyTile; j += share.step) {
    const FlashColumn c = column(j);
    const float pv = c.visible ? softmax_probability(s[j], scale, c.stats) : 0.0f;
    p.store(j, pv);
    ds.store(j, c.visible ? (pv * (dp[j] - c.delta)) * scale : 0.0f);
  }
}

// The backward kernels' shared memory for head size HD: four 16-bit head tiles (the block's two,
// then the two each step loads), then per warp its scores and dp (fp32, [16][kLdScores] each),
// its p and ds (16-bit, [16][kLdProbs] each), and the key kernel's per-column stats and delta
// of the query tile. A warp's scores and dp, contiguous, are also where it stages its
// [16][HD + 4] fp32 results on their way to global memory.
template <int HD>
struct FlashBackwardLayout {
  using Forward = FlashLayout<HD>;
  static constexpr int kLdHeads = Forward::kLdHeads;
  static constexpr int kLdScores = Forward::kLdScores;
  static constexpr int kLdProbs = Forward::kLdProbs;
  static constexpr int kLdOut = Forward::kLdOut;  // a warp's staged results, fp32
  static constexpr int64_t kHeadTileBytes = Forward::kHeadTileBytes;
  static constexpr int64_t kScoresWarp = Forward::kScoresWarp;
  static constexpr int64_t kProbsWarp = Forward::kProbsWarp;
  static constexpr int64_t kWarpBytes = 2 * kScoresWarp + 2 * kProbsWarp;
  static constexpr int kHeadTiles = 4;
  static constexpr int64_t kHeads = 0;  // tile i at kHeads + i·kHeadTileBytes
  static constexpr int64_t kWarpTiles = kHeads + kHeadTiles * kHeadTileBytes;
  // Within a warp's bytes:
  static constexpr int64_t kScores = 0;
  static constexpr int64_t kGrads = kScoresWarp;
  static constexpr int64_t kProbs = 2 * kScoresWarp;
  static constexpr int64_t kGradProbs = 2 * kScoresWarp + kProbsWarp;
  static constexpr int64_t kColumnStats = kWarpTiles + FlashTiling::kWarps * kWarpBytes;
  static constexpr int64_t kColumnDelta =
      kColumnStats + FlashTiling::kQueryRows * int64_t{sizeof(SoftmaxRowStats)};
  static constexpr int64_t kBytes = kColumnDelta + FlashTiling::kQueryRows * 4;
  static_assert(int64_t{FlashTiling::kWarpRows} * kLdOut * 4 <= 2 * kScoresWarp,
                "a warp's results staged in its scores and dp");
  static_assert(kWarpBytes % 32 == 0, "tiles on 32-byte boundaries");
};

// A warp's tiles in the backward's shared memory `smem` (FlashBackwardLayout).
template <int HD>
struct FlashBackwardTiles {
  using L = FlashBackwardLayout<HD>;
  unsigned char* smem;
  int warp;
  SS_HOST_DEVICE uint16_t* head_tile(int i) const {
    return reinterpret_cast<uint16_t*>(smem + L::kHeads + i * L::kHeadTileBytes);
  }
  SS_HOST_DEVICE unsigned char* mine() const { return smem + L::kWarpTiles + warp * L::kWarpBytes; }
  SS_HOST_DEVICE float* scores() const { return reinterpret_cast<float*>(mine() + L::kScores); }
  SS_HOST_DEVICE float* grads() const { return reinterpret_cast<float*>(mine() + L::kGrads); }
  SS_HOST_DEVICE uint16_t* probs() const { return reinterpret_cast<uint16_t*>(mine() + L::kProbs); }
  SS_HOST_DEVICE uint16_t* grad_probs() const {
    return reinterpret_cast<uint16_t*>(mine() + L::kGradProbs);
  }
  SS_HOST_DEVICE SoftmaxRowStats* column_stats() const {
    return reinterpret_cast<SoftmaxRowStats*>(smem + L::kColumnStats);
  }
  SS_HOST_DEVICE float* column_delta() const {
    return reinterpret_cast<float*>(smem + L::kColumnDelta);
  }
};

}  // namespace scalescope::kernel_math
