// The streams and events of the simulated accelerator. A stream is a queue of work run in
// order by a worker thread of its own, as a GPU runs a stream's kernels: enqueueing returns
// at once. An event is a marker in a queue: recording it enqueues the marker, waiting on it
// makes a stream's later work wait until the marker has run, and its time is read by the
// worker when the marker runs, where the work ran.
//
// Chaos mode: with a jitter of N µs, every operation waits a seeded random 0..N µs on its
// stream before it runs, so that work that is not ordered by events interleaves differently
// from run to run and an ordering bug changes results or trips a check.
//
// A failure of enqueued work (an exception) is the device's, as a fault is a GPU context's:
// every stream of the device skips its later work (markers still run, so that nothing waits
// forever) and every synchronize() of the device's streams and events throws it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "core/caching_allocator.h"
#include "core/device.h"

namespace scalescope {

// What the streams of one simulated device share: its failure.
class SimFault {
 public:
  // Keeps the first failure. Thread-safe.
  void set(std::exception_ptr error);
  std::exception_ptr get() const;
  bool failed() const { return get() != nullptr; }

 private:
  mutable std::mutex mutex_;
  std::exception_ptr error_;
};

class SimStream final : public Stream {
 public:
  // `threads`: the OpenMP threads the worker's kernels use. `jitter_us`: the most each
  // operation is delayed (0: none), drawn from a generator seeded with `seed`. Registers
  // with `allocator`, whose freed blocks are then fenced against this stream's work.
  SimStream(Device& device, SimFault& fault, CachingAllocator& allocator, int threads,
            int64_t jitter_us, uint64_t seed);
  // Runs the work still queued (as a GPU finishes a destroyed stream's work), then stops.
  ~SimStream() override;

  Device& device() const override { return device_; }
  // Blocks until the work enqueued so far has run; throws the device's failure.
  void synchronize() override;
  // synchronize(), giving up after `timeout`: false when the work has not run by then.
  bool synchronize_for(std::chrono::milliseconds timeout);
  bool idle() const override;

  // Runs `work` on the worker after everything enqueued before. `marker`: runs even after a
  // failure of the device (event markers and waits, which must not hang).
  void enqueue(std::function<void()> work, bool marker = false);

 private:
  struct Item {
    std::function<void()> work;
    bool marker;
  };
  void run();
  void delay();

  Device& device_;
  SimFault& fault_;
  CachingAllocator& allocator_;
  int threads_;
  int64_t jitter_us_;
  std::mt19937_64 random_;  // the worker's alone
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;  // guarded by mutex_, as are the three below
  uint64_t enqueued_ = 0;
  uint64_t done_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

// REQUIRES: `stream` is a stream of a simulated device; throws Error otherwise.
SimStream& sim_stream(Stream& stream);

class SimEvent final : public Event {
 public:
  // `timing` false: an ordering event, whose elapsed_ms_since throws.
  SimEvent(SimFault& fault, bool timing);
  void record(Stream& stream) override;
  void wait_on(Stream& stream) const override;
  void synchronize() const override;
  bool synchronize_for(std::chrono::milliseconds timeout) const override;
  bool query() const override;
  double elapsed_ms_since(const Event& start) const override;

 private:
  // Shared with the markers in flight, which may run after the event is destroyed.
  struct State {
    std::mutex mutex;
    std::condition_variable reached_cv;
    uint64_t recorded = 0;  // records made
    uint64_t reached = 0;   // the latest record whose marker has run
    int64_t time_ns = 0;    // when that marker ran
  };
  SimFault& fault_;
  bool timing_;
  std::shared_ptr<State> state_;
};

}  // namespace scalescope
