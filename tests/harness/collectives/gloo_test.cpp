// The Gloo communicator: replicas as threads of this process, connected over loopback.
// Parameterized suites are instantiated as Gloo/... so that --gtest_filter=Gloo* runs them.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "harness/collectives/communicator.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using std::chrono::milliseconds;

// Long enough never to fire on a loaded 2-core CI machine, short enough that a broken test
// fails instead of hanging.
constexpr milliseconds kTimeout{10000};

// Runs `body` on `size` replica threads, each with its own communicator and CPU device;
// an exception in any thread fails the test with that thread's message.
void run_ranks(int size, const std::function<void(Communicator&, Stream&)>& body,
               milliseconds timeout = kTimeout) {
  GlooGroup group(size, timeout);
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        CpuDevice device(rank, 1);
        auto comm = group.connect(rank);
        EXPECT_EQ(comm->rank(), rank);
        EXPECT_EQ(comm->size(), size);
        EXPECT_EQ(comm->backend_name(), "gloo");
        body(*comm, device.default_stream());
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(errors[static_cast<size_t>(rank)], "") << "rank " << rank;
  }
}

// Small integers: every sum and average below is exact in float.
float integer_value(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * (i % 17 + 1));
}

class GlooCommunicatorTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooCommunicatorTest, AllReduceSumOfIntegersIsExact) {
  const int size = GetParam();
  constexpr int64_t kCount = 1000;
  run_ranks(size, [&](Communicator& comm, Stream& stream) {
    std::vector<float> data(kCount);
    for (int64_t i = 0; i < kCount; ++i) data[i] = integer_value(comm.rank(), i);
    comm.all_reduce(data.data(), kCount, ReduceOp::kSum, stream);
    const int rank_sum = size * (size + 1) / 2;
    for (int64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(data[i], static_cast<float>(rank_sum * (i % 17 + 1))) << "element " << i;
    }
  });
}

TEST_P(GlooCommunicatorTest, AllReduceAverageOfIntegersIsExact) {
  const int size = GetParam();
  constexpr int64_t kCount = 1000;
  run_ranks(size, [&](Communicator& comm, Stream& stream) {
    std::vector<float> data(kCount);
    for (int64_t i = 0; i < kCount; ++i) data[i] = integer_value(comm.rank(), i);
    comm.all_reduce(data.data(), kCount, ReduceOp::kAverage, stream);
    // Mean of 1..size is (size + 1) / 2: a multiple of 0.5, exact in float.
    for (int64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(data[i], static_cast<float>((size + 1) * (i % 17 + 1)) / 2.0f) << "element " << i;
    }
  });
}

TEST_P(GlooCommunicatorTest, AllReduceOddCounts) {
  const int size = GetParam();
  for (const int64_t count : {int64_t{1}, int64_t{7}, int64_t{1000003}}) {
    run_ranks(size, [&](Communicator& comm, Stream& stream) {
      std::vector<float> data(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) data[i] = integer_value(comm.rank(), i);
      comm.all_reduce(data.data(), count, ReduceOp::kSum, stream);
      const int rank_sum = size * (size + 1) / 2;
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(data[i], static_cast<float>(rank_sum * (i % 17 + 1)))
            << "count " << count << ", element " << i;
      }
    });
  }
}

// Replica equivalence needs every rank to hold the very same bits after an all-reduce,
// including where float addition is not associative.
TEST_P(GlooCommunicatorTest, AllReduceOfRandomFloatsIsBitIdenticalOnEveryRank) {
  const int size = GetParam();
  constexpr int64_t kCount = 100003;
  std::vector<std::vector<float>> inputs(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    std::mt19937 rng(1234 + static_cast<unsigned>(rank));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    inputs[static_cast<size_t>(rank)].resize(kCount);
    for (auto& x : inputs[static_cast<size_t>(rank)]) x = dist(rng);
  }
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    std::vector<std::vector<float>> outputs = inputs;
    run_ranks(size, [&](Communicator& comm, Stream& stream) {
      auto& data = outputs[static_cast<size_t>(comm.rank())];
      comm.all_reduce(data.data(), kCount, op, stream);
    });
    for (int64_t i = 0; i < kCount; ++i) {
      double expected = 0.0;
      for (int rank = 0; rank < size; ++rank) expected += inputs[static_cast<size_t>(rank)][i];
      if (op == ReduceOp::kAverage) expected /= size;
      ASSERT_NEAR(outputs[0][i], expected, 1e-5) << "element " << i;
    }
    for (int rank = 1; rank < size; ++rank) {
      EXPECT_EQ(std::memcmp(outputs[0].data(), outputs[static_cast<size_t>(rank)].data(),
                            kCount * sizeof(float)),
                0)
          << "rank " << rank << " differs from rank 0";
    }
  }
}

