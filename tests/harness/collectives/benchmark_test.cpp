// The all-reduce benchmark behind `scalescope collectives`: its measurements, its data check
// (which must catch a corrupted result), its metrics, and its parsing of sizes.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/collectives/benchmark.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

constexpr std::chrono::milliseconds kTimeout{10000};

AllReduceBenchOptions small_options(ReduceOp op) {
  AllReduceBenchOptions o;
  // 3 floats is fewer than the ranks of the 3-rank group's ring has chunks to spare; the
  // others are ordinary and one is not a power of two.
  o.sizes = {4, 12, 1024, 40000, 262144};
  o.warmup_iters = 1;
  o.iters = 3;
  o.op = op;
  return o;
}

// A communicator that passes everything through, then adds 1 to one element of `victim`'s
// all-reduce result: the kind of silent corruption the data check exists for.
class CorruptingCommunicator final : public Communicator {
 public:
  CorruptingCommunicator(std::unique_ptr<Communicator> inner, int victim)
      : inner_(std::move(inner)), victim_(victim) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  void all_reduce(float* data, int64_t count, ReduceOp op, Stream& stream) override {
    inner_->all_reduce(data, count, op, stream);
    if (rank() == victim_ && count > 0) data[count / 2] += 1.0f;  // CPU memory
  }
  void broadcast(float* data, int64_t count, int root, Stream& stream) override {
    inner_->broadcast(data, count, root, stream);
  }
  void barrier() override { inner_->barrier(); }
  std::vector<double> all_gather(std::span<const double> mine) override {
    return inner_->all_gather(mine);
  }

 private:
  std::unique_ptr<Communicator> inner_;
  int victim_;
};

class AllReduceBenchTest : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceBenchTest, MeasuresEverySizeWithCorrectData) {
  const int ranks = GetParam();
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    const AllReduceBenchOptions options = small_options(op);
    std::vector<int64_t> reported;
    const AllReduceBenchResult r = benchmark_all_reduce_gloo(
        ranks, options, kTimeout, {},
        [&](const AllReduceSizeResult& s) { reported.push_back(s.bytes); });
    EXPECT_EQ(reported, options.sizes) << "on_size is called once per size, in order";
    EXPECT_EQ(r.backend, "gloo");
    EXPECT_EQ(r.ranks, ranks);
    EXPECT_EQ(r.wrong(), 0);
    ASSERT_EQ(r.sizes.size(), options.sizes.size());
    for (size_t i = 0; i < r.sizes.size(); ++i) {
      const AllReduceSizeResult& s = r.sizes[i];
      SCOPED_TRACE(::testing::Message() << "size " << s.bytes << ", op " << to_string(op));
      EXPECT_EQ(s.bytes, options.sizes[i]);
      EXPECT_EQ(s.count, s.bytes / 4);
      EXPECT_EQ(s.wrong, 0);
      EXPECT_EQ(s.rank_wrong, std::vector<int64_t>(static_cast<size_t>(ranks), 0));
      ASSERT_EQ(s.rank_time_us.size(), static_cast<size_t>(ranks));
      for (const double t : s.rank_time_us) EXPECT_GT(t, 0.0);
      // The policy: the slowest rank's time is the collective's.
      EXPECT_EQ(s.time_us, *std::max_element(s.rank_time_us.begin(), s.rank_time_us.end()));
      EXPECT_GT(s.time_us, 0.0);
      EXPECT_DOUBLE_EQ(s.algbw_gbps, static_cast<double>(s.bytes) / (s.time_us * 1e3));
      // nccl-tests: busbw = algbw * 2(N-1)/N.
      EXPECT_DOUBLE_EQ(s.busbw_gbps, s.algbw_gbps * 2.0 * (ranks - 1) / ranks);
    }
  }
}

TEST_P(AllReduceBenchTest, CorruptedResultIsDetectedOnTheRankThatHoldsIt) {
  const int ranks = GetParam();
  const int victim = ranks - 1;
  const AllReduceBenchOptions options = small_options(ReduceOp::kSum);
  const AllReduceBenchResult r =
      benchmark_all_reduce_gloo(ranks, options, kTimeout, [&](std::unique_ptr<Communicator> c) {
        return std::make_unique<CorruptingCommunicator>(std::move(c), victim);
      });
  // One wrong element per size (the checked all-reduce), on the victim only, seen by the
  // result every rank returns.
  EXPECT_EQ(r.wrong(), static_cast<int64_t>(options.sizes.size()));
  for (const AllReduceSizeResult& s : r.sizes) {
    EXPECT_EQ(s.wrong, 1) << "size " << s.bytes;
    for (int rank = 0; rank < ranks; ++rank) {
      EXPECT_EQ(s.rank_wrong[static_cast<size_t>(rank)], rank == victim ? 1 : 0)
          << "size " << s.bytes << ", rank " << rank;
    }
  }
  EXPECT_NE(to_json(r)["wrong"].get<int64_t>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Gloo, AllReduceBenchTest, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "cpu" + std::to_string(info.param);
                         });

