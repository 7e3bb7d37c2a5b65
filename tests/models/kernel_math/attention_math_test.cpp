// kernel_math/attention_math.h: the causal scaled softmax rows, forward and backward, against
// float64 (and the backward against finite differences of the forward); the same softmax in
// tiles against the whole rows, and against the CPU attention kernel bit for bit; the
// head-major layout's index.
//
// The CPU kernel's softmax is observed exactly through inputs whose products are exact in any
// order of addition: with each head's q and v rows unit vectors (q_i = v_i = e_i, hd = S), the
// scores are s_ij = k_j[i], the output is y_i = P_i (the probabilities themselves), dP_ij =
// dout_i[j], and k's gradient is dk_j[c] = dS_cj. k and dout may then be any floats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "models/kernel_math/attention_math.h"
#include "tests/models/kernel_math/cpu_kernels_on_host.h"
#include "tests/models/kernel_math/lane_reduce.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;

// Row `row` of the causal softmax of scale·s in float64.
std::vector<double> softmax64(const std::vector<double>& s, int64_t row, double scale) {
  std::vector<double> p(s.size(), 0.0);
  double max = -INFINITY;
  for (int64_t j = 0; j <= row; ++j) max = std::max(max, scale * s[static_cast<size_t>(j)]);
  double sum = 0.0;
  for (int64_t j = 0; j <= row; ++j) sum += std::exp(scale * s[static_cast<size_t>(j)] - max);
  for (int64_t j = 0; j <= row; ++j) {
    p[static_cast<size_t>(j)] = std::exp(scale * s[static_cast<size_t>(j)] - max) / sum;
  }
  return p;
}

std::vector<float> forward_row(const std::vector<float>& s, int64_t row, float scale) {
  std::vector<float> p(s.size(), -1.0f);
  km::causal_softmax_row(s.data(), p.data(), row, static_cast<int64_t>(s.size()), scale,
                         km::RowShare{}, km::SerialReduce{});
  return p;
}

std::vector<float> backward_row(const std::vector<float>& p, const std::vector<float>& dp,
                                int64_t row, float scale) {
  std::vector<float> ds(p.size(), -1.0f);
  km::causal_softmax_backward_row(p.data(), dp.data(), ds.data(), row,
                                  static_cast<int64_t>(p.size()), scale, km::RowShare{},
                                  km::SerialReduce{});
  return ds;
}

