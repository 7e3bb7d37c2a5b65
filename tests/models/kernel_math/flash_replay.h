// The attention's fused kernels (models/cuda/flash_attention.cu, flash_attention_backward.cu)
// replayed on the host: every block and warp, its shared memory a byte array laid out by
// kernel_math/flash_attention_math.h's layouts (filled with NaN first, so that a value read
// before it is written, a tile that overlaps another or a leading dimension off by one shows up),
// each tensor-core operation as the WMMA API defines it (host_wmma.h) over the kernel's pointers
// and leading dimensions, each lane's part of a tile with the kernel's calls in the kernel's
// order, the shuffle between a pair of lanes as the exchange it is. Warps run one after another:
// each writes only its own tiles between the block's barriers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "models/kernel_math/flash_attention_math.h"
#include "tests/models/kernel_math/host_wmma.h"

namespace scalescope::kernel_math_test::flash_replay {

namespace km = kernel_math;
using Tiling = km::FlashTiling;
namespace hw = host_wmma;
using hw::kTile;

// A block of the forward kernel (blockIdx.x = query tile, blockIdx.y = head) on the host.
template <int HD>
class HostForward {
 public:
  using L = km::FlashLayout<HD>;

  HostForward(const km::AttentionShape& s, const std::vector<uint16_t>& q,
              const std::vector<uint16_t>& k, const std::vector<uint16_t>& v, km::HalfFormat format)
      : s_(s), q_(q), k_(k), v_(v), format_(format), smem_(L::kBytes) {}

  void run(int64_t query_tile, int64_t head, std::vector<float>& out,
           std::vector<km::SoftmaxRowStats>& stats) {
    smem_.fill(0xFF);  // NaN as floats and as 16-bit values
    const int64_t q0 = query_tile * Tiling::kQueryRows;
    for (int w = 0; w < Tiling::kWarps; ++w) {
      for (int lane = 0; lane < 32; ++lane) {
        const int row = km::flash_lane_row(lane);
        for (int c = lane % 2; c < HD; c += 2) out_tile(w)[row * L::kLdOut + c] = 0.0f;
      }
    }
    hw::load_head_tile<HD, L::kLdHeads>(q_, head, q0, s_.seq, tiles(0).queries());
    std::vector<km::SoftmaxRowStats> state(Tiling::kThreads, km::flash_row_start());
    for (int64_t t = 0; t < km::flash_key_tiles(query_tile, s_.seq); ++t) {
      const int64_t key0 = t * Tiling::kKeyTile;
      hw::load_head_tile<HD, L::kLdHeads>(k_, head, key0, s_.seq, tiles(0).keys());
      hw::load_head_tile<HD, L::kLdHeads>(v_, head, key0, s_.seq, tiles(0).values());
      for (int w = 0; w < Tiling::kWarps; ++w) {
        warp_scores(w);
        take_tile(w, q0, key0, state.data() + w * 32);
        warp_accumulate(w);
      }
    }
    for (int w = 0; w < Tiling::kWarps; ++w) {
      for (int lane = 0; lane < 32; ++lane) {
        const int row = km::flash_lane_row(lane);
        const int64_t query = q0 + w * Tiling::kWarpRows + row;
        if (query >= s_.seq) continue;
        const km::SoftmaxRowStats& st = state[w * 32 + lane];
        float* dst = out.data() + (head * s_.seq + query) * HD;
        for (int c = lane % 2; c < HD; c += 2) dst[c] = out_tile(w)[row * L::kLdOut + c] / st.sum;
        if (lane % 2 == 0) stats[head * s_.seq + query] = st;
      }
    }
  }

 private:
  km::FlashForwardTiles<HD> tiles(int w) { return {smem_.data(), w}; }
  float* scores(int w) { return tiles(w).scores(); }
  uint16_t* probs(int w) { return tiles(w).probs(); }
  float* out_tile(int w) { return tiles(w).out(); }

  void warp_scores(int w) {
    hw::product_nt<HD>(tiles(w).warp_queries(), L::kLdHeads, tiles(w).keys(), L::kLdHeads,
                       scores(w), L::kLdScores, format_);
  }