TEST(AllReduceBench, OneRankMovesNothingAndHasNoFit) {
  const AllReduceBenchResult r =
      benchmark_all_reduce_gloo(1, small_options(ReduceOp::kAverage), kTimeout);
  EXPECT_EQ(r.wrong(), 0);
  for (const AllReduceSizeResult& s : r.sizes) EXPECT_EQ(s.busbw_gbps, 0.0);
  EXPECT_FALSE(fit_all_reduce(r).has_value());
  EXPECT_TRUE(to_json(r)["alpha_beta"].is_null());
}

TEST(AllReduceBench, CheckPatternSumsAndAveragesExactly) {
  for (int ranks = 1; ranks <= 9; ++ranks) {
    for (int64_t i = 0; i < 5000; ++i) {
      double sum = 0;
      for (int r = 0; r < ranks; ++r) sum += check_input(r, i);
      ASSERT_EQ(check_expected(ranks, i, ReduceOp::kSum), static_cast<float>(sum));
      ASSERT_EQ(check_expected(ranks, i, ReduceOp::kAverage), static_cast<float>(sum / ranks));
    }
  }
  // Index-dependent beyond any short period: a chunk put at the wrong offset changes values.
  int differ = 0;
  for (int64_t i = 0; i < 1024; ++i) differ += check_input(0, i) != check_input(0, i + 256);
  EXPECT_GT(differ, 512);
  EXPECT_NE(check_input(0, 7), check_input(1, 7));
}

// NCCL's float average pre-multiplies every rank's value by float(1/n) and sums in ring order
// (from any rank); Gloo and the simulated devices divide the sum. The check accepts both for
// every group size up to 8 (where 1/3, 1/5, 1/6, 1/7 are inexact), and refuses a rank's
// contribution missing or doubled.
TEST(AllReduceBench, TheAverageCheckAcceptsNcclsArithmeticAndRefusesWrongSums) {
  for (int ranks = 2; ranks <= 8; ++ranks) {
    const float scale = static_cast<float>(1.0 / ranks);
    for (int64_t i = 0; i < 4096; ++i) {
      for (int first = 0; first < ranks; ++first) {
        float premul_sum = 0.0f;
        for (int k = 0; k < ranks; ++k) premul_sum += check_input((first + k) % ranks, i) * scale;
        ASSERT_TRUE(check_matches(premul_sum, ranks, i, ReduceOp::kAverage))
            << ranks << " ranks, index " << i << ", ring from " << first;
      }
      float sum = 0.0f;
      for (int r = 0; r < ranks; ++r) sum += check_input(r, i);
      ASSERT_TRUE(check_matches(sum / static_cast<float>(ranks), ranks, i, ReduceOp::kAverage));
      ASSERT_TRUE(check_matches(sum, ranks, i, ReduceOp::kSum));
      const float one_rank = check_input(ranks - 1, i) / static_cast<float>(ranks);
      const float expected = check_expected(ranks, i, ReduceOp::kAverage);
      ASSERT_FALSE(check_matches(expected - one_rank, ranks, i, ReduceOp::kAverage));
      ASSERT_FALSE(check_matches(expected + one_rank, ranks, i, ReduceOp::kAverage));
      ASSERT_FALSE(check_matches(std::nextafter(sum, 0.0f), ranks, i, ReduceOp::kSum));
    }
  }
}

