// The gradient reducers on their own: when each bucket starts (readiness), how micro-batches
// accumulate, and that the thread and stream reducers give the same bits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/cpu/cpu_device.h"
#include "harness/collectives/communicator.h"
#include "harness/trainer/reducer.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

// Three layers whose gradients lie in reverse layer order: layer 2 [0, 10), layer 1
// [10, 30), layer 0 [30, 35); bucket 0 is layer 2, bucket 1 layers 1 and 0.
std::vector<Bucket> two_buckets() {
  return {Bucket{0, 10, 2, 2}, Bucket{10, 35, 0, 1}};
}
constexpr int64_t kParams = 35;

// Records every all-reduce (which floats, and what they held) and leaves the data as it is:
// the average over identical ranks.
class RecordingComm final : public Communicator {
 public:
  RecordingComm(int size, bool enqueues) : size_(size), enqueues_(enqueues) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "recording"; }
  bool enqueues() const override { return enqueues_; }
  void all_reduce(float* data, int64_t count, ReduceOp, Stream&) override {
    reduced.push_back({data, count, std::vector<float>(data, data + count)});
  }
  void broadcast(float*, int64_t, int, Stream&) override {}
  void barrier() override {}
  std::vector<double> all_gather(std::span<const double> mine) override {
    return {mine.begin(), mine.end()};
  }

  struct Call {
    const float* data;
    int64_t count;
    std::vector<float> values;
  };
  std::vector<Call> reduced;

 private:
  int size_;
  bool enqueues_;
};

struct Fixture {
  CpuDevice device{0, 1};
  std::vector<float> grads = std::vector<float>(kParams, 0.0f);
  ClockAnchor clock{device, device.default_stream(), now_ns()};
  std::unique_ptr<GradientReducer> reducer(Communicator& comm, int micro, bool overlap,
                                           bool on_streams = false) {
    return make_reducer(comm, device, device.default_stream(), grads.data(),
                        {.buckets = two_buckets(),
                         .micro_batches = micro,
                         .overlap = overlap,
                         .compression = std::nullopt},
                        clock, on_streams);
  }
};

TEST(Reducer, ABucketStartsWhenBackwardCompletesItsLowestLayer) {
  // One rank makes the thread reducer reduce inline, so that the test sees when; the stream
  // reducer enqueues (inline on a CPU stream) and skips the all-reduce of one rank.
  for (const bool enqueues : {false, true}) {
    Fixture f;
    RecordingComm comm(enqueues ? 2 : 1, enqueues);
    const std::unique_ptr<GradientReducer> reducer = f.reducer(comm, 1, true);
    reducer->prepare_for_backward(1, 0);
    reducer->mark_layer_ready(2);
    ASSERT_EQ(comm.reduced.size(), 1u) << "enqueues " << enqueues;
    EXPECT_EQ(comm.reduced[0].data, f.grads.data());
    EXPECT_EQ(comm.reduced[0].count, 10);
    reducer->mark_layer_ready(1);  // bucket 1 still waits for layer 0
    EXPECT_EQ(comm.reduced.size(), 1u);
    reducer->mark_layer_ready(0);
    ASSERT_EQ(comm.reduced.size(), 2u);
    EXPECT_EQ(comm.reduced[1].data, f.grads.data() + 10);
    EXPECT_EQ(comm.reduced[1].count, 25);
    reducer->finalize_backward();
    reducer->finish_step();
    EXPECT_EQ(comm.reduced.size(), 2u);  // nothing started twice
    EXPECT_EQ(reducer->times().bucket_ms.size(), 2u);
  }
}

TEST(Reducer, WithoutOverlapEveryBucketWaitsForTheEndOfBackward) {
  Fixture f;
  RecordingComm comm(2, false);
  const std::unique_ptr<GradientReducer> reducer = f.reducer(comm, 1, false);
  reducer->prepare_for_backward(1, 0);
  for (const int layer : {2, 1, 0}) reducer->mark_layer_ready(layer);
  reducer->finalize_backward();
  EXPECT_TRUE(comm.reduced.empty());
  reducer->finish_step();
  ASSERT_EQ(comm.reduced.size(), 2u);
  EXPECT_EQ(comm.reduced[0].count, 10);
  EXPECT_EQ(comm.reduced[1].count, 25);
}