  // The kernel's accumulate_output.
  void warp_accumulate(int w) {
    hw::Accumulator acc[HD / kTile];
    for (int n = 0; n < HD / kTile; ++n) hw::load(acc[n], out_tile(w) + n * kTile, L::kLdOut);
    hw::accumulate_nn<HD>(probs(w), L::kLdProbs, tiles(w).values(), L::kLdHeads, acc, format_);
    for (int n = 0; n < HD / kTile; ++n) hw::store(out_tile(w) + n * kTile, acc[n], L::kLdOut);
  }

  // The kernel's take_tile for the warp's 32 lanes, the shuffles between a lane and lane ^ 1.
  void take_tile(int w, int64_t q0, int64_t key0, km::SoftmaxRowStats* row_state) {
    float share_max[32], share_sum[32];
    const auto visible = [&](int lane) {
      return km::flash_visible(q0 + w * Tiling::kWarpRows + km::flash_lane_row(lane), key0, s_.seq);
    };
    const float scale = km::attention_scale(HD);
    for (int lane = 0; lane < 32; ++lane) {
      const int row = km::flash_lane_row(lane);
      share_max[lane] = km::flash_share_max(scores(w) + row * L::kLdScores, visible(lane), scale,
                                            km::flash_lane_share(lane));
    }
    float new_max[32];
    for (int lane = 0; lane < 32; ++lane) {
      new_max[lane] =
          std::fmax(row_state[lane].max, std::fmax(share_max[lane], share_max[lane ^ 1]));
      const int row = km::flash_lane_row(lane);
      share_sum[lane] = km::flash_share_probabilities(
          scores(w) + row * L::kLdScores, km::HalfRow{probs(w) + row * L::kLdProbs, format()},
          visible(lane), scale, new_max[lane], km::flash_lane_share(lane));
    }
    for (int lane = 0; lane < 32; ++lane) {
      const float tile_sum = share_sum[lane] + share_sum[lane ^ 1];
      const float rescale = km::flash_take_tile(row_state[lane], new_max[lane], tile_sum);
      const km::RowShare share = km::flash_lane_share(lane);
      float* out = out_tile(w) + km::flash_lane_row(lane) * L::kLdOut;
      for (int64_t c = share.first; c < HD; c += share.step) out[c] *= rescale;
    }
  }
  km::HalfFormat format() const { return format_; }

  km::AttentionShape s_;
  const std::vector<uint16_t>& q_;
  const std::vector<uint16_t>& k_;
  const std::vector<uint16_t>& v_;
  km::HalfFormat format_;
  hw::SharedMemory smem_;
};

struct Heads {
  std::vector<uint16_t> q, k, v;
};

inline Heads random_heads(const km::AttentionShape& s, km::HalfFormat format, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Heads h;
  for (auto* part : {&h.q, &h.k, &h.v}) {
    part->resize(static_cast<size_t>(s.head_elements()));
    // q and k scaled up, so that the scores spread and the running maximum moves between tiles.
    const float spread = part == &h.v ? 1.0f : 2.0f;
    for (auto& x : *part) x = km::to_half(spread * normal(rng), format);
  }
  return h;
}

template <int HD>
void run_forward(const km::AttentionShape& s, const Heads& h, km::HalfFormat format,
                 std::vector<float>& out, std::vector<km::SoftmaxRowStats>& stats) {
  HostForward<HD> block(s, h.q, h.k, h.v, format);
  out.assign(static_cast<size_t>(s.head_elements()), NAN);
  stats.assign(static_cast<size_t>(s.score_rows()), {NAN, NAN});
  for (int64_t head = 0; head < s.batch * s.heads; ++head) {
    for (int64_t t = 0; t < km::flash_query_tiles(s.seq); ++t) block.run(t, head, out, stats);
  }
}

// The blocks of the backward kernels on the host: key_gradients_kernel's (a key tile and head:
// its rows of dK and dV) and query_gradients_kernel's (a query tile and head: its rows of dQ).
template <int HD>
class HostBackward {
 public:
  using L = km::FlashBackwardLayout<HD>;
  struct Inputs {
    const Heads& h;
    const std::vector<uint16_t>& dout;
    const std::vector<km::SoftmaxRowStats>& stats;
    const std::vector<float>& delta;
  };

  HostBackward(const km::AttentionShape& s, const Inputs& in, km::HalfFormat format)
      : s_(s), in_(in), format_(format), smem_(L::kBytes) {}