TEST(KernelMathAttention, SoftmaxRowMatchesFloat64AndMasksLaterPositions) {
  const int64_t len = 9;
  const float scale = km::attention_scale(4);
  EXPECT_EQ(scale, 0.5f);
  for (int64_t row = 0; row < len; ++row) {
    const std::vector<float> s = random_floats(len, 10 + static_cast<uint64_t>(row), -4.0f, 4.0f);
    const std::vector<float> p = forward_row(s, row, scale);
    const std::vector<double> want = softmax64({s.begin(), s.end()}, row, scale);
    double sum = 0.0;
    for (int64_t j = 0; j < len; ++j) {
      const auto i = static_cast<size_t>(j);
      if (j > row) {
        EXPECT_EQ(p[i], 0.0f) << "masked column " << j << " of row " << row;
      } else {
        EXPECT_NEAR(p[i], want[i], 1e-6 * want[i] + 1e-9) << "row " << row << " column " << j;
      }
      sum += p[i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << row;
  }
}

// The maximum is subtracted before exp: scores far beyond exp's float range give the softmax
// of their differences, and a masked score that is infinite or NaN is never read.
TEST(KernelMathAttention, SoftmaxRowIsStableForLargeScores) {
  const std::vector<float> s = {1000.0f, 1002.0f, -1000.0f, kNan, kInf};
  const std::vector<float> p = forward_row(s, 2, 1.0f);
  const std::vector<double> want = softmax64({1000.0, 1002.0, -1000.0, 0.0, 0.0}, 2, 1.0);
  for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(p[j], want[j], 1e-6) << j;
  EXPECT_EQ(p[3], 0.0f);
  EXPECT_EQ(p[4], 0.0f);
}

TEST(KernelMathAttention, SoftmaxRowsMayWorkInPlace) {
  const std::vector<float> s = random_floats(6, 20, -2.0f, 2.0f);
  std::vector<float> inplace = s;
  km::causal_softmax_row(inplace.data(), inplace.data(), 3, 6, 0.7f, km::RowShare{},
                         km::SerialReduce{});
  EXPECT_EQ(bit_mismatches(inplace, forward_row(s, 3, 0.7f)), "");
  const std::vector<float> p = forward_row(s, 3, 0.7f);
  std::vector<float> dp = random_floats(6, 21);
  const std::vector<float> ds = backward_row(p, dp, 3, 0.7f);
  km::causal_softmax_backward_row(p.data(), dp.data(), dp.data(), 3, 6, 0.7f, km::RowShare{},
                                  km::SerialReduce{});
  EXPECT_EQ(bit_mismatches(dp, ds), "");
}

// ds is the gradient of L = Σ_j dp[j]·p[j](s) with respect to the unscaled scores s: against
// central differences of the float64 softmax. Masked scores do not change L, and get 0.
TEST(KernelMathAttention, SoftmaxBackwardRowIsTheForwardsDerivative) {
  const int64_t len = 7;
  const float scale = 0.6f;
  for (const int64_t row : {0, 3, 6}) {
    const std::vector<float> s = random_floats(len, 30 + static_cast<uint64_t>(row), -2.0f, 2.0f);
    const std::vector<float> dp = random_floats(len, 40 + static_cast<uint64_t>(row));
    const std::vector<float> ds = backward_row(forward_row(s, row, scale), dp, row, scale);
    std::vector<double> s64(s.begin(), s.end());
    const auto loss = [&] {
      const std::vector<double> p = softmax64(s64, row, scale);
      double l = 0.0;
      for (size_t j = 0; j < p.size(); ++j) l += dp[j] * p[j];
      return l;
    };
    for (size_t j = 0; j < s64.size(); ++j) {
      const double saved = s64[j];
      const double step = 1e-6;
      s64[j] = saved + step;
      const double up = loss();
      s64[j] = saved - step;
      const double down = loss();
      s64[j] = saved;
      EXPECT_NEAR(ds[j], (up - down) / (2.0 * step), 1e-5) << "row " << row << " column " << j;
    }
  }
}

// The 16-bit copies the rows write beside their fp32 results (what the CUDA attention's
// products read under bf16 and fp16) are to_half of those results, bit for bit, masked
// columns included; without a copy the rows write nothing else.
TEST(KernelMathAttention, SoftmaxRowsWriteTheir16BitCopyInTheSamePass) {
  const int64_t len = 9;
  const float scale = 0.35f;
  for (const km::HalfFormat format : {km::HalfFormat::kBf16, km::HalfFormat::kFp16}) {
    for (const int64_t row : {0, 4, 8}) {
      const std::vector<float> s = random_floats(len, 60 + static_cast<uint64_t>(row), -3.0f, 3.0f);
      const std::vector<float> dp = random_floats(len, 61 + static_cast<uint64_t>(row));
      std::vector<float> p(s.size()), ds(s.size());
      std::vector<uint16_t> p16(s.size(), 0xffff), ds16(s.size(), 0xffff);
      km::causal_softmax_row(s.data(), p.data(), row, len, scale, km::RowShare{},
                             km::SerialReduce{}, km::HalfRow{p16.data(), format});
      km::causal_softmax_backward_row(p.data(), dp.data(), ds.data(), row, len, scale,
                                      km::RowShare{}, km::SerialReduce{},
                                      km::HalfRow{ds16.data(), format});
      EXPECT_EQ(bit_mismatches(p, forward_row(s, row, scale)), "");
      EXPECT_EQ(bit_mismatches(ds, backward_row(p, dp, row, scale)), "");
      for (size_t j = 0; j < s.size(); ++j) {
        EXPECT_EQ(p16[j], km::to_half(p[j], format)) << "row " << row << " column " << j;
        EXPECT_EQ(ds16[j], km::to_half(ds[j], format)) << "row " << row << " column " << j;
      }
      // With no fp32 result asked for (what a 16-bit pass's products do not read), the same
      // copies alone, the scores and dp left as they were.
      std::vector<float> s_alone = s, dp_alone = dp;
      std::vector<uint16_t> p16_alone(s.size(), 0xffff), ds16_alone(s.size(), 0xffff);
      km::causal_softmax_row(s_alone.data(), nullptr, row, len, scale, km::RowShare{},
                             km::SerialReduce{}, km::HalfRow{p16_alone.data(), format});
      km::causal_softmax_backward_row(p.data(), dp_alone.data(), nullptr, row, len, scale,
                                      km::RowShare{}, km::SerialReduce{},
                                      km::HalfRow{ds16_alone.data(), format});
      EXPECT_EQ(p16_alone, p16) << "row " << row;
      EXPECT_EQ(ds16_alone, ds16) << "row " << row;
      EXPECT_EQ(bit_mismatches(s_alone, s), "");
      EXPECT_EQ(bit_mismatches(dp_alone, dp), "");
    }
  }
}

// What the CUDA attention's backward computes from the scores and the stats its forward kept is
// what it would from the probabilities, bit for bit: the probabilities again and their 16-bit
// copy (causal_softmax_from_stats_row), each p_j (ProbabilitiesFromScores), and dS and its copy.
TEST(KernelMathAttention, SoftmaxBackwardFromTheScoresIsTheBackwardFromTheProbabilities) {
  const int64_t len = 37;
  const float scale = 0.125f;
  for (const km::HalfFormat format : {km::HalfFormat::kBf16, km::HalfFormat::kFp16}) {
    for (const int64_t row : {0, 1, 17, 36}) {
      const auto seed = static_cast<uint64_t>(row);
      const std::vector<float> s = random_floats(len, 90 + seed, -20.0f, 20.0f);
      const std::vector<float> dp = random_floats(len, 91 + seed);
      std::vector<float> p(len), again(len, -1.0f);
      std::vector<uint16_t> p16(len), again16(len);
      const km::SoftmaxRowStats stats =
          km::causal_softmax_row(s.data(), p.data(), row, len, scale, km::RowShare{},
                                 km::SerialReduce{}, km::HalfRow{p16.data(), format});
      km::causal_softmax_from_stats_row(s.data(), again.data(), row, len, scale, stats,
                                        km::RowShare{}, km::HalfRow{again16.data(), format});
      EXPECT_EQ(bit_mismatches(again, p), "") << "row " << row;
      EXPECT_EQ(again16, p16) << "row " << row;
      const km::ProbabilitiesFromScores from_scores{s.data(), scale, stats};
      for (int64_t j = 0; j <= row; ++j) {
        EXPECT_EQ(km::float_bits(from_scores(s[static_cast<size_t>(j)])),
                  km::float_bits(p[static_cast<size_t>(j)]))
            << "row " << row << " column " << j;
      }
      std::vector<float> want(len), got(len);
      std::vector<uint16_t> want16(len), got16(len);
      km::causal_softmax_backward_row(p.data(), dp.data(), want.data(), row, len, scale,
                                      km::RowShare{}, km::SerialReduce{},
                                      km::HalfRow{want16.data(), format});
      km::causal_softmax_backward_row_of(from_scores, dp.data(), got.data(), row, len, scale,
                                         km::RowShare{}, km::SerialReduce{},
                                         km::HalfRow{got16.data(), format});
      EXPECT_EQ(bit_mismatches(got, want), "") << "row " << row;
      EXPECT_EQ(got16, want16) << "row " << row;
    }
  }
}

// After one lane's pass: its columns (lane, lane + kLanes, ...) hold `whole`'s values, every
// other column still holds `before`'s.
template <class T>
void expect_lane_wrote_its_share(const std::vector<T>& got, const std::vector<T>& whole,
                                 const std::vector<T>& before, int64_t lane, int64_t lanes) {
  for (size_t j = 0; j < got.size(); ++j) {
    const bool mine = static_cast<int64_t>(j) % lanes == lane;
    const T& want = mine ? whole[j] : before[j];
    EXPECT_EQ(std::memcmp(&got[j], &want, sizeof(T)), 0)
        << "lane " << lane << " column " << j << (mine ? " (its own)" : " (another lane's)");
  }
}

// 32 lanes each taking the columns lane, lane + 32, ... (a warp of the GPU's softmax kernels,
// each lane's passes reading kElementsAhead of its columns before writing them): each lane
// writes its columns, and only those, with the bits of one thread taking the whole row, in
// place or not, and the 16-bit copies alone; its partial maximum and sums combine to the row's.
TEST(KernelMathAttention, SoftmaxRowsSplitAmongLanesAreTheWholeRows) {
  constexpr int64_t kLanes = 32, len = 150;  // 4 or 5 columns a lane: a whole batch and a part
  const float scale = 0.3f;
  const km::HalfFormat format = km::HalfFormat::kFp16;
  for (const int64_t row : {0, 40, 149}) {
    SCOPED_TRACE("row " + std::to_string(row));
    const auto seed = static_cast<uint64_t>(row);
    const std::vector<float> s = random_floats(len, 70 + seed, -4.0f, 4.0f);
    const std::vector<float> dp = random_floats(len, 71 + seed);
    std::vector<float> p(len), ds(len);
    std::vector<uint16_t> p16(len), ds16(len);
    RecordingReduce fwd, bwd;
    km::causal_softmax_row(s.data(), p.data(), row, len, scale, km::RowShare{}, fwd,
                           km::HalfRow{p16.data(), format});
    km::causal_softmax_backward_row(p.data(), dp.data(), ds.data(), row, len, scale, km::RowShare{},
                                    bwd, km::HalfRow{ds16.data(), format});
    const std::vector<float> unwritten(len, 12345.0f);
    const std::vector<uint16_t> unwritten16(len, 0xffff);
    for (const bool in_place : {false, true}) {
      for (const bool fp32 : {true, false}) {
        if (in_place && !fp32) continue;
        std::vector<double> fwd_partials(fwd.totals.size(), 0.0), bwd_partials(bwd.totals.size());
        fwd_partials[0] = -INFINITY;
        for (int64_t lane = 0; lane < kLanes; ++lane) {
          const km::RowShare share{lane, kLanes};
          std::vector<float> lane_s = s, lane_p = unwritten;
          std::vector<uint16_t> lane_p16 = unwritten16, lane_ds16 = unwritten16;
          float* out = !fp32 ? nullptr : in_place ? lane_s.data() : lane_p.data();
          km::causal_softmax_row(lane_s.data(), out, row, len, scale, share,
                                 ReplayingReduce{fwd.totals, fwd_partials},
                                 km::HalfRow{lane_p16.data(), format});
          std::vector<float> lane_dp = dp, lane_ds = unwritten;
          float* grad = !fp32 ? nullptr : in_place ? lane_dp.data() : lane_ds.data();
          km::causal_softmax_backward_row(p.data(), lane_dp.data(), grad, row, len, scale, share,
                                          ReplayingReduce{bwd.totals, bwd_partials},
                                          km::HalfRow{lane_ds16.data(), format});
          expect_lane_wrote_its_share(lane_p16, p16, unwritten16, lane, kLanes);
          expect_lane_wrote_its_share(lane_ds16, ds16, unwritten16, lane, kLanes);
          expect_lane_wrote_its_share(in_place ? lane_s : lane_p, fp32 ? p : unwritten,
                                      in_place ? s : unwritten, lane, kLanes);
          expect_lane_wrote_its_share(in_place ? lane_dp : lane_ds, fp32 ? ds : unwritten,
                                      in_place ? dp : unwritten, lane, kLanes);
          if (!in_place) {
            EXPECT_EQ(bit_mismatches(lane_s, s), "") << "lane " << lane;
          }
        }
        EXPECT_EQ(fwd_partials[0], fwd.totals[0]) << "the maximum";
        EXPECT_NEAR(fwd_partials[1], fwd.totals[1], 1e-6 * fwd.totals[1]) << "the sum";
        EXPECT_NEAR(bwd_partials[0], bwd.totals[0], 1e-5) << "the dot product";
      }
    }
  }
}

TEST(KernelMathAttention, HeadMajorIndexFollowsTheSplitOfQKV) {
  const km::AttentionShape s{2, 3, 4, 5};  // N, S, H, hd: D = 20
  EXPECT_EQ(s.model_dim(), 20);
  EXPECT_EQ(s.head_elements(), 2 * 3 * 20);
  EXPECT_EQ(s.score_rows(), 2 * 4 * 3);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t t = 0; t < 3; ++t)
        for (int64_t c = 0; c < 5; ++c) {
          const int64_t e = ((n * 4 + h) * 3 + t) * 5 + c;
          // v (the third D columns) of an input [N, S, 60], and an output [N, S, 20].
          EXPECT_EQ(km::head_major_to_rows(s, e, 60, 40), (n * 3 + t) * 60 + 40 + h * 5 + c);
          EXPECT_EQ(km::head_major_to_rows(s, e, 20, 0), (n * 3 + t) * 20 + h * 5 + c);
        }
}

// The GPU kernels split the index with IntDivider's multiplications: the same place as plain
// division for every element of small shapes (odd sizes, one head, one position), and for
// GPT-2 small's and a wide preset's heads at their first and last elements and a stride through.
TEST(KernelMathAttention, HeadMajorIndexIsTheSameWithTheMultiplyingDivider) {
  const km::AttentionShape small[] = {{2, 3, 4, 5}, {1, 1, 1, 1}, {3, 7, 1, 13}, {2, 1, 6, 4}};
  for (const km::AttentionShape& s : small) {
    const auto d = km::head_dividers<km::IntDivider>(s);
    for (int64_t e = 0; e < s.head_elements(); ++e) {
      ASSERT_EQ(km::head_major_to_rows(s, d, e, 3 * s.model_dim(), s.model_dim()),
                km::head_major_to_rows(s, e, 3 * s.model_dim(), s.model_dim()))
          << "shape " << s.batch << "x" << s.seq << "x" << s.heads << "x" << s.head_dim << " e "
          << e;
    }
  }
  const km::AttentionShape large[] = {{8, 1024, 12, 64}, {16, 2048, 25, 64}, {3, 777, 7, 96}};
  for (const km::AttentionShape& s : large) {
    const auto d = km::head_dividers<km::IntDivider>(s);
    const int64_t count = s.head_elements();
    std::vector<int64_t> elements;
    for (int64_t e = 0; e < 4096; ++e) elements.insert(elements.end(), {e, count - 1 - e});
    for (int64_t e = 4096; e < count; e += 9973) elements.push_back(e);
    for (int64_t e : elements) {
      ASSERT_EQ(km::head_major_to_rows(s, d, e, 3 * s.model_dim(), s.model_dim()),
                km::head_major_to_rows(s, e, 3 * s.model_dim(), s.model_dim()))
          << "e " << e;
    }
  }
}

// The attention layer's input: per head, q and v rows unit vectors, k random (see the top).
std::vector<float> unit_qv_input(const km::AttentionShape& s, uint64_t seed) {
  const int64_t d = s.model_dim();
  std::vector<float> x = random_floats(s.batch * s.seq * 3 * d, seed, -3.0f, 3.0f);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t t = 0; t < s.seq; ++t)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t c = 0; c < s.head_dim; ++c) {
          const int64_t row = (n * s.seq + t) * 3 * d + h * s.head_dim + c;
          x[static_cast<size_t>(row)] = c == t ? 1.0f : 0.0f;          // q
          x[static_cast<size_t>(row + 2 * d)] = c == t ? 1.0f : 0.0f;  // v
        }
  return x;
}

