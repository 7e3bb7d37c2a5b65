// models/kernel_math/flash_attention_math.h and the fused forward of models/cuda/
// flash_attention.cu, replayed on the host: every block and warp of the kernel, its shared
// memory a byte array laid out by FlashLayout (filled with NaN first, so that a value read before
// it is written, a tile that overlaps another or a leading dimension off by one shows up), each
// tensor-core operation done as the WMMA API defines it (load_matrix_sync's row- and
// column-major layouts over the same pointers and leading dimensions, mma_sync, store), each
// lane's part of a tile with the kernel's calls in the kernel's order, the pair of lanes' shuffle
// as the exchange it is. The outputs and stats are checked against attention computed in
// double from the same 16-bit q, k and v.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "models/cuda/attention_chunks.h"
#include "models/kernel_math/flash_attention_math.h"
#include "tests/models/kernel_math/flash_replay.h"

namespace scalescope::kernel_math_test {
namespace {

namespace km = kernel_math;
using namespace flash_replay;

// The replayed kernel against attention in double from the same 16-bit values: each output
// within what rounding the probabilities to 16 bits allows (a relative 2^-8 or 2^-11 of each
// p·v term), the stats' max and sum to float rounding of the scores.
template <int HD>
void expect_matches_double(int64_t batch, int64_t heads, int64_t seq, km::HalfFormat format) {
  const km::AttentionShape s{batch, seq, heads, HD};
  const Heads h = random_heads(s, format, static_cast<uint32_t>(seq * 31 + HD));
  std::vector<float> out;
  std::vector<km::SoftmaxRowStats> stats;
  run_forward<HD>(s, h, format, out, stats);
  const double scale = km::attention_scale(HD);
  const double u = km::unit_roundoff(format);
  const auto value = [&](const std::vector<uint16_t>& part, int64_t head, int64_t pos, int c) {
    return static_cast<double>(
        km::from_half(part[static_cast<size_t>((head * seq + pos) * HD + c)], format));
  };
  for (int64_t head = 0; head < batch * heads; ++head) {
    for (int64_t i = 0; i < seq; ++i) {
      std::vector<double> p(static_cast<size_t>(i + 1));
      double max = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int c = 0; c < HD; ++c) dot += value(h.q, head, i, c) * value(h.k, head, j, c);
        p[static_cast<size_t>(j)] = dot * scale;
        max = std::max(max, dot * scale);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - max));
      const km::SoftmaxRowStats got = stats[static_cast<size_t>(head * seq + i)];
      ASSERT_NEAR(got.max, max, 1e-5 * (1 + std::fabs(max))) << "head " << head << " row " << i;
      ASSERT_NEAR(got.sum, sum, 1e-4 * sum) << "head " << head << " row " << i;
      for (int c = 0; c < HD; ++c) {
        double want = 0, bound = 0;
        for (int64_t j = 0; j <= i; ++j) {
          want += p[static_cast<size_t>(j)] * value(h.v, head, j, c) / sum;
          bound += p[static_cast<size_t>(j)] * std::fabs(value(h.v, head, j, c)) / sum;
        }
        const float o = out[static_cast<size_t>((head * seq + i) * HD + c)];
        ASSERT_NEAR(o, want, 2 * u * bound + 1e-5)
            << "head " << head << " row " << i << " col " << c;
      }
    }
  }
}

TEST(FlashAttention, ReplayedKernelIsAttentionInBf16) {
  expect_matches_double<64>(2, 3, 130, km::HalfFormat::kBf16);  // a part-filled last tile
  expect_matches_double<32>(1, 2, 64, km::HalfFormat::kBf16);   // exactly one tile
}

TEST(FlashAttention, ReplayedKernelIsAttentionInFp16) {
  expect_matches_double<16>(2, 2, 40, km::HalfFormat::kFp16);    // one part-filled tile
  expect_matches_double<128>(1, 1, 200, km::HalfFormat::kFp16);  // four tiles, the last of 8
}

// Attention's backward in double for one head from the same 16-bit q, k, v and dO, and for each
// gradient element a bound on what the kernels' roundings may move it: p and ds rounded to 16
// bits for the products (a relative unit roundoff of each term), and ds's inputs, the recomputed
// output in delta among them, to within a unit roundoff of their magnitudes.
struct DoubleBackward {
  std::vector<double> dq, dk, dv, dq_bound, dk_bound, dv_bound;
};

