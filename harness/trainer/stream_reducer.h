// Gradient buckets all-reduced on the device's communication stream, for communicators whose
// collectives are enqueued rather than run by the calling thread (NCCL). Nothing here
// blocks the host: each bucket's reduction waits on the communication stream for an event
// recorded on the compute stream when backward has produced it, and the compute stream's
// later work (the optimizer) waits for an event recorded after the last reduction. Every
// reduction is bracketed by timing events on the communication stream, read once the step
// has ended.
#pragma once

#include <memory>
#include <vector>

#include "harness/trainer/clock_anchor.h"
#include "harness/trainer/reducer.h"

namespace scalescope {

class StreamReducer final : public GradientReducer {
 public:
  // `clock` puts the buckets' start times on the run's host clock.
  StreamReducer(Communicator& comm, Device& device, Stream& compute, float* grads, Config config,
                const ClockAnchor& clock);

  const ReduceTimes& times() override;
  // On the communication stream after the buckets enqueued before it; the compute stream
  // waits for it.
  void sync_sum(float* values, int64_t count) override;

 private:
  // Enqueues the bucket's reduction on the communication stream, after the compute
  // stream's work so far; returns without waiting for it.
  void start(size_t index) override;
  // Makes the compute stream wait for every reduction of the step; does not block the host.
  void wait_all() override;

  Stream& comm_stream_;
  const ClockAnchor& clock_;
  std::vector<std::unique_ptr<Event>> ready_;  // [bucket], on compute: gradients written
  std::vector<std::unique_ptr<Event>> start_;  // [bucket], on comm: reduction began
  std::vector<std::unique_ptr<Event>> end_;    // [bucket], on comm: reduction done
  // With compression, [bucket] on comm: the cast to 16 bits done, the all-reduce done (the
  // cast back runs from there to end_).
  std::vector<std::unique_ptr<Event>> cast_;
  std::vector<std::unique_ptr<Event>> reduced_;
  std::unique_ptr<Event> done_;        // on comm: every reduction of the step done
  std::unique_ptr<Event> sync_ready_;  // on compute: a sync sum's values written
  std::unique_ptr<Event> sync_done_;   // on comm: its all-reduce done
  ReduceTimes times_;
};

}  // namespace scalescope
