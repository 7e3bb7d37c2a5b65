// Gradient buckets all-reduced on the device's communication stream, for communicators whose
// collectives are enqueued rather than run by the calling thread (NCCL). Nothing here
// blocks the host: each bucket's reduction waits on the communication stream for an event
// recorded on the compute stream when backward has produced it, and the compute stream's
// later work (the optimizer) waits for an event recorded after the last reduction. Every
// reduction is bracketed by timing events on the communication stream, read once the step
// has ended.
//
// Only the Device/Stream/Event abstraction is used, so the same code runs on CPU devices
// (whose streams run work inline): tests compare it there with CommWorker.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/collectives/communicator.h"
#include "harness/trainer/comm_worker.h"

namespace scalescope {

class StreamReducer final : public GradientReducer {
 public:
  // `grads` is the flat gradient buffer the buckets index, written on `compute`; reductions
  // run on `comm` (may be `compute` itself). `reference` is an event already recorded on
  // `compute` and reached at `reference_ms` (ms since the run's epoch): bucket start times
  // are put on that clock. REQUIRES: the streams and the event belong to `device`, which is
  // current on the calling thread for every call.
  StreamReducer(Communicator& comm, Device& device, Stream& compute, Stream& comm_stream,
                float* grads, std::vector<Bucket> buckets, const Event& reference,
                double reference_ms);

  const std::vector<Bucket>& buckets() const override { return buckets_; }
  void begin_step(int64_t step, const float* accumulated) override;
  // Enqueues the bucket's reduction on the communication stream, after the compute stream's
  // work so far; returns without waiting for it.
  void submit(size_t index) override;
  // Makes the compute stream wait for every reduction of the step; does not block the host.
  void finish_step() override;
  const ReduceTimes& times() override;

 private:
  Communicator& comm_;
  Device& device_;
  Stream& compute_;
  Stream& comm_stream_;
  float* grads_;
  std::vector<Bucket> buckets_;
  const Event& reference_;
  double reference_ms_;
  const float* accumulated_ = nullptr;
  int64_t step_ = 0;
  size_t submitted_ = 0;
  std::vector<std::string> range_text_;
  std::vector<std::unique_ptr<Event>> ready_;  // [bucket], on compute: gradients written
  std::vector<std::unique_ptr<Event>> start_;  // [bucket], on comm: reduction began
  std::vector<std::unique_ptr<Event>> end_;    // [bucket], on comm: reduction done
  std::unique_ptr<Event> done_;                // on comm: every reduction of the step done
  ReduceTimes times_;
};

}  // namespace scalescope