// One tile of keys (hd = S <= 64): the CPU kernel's output is the online softmax's
// exponentials times 1/sum, and k's gradient the tile backward's dS, bit for bit.
TEST(KernelMathAttention, CpuKernelsSoftmaxIsTheTileMathBitForBit) {
  const km::AttentionShape s{2, 6, 2, 6};  // hd = S: every position has a unit vector
  const int64_t d = s.model_dim();
  const float scale = km::attention_scale(s.head_dim);
  CpuLayer layer(CausalSelfAttentionSpec{s.heads}, Shape{s.batch, s.seq, 3 * d});
  const std::vector<float> x = unit_qv_input(s, 50);
  const std::vector<float> dout = random_floats(s.batch * s.seq * d, 51);
  const std::vector<float> y = layer.forward(x);
  const std::vector<float> din = layer.backward(x, y, dout);
  std::vector<float> want_y(y.size()), got_dk(y.size()), want_dk(y.size());
  const auto at = [&](int64_t n, int64_t t, int64_t h, int64_t c) {
    return static_cast<size_t>((n * s.seq + t) * d + h * s.head_dim + c);
  };
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        std::vector<float> scores(static_cast<size_t>(s.seq)), dp(scores.size());
        for (int64_t j = 0; j < s.seq; ++j) {
          scores[static_cast<size_t>(j)] =
              x[static_cast<size_t>((n * s.seq + j) * 3 * d + d + h * s.head_dim + i)];
          dp[static_cast<size_t>(j)] = dout[at(n, i, h, j)];
        }
        std::vector<float> e = scores;
        e.resize(km::kTileLanes, kNan);  // padding: set to 0
        km::OnlineSoftmaxRow row;
        EXPECT_EQ(km::online_softmax_tile(e.data(), s.seq, km::kTileLanes, 0, i, scale, row), 0.0f);
        EXPECT_EQ(e[km::kTileLanes - 1], 0.0f);
        const float inverse = 1.0f / row.sum;
        for (int64_t j = 0; j < s.seq; ++j)
          want_y[at(n, i, h, j)] = e[static_cast<size_t>(j)] * inverse;
        const float delta =
            km::attention_row_delta(&dout[at(n, i, h, 0)], &want_y[at(n, i, h, 0)], s.head_dim);
        scores.resize(km::kTileLanes, kNan);
        dp.resize(km::kTileLanes, kNan);
        km::attention_tile_backward_row(scores.data(), dp.data(), s.seq, km::kTileLanes, 0, i,
                                        scale, row.log_sum_exp(), delta);
        for (int64_t j = 0; j < s.seq; ++j) {
          // dk_j[i] = dS_ij, stored at position j, column i of k's head h.
          want_dk[at(n, j, h, i)] = dp[static_cast<size_t>(j)];
          got_dk[at(n, j, h, i)] =
              din[static_cast<size_t>((n * s.seq + j) * 3 * d + d + h * s.head_dim + i)];
        }
      }
  EXPECT_EQ(bit_mismatches(y, want_y), "") << "forward: y = P";
  EXPECT_EQ(bit_mismatches(got_dk, want_dk), "") << "backward: dk = dSᵀ";
}

