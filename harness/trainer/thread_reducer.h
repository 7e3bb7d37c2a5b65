// Gradient buckets reduced on a communication thread, for communicators whose collectives
// block the calling thread (Gloo): the replica's thread goes on with backward while this
// one all-reduces the buckets already complete. finish_step() blocks the host until the
// thread is done. Times are read on the host clock, where the reductions ran.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "harness/trainer/reducer.h"

namespace scalescope {

class ThreadReducer final : public GradientReducer {
 public:
  // `epoch_ns`: the run's origin (core/clock.h now_ns()) of ReduceTimes::start_ms.
  ThreadReducer(Communicator& comm, Device& device, Stream& compute, float* grads, Config config,
                int64_t epoch_ns);
  ~ThreadReducer() override;

  const ReduceTimes& times() override { return times_; }
  int host_threads() const override { return thread_.joinable() ? 1 : 0; }
  // Runs on the communication thread after the buckets started before it; blocks until done.
  void sync_sum(float* values, int64_t count) override;

 private:
  // Hands the bucket to the communication thread (reduces it inline with one replica:
  // nothing to overlap, no thread to wake).
  void start(size_t index) override;
  // Blocks until every bucket of the step is reduced; rethrows a failure of the thread.
  void wait_all() override;
  void begin_step() override;
  void run();
  // Adds the accumulated gradients to bucket `index`, all-reduces it (with compression, cast
  // to 16 bits and back around it) and records its times.
  void reduce(size_t index);

  int64_t epoch_ns_;
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t submitted_ = 0;  // guarded by mutex_, as are the three below
  size_t done_ = 0;
  ReduceTimes times_;
  bool stop_ = false;
  float* sync_values_ = nullptr;  // a sync_sum waiting for the thread (null: none)
  int64_t sync_count_ = 0;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace scalescope