  void keys(int64_t key_tile, int64_t head, std::vector<float>& dk, std::vector<float>& dv) {
    smem_.fill(0xFF);
    const int64_t key0 = key_tile * Tiling::kKeyTile;
    load(in_.h.k, head, key0, 0);
    load(in_.h.v, head, key0, 1);
    hw::Accumulator dks[Tiling::kWarps][HD / kTile], dvs[Tiling::kWarps][HD / kTile];
    for (int64_t t = km::flash_first_query_tile(key_tile); t < km::flash_query_tiles(s_.seq); ++t) {
      const int64_t q0 = t * Tiling::kQueryRows;
      load(in_.h.q, head, q0, 2);
      load(in_.dout, head, q0, 3);
      const auto w0 = tiles(0);
      for (int i = 0; i < Tiling::kQueryRows; ++i) {
        const bool in = q0 + i < s_.seq;
        const auto at = static_cast<size_t>(head * s_.seq + q0 + i);
        w0.column_stats()[i] = in ? in_.stats[at] : km::SoftmaxRowStats{0.0f, 1.0f};
        w0.column_delta()[i] = in ? in_.delta[at] : 0.0f;
      }
      for (int w = 0; w < Tiling::kWarps; ++w) {
        const auto t_ = tiles(w);
        products(t_, 0, 2, w);  // sᵀ = k·qᵀ, dpᵀ = v·dOᵀ
        for (int lane = 0; lane < 32; ++lane) {
          const int row = km::flash_lane_row(lane);
          const int64_t key = key0 + w * Tiling::kWarpRows + row;
          km::flash_backward_share(
              t_.scores() + row * L::kLdScores, t_.grads() + row * L::kLdScores,
              km::HalfRow{t_.probs() + row * L::kLdProbs, format_},
              km::HalfRow{t_.grad_probs() + row * L::kLdProbs, format_}, scale(),
              km::flash_lane_share(lane), [&](int64_t j) {
                return km::FlashColumn{km::flash_sees(q0 + j, key, s_.seq), t_.column_stats()[j],
                                       t_.column_delta()[j]};
              });
        }
        hw::accumulate_nn<HD>(t_.probs(), L::kLdProbs, t_.head_tile(3), L::kLdHeads, dvs[w],
                              format_);
        hw::accumulate_nn<HD>(t_.grad_probs(), L::kLdProbs, t_.head_tile(2), L::kLdHeads, dks[w],
                              format_);
      }
    }
    for (int w = 0; w < Tiling::kWarps; ++w) {
      store_rows(w, dks[w], dk, head, key0 + w * Tiling::kWarpRows);
      store_rows(w, dvs[w], dv, head, key0 + w * Tiling::kWarpRows);
    }
  }

  void queries(int64_t query_tile, int64_t head, std::vector<float>& dq) {
    smem_.fill(0xFF);
    const int64_t q0 = query_tile * Tiling::kQueryRows;
    load(in_.h.q, head, q0, 0);
    load(in_.dout, head, q0, 1);
    hw::Accumulator dqs[Tiling::kWarps][HD / kTile];
    for (int64_t t = 0; t < km::flash_key_tiles(query_tile, s_.seq); ++t) {
      const int64_t key0 = t * Tiling::kKeyTile;
      load(in_.h.k, head, key0, 2);
      load(in_.h.v, head, key0, 3);
      for (int w = 0; w < Tiling::kWarps; ++w) {
        const auto t_ = tiles(w);
        products(t_, 0, 2, w);  // s = q·kᵀ, dp = dO·vᵀ
        for (int lane = 0; lane < 32; ++lane) {
          const int row = km::flash_lane_row(lane);
          const int64_t query = q0 + w * Tiling::kWarpRows + row;
          const bool in = query < s_.seq;
          const auto at = static_cast<size_t>(head * s_.seq + query);
          const km::FlashColumn of_row{false, in ? in_.stats[at] : km::SoftmaxRowStats{},
                                       in ? in_.delta[at] : 0.0f};
          km::flash_backward_share(t_.scores() + row * L::kLdScores,
                                   t_.grads() + row * L::kLdScores, km::HalfRow{nullptr, format_},
                                   km::HalfRow{t_.grad_probs() + row * L::kLdProbs, format_},
                                   scale(), km::flash_lane_share(lane), [&](int64_t j) {
                                     km::FlashColumn c = of_row;
                                     c.visible = km::flash_sees(query, key0 + j, s_.seq);
                                     return c;
                                   });
        }
        hw::accumulate_nn<HD>(t_.grad_probs(), L::kLdProbs, t_.head_tile(2), L::kLdHeads, dqs[w],
                              format_);
      }
    }
    for (int w = 0; w < Tiling::kWarps; ++w) {
      store_rows(w, dqs[w], dq, head, q0 + w * Tiling::kWarpRows);
    }
  }

