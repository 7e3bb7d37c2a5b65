// CPU replicas of one process reducing through shared memory (--cpu-collectives
// shared-memory, the default): every rank ends with the bits of the rank-order sum, the
// 16-bit sums round each partial sum, a broadcast copies the root's buffer, and a mismatch, an
// abort or a peer that never comes fails every waiting rank with a message, never a hang.
#include "harness/collectives/shared_memory.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "harness/collectives/failures.h"
#include "harness/collectives/replica_comms.h"
#include "models/kernel_math/half_math.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;
constexpr std::chrono::milliseconds kTimeout{10000};

// Runs `body` on a thread per rank with the rank's communicator from ReplicaComms, as the
// trainer makes them; returns each rank's error ("" when none).
std::vector<std::string> run_ranks(ReplicaComms& comms, int size,
                                   const std::function<void(int, Communicator&, Stream&)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        CpuDevice device(rank, 1);
        std::unique_ptr<Communicator> comm = comms.connect(rank, device, rank);
        body(rank, *comm, device.comm_stream());
      } catch (const Error& e) {
        errors[static_cast<size_t>(rank)] = e.what();
        EXPECT_TRUE(is_collective_library(e.library())) << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

std::vector<float> values(int rank, int64_t count) {
  std::mt19937 rng(static_cast<unsigned>(7 + rank));
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(count));
  for (float& v : out) v = g(rng);
  return out;
}

TEST(SharedMemoryCollectives, EveryRankGetsTheBitsOfTheRankOrderSumAndMean) {
  const int size = 3;
  const int64_t count = 10007;  // several blocks, and slices of uneven length
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    ReplicaComms comms(DeviceKind::kCpu, size, 0, size, kTimeout, 1, "", "", {}, true);
    std::vector<std::vector<float>> got(size);
    const auto errors = run_ranks(comms, size, [&](int rank, Communicator& comm, Stream& stream) {
      EXPECT_EQ(comm.backend_name(), "shared memory");
      std::vector<float> v = values(rank, count);
      comm.all_reduce(v.data(), count, op, stream);
      got[static_cast<size_t>(rank)] = std::move(v);
    });
    EXPECT_EQ(errors, std::vector<std::string>(size));
    std::vector<std::vector<float>> in;
    for (int r = 0; r < size; ++r) in.push_back(values(r, count));
    for (int64_t i = 0; i < count; ++i) {
      float want = in[0][static_cast<size_t>(i)];
      for (int r = 1; r < size; ++r) want += in[static_cast<size_t>(r)][static_cast<size_t>(i)];
      if (op == ReduceOp::kAverage) want /= static_cast<float>(size);
      for (int r = 0; r < size; ++r) {
        ASSERT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(i)], want)
            << "rank " << r << " element " << i;
      }
    }
  }
}

TEST(SharedMemoryCollectives, HalfSumsRoundEachPartialSumAndBroadcastCopiesTheRoot) {
  const int size = 2;
  const int64_t count = 3001;
  const auto format = kernel_math::HalfFormat::kBf16;
  ReplicaComms comms(DeviceKind::kCpu, size, 0, size, kTimeout, 1, "", "", {}, true);
  std::vector<std::vector<uint16_t>> half(size);
  std::vector<std::vector<float>> copied(size);
  const auto errors = run_ranks(comms, size, [&](int rank, Communicator& comm, Stream& stream) {
    const std::vector<float> v = values(rank, count);
    std::vector<uint16_t> h(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      h[static_cast<size_t>(i)] =
          kernel_math::compress_gradient(v[static_cast<size_t>(i)], size, format);
    }
    comm.all_reduce_half(h.data(), count, format, stream);
    half[static_cast<size_t>(rank)] = std::move(h);
    std::vector<float> b = values(rank, count);
    comm.broadcast(b.data(), count, 1, stream);
    copied[static_cast<size_t>(rank)] = std::move(b);
  });
  EXPECT_EQ(errors, std::vector<std::string>(size));
  const auto h0 = values(0, count);
  const auto h1 = values(1, count);
  for (int64_t i = 0; i < count; ++i) {
    const auto a = kernel_math::compress_gradient(h0[static_cast<size_t>(i)], size, format);
    const auto b = kernel_math::compress_gradient(h1[static_cast<size_t>(i)], size, format);
    const uint16_t want = kernel_math::half_sum(a, b, format);
    ASSERT_EQ(half[0][static_cast<size_t>(i)], want) << i;
    ASSERT_EQ(half[1][static_cast<size_t>(i)], want) << i;
  }
  EXPECT_EQ(copied[0], h1);
  EXPECT_EQ(copied[1], h1);
}