TEST_P(GlooCommunicatorTest, BroadcastFromFirstAndLastRank) {
  const int size = GetParam();
  constexpr int64_t kCount = 1001;
  for (const int root : {0, size - 1}) {
    run_ranks(size, [&](Communicator& comm, Stream& stream) {
      std::vector<float> data(kCount);
      for (int64_t i = 0; i < kCount; ++i) data[i] = integer_value(comm.rank(), i);
      comm.broadcast(data.data(), kCount, root, stream);
      for (int64_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(data[i], integer_value(root, i)) << "root " << root << ", element " << i;
      }
    });
  }
}

TEST_P(GlooCommunicatorTest, AllGatherConcatenatesInRankOrder) {
  const int size = GetParam();
  run_ranks(size, [&](Communicator& comm, Stream&) {
    const std::vector<double> mine = {comm.rank() + 0.25, -comm.rank() * 1e300, 7.0};
    const std::vector<double> all = comm.all_gather(mine);
    ASSERT_EQ(all.size(), 3u * static_cast<size_t>(size));
    for (int rank = 0; rank < size; ++rank) {
      EXPECT_EQ(all[3 * rank + 0], rank + 0.25);
      EXPECT_EQ(all[3 * rank + 1], -rank * 1e300);
      EXPECT_EQ(all[3 * rank + 2], 7.0);
    }
  });
}

TEST_P(GlooCommunicatorTest, BarrierOrdersWritesBeforeReads) {
  const int size = GetParam();
  // Each rank in turn writes before a barrier while the others wait, then everyone reads
  // after it; the writer sleeps first so that a barrier that does not wait is caught.
  // Atomics keep the test free of data races by the letter of the memory model (the
  // barrier orders the threads through sockets, which the model does not see).
  std::vector<std::atomic<int>> written(static_cast<size_t>(size));
  run_ranks(size, [&](Communicator& comm, Stream&) {
    for (int writer = 0; writer < size; ++writer) {
      if (comm.rank() == writer) {
        std::this_thread::sleep_for(milliseconds(50));
        written[static_cast<size_t>(writer)] = writer + 1;
      }
      comm.barrier();
      EXPECT_EQ(written[static_cast<size_t>(writer)], writer + 1)
          << "rank " << comm.rank() << " passed the barrier before writer " << writer;
      // The next writer must not start before everyone has read.
      comm.barrier();
    }
  });
}

// mlp-41m's gradients in one call: Gloo must take a buffer of 164 MB whole.
TEST(GlooCommunicatorLargeTest, AllReduceOf41MFloats) {
  constexpr int64_t kCount = 41'000'000;
  std::vector<std::vector<float>> buffers(2);
  run_ranks(2, [&](Communicator& comm, Stream& stream) {
    auto& data = buffers[static_cast<size_t>(comm.rank())];
    data.resize(kCount);
    for (int64_t i = 0; i < kCount; ++i) data[i] = integer_value(comm.rank(), i);
    comm.all_reduce(data.data(), kCount, ReduceOp::kAverage, stream);
  });
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(buffers[0][i], static_cast<float>(3 * (i % 17 + 1)) / 2.0f) << "element " << i;
  }
  EXPECT_EQ(std::memcmp(buffers[0].data(), buffers[1].data(), kCount * sizeof(float)), 0);
}

// A device that claims to be a GPU, to check the refusal without one.
class FakeCudaDevice final : public Device {
 public:
  class FakeStream final : public Stream {
   public:
    explicit FakeStream(Device& device) : device_(device) {}
    Device& device() const override { return device_; }
    void synchronize() override {}
    bool idle() const override { return true; }

   private:
    Device& device_;
  };

  DeviceId id() const override { return DeviceId{DeviceKind::kCuda, 0}; }
  std::string name() const override { return "fake cuda"; }
  void make_current() override {}
  void* allocate(size_t) override { return nullptr; }
  void deallocate(void*, size_t) noexcept override {}
  void* allocate_host(size_t) override { return nullptr; }
  void deallocate_host(void*) noexcept override {}
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<FakeStream>(*this); }
  std::unique_ptr<Event> create_event() override { return nullptr; }
  Stream& default_stream() override { return stream_; }
  void copy_to_device(void*, const void*, size_t, Stream&) override {}
  void copy_to_host(void*, const void*, size_t, Stream&) override {}
  void copy_on_device(void*, const void*, size_t, Stream&) override {}
  void fill_zero(void*, size_t, Stream&) override {}

 private:
  FakeStream stream_{*this};
};

