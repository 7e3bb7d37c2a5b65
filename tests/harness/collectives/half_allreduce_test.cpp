// Compressed (16-bit) all-reduce on Gloo (CPU replicas) and on the simulated devices'
// collectives: every rank ends with the same bits, and the mean of gradients pre-divided and
// summed in fp16 or bf16 is within the format's stated error of the float64 mean.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/sim/sim_device.h"
#include "harness/collectives/collective_backends.h"
#include "harness/collectives/communicator.h"
#include "models/kernel_math/half_math.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using kernel_math::HalfFormat;
constexpr std::chrono::milliseconds kTimeout{10000};

struct Case {
  DeviceKind kind;
  HalfFormat format;
  int size;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(c.kind == DeviceKind::kSim ? "sim" : "gloo") +
         (c.format == HalfFormat::kFp16 ? "_fp16_" : "_bf16_") + std::to_string(c.size);
}

// Runs `body` on a thread per rank with the rank's communicator (Gloo, or the sim devices'
// collectives over Gloo for host values) and its device's communication stream.
void run_ranks(const Case& c, const std::function<void(int, Communicator&, Stream&)>& body) {
  GlooGroup gloo(c.size, kTimeout);
  std::unique_ptr<DeviceCollectiveGroup> sim;
  if (c.kind == DeviceKind::kSim) sim = collective_backend(c.kind).create_group(c.size, kTimeout);
  std::vector<std::string> errors(static_cast<size_t>(c.size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < c.size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        std::unique_ptr<Device> device;
        if (sim != nullptr) {
          device = std::make_unique<SimDevice>(rank, 1, 0, 1);
        } else {
          device = std::make_unique<CpuDevice>(rank, 1);
        }
        std::unique_ptr<Communicator> comm = gloo.connect(rank);
        if (sim != nullptr) comm = sim->connect(rank, rank, rank, c.size, std::move(comm));
        body(rank, *comm, device->comm_stream());
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < c.size; ++rank) {
    EXPECT_EQ(errors[static_cast<size_t>(rank)], "") << "rank " << rank;
  }
}

std::vector<float> gradients(int rank, int64_t count) {
  std::mt19937 rng(static_cast<unsigned>(100 + rank));
  std::normal_distribution<float> g(0.0f, 1e-3f);
  std::vector<float> out(static_cast<size_t>(count));
  for (float& v : out) v = g(rng);
  return out;
}

class HalfAllReduce : public testing::TestWithParam<Case> {};

TEST_P(HalfAllReduce, EveryRankGetsTheMeanWithinTheFormatsError) {
  const Case c = GetParam();
  const int64_t count = 1001;  // not a multiple of the ranks: uneven chunks
  std::vector<std::vector<uint16_t>> results(static_cast<size_t>(c.size));
  run_ranks(c, [&](int rank, Communicator& comm, Stream& stream) {
    const std::vector<float> g = gradients(rank, count);
    std::vector<uint16_t> buffer(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      buffer[static_cast<size_t>(i)] =
          kernel_math::compress_gradient(g[static_cast<size_t>(i)], c.size, c.format);
    }
    comm.all_reduce_half(buffer.data(), count, c.format, stream);
    comm.synchronize(stream, "the compressed all-reduce");
    results[static_cast<size_t>(rank)] = std::move(buffer);
  });
  for (int rank = 1; rank < c.size; ++rank) {
    ASSERT_EQ(results[static_cast<size_t>(rank)], results[0]) << "rank " << rank;
  }
  // kernel_math's bound (tests/models/kernel_math/half_math_test.cpp): γ(n+1) Σ|g|/n, plus
  // half of fp16's subnormal spacing per rounding.
  const double u = kernel_math::unit_roundoff(c.format);
  const int n = c.size;
  const double subnormal = c.format == HalfFormat::kFp16 ? std::ldexp(1.0, -25) : 0.0;
  std::vector<std::vector<float>> all;
  for (int rank = 0; rank < n; ++rank) all.push_back(gradients(rank, count));
  for (int64_t i = 0; i < count; ++i) {
    double mean = 0.0;
    double magnitude = 0.0;
    for (int rank = 0; rank < n; ++rank) {
      const double g = all[static_cast<size_t>(rank)][static_cast<size_t>(i)];
      mean += g / n;
      magnitude += std::abs(g) / n;
    }
    const double bound = (n + 1) * u / (1 - (n + 1) * u) * magnitude + (n + 1) * subnormal;
    const double got = kernel_math::from_half(results[0][static_cast<size_t>(i)], c.format);
    ASSERT_LE(std::abs(got - mean), bound) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, HalfAllReduce,
                         testing::Values(Case{DeviceKind::kCpu, HalfFormat::kFp16, 2},
                                         Case{DeviceKind::kCpu, HalfFormat::kBf16, 3},
                                         Case{DeviceKind::kSim, HalfFormat::kFp16, 3},
                                         Case{DeviceKind::kSim, HalfFormat::kBf16, 2}),
                         case_name);

TEST(HalfAllReduce, ACommunicatorWithoutItSaysSo) {
  // The default of the interface, which a backend without 16-bit sums keeps.
  class FloatOnly final : public Communicator {
   public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    std::string backend_name() const override { return "float-only"; }
    void all_reduce(float*, int64_t, ReduceOp, Stream&) override {}
    void broadcast(float*, int64_t, int, Stream&) override {}
    void barrier() override {}
    std::vector<double> all_gather(std::span<const double> mine) override {
      return {mine.begin(), mine.end()};
    }
  } comm;
  CpuDevice device(0, 1);
  uint16_t x = 0;
  EXPECT_CONTAINS(testing_util::error_of([&] {
                    comm.all_reduce_half(&x, 1, HalfFormat::kBf16, device.default_stream());
                  }),
                  "float-only: compressed (16-bit) all-reduce is not supported");
}

}  // namespace
}  // namespace scalescope
