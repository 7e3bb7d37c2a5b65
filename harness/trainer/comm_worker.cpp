#include "harness/trainer/comm_worker.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/nvtx.h"

namespace scalescope {

CommWorker::CommWorker(Communicator& comm, Stream& stream, float* grads,
                       std::vector<Bucket> buckets, int rank, int64_t epoch_ns)
    : comm_(comm),
      stream_(stream),
      grads_(grads),
      buckets_(std::move(buckets)),
      rank_(rank),
      epoch_ns_(epoch_ns) {
  times_.bucket_ms.assign(buckets_.size(), 0.0);
  times_.start_ms.assign(buckets_.size(), 0.0);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    range_text_.push_back(fmt::format("allreduce bucket {}: {} B", i, buckets_[i].bytes()));
  }
  // One replica has nothing to exchange: reduce inline rather than wake a thread for every
  // bucket of every step.
  if (comm_.size() > 1) thread_ = std::thread([this] { run(); });
}

CommWorker::~CommWorker() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommWorker::begin_step(int64_t step, const float* accumulated) {
  std::lock_guard lock(mutex_);
  SS_CHECK(done_ == submitted_, "a step's reduction began before the last one finished");
  accumulated_ = accumulated;
  step_ = step;
  submitted_ = 0;
  done_ = 0;
  times_.total_ms = 0.0;
}

void CommWorker::submit(size_t index) {
  {
    std::lock_guard lock(mutex_);
    SS_CHECK(index == submitted_ && index < buckets_.size(),
             "bucket {} submitted out of order (next is {})", index, submitted_);
    ++submitted_;
  }
  if (!thread_.joinable()) {
    reduce(index, accumulated_, step_);
    return;
  }
  cv_.notify_all();
}

void CommWorker::reduce(size_t index, const float* accumulated, int64_t step) {
  const Bucket& b = buckets_[index];
  const int64_t start = now_ns();
  {
    // The step as payload, the bucket and its size in the text: the timeline shows which
    // buckets of which step ran how long.
    nvtx::Range range(nvtx::Phase::kAllReduce, step, range_text_[index].c_str());
    float* g = grads_ + b.begin;
    if (accumulated != nullptr) {
      // The earlier micro-batches' gradients join the last one's here, on this thread, so
      // backward never waits for the addition.
      const float* a = accumulated + b.begin;
      for (int64_t i = 0; i < b.end - b.begin; ++i) g[i] += a[i];
    }
    comm_.all_reduce(g, b.end - b.begin, ReduceOp::kAverage, stream_);
  }  // the range closes before the step can see the bucket done
  const double ms = static_cast<double>(now_ns() - start) * 1e-6;
  std::lock_guard lock(mutex_);
  times_.total_ms += ms;
  times_.bucket_ms[index] = ms;
  times_.start_ms[index] = static_cast<double>(start - epoch_ns_) * 1e-6;
  ++done_;
}

void CommWorker::finish_step() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_ == buckets_.size() || error_ != nullptr; });
  if (error_) std::rethrow_exception(error_);
}

void CommWorker::run() {
  set_thread_rank(rank_);
  nvtx::name_current_thread(fmt::format("scalescope comm {}", rank_).c_str());
  while (true) {
    size_t index = 0;
    const float* accumulated = nullptr;
    int64_t step = 0;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || done_ < submitted_; });
      if (stop_) return;
      index = done_;
      accumulated = accumulated_;
      step = step_;
    }
    try {
      reduce(index, accumulated, step);
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    cv_.notify_all();
  }
}

}  // namespace scalescope
