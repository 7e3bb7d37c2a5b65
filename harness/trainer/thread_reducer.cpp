#include "harness/trainer/thread_reducer.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/nvtx.h"

namespace scalescope {

ThreadReducer::ThreadReducer(Communicator& comm, Device& device, Stream& compute, float* grads,
                             Config config, int64_t epoch_ns)
    : GradientReducer(comm, device, compute, grads, std::move(config)), epoch_ns_(epoch_ns) {
  times_.bucket_ms.assign(buckets().size(), 0.0);
  times_.start_ms.assign(buckets().size(), 0.0);
  if (comm.size() > 1) thread_ = std::thread([this] { run(); });
}

ThreadReducer::~ThreadReducer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ThreadReducer::begin_step() {
  std::lock_guard lock(mutex_);
  submitted_ = 0;
  done_ = 0;
  times_.total_ms = 0.0;
  times_.cast_ms = 0.0;
}

void ThreadReducer::start(size_t index) {
  {
    std::lock_guard lock(mutex_);
    SS_CHECK(index == submitted_, "bucket {} started out of order (next is {})", index, submitted_);
    ++submitted_;
  }
  if (!thread_.joinable()) {
    reduce(index);
    return;
  }
  cv_.notify_all();
}

void ThreadReducer::reduce(size_t index) {
  // The earlier micro-batches' gradients join the last one's here, on this thread, so
  // backward never waits for the addition; the bucket's time is the all-reduce's alone.
  norm_before(index, compute());
  add_accumulated(index, compute());
  const int64_t cast_start = now_ns();
  if (compressed()) {
    nvtx::Range range(Phase::kGradCast, step(), "compress");
    compress(index, compute());
  }
  const int64_t start = now_ns();
  {
    // The step as payload, the bucket and its size in the text: the timeline shows which
    // buckets of which step ran how long.
    nvtx::Range range(Phase::kAllReduce, step(), range_text(index).c_str());
    all_reduce(index, compute());
  }  // the range closes before the step can see the bucket done
  const int64_t end = now_ns();
  if (compressed()) {
    nvtx::Range range(Phase::kGradCast, step(), "decompress");
    decompress(index, compute());
  }
  const double ms = static_cast<double>(end - start) * 1e-6;
  const double cast_ms =
      compressed() ? static_cast<double>(now_ns() - end + start - cast_start) * 1e-6 : 0.0;
  norm_after(index, compute());
  std::lock_guard lock(mutex_);
  times_.total_ms += ms;
  times_.cast_ms += cast_ms;
  times_.bucket_ms[index] = ms;
  times_.start_ms[index] = static_cast<double>(start - epoch_ns_) * 1e-6;
  ++done_;
}

void ThreadReducer::sync_sum(float* values, int64_t count) {
  if (!thread_.joinable()) {
    comm().all_reduce(values, count, ReduceOp::kSum, compute());
    return;
  }
  std::unique_lock lock(mutex_);
  if (error_) std::rethrow_exception(error_);  // the thread failed on an earlier bucket
  sync_values_ = values;
  sync_count_ = count;
  cv_.notify_all();
  cv_.wait(lock, [&] { return sync_values_ == nullptr || error_ != nullptr; });
  if (error_) std::rethrow_exception(error_);
}

void ThreadReducer::wait_all() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_ == buckets().size() || error_ != nullptr; });
  if (error_) std::rethrow_exception(error_);
}

void ThreadReducer::run() {
  set_thread_rank(comm().rank());
  nvtx::name_current_thread(fmt::format("scalescope comm {}", comm().rank()).c_str());
  // Work this thread runs on the device (the accumulated gradients' addition) uses the
  // device's settings, as the replica's own thread does.
  device().make_current();
  while (true) {
    size_t index = 0;
    float* sync = nullptr;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || done_ < submitted_ || sync_values_ != nullptr; });
      if (stop_) return;
      index = done_;
      // The buckets started before a sync sum go first: every rank then runs the
      // collectives in one order (the replica thread waits in sync_sum meanwhile).
      if (done_ == submitted_) sync = sync_values_;
    }
    try {
      if (sync == nullptr) {
        reduce(index);
      } else {
        comm().all_reduce(sync, sync_count_, ReduceOp::kSum, compute());
        std::lock_guard lock(mutex_);
        sync_values_ = nullptr;
      }
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
