// The communication thread of a replica: all-reduces gradient buckets as backward hands them
// over, while backward goes on with earlier layers (on a GPU the same role falls to the
// communication stream).
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

class CommWorker {
 public:
  // `grads` is the flat gradient buffer the buckets index; `accumulated`, when not null, is
  // added to each bucket before it is reduced (gradient accumulation).
  CommWorker(Communicator& comm, Stream& stream, float* grads, std::vector<Bucket> buckets,
             int rank);
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Starts the reduction of step `step` (1-based; NVTX payload): buckets are then submitted
  // in order.
  void begin_step(int64_t step, const float* accumulated);
  // Hands bucket `index` (the next one in order) to the communication thread.
  void submit(size_t index);
  // Blocks until every bucket of the step is reduced; rethrows a failure of the thread.
  // Returns the milliseconds the communication thread spent reducing (the total all-reduce
  // time, hidden or not).
  double wait_all();
  // Milliseconds each bucket's reduction took in the last step, in bucket order.
  // REQUIRES: wait_all() returned.
  const std::vector<double>& bucket_ms() const { return bucket_ms_; }
  // When each bucket's reduction began (core/clock.h now_ns()), same order.
  const std::vector<int64_t>& bucket_start_ns() const { return bucket_start_ns_; }

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
  double busy_ms_ = 0.0;
  std::vector<double> bucket_ms_;
  std::vector<int64_t> bucket_start_ns_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace scalescope