TEST(AllReduceBench, FitAndJsonFromConstructedResult) {
  AllReduceBenchResult r;
  r.backend = "gloo";
  r.ranks = 4;
  // ms = 0.01 + 1e-6 * bytes * 2(N-1)/N exactly: alpha 10 us, bus bandwidth 1 GB/s.
  for (const int64_t bytes : {int64_t{1024}, int64_t{65536}, int64_t{1} << 20}) {
    AllReduceSizeResult s;
    s.bytes = bytes;
    s.count = bytes / 4;
    s.time_us = (0.01 + 1e-6 * static_cast<double>(bytes) * 1.5) * 1e3;
    s.busbw_gbps = 1.0;
    r.sizes.push_back(s);
  }
  const std::optional<AlphaBetaFit> fit = fit_all_reduce(r);
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->alpha_ms, 0.01, 1e-9);
  EXPECT_NEAR(fit->bus_bandwidth_gbps, 1.0, 1e-6);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["sizes"].size(), 3u);
  EXPECT_EQ(j["rank_policy"], "max");
  EXPECT_EQ(j["op"], "sum");
  EXPECT_DOUBLE_EQ(j["average_busbw_gbps"].get<double>(), 1.0);
  EXPECT_NEAR(j["alpha_beta"]["bus_bandwidth_gbps"].get<double>(), 1.0, 1e-6);
}

TEST(AllReduceBench, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("8", "--min-bytes"), 8);
  EXPECT_EQ(parse_byte_size("64K", "--max-bytes"), 65536);
  EXPECT_EQ(parse_byte_size("64k", "--max-bytes"), 65536);
  EXPECT_EQ(parse_byte_size("4KiB", "--max-bytes"), 4096);
  EXPECT_EQ(parse_byte_size("64M", "--max-bytes"), int64_t{64} << 20);
  EXPECT_EQ(parse_byte_size("2MB", "--max-bytes"), int64_t{2} << 20);
  EXPECT_EQ(parse_byte_size("1G", "--max-bytes"), int64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("16B", "--max-bytes"), 16);
  for (const char* bad :
       {"", "abc", "-8", "0", "12X", "8.5K", "K", "99999999999999999999", "9000000000000G"}) {
    const std::string message = error_of([&] { parse_byte_size(bad, "--max-bytes"); });
    EXPECT_CONTAINS(message, "--max-bytes");
    EXPECT_CONTAINS(message, std::string("'") + bad + "'");
  }
}

TEST(AllReduceBench, MessageSizesFollowTheFactor) {
  std::vector<int64_t> expected;
  for (int64_t b = 8; b <= 65536; b *= 2) expected.push_back(b);
  EXPECT_EQ(message_sizes(8, 65536, 2), expected);
  EXPECT_EQ(message_sizes(8, 100, 2), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(message_sizes(4, 4, 2), (std::vector<int64_t>{4}));
  EXPECT_EQ(message_sizes(4, 1024, 4), (std::vector<int64_t>{4, 16, 64, 256, 1024}));
  EXPECT_EQ(message_sizes(8, int64_t{8} << 30, 2).back(), int64_t{8} << 30);

  EXPECT_CONTAINS(error_of([] { message_sizes(6, 64, 2); }), "--min-bytes 6");
  EXPECT_CONTAINS(error_of([] { message_sizes(0, 64, 2); }), "--min-bytes 0");
  EXPECT_CONTAINS(error_of([] { message_sizes(64, 8, 2); }), "--max-bytes 8");
  EXPECT_CONTAINS(error_of([] { message_sizes(8, 64, 1); }), "--factor 1");
  EXPECT_CONTAINS(error_of([] { message_sizes(8, int64_t{16} << 30, 2); }),
                  "--max-bytes 17179869184");
  EXPECT_EQ(parse_reduce_op("avg"), ReduceOp::kAverage);
  EXPECT_CONTAINS(error_of([] { parse_reduce_op("max"); }), "'max'");
}

TEST(AllReduceBench, BadOptionsFailBeforeAnyRankStarts) {
  AllReduceBenchOptions o = small_options(ReduceOp::kSum);
  o.iters = 0;
  EXPECT_CONTAINS(error_of([&] { benchmark_all_reduce_gloo(2, o, kTimeout); }), "--iters 0");
  o = small_options(ReduceOp::kSum);
  o.warmup_iters = -1;
  EXPECT_CONTAINS(error_of([&] { benchmark_all_reduce_gloo(2, o, kTimeout); }),
                  "--warmup-iters -1");
  o = small_options(ReduceOp::kSum);
  o.sizes = {8, 6};
  EXPECT_CONTAINS(error_of([&] { benchmark_all_reduce_gloo(2, o, kTimeout); }),
                  "message size 6 bytes");
  o.sizes.clear();
  EXPECT_CONTAINS(error_of([&] { benchmark_all_reduce_gloo(2, o, kTimeout); }), "no message sizes");
  EXPECT_CONTAINS(
      error_of([&] { benchmark_all_reduce_gloo(0, small_options(ReduceOp::kSum), kTimeout); }),
      "0 ranks");
}

}  // namespace
}  // namespace scalescope
