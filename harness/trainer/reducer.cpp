#include "harness/trainer/reducer.h"

#include <fmt/format.h>

#include "core/check.h"
#include "harness/trainer/stream_reducer.h"
#include "harness/trainer/thread_reducer.h"
#include "models/kernels.h"

namespace scalescope {

GradientReducer::GradientReducer(Communicator& comm, Device& device, Stream& compute, float* grads,
                                 Config config)
    : comm_(comm),
      device_(device),
      compute_(compute),
      grads_(grads),
      buckets_(std::move(config.buckets)),
      micro_batches_(config.micro_batches),
      overlap_(config.overlap),
      compression_(comm.size() > 1 ? config.compression : std::nullopt) {
  SS_CHECK(micro_batches_ >= 1, "{} micro-batches per step", micro_batches_);
  int64_t total = 0;
  const int64_t wire_bytes = compression_ ? sizeof(uint16_t) : sizeof(float);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const int64_t count = buckets_[i].end - buckets_[i].begin;
    range_text_.push_back(fmt::format("allreduce bucket {}: {} B", i, count * wire_bytes));
    total = std::max(total, buckets_[i].end);
  }
  if (micro_batches_ > 1) accumulated_ = Tensor(device, Shape{total});
  // Allocated once: a step allocates nothing.
  if (compression_) half_ = DeviceBuffer(device, static_cast<size_t>(total) * sizeof(uint16_t));
  if (config.noise_norms) norms_ = DeviceBuffer(device, 2 * buckets_.size() * sizeof(double));
}

GradientReducer::~GradientReducer() = default;

void GradientReducer::prepare_for_backward(int64_t step, int micro_batch) {
  SS_CHECK(micro_batch >= 0 && micro_batch < micro_batches_,
           "micro-batch {} of a step of {} micro-batches", micro_batch, micro_batches_);
  if (micro_batch == 0) {
    SS_CHECK(started_ == 0 || started_ == buckets_.size(),
             "step {} began before step {} started all its buckets", step, step_);
    step_ = step;
    started_ = 0;
    begin_step();
  }
  micro_batch_ = micro_batch;
}

void GradientReducer::mark_layer_ready(int layer) {
  // A bucket is complete when the backward of its lowest layer has run (of the last
  // micro-batch: the earlier ones only accumulate).
  if (overlap_ && micro_batch_ == micro_batches_ - 1 && started_ < buckets_.size() &&
      layer == buckets_[started_].first_layer) {
    start(started_++);
  }
}

void GradientReducer::finalize_backward() {
  if (micro_batch_ == micro_batches_ - 1) return;
  accumulate_into(accumulated_.data(), grads_, accumulated_.numel(), micro_batch_ == 0, compute_);
}

void GradientReducer::finish_step() {
  while (started_ < buckets_.size()) start(started_++);
  wait_all();
}

void GradientReducer::add_accumulated(size_t index, Stream& stream) {
  if (micro_batches_ == 1) return;
  const Bucket& b = buckets_[index];
  accumulate_into(grads_ + b.begin, accumulated_.data() + b.begin, b.end - b.begin,
                  /*first=*/false, stream);
}

void GradientReducer::compress(size_t index, Stream& stream) {
  const Bucket& b = buckets_[index];
  compress_gradients(grads_ + b.begin, static_cast<uint16_t*>(half_.data()) + b.begin,
                     b.end - b.begin, comm_.size(), *compression_, stream);
}

void GradientReducer::decompress(size_t index, Stream& stream) {
  const Bucket& b = buckets_[index];
  decompress_gradients(static_cast<const uint16_t*>(half_.data()) + b.begin, grads_ + b.begin,
                       b.end - b.begin, *compression_, stream);
}

void GradientReducer::all_reduce(size_t index, Stream& stream) {
  const Bucket& b = buckets_[index];
  if (compression_) {
    comm_.all_reduce_half(static_cast<uint16_t*>(half_.data()) + b.begin, b.end - b.begin,
                          *compression_, stream);
  } else {
    comm_.all_reduce(grads_ + b.begin, b.end - b.begin, ReduceOp::kAverage, stream);
  }
}

void GradientReducer::norm(size_t index, int slot, Stream& stream) {
  if (norms_.data() == nullptr) return;
  const Bucket& b = buckets_[index];
  int64_t begin = b.begin;
  int64_t end = b.end;
  if (slot == 1) {
    // After the all-reduce every replica holds the same gradients: each takes its 1/N slice,
    // and the slices' norms add up to the whole (results.cpp), for 1/N of the pass's cost.
    const int64_t n = end - begin;
    begin = b.begin + n * comm_.rank() / comm_.size();
    end = b.begin + n * (comm_.rank() + 1) / comm_.size();
  }
  squared_norm(grads_ + begin, end - begin,
               static_cast<double*>(norms_.data()) + 2 * index + static_cast<size_t>(slot), stream);
}

std::unique_ptr<GradientReducer> make_reducer(Communicator& comm, Device& device, Stream& compute,
                                              float* grads, GradientReducer::Config config,
                                              const ClockAnchor& clock, bool on_streams) {
  if (comm.enqueues() || on_streams) {
    return std::make_unique<StreamReducer>(comm, device, compute, grads, std::move(config), clock);
  }
  return std::make_unique<ThreadReducer>(comm, device, compute, grads, std::move(config),
                                         clock.epoch_ns());
}

}  // namespace scalescope