TEST_P(GlooCommunicatorTest, RefusesGpuMemory) {
  const int size = GetParam();
  run_ranks(size, [&](Communicator& comm, Stream& stream) {
    FakeCudaDevice gpu;
    float x = 1.0f;
    for (int which = 0; which < 2; ++which) {
      try {
        if (which == 0) {
          comm.all_reduce(&x, 1, ReduceOp::kSum, gpu.default_stream());
        } else {
          comm.broadcast(&x, 1, 0, gpu.default_stream());
        }
        ADD_FAILURE() << "a GPU stream was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("GPU replicas use NCCL"), std::string::npos)
            << e.what();
      }
    }
    // The refusal happens before any communication, so the group is still usable.
    comm.all_reduce(&x, 1, ReduceOp::kAverage, stream);
    EXPECT_EQ(x, 1.0f);
  });
}

INSTANTIATE_TEST_SUITE_P(Gloo, GlooCommunicatorTest, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

TEST(GlooGroupTest, RefusesBadArguments) {
  EXPECT_THROW(GlooGroup(0, kTimeout), Error);
  EXPECT_THROW(GlooGroup(-1, kTimeout), Error);
  EXPECT_THROW(GlooGroup(2, milliseconds(0)), Error);

  GlooGroup group(1, kTimeout);
  EXPECT_THROW(group.connect(-1), Error);
  EXPECT_THROW(group.connect(1), Error);
  auto comm = group.connect(0);
  try {
    group.connect(0);
    ADD_FAILURE() << "connecting rank 0 twice was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already connected"), std::string::npos) << e.what();
  }
  CpuDevice device(0, 1);
  float x = 3.0f;
  EXPECT_THROW(comm->broadcast(&x, 1, 1, device.default_stream()), Error);
  EXPECT_THROW(comm->all_reduce(&x, -1, ReduceOp::kSum, device.default_stream()), Error);
}

// `f` in a child process whose open-file limit is `soft` and `hard`.
std::string in_child_with_open_files(rlim_t soft, rlim_t hard,
                                     const std::function<std::string()>& f) {
  return testing_util::in_child_process([&] {
    const rlimit limit{soft, hard};
    return ::setrlimit(RLIMIT_NOFILE, &limit) == 0 ? f() : std::string("setrlimit failed");
  });
}

// cpu:1024 in one process, where `ulimit -n` was 20000, failed after the whole timeout with
// "Too many open files" from the rank that ran out.
TEST(GlooGroupTest, AMeshPastTheOpenFileLimitIsRefusedAtOnceAndTheSoftLimitRaised) {
  const std::string refused = in_child_with_open_files(
      1024, 1024, [] { return testing_util::error_of([] { GlooGroup group(300, kTimeout); }); });
  EXPECT_NE(refused.find("300 ranks of this process connect to 300 ranks over Gloo's TCP"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("more than this process may open (1024"), std::string::npos) << refused;
  // Under the hard limit the soft one is raised, and the group connects (12 ranks need ~170
  // descriptors of their own, which a soft limit of 32 would not give).
  const std::string raised = in_child_with_open_files(32, 4096, [] {
    GlooGroup group(12, kTimeout);
    rlimit now{};
    ::getrlimit(RLIMIT_NOFILE, &now);
    if (now.rlim_cur < 12 * 14) return "soft limit " + std::to_string(now.rlim_cur);
    std::vector<std::unique_ptr<Communicator>> comms(12);
    std::vector<std::thread> threads;
    std::atomic<int> failed{0};
    for (int r = 0; r < 12; ++r) {
      threads.emplace_back([&, r] {
        try {
          comms[r] = group.connect(r);
        } catch (const Error&) {
          ++failed;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return failed == 0 ? std::string("ok") : std::to_string(failed.load()) + " ranks failed";
  });
  EXPECT_EQ(raised, "ok");
}

TEST(GlooGroupTest, RankOutOfRangeInALargerGroup) {
  GlooGroup group(3, kTimeout);
  try {
    group.connect(3);
    ADD_FAILURE() << "rank 3 of 3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3 is not one of this process's ranks [0, 3)"),
              std::string::npos)
        << e.what();
  }
}

TEST(GlooGroupTest, ConnectTimesOutWhenAPeerNeverJoins) {
  constexpr milliseconds kShort{500};
  GlooGroup group(2, kShort);
  const auto start = std::chrono::steady_clock::now();
  try {
    group.connect(0);
    ADD_FAILURE() << "connecting without the other rank succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 of 2"), std::string::npos) << what;
    EXPECT_NE(what.find("timed out after 500 ms"), std::string::npos) << what;
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, kShort * 9 / 10);
  EXPECT_LT(elapsed, kShort * 2);
}

// Gloo's pairs write with writev: a peer that died made the survivor's next write raise
// SIGPIPE, whose default action killed it (status 141) before it could name the lost peer.
// After a group connects, a write to a socket whose other end is gone fails with EPIPE.
TEST(GlooGroupTest, AWriteToADeadPeerFailsInsteadOfKillingTheProcess) {
  const std::string outcome = testing_util::in_child_process([] {
    ::signal(SIGPIPE, SIG_DFL);
    GlooGroup group(2, kTimeout);
    std::thread peer([&] { group.connect(1); });
    group.connect(0);
    peer.join();
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) return std::string("no socketpair");
    ::close(ends[1]);
    const char byte = 0;
    const ssize_t written = ::write(ends[0], &byte, 1);
    return written < 0 && errno == EPIPE ? std::string("EPIPE") : std::string("wrote");
  });
  EXPECT_EQ(outcome, "EPIPE") << "(empty: the process died, of SIGPIPE as it seems)";
}