template <int HD>
DoubleBackward backward_in_double(const km::AttentionShape& s, const Heads& h,
                                  const std::vector<uint16_t>& dout, int64_t head,
                                  km::HalfFormat format) {
  const int64_t n = s.seq;
  const auto x = [&](const std::vector<uint16_t>& part, int64_t pos, int c) {
    return static_cast<double>(
        km::from_half(part[static_cast<size_t>((head * n + pos) * HD + c)], format));
  };
  const double scale = km::attention_scale(HD);
  std::vector<double> p(static_cast<size_t>(n * n), 0.0), ds(p), ds_size(p);
  const auto at = [&](int64_t i, int64_t j) { return static_cast<size_t>(i * n + j); };
  for (int64_t i = 0; i < n; ++i) {
    double max = -INFINITY, sum = 0, delta = 0, delta_size = 0;
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (int c = 0; c < HD; ++c) dot += x(h.q, i, c) * x(h.k, j, c);
      p[at(i, j)] = dot * scale;
      max = std::max(max, dot * scale);
    }
    for (int64_t j = 0; j <= i; ++j) sum += (p[at(i, j)] = std::exp(p[at(i, j)] - max));
    std::vector<double> dp(static_cast<size_t>(i + 1));
    for (int64_t j = 0; j <= i; ++j) {
      p[at(i, j)] /= sum;
      for (int c = 0; c < HD; ++c) dp[static_cast<size_t>(j)] += x(dout, i, c) * x(h.v, j, c);
      delta += p[at(i, j)] * dp[static_cast<size_t>(j)];
      for (int c = 0; c < HD; ++c)
        delta_size += p[at(i, j)] * std::fabs(x(dout, i, c) * x(h.v, j, c));
    }
    for (int64_t j = 0; j <= i; ++j) {
      const double d = dp[static_cast<size_t>(j)];
      ds[at(i, j)] = p[at(i, j)] * (d - delta) * scale;
      ds_size[at(i, j)] = p[at(i, j)] * (std::fabs(d) + std::fabs(delta) + delta_size) * scale;
    }
  }
  DoubleBackward r;
  for (auto* v : {&r.dq, &r.dk, &r.dv, &r.dq_bound, &r.dk_bound, &r.dv_bound}) {
    v->assign(static_cast<size_t>(n * HD), 0.0);
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      for (int c = 0; c < HD; ++c) {
        const auto ic = static_cast<size_t>(i * HD + c), jc = static_cast<size_t>(j * HD + c);
        r.dv[jc] += p[at(i, j)] * x(dout, i, c);
        r.dv_bound[jc] += p[at(i, j)] * std::fabs(x(dout, i, c));
        r.dk[jc] += ds[at(i, j)] * x(h.q, i, c);
        r.dk_bound[jc] += ds_size[at(i, j)] * std::fabs(x(h.q, i, c));
        r.dq[ic] += ds[at(i, j)] * x(h.k, j, c);
        r.dq_bound[ic] += ds_size[at(i, j)] * std::fabs(x(h.k, j, c));
      }
    }
  }
  return r;
}

// The replayed backward kernels, from the replayed forward's output and stats, against the
// backward in double: every gradient element within 3 unit roundoffs of its bound.
template <int HD>
void expect_gradients_match_double(int64_t batch, int64_t heads, int64_t seq,
                                   km::HalfFormat format) {
  const km::AttentionShape s{batch, seq, heads, HD};
  const Heads h = random_heads(s, format, static_cast<uint32_t>(seq * 7 + HD));
  const std::vector<uint16_t> dout = random_heads(s, format, static_cast<uint32_t>(seq + 3)).v;
  std::vector<float> out, dq, dk, dv;
  std::vector<km::SoftmaxRowStats> stats;
  run_forward<HD>(s, h, format, out, stats);
  run_backward<HD>(s, h, dout, out, stats, format, dq, dk, dv);
  const double u = km::unit_roundoff(format);
  for (int64_t head = 0; head < batch * heads; ++head) {
    const DoubleBackward want = backward_in_double<HD>(s, h, dout, head, format);
    for (int64_t e = 0; e < seq * HD; ++e) {
      const auto i = static_cast<size_t>(e);
      const auto g = static_cast<size_t>(head * seq * HD + e);
      SCOPED_TRACE("head " + std::to_string(head) + " row " + std::to_string(e / HD) + " col " +
                   std::to_string(e % HD));
      ASSERT_NEAR(dv[g], want.dv[i], 3 * u * want.dv_bound[i] + 1e-6);
      ASSERT_NEAR(dk[g], want.dk[i], 3 * u * want.dk_bound[i] + 1e-6);
      ASSERT_NEAR(dq[g], want.dq[i], 3 * u * want.dq_bound[i] + 1e-6);
    }
  }
}