// A row wider than its visible keys (the diagonal tile's early queries): the lane groups past
// the last visible key are written as zeros without being computed, whatever they held, and
// the visible ones get the bits of the narrow row, forward and backward.
TEST(KernelMathAttention, LaneGroupsPastTheVisibleKeysAreZeros) {
  const int64_t width = 4 * km::kTileLanes, query = 9, cols = 20;  // 10 visible: groups 0 and 1
  const float scale = 0.7f;
  std::vector<float> s = random_floats(width, 70), dp = random_floats(width, 71);
  for (int64_t j = 2 * km::kTileLanes; j < width; ++j) s[static_cast<size_t>(j)] = kNan;
  std::vector<float> narrow(s.begin(), s.begin() + 2 * km::kTileLanes);
  std::vector<float> wide = s;
  km::OnlineSoftmaxRow narrow_row, wide_row;
  km::online_softmax_tile(narrow.data(), cols, 2 * km::kTileLanes, 0, query, scale, narrow_row);
  km::online_softmax_tile(wide.data(), cols, width, 0, query, scale, wide_row);
  EXPECT_EQ(wide_row.max, narrow_row.max);
  EXPECT_EQ(wide_row.sum, narrow_row.sum);
  for (int64_t j = 0; j < width; ++j) {
    const float want = j < 2 * km::kTileLanes ? narrow[static_cast<size_t>(j)] : 0.0f;
    EXPECT_EQ(km::float_bits(wide[static_cast<size_t>(j)]), km::float_bits(want)) << j;
  }
  std::vector<float> narrow_s(s.begin(), s.begin() + 2 * km::kTileLanes), wide_s = s;
  std::vector<float> narrow_dp(dp.begin(), dp.begin() + 2 * km::kTileLanes), wide_dp = dp;
  const float lse = narrow_row.log_sum_exp(), delta = 0.3f;
  km::attention_tile_backward_row(narrow_s.data(), narrow_dp.data(), cols, 2 * km::kTileLanes, 0,
                                  query, scale, lse, delta);
  km::attention_tile_backward_row(wide_s.data(), wide_dp.data(), cols, width, 0, query, scale, lse,
                                  delta);
  for (int64_t j = 0; j < width; ++j) {
    const bool live = j < 2 * km::kTileLanes;
    const auto i = static_cast<size_t>(j);
    EXPECT_EQ(km::float_bits(wide_s[i]), km::float_bits(live ? narrow_s[i] : 0.0f)) << j;
    EXPECT_EQ(km::float_bits(wide_dp[i]), km::float_bits(live ? narrow_dp[i] : 0.0f)) << j;
  }
}