// `keys` (CBOR of {key: bytes}, from GlooGroup::take_local_keys) without the pairs'
// addresses (keys "0", "1", ...): only what Gloo exchanges before them.
std::string without_addresses(const std::string& keys) {
  nlohmann::json j = nlohmann::json::from_cbor(std::vector<uint8_t>(keys.begin(), keys.end()));
  for (auto it = j.begin(); it != j.end();) {
    it = std::isdigit(static_cast<unsigned char>(it.key().front())) ? j.erase(it) : std::next(it);
  }
  const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(j);
  return {bytes.begin(), bytes.end()};
}

// As a process that died after publishing its address: rank 1 (a group of its own, as in
// another process) gets rank 0's keys but its address, so it publishes its own address and
// then waits. Gloo's pairs wait five times their timeout for a connection; rank 0 must
// still give up within the group's timeout. Which side of a pair listens goes by the two
// addresses, so rank 0 waits (and fails) in some attempts and connects to the silent
// listener in the others; the attempts repeat until rank 0 has waited a few times.
TEST(GlooGroupTest, ConnectEndsWithinTheTimeoutWhenAPeerPublishedItsAddressAndVanished) {
  constexpr milliseconds kShort{1000};
  int waited = 0;
  for (int attempt = 0; attempt < 40 && waited < 3; ++attempt) {
    GlooGroup zero(2, 0, 1, kShort, "127.0.0.1", "");
    GlooGroup one(2, 1, 1, kShort, "127.0.0.1", "");
    std::thread rank1([&] {
      try {
        (void)one.connect(1);
      } catch (const Error&) {  // aborted below: it never got rank 0's address
      }
    });
    std::atomic<bool> over{false};
    std::thread relay([&] {
      while (!over) {
        zero.add_remote(one.take_local_keys(milliseconds(5)).first);
        one.add_remote(without_addresses(zero.take_local_keys(milliseconds(5)).first));
      }
    });
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)zero.connect(0);  // the initiator's connect succeeds: the listener's socket accepts
    } catch (const Error& e) {
      ++waited;
      EXPECT_NE(std::string(e.what()).find("rank 0 of 2"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("waiting for the addresses"), std::string::npos)
          << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, kShort * 2) << "attempt " << attempt;
    over = true;
    relay.join();
    one.abort("the test is over");
    rank1.join();
  }
  EXPECT_EQ(waited, 3);
}

TEST(GlooGroupTest, CollectiveTimesOutWhenAPeerNeverCalls) {
  constexpr milliseconds kShort{500};
  GlooGroup group(2, kShort);
  std::unique_ptr<Communicator> late;
  std::thread other([&] { late = group.connect(1); });
  auto comm = group.connect(0);
  other.join();
  ASSERT_NE(late, nullptr);

  CpuDevice device(0, 1);
  std::vector<float> data(12345, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  try {
    comm->all_reduce(data.data(), 12345, ReduceOp::kSum, device.default_stream());
    ADD_FAILURE() << "an all-reduce without the other rank succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 of 2: all_reduce of 12345 floats timed out after 500 ms"),
              std::string::npos)
        << what;
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, kShort * 2);
  // A communicator that failed refuses further work rather than mismatching messages.
  EXPECT_THROW(comm->barrier(), Error);
}

}  // namespace
}  // namespace scalescope