TEST(FlashAttention, ReplayedBackwardIsAttentionsGradientInBf16) {
  expect_gradients_match_double<64>(1, 2, 130, km::HalfFormat::kBf16);
  expect_gradients_match_double<32>(2, 2, 64, km::HalfFormat::kBf16);
}

TEST(FlashAttention, ReplayedBackwardIsAttentionsGradientInFp16) {
  expect_gradients_match_double<16>(1, 2, 40, km::HalfFormat::kFp16);
  expect_gradients_match_double<128>(1, 1, 150, km::HalfFormat::kFp16);
}

// Which key tiles a query tile reads: up to its last query's, none past the sequence.
TEST(FlashAttention, QueryTilesReadTheKeysUpToTheirLastQuery) {
  EXPECT_EQ(km::flash_query_tiles(130), 3);
  EXPECT_EQ(km::flash_key_tiles(0, 130), 1);
  EXPECT_EQ(km::flash_key_tiles(2, 130), 3);
  EXPECT_EQ(km::flash_key_tiles(0, 40), 1);
  EXPECT_EQ(km::flash_key_tiles(1, 128), 2);
  // A query sees its keys up to itself, nothing past the sequence; the padding rows nothing.
  EXPECT_EQ(km::flash_visible(70, 64, 130), 7);
  EXPECT_EQ(km::flash_visible(129, 128, 130), 2);
  EXPECT_EQ(km::flash_visible(10, 0, 130), 11);
  EXPECT_EQ(km::flash_visible(100, 0, 130), 64);
  EXPECT_EQ(km::flash_visible(130, 128, 130), 0);
}

// The tiles of shared memory do not overlap, and each holds what it is said to.
TEST(FlashAttention, SharedMemoryTilesFollowOneAnother) {
  using L = km::FlashLayout<64>;
  EXPECT_EQ(L::kK - L::kQ, 64 * 72 * 2);
  EXPECT_EQ(L::kScores - L::kV, 64 * 72 * 2);
  EXPECT_EQ(L::kProbs - L::kScores, 4 * 16 * 68 * 4);
  EXPECT_EQ(L::kOut - L::kProbs, 4 * 16 * 72 * 2);
  EXPECT_EQ(L::kBytes - L::kOut, 4 * 16 * 68 * 4);
  EXPECT_EQ(L::kBytes, 71680);
  EXPECT_LE(km::FlashLayout<128>::kBytes, 227 * 1024);  // an H100's or H200's opt-in
  using B = km::FlashBackwardLayout<64>;
  EXPECT_EQ(B::kWarpTiles, 4 * 64 * 72 * 2);
  EXPECT_EQ(B::kWarpBytes, 2 * 16 * 68 * 4 + 2 * 16 * 72 * 2);
  EXPECT_EQ(B::kColumnStats, B::kWarpTiles + 4 * B::kWarpBytes);
  EXPECT_EQ(B::kBytes, 90880);
  EXPECT_EQ(km::FlashBackwardLayout<128>::kBytes, 123648);  // more than sm_86's 99 KiB
}

// When the CUDA kernel runs the fused forward, and when it keeps to the chunks.
TEST(FlashAttention, RunsWhereAskedAndTheShapeAndDeviceAllowIt) {
  namespace ac = attention_chunks;
  const km::AttentionShape gpt2{8, 1024, 12, 64};
  const int64_t bytes = km::FlashLayout<64>::kBytes;
  const int64_t h200 = 227 * 1024;
  EXPECT_TRUE(ac::flash_runs(ac::Kind::kFlash, true, gpt2, bytes, h200));
  EXPECT_FALSE(ac::flash_runs(ac::Kind::kChunks, true, gpt2, bytes, h200));
  EXPECT_FALSE(ac::flash_runs(ac::Kind::kFlash, false, gpt2, bytes, h200));
  EXPECT_FALSE(ac::flash_runs(ac::Kind::kFlash, true, {8, 1024, 12, 48}, bytes, h200));
  EXPECT_FALSE(ac::flash_runs(ac::Kind::kFlash, true, {65536, 8, 1, 64}, bytes, h200));
  EXPECT_FALSE(ac::flash_runs(ac::Kind::kFlash, true, gpt2, bytes, 48 * 1024));
}

}  // namespace
}  // namespace scalescope::kernel_math_test