TEST(SharedMemoryCollectives, GlooIsKeptWhenAsked) {
  ReplicaComms gloo(DeviceKind::kCpu, 2, 0, 2, kTimeout, 1, "", "", {}, false);
  const auto errors = run_ranks(
      gloo, 2, [](int, Communicator& comm, Stream&) { EXPECT_EQ(comm.backend_name(), "gloo"); });
  EXPECT_EQ(errors, std::vector<std::string>(2));
}

TEST(SharedMemoryCollectives, MismatchedCountsFailEveryRankNamingBoth) {
  ReplicaComms comms(DeviceKind::kCpu, 2, 0, 2, kTimeout, 1, "", "", {}, true);
  const auto errors = run_ranks(comms, 2, [](int rank, Communicator& comm, Stream& stream) {
    std::vector<float> v(static_cast<size_t>(10 + rank));
    comm.all_reduce(v.data(), static_cast<int64_t>(v.size()), ReduceOp::kSum, stream);
  });
  EXPECT_CONTAINS(errors[0], "all_reduce of 10 values of 4 bytes, but rank 1 gave 11");
  EXPECT_CONTAINS(errors[1], "rank 0 gave 10");
}

TEST(SharedMemoryCollectives, AnAbortReleasesAWaitingRankAtOnce) {
  ReplicaComms comms(DeviceKind::kCpu, 2, 0, 2, std::chrono::minutes(10), 1, "", "", {}, true);
  const auto started = std::chrono::steady_clock::now();
  const auto errors = run_ranks(comms, 2, [&](int rank, Communicator& comm, Stream& stream) {
    if (rank == 1) {
      comms.abort("replica 1 failed");  // as the trainer does when a replica's thread fails
      return;
    }
    std::vector<float> v(4);
    comm.all_reduce(v.data(), 4, ReduceOp::kSum, stream);
  });
  EXPECT_CONTAINS(errors[0], "rank 0 of 2");
  EXPECT_CONTAINS(errors[0], "replica 1 failed");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::minutes(1));
}

TEST(SharedMemoryCollectives, APeerThatNeverComesTimesOutNamingTheWait) {
  SharedMemoryWorld world(2, std::chrono::milliseconds(200), kSharedMemoryLibrary);
  std::vector<float> v(4);
  const std::string e = error_of(
      [&] { world.all_reduce(0, v.data(), static_cast<int64_t>(v.size()), ReduceOp::kSum); });
  EXPECT_CONTAINS(e, "rank 0 waited 200 ms in all_reduce for the other ranks");
  // The world stays broken: the late rank fails at once instead of waiting for rank 0.
  EXPECT_CONTAINS(error_of([&] { world.all_reduce(1, v.data(), 4, ReduceOp::kSum); }),
                  "rank 0 waited 200 ms");
}

// The sim devices' collectives wait on their streams as NCCL's kernels do on a GPU: the
// group's abort (what the host waits poll) ends none of them; a rank's own abandonment (its
// communicator's abort) ends its own, and once a rank has left nothing completes any more.
TEST(SharedMemoryCollectives, OnStreamsOnlyARanksOwnAbortEndsItsWait) {
  SharedMemoryWorld world(2, std::chrono::minutes(10), kSharedMemoryLibrary,
                          SharedMemoryWaits::kDevice);
  std::vector<float> v(4);
  std::promise<std::string> waited;
  std::thread rank0([&] {
    waited.set_value(error_of([&] { world.all_reduce(0, v.data(), 4, ReduceOp::kSum); }));
  });
  std::future<std::string> error = waited.get_future();
  world.abort("replica 1 failed");
  EXPECT_EQ(world.aborted(), "replica 1 failed");
  EXPECT_EQ(error.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the group's abort ended a queued collective";
  world.abandon(0, "rank 0's communicator was aborted");
  rank0.join();
  EXPECT_CONTAINS(error.get(), "rank 0 of 2: all_reduce: rank 0's communicator was aborted");
  // Later collectives of rank 0 fail at once, and rank 1's finds nobody.
  EXPECT_CONTAINS(error_of([&] { world.broadcast(0, v.data(), 4, 0); }), "was aborted");

  SharedMemoryWorld left(2, std::chrono::milliseconds(200), kSharedMemoryLibrary,
                         SharedMemoryWaits::kDevice);
  std::thread gone(
      [&] { (void)error_of([&] { left.all_reduce(0, v.data(), 4, ReduceOp::kSum); }); });
  left.abandon(0, "rank 0 left");
  gone.join();
  std::vector<float> w(4);
  EXPECT_CONTAINS(error_of([&] { left.all_reduce(1, w.data(), 4, ReduceOp::kSum); }),
                  "rank 1 waited 200 ms in all_reduce");
}

}  // namespace
}  // namespace scalescope