 private:
  km::FlashBackwardTiles<HD> tiles(int w) { return {smem_.data(), w}; }
  float scale() const { return km::attention_scale(HD); }
  void load(const std::vector<uint16_t>& heads, int64_t head, int64_t first, int tile) {
    hw::load_head_tile<HD, L::kLdHeads>(heads, head, first, s_.seq, tiles(0).head_tile(tile));
  }
  // The warp's two products of a step: its rows of head tile `mine` against head tile `other`
  // into its scores, and of tile mine + 1 against other + 1 into its dp.
  void products(const km::FlashBackwardTiles<HD>& t, int mine, int other, int w) {
    const int64_t rows = w * Tiling::kWarpRows * L::kLdHeads;
    hw::product_nt<HD>(t.head_tile(mine) + rows, L::kLdHeads, t.head_tile(other), L::kLdHeads,
                       t.scores(), L::kLdScores, format_);
    hw::product_nt<HD>(t.head_tile(mine + 1) + rows, L::kLdHeads, t.head_tile(other + 1),
                       L::kLdHeads, t.grads(), L::kLdScores, format_);
  }
  // store_rows: through the warp's staging, the rows within the sequence.
  void store_rows(int w, const hw::Accumulator* acc, std::vector<float>& heads, int64_t head,
                  int64_t first) {
    float* staging = tiles(w).scores();
    for (int n = 0; n < HD / kTile; ++n) hw::store(staging + n * kTile, acc[n], L::kLdOut);
    for (int row = 0; row < Tiling::kWarpRows; ++row) {
      if (first + row >= s_.seq) continue;
      for (int c = 0; c < HD; ++c) {
        heads.at(static_cast<size_t>((head * s_.seq + first + row) * HD + c)) =
            staging[row * L::kLdOut + c];
      }
    }
  }

  km::AttentionShape s_;
  Inputs in_;
  km::HalfFormat format_;
  hw::SharedMemory smem_;
};

// The backward kernels' results on the host, as the CUDA kernel calls them from backward_saved:
// each row's delta as row_delta_kernel computes it from the rows [N, S, D] of dout (here the
// 16-bit values widened) and of the model's saved 16-bit copy of the output (the replayed
// forward's, rounded), then every block of both kernels, with the stats the forward kept.
template <int HD>
void run_backward(const km::AttentionShape& s, const Heads& h, const std::vector<uint16_t>& dout,
                  const std::vector<float>& out, const std::vector<km::SoftmaxRowStats>& stats,
                  km::HalfFormat format, std::vector<float>& dq, std::vector<float>& dk,
                  std::vector<float>& dv) {
  std::vector<float> dout_rows(dout.size());
  std::vector<uint16_t> out_rows(out.size());
  for (int64_t e = 0; e < s.head_elements(); ++e) {
    const auto at = static_cast<size_t>(km::head_major_to_rows(s, e, s.model_dim(), 0));
    dout_rows[at] = km::from_half(dout[static_cast<size_t>(e)], format);
    out_rows[at] = km::to_half(out[static_cast<size_t>(e)], format);
  }
  std::vector<float> delta(static_cast<size_t>(s.score_rows()));
  for (int64_t r = 0; r < s.score_rows(); ++r) {
    const int64_t at = km::head_major_to_rows(s, r * HD, s.model_dim(), 0);
    delta[static_cast<size_t>(r)] = km::attention_row_delta(
        dout_rows.data() + at, km::HalfValues{out_rows.data() + at, format}, HD);
  }
  for (auto* g : {&dq, &dk, &dv}) g->assign(static_cast<size_t>(s.head_elements()), NAN);
  HostBackward<HD> b(s, {h, dout, stats, delta}, format);
  for (int64_t head = 0; head < s.batch * s.heads; ++head) {
    for (int64_t t = 0; t < km::flash_query_tiles(s.seq); ++t) {
      b.keys(t, head, dk, dv);
      b.queries(t, head, dq);
    }
  }
}
}  // namespace scalescope::kernel_math_test::flash_replay
