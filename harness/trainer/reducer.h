// The gradient reducer of a replica: it owns gradient readiness, bucketing and micro-batch
// accumulation, and averages the gradients over the replicas, a bucket at a time, while
// backward goes on with earlier layers. Its lifecycle follows PyTorch's DDP reducer:
//
//   per micro-batch:  prepare_for_backward → mark_layer_ready (backward's per-layer callback)
//                     → finalize_backward
//   per step:         finish_step (what the step waits for) → times() once the step has ended
//
// Two implementations, chosen by what the communicator is (make_reducer): ThreadReducer
// reduces on a communication thread, for collectives that block the calling thread (Gloo);
// StreamReducer enqueues on the device's communication stream, ordered by events, for
// collectives that are enqueued (NCCL).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"
#include "harness/collectives/communicator.h"
#include "harness/trainer/buckets.h"
#include "harness/trainer/clock_anchor.h"

namespace scalescope {

// The all-reduce times of one step.
struct ReduceTimes {
  double total_ms = 0.0;  // how long the reductions ran, hidden or not
  // With compression: how long the casts to the 16-bit type and back ran (not in total_ms).
  double cast_ms = 0.0;
  std::vector<double> bucket_ms;  // per bucket, in bucket order
  std::vector<double> start_ms;   // when each began, in ms since the run began (core/clock.h)
};

class GradientReducer {
 public:
  struct Config {
    std::vector<Bucket> buckets;  // tile the gradients, in the order backward completes them
    int micro_batches = 1;        // per step; all but the last one's gradients accumulate
    bool overlap = true;          // reduce a bucket as soon as backward completes it
    // Gradient compression: each bucket is cast to this 16-bit format (divided by the
    // replica count first, so that the sum is the mean), all-reduced in it and cast back.
    // Nothing is cast when the communicator has one rank (it has nothing to exchange).
    std::optional<kernel_math::HalfFormat> compression;
    // Gradient noise scale: each bucket's squared norm before its reduction (the last
    // micro-batch's gradients alone) and, of this replica's 1/N slice of it, after it (the
    // average over the replicas of their accumulated gradients), outside the timed all-reduce.
    bool noise_norms = false;
  };
  // `grads`: the model's flat gradients, written by backward on `compute`; `comm` averages
  // them over its ranks.
  // REQUIRES: `compute` belongs to `device`, which is current on every calling thread.
  GradientReducer(Communicator& comm, Device& device, Stream& compute, float* grads, Config config);
  virtual ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The host threads it started to reduce on (a communication thread where collectives block
  // the caller and there are peers).
  virtual int host_threads() const { return 0; }

  // Before micro-batch `micro_batch` (0-based) of step `step` (1-based) runs backward.
  void prepare_for_backward(int64_t step, int micro_batch);
  // Backward has enqueued layer `layer`'s gradients. With overlap, the last micro-batch's
  // buckets start as soon as their lowest layer is done.
  void mark_layer_ready(int layer);
  // After a micro-batch's backward: the gradients of every micro-batch but the last are
  // kept (added up on the compute stream) and join the last one's bucket by bucket.
  void finalize_backward();
  // Starts the buckets not started yet and orders the step's later work (the optimizer,
  // on the compute stream) after every reduction: the exposed all-reduce. Throws Error
  // when a reduction failed, where that is known at this point.
  void finish_step();
  // Sums `count` floats of compute-stream memory over the replicas (--sync-batchnorm's
  // statistics), in order with the buckets already started on the same communicator, and
  // orders the compute stream's later work after it (the host waits where the collective
  // blocks). Every replica asks for the same sums at the same point of its step.
  virtual void sync_sum(float* values, int64_t count) = 0;
  // The step's times. REQUIRES: the step's work has finished (its end was synchronised).
  virtual const ReduceTimes& times() = 0;
  // With noise_norms: device memory holding two doubles per bucket, the bucket's squared norm
  // before its reduction and its slice's after it (the replicas' slices add up to the bucket);
  // valid once the compute stream has passed finish_step.
  // Null without.
  const double* norms() const { return static_cast<const double*>(norms_.data()); }
  size_t norms_bytes() const { return norms_.bytes(); }

 protected:
  // Reduces bucket `index` (buckets start in order, each once per step) once the work
  // enqueued on the compute stream so far has run. The implementation adds the earlier
  // micro-batches' gradients first (add_accumulated).
  virtual void start(size_t index) = 0;
  // Waits (on the host or the compute stream) for every started bucket.
  virtual void wait_all() = 0;
  // A new step begins (no bucket of the last one is still running).
  virtual void begin_step() {}

  // grads += the earlier micro-batches' gradients over bucket `index`, on `stream` (nothing
  // with one micro-batch per step).
  void add_accumulated(size_t index, Stream& stream);
  // With compression: the bucket's gradients cast to the 16-bit format (pre-divided), on
  // `stream`; and the reduced values cast back into them.
  bool compressed() const { return compression_.has_value(); }
  void compress(size_t index, Stream& stream);
  void decompress(size_t index, Stream& stream);
  // The bucket's all-reduce, of its floats (averaged) or, with compression, of its 16-bit
  // values (summed: they were pre-divided).
  void all_reduce(size_t index, Stream& stream);
  // With noise_norms: the bucket's squared norm before its reduction (first, before
  // add_accumulated), and its slice's after it (last); nothing without.
  void norm_before(size_t index, Stream& stream) { norm(index, 0, stream); }
  void norm_after(size_t index, Stream& stream) { norm(index, 1, stream); }
  Communicator& comm() const { return comm_; }
  int64_t step() const { return step_; }
  // "allreduce bucket 2: 1048576 B": the text of a bucket's NVTX range.
  const std::string& range_text(size_t index) const { return range_text_[index]; }
  Device& device() const { return device_; }
  Stream& compute() const { return compute_; }

 private:
  Communicator& comm_;
  Device& device_;
  Stream& compute_;
  float* grads_;
  std::vector<Bucket> buckets_;
  int micro_batches_;
  bool overlap_;
  std::vector<std::string> range_text_;
  Tensor accumulated_;  // the earlier micro-batches' gradients (micro_batches_ > 1)
  std::optional<kernel_math::HalfFormat> compression_;
  DeviceBuffer half_;   // with compression: 16-bit values of every gradient, bucket by bucket
  DeviceBuffer norms_;  // with noise_norms: [bucket][before, after]
  void norm(size_t index, int slot, Stream& stream);
  int64_t step_ = 0;
  int micro_batch_ = 0;
  size_t started_ = 0;  // buckets started this step
};

// The reducer for `comm`: on its communication stream where its collectives are enqueued
// (or where `on_streams` asks for it: tests), else on a thread. `clock` puts the buckets'
// start times (ReduceTimes::start_ms) on the run's host clock.
std::unique_ptr<GradientReducer> make_reducer(Communicator& comm, Device& device, Stream& compute,
                                              float* grads, GradientReducer::Config config,
                                              const ClockAnchor& clock, bool on_streams);

}  // namespace scalescope
