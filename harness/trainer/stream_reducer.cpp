#include "harness/trainer/stream_reducer.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/nvtx.h"
#include "models/kernels.h"

namespace scalescope {

StreamReducer::StreamReducer(Communicator& comm, Device& device, Stream& compute,
                             Stream& comm_stream, float* grads, std::vector<Bucket> buckets,
                             const Event& reference, double reference_ms)
    : comm_(comm),
      device_(device),
      compute_(compute),
      comm_stream_(comm_stream),
      grads_(grads),
      buckets_(std::move(buckets)),
      reference_(reference),
      reference_ms_(reference_ms),
      done_(device.create_ordering_event()) {
  for (size_t i = 0; i < buckets_.size(); ++i) {
    range_text_.push_back(fmt::format("allreduce bucket {}: {} B", i, buckets_[i].bytes()));
    ready_.push_back(device_.create_ordering_event());
    start_.push_back(device_.create_event());
    end_.push_back(device_.create_event());
  }
  times_.bucket_ms.assign(buckets_.size(), 0.0);
  times_.start_ms.assign(buckets_.size(), 0.0);
}

void StreamReducer::begin_step(int64_t step, const float* accumulated) {
  SS_CHECK(submitted_ == 0 || submitted_ == buckets_.size(),
           "a step's reduction began before the last one was submitted whole");
  accumulated_ = accumulated;
  step_ = step;
  submitted_ = 0;
}

void StreamReducer::submit(size_t index) {
  SS_CHECK(index == submitted_ && index < buckets_.size(),
           "bucket {} submitted out of order (next is {})", index, submitted_);
  ++submitted_;
  const Bucket& b = buckets_[index];
  // The host-side range marks when the reduction was enqueued; the timeline shows the
  // collective's kernel itself on the communication stream.
  nvtx::Range range(nvtx::Phase::kAllReduce, step_, range_text_[index].c_str());
  ready_[index]->record(compute_);
  ready_[index]->wait_on(comm_stream_);
  start_[index]->record(comm_stream_);
  float* g = grads_ + b.begin;
  if (accumulated_ != nullptr) {
    // grads += accumulated, on the communication stream so that backward never waits for it.
    accumulate_into(g, accumulated_ + b.begin, b.end - b.begin, /*first=*/false, comm_stream_);
  }
  // One replica has nothing to exchange (and the average of one is itself).
  if (comm_.size() > 1) comm_.all_reduce(g, b.end - b.begin, ReduceOp::kAverage, comm_stream_);
  end_[index]->record(comm_stream_);
}

void StreamReducer::finish_step() {
  SS_CHECK(submitted_ == buckets_.size(), "the step ended with {} of {} buckets submitted",
           submitted_, buckets_.size());
  done_->record(comm_stream_);
  done_->wait_on(compute_);
}

const ReduceTimes& StreamReducer::times() {
  times_.total_ms = 0.0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    times_.bucket_ms[i] = end_[i]->elapsed_ms_since(*start_[i]);
    times_.start_ms[i] = reference_ms_ + start_[i]->elapsed_ms_since(reference_);
    times_.total_ms += times_.bucket_ms[i];
  }
  return times_;
}

}  // namespace scalescope