// Micro-batch m writes gradient value m + 1 everywhere: the reduced gradients hold the
// sum over the micro-batches, 1 + 2 + 3, and only the last micro-batch starts buckets.
TEST(Reducer, MicroBatchesAccumulateAndReduceOnce) {
  for (const bool on_streams : {false, true}) {
    Fixture f;
    RecordingComm comm(2, false);
    const std::unique_ptr<GradientReducer> reducer = f.reducer(comm, 3, true, on_streams);
    for (int step = 1; step <= 2; ++step) {
      comm.reduced.clear();
      for (int m = 0; m < 3; ++m) {
        std::fill(f.grads.begin(), f.grads.end(), static_cast<float>(m + 1));
        reducer->prepare_for_backward(step, m);
        for (const int layer : {2, 1, 0}) reducer->mark_layer_ready(layer);
        reducer->finalize_backward();
        if (m < 2) {
          EXPECT_TRUE(comm.reduced.empty()) << "micro-batch " << m;
        }
      }
      reducer->finish_step();
      ASSERT_EQ(comm.reduced.size(), 2u);
      for (const RecordingComm::Call& call : comm.reduced) {
        for (const float v : call.values) ASSERT_EQ(v, 6.0f) << "step " << step;
      }
    }
  }
}

TEST(Reducer, BucketsAreStartedInOrderOncePerStep) {
  Fixture f;
  RecordingComm comm(2, false);
  const std::unique_ptr<GradientReducer> reducer = f.reducer(comm, 2, true);
  EXPECT_THROW(reducer->prepare_for_backward(1, 2), Error);  // no third micro-batch
  reducer->prepare_for_backward(1, 0);
  reducer->finalize_backward();
  reducer->prepare_for_backward(1, 1);
  reducer->mark_layer_ready(2);
  // A new step before this one started all its buckets is a bug in the caller.
  EXPECT_THROW(reducer->prepare_for_backward(2, 0), Error);
}

// Both reducers over real Gloo between two ranks, three steps with accumulation: the same
// bits, whichever thread or stream ran the reductions.
TEST(Reducer, ThreadAndStreamReducersGiveTheSameBits) {
  const auto run = [](bool on_streams) {
    GlooGroup group(2, std::chrono::milliseconds(10000));
    std::vector<std::vector<float>> out(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        Fixture f;
        std::unique_ptr<Communicator> comm = group.connect(rank);
        const std::unique_ptr<GradientReducer> reducer = f.reducer(*comm, 2, true, on_streams);
        for (int step = 1; step <= 3; ++step) {
          for (int m = 0; m < 2; ++m) {
            for (int64_t i = 0; i < kParams; ++i) {
              f.grads[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i + rank + m) / 3.0f;
            }
            reducer->prepare_for_backward(step, m);
            for (const int layer : {2, 1, 0}) reducer->mark_layer_ready(layer);
            reducer->finalize_backward();
          }
          reducer->finish_step();
          f.device.default_stream().synchronize();
        }
        out[static_cast<size_t>(rank)] = f.grads;
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), kParams * sizeof(float)), 0);
    return out[0];
  };
  const std::vector<float> threaded = run(false);
  const std::vector<float> streamed = run(true);
  ASSERT_EQ(threaded.size(), streamed.size());
  EXPECT_EQ(std::memcmp(threaded.data(), streamed.data(), kParams * sizeof(float)), 0);
  // And they are the average of the two ranks' accumulated gradients.
  const float expected =
      (0.1f * 5.0f / 3.0f + 0.1f * 6.0f / 3.0f + 0.1f * 6.0f / 3.0f + 0.1f * 7.0f / 3.0f) / 2.0f;
  EXPECT_NEAR(threaded[5], expected, 1e-6f);
}

}  // namespace
}  // namespace scalescope