// vector_exp against float64 exp: within 2 ulp over the softmax's arguments (x <= 0) and GELU's
// (up to 88); exp(0) = 1 exactly; 0 below float's normal range, +inf above 88, NaN for NaN.
TEST(KernelMathAttention, VectorExpIsExpWithinTwoUlp) {
  EXPECT_EQ(km::vector_exp(0.0f), 1.0f);
  EXPECT_EQ(km::vector_exp(-88.0f), 0.0f);
  EXPECT_EQ(km::vector_exp(-INFINITY), 0.0f);
  EXPECT_EQ(km::vector_exp(88.5f), INFINITY);
  EXPECT_EQ(km::vector_exp(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(km::vector_exp(kNan)));
  int checked = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f, ++checked) {
    const double want = std::exp(static_cast<double>(x));
    const double ulp =
        std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want);
    EXPECT_LE(std::abs(km::vector_exp(x) - want), 2.0 * ulp) << "x = " << x;
  }
  EXPECT_GT(checked, 12000);
}

// A row taken in tiles, its maximum growing from tile to tile and a tile straddling the
// diagonal: the accumulated exponentials rescaled by what each tile returns are the whole
// row's softmax (float64), the log-sum-exp is the row's, and the tile backward with it
// gives the whole-row backward's gradient.
TEST(KernelMathAttention, OnlineSoftmaxOverTilesIsTheRowsSoftmax) {
  const int64_t len = 21, query = 17, tile = km::kTileLanes;  // tiles of 8, 8 and 5 keys
  const float scale = 0.8f;
  // Rising scores: the second tile raises the maximum; the third's two visible scores do not.
  std::vector<float> s = random_floats(len, 60, -0.2f, 0.2f);
  for (int64_t j = 0; j < len; ++j) s[static_cast<size_t>(j)] += 0.5f * static_cast<float>(j);
  s[16] = s[15] - 1.0f;
  s[17] = s[15] - 2.0f;
  s[20] = kNan;  // masked: never used
  const std::vector<double> want = softmax64({s.begin(), s.end()}, query, scale);
  std::vector<float> acc(static_cast<size_t>(len), 0.0f);
  km::OnlineSoftmaxRow row;
  for (int64_t k0 = 0; k0 < len; k0 += tile) {
    const int64_t cols = std::min(tile, len - k0);
    std::vector<float> e(s.begin() + k0, s.begin() + k0 + cols);
    e.resize(tile, kNan);  // the last tile's padding
    const float rescale = km::online_softmax_tile(e.data(), cols, tile, k0, query, scale, row);
    if (k0 == 0) {
      EXPECT_EQ(rescale, 0.0f) << "nothing accumulated before the first tile";
    } else if (k0 == tile) {
      EXPECT_TRUE(rescale > 0.0f && rescale < 1.0f) << rescale;
    } else {
      EXPECT_EQ(rescale, 1.0f) << "the maximum stays";
    }
    for (float& a : acc) a *= rescale;
    for (int64_t j = 0; j < cols; ++j) acc[static_cast<size_t>(k0 + j)] = e[static_cast<size_t>(j)];
  }
  double lse = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j <= query; ++j)
    lse = std::max(lse, scale * static_cast<double>(s[static_cast<size_t>(j)]));
  for (int64_t j = 0; j <= query; ++j)
    sum += std::exp(scale * static_cast<double>(s[static_cast<size_t>(j)]) - lse);
  EXPECT_NEAR(row.log_sum_exp(), lse + std::log(sum), 1e-5);
  for (int64_t j = 0; j < len; ++j) {
    const auto i = static_cast<size_t>(j);
    EXPECT_NEAR(acc[i] / row.sum, want[i], 1e-6) << "column " << j;
  }
  // Backward, tile by tile, against the whole row's.
  const std::vector<float> dp = random_floats(len, 61);
  std::vector<float> p(static_cast<size_t>(len));
  for (size_t j = 0; j < p.size(); ++j) p[j] = static_cast<float>(want[j]);
  const std::vector<float> ds_row = backward_row(p, dp, query, scale);
  float delta = 0.0f;
  for (size_t j = 0; j < p.size(); ++j) delta += p[j] * (j <= query ? dp[j] : 0.0f);
  for (int64_t k0 = 0; k0 < len; k0 += tile) {
    const int64_t cols = std::min(tile, len - k0);
    std::vector<float> tile_s(s.begin() + k0, s.begin() + k0 + cols);
    std::vector<float> tile_dp(dp.begin() + k0, dp.begin() + k0 + cols);
    tile_s.resize(tile, kNan);
    tile_dp.resize(tile, kNan);
    km::attention_tile_backward_row(tile_s.data(), tile_dp.data(), cols, tile, k0, query, scale,
                                    row.log_sum_exp(), delta);
    for (int64_t j = cols; j < tile; ++j) {
      EXPECT_EQ(tile_s[static_cast<size_t>(j)], 0.0f);
      EXPECT_EQ(tile_dp[static_cast<size_t>(j)], 0.0f);
    }
    for (int64_t j = 0; j < cols; ++j) {
      const auto i = static_cast<size_t>(k0 + j);
      EXPECT_NEAR(tile_s[static_cast<size_t>(j)], want[i], 1e-6) << "p, column " << k0 + j;
      EXPECT_NEAR(tile_dp[static_cast<size_t>(j)], ds_row[i], 1e-6) << "ds, column " << k0 + j;
    }
  }
}

}  // namespace
}  // namespace scalescope::kernel_math_test
