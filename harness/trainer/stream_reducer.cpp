#include "harness/trainer/stream_reducer.h"

#include "core/nvtx.h"

namespace scalescope {

StreamReducer::StreamReducer(Communicator& comm, Device& device, Stream& compute, float* grads,
                             Config config, const ClockAnchor& clock)
    : GradientReducer(comm, device, compute, grads, std::move(config)),
      comm_stream_(device.comm_stream()),
      clock_(clock),
      done_(device.create_ordering_event()),
      sync_ready_(device.create_ordering_event()),
      sync_done_(device.create_ordering_event()) {
  for (size_t i = 0; i < buckets().size(); ++i) {
    ready_.push_back(device.create_ordering_event());
    start_.push_back(device.create_event());
    end_.push_back(device.create_event());
    if (compressed()) {
      cast_.push_back(device.create_event());
      reduced_.push_back(device.create_event());
    }
  }
  times_.bucket_ms.assign(buckets().size(), 0.0);
  times_.start_ms.assign(buckets().size(), 0.0);
}

void StreamReducer::start(size_t index) {
  // The host-side range marks when the reduction was enqueued; the timeline shows the
  // collective's kernel itself on the communication stream.
  nvtx::Range range(Phase::kAllReduce, step(), range_text(index).c_str());
  ready_[index]->record(compute());
  ready_[index]->wait_on(comm_stream_);
  // On the communication stream, so that backward never waits for the addition; before the
  // bucket's timing starts, which is the all-reduce's alone.
  norm_before(index, comm_stream_);
  add_accumulated(index, comm_stream_);
  start_[index]->record(comm_stream_);
  if (compressed()) {  // only with more than one replica
    compress(index, comm_stream_);
    cast_[index]->record(comm_stream_);
    all_reduce(index, comm_stream_);
    reduced_[index]->record(comm_stream_);
    decompress(index, comm_stream_);
  } else if (comm().size() > 1) {
    // One replica has nothing to exchange (and the average of one is itself).
    all_reduce(index, comm_stream_);
  }
  end_[index]->record(comm_stream_);
  norm_after(index, comm_stream_);
}

void StreamReducer::sync_sum(float* values, int64_t count) {
  sync_ready_->record(compute());
  sync_ready_->wait_on(comm_stream_);
  comm().all_reduce(values, count, ReduceOp::kSum, comm_stream_);
  sync_done_->record(comm_stream_);
  sync_done_->wait_on(compute());
}

void StreamReducer::wait_all() {
  done_->record(comm_stream_);
  done_->wait_on(compute());
}

const ReduceTimes& StreamReducer::times() {
  times_.total_ms = 0.0;
  times_.cast_ms = 0.0;
  for (size_t i = 0; i < buckets().size(); ++i) {
    // With compression the bucket's all-reduce is the part between the casts.
    const Event& began = compressed() ? *cast_[i] : *start_[i];
    const Event& ended = compressed() ? *reduced_[i] : *end_[i];
    times_.bucket_ms[i] = ended.elapsed_ms_since(began);
    times_.start_ms[i] = clock_.host_ms(began);
    times_.total_ms += times_.bucket_ms[i];
    if (compressed()) {
      times_.cast_ms +=
          began.elapsed_ms_since(*start_[i]) + end_[i]->elapsed_ms_since(*reduced_[i]);
    }
  }
  return times_;
}

}  // namespace scalescope
