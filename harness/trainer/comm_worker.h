// How a replica's gradient buckets get all-reduced while backward goes on with earlier
// layers: GradientReducer is what the step loop sees; CommWorker does it on a communication
// thread (for collectives that block the calling thread: Gloo), StreamReducer
// (harness/trainer/stream_reducer.h) on the device's communication stream (for collectives
// that are enqueued: NCCL).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/collectives/communicator.h"
#include "harness/trainer/buckets.h"

namespace scalescope {

// The all-reduce times of one step.
struct ReduceTimes {
  double total_ms = 0.0;          // how long the reductions ran, hidden or not
  std::vector<double> bucket_ms;  // per bucket, in bucket order
  std::vector<double> start_ms;   // when each began, in ms since the run's epoch_ns
};

// One step at a time: begin_step, submit every bucket in order, finish_step, then (once the
// step's work has finished) times().
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual const std::vector<Bucket>& buckets() const = 0;
  // Starts the reduction of step `step` (1-based; NVTX payload). `accumulated`, when not
  // null, is added to each bucket before it is reduced (gradient accumulation).
  virtual void begin_step(int64_t step, const float* accumulated) = 0;
  // Bucket `index` (the next one in order) is complete: the work enqueued on the compute
  // stream so far writes its gradients.
  virtual void submit(size_t index) = 0;
  // Orders the compute stream's later work (the optimizer) after every bucket's reduction.
  // Throws Error when a reduction failed (where that is known at this point).
  virtual void finish_step() = 0;
  // The step's times. REQUIRES: the step's work has finished (its end was synchronised).
  virtual const ReduceTimes& times() = 0;
};

// Reduces on a communication thread, for communicators whose collectives block the calling
// thread; finish_step() blocks the host until the thread is done.
class CommWorker final : public GradientReducer {
 public:
  // `grads` is the flat gradient buffer the buckets index; `epoch_ns` is the run's
  // (core/clock.h now_ns()) origin of ReduceTimes::start_ms.
  CommWorker(Communicator& comm, Stream& stream, float* grads, std::vector<Bucket> buckets,
             int rank, int64_t epoch_ns);
  ~CommWorker() override;
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  const std::vector<Bucket>& buckets() const override { return buckets_; }
  void begin_step(int64_t step, const float* accumulated) override;
  // Hands the bucket to the communication thread.
  void submit(size_t index) override;
  // Blocks until every bucket of the step is reduced; rethrows a failure of the thread.
  void finish_step() override;
  const ReduceTimes& times() override { return times_; }

 private:
  void run();
  // Adds the accumulated gradients to bucket `index`, all-reduces it and records its time.
  void reduce(size_t index, const float* accumulated, int64_t step);

  Communicator& comm_;
  Stream& stream_;
  float* grads_;
  std::vector<Bucket> buckets_;
  int rank_;
  const float* accumulated_ = nullptr;
  int64_t step_ = 0;
  std::vector<std::string> range_text_;  // per bucket, for its NVTX range
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t submitted_ = 0;
  size_t done_ = 0;
  int64_t epoch_ns_;
  ReduceTimes times_;  // guarded by mutex_ while a step runs
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace scalescope
