#include "core/sim/sim_stream.h"

#include <omp.h>

#include <chrono>
#include <utility>

#include "core/check.h"
#include "core/clock.h"

namespace scalescope {

void SimFault::set(std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (!error_) error_ = std::move(error);
}

std::exception_ptr SimFault::get() const {
  std::lock_guard lock(mutex_);
  return error_;
}

SimStream::SimStream(Device& device, SimFault& fault, CachingAllocator& allocator, int threads,
                     int64_t jitter_us, uint64_t seed)
    : device_(device),
      fault_(fault),
      allocator_(allocator),
      threads_(threads),
      jitter_us_(jitter_us),
      random_(seed) {
  allocator_.register_stream(*this);
  try {
    worker_ = std::thread([this] { run(); });
  } catch (...) {
    allocator_.unregister_stream(*this);
    throw;
  }
}

SimStream::~SimStream() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
  allocator_.unregister_stream(*this);
}

void SimStream::synchronize() {
  std::unique_lock lock(mutex_);
  const uint64_t target = enqueued_;
  changed_.wait(lock, [&] { return done_ >= target; });
  lock.unlock();
  if (const std::exception_ptr error = fault_.get()) std::rethrow_exception(error);
}

bool SimStream::synchronize_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const uint64_t target = enqueued_;
  if (!changed_.wait_for(lock, timeout, [&] { return done_ >= target; })) return false;
  lock.unlock();
  if (const std::exception_ptr error = fault_.get()) std::rethrow_exception(error);
  return true;
}

bool SimStream::idle() const {
  std::lock_guard lock(mutex_);
  return done_ == enqueued_;
}

void SimStream::enqueue(std::function<void()> work, bool marker) {
  {
    std::lock_guard lock(mutex_);
    SS_CHECK(!stop_, "work enqueued on a stream being destroyed");
    queue_.push_back({std::move(work), marker});
    ++enqueued_;
  }
  changed_.notify_all();
}

void SimStream::delay() {
  if (jitter_us_ <= 0) return;
  std::uniform_int_distribution<int64_t> us(0, jitter_us_);
  std::this_thread::sleep_for(std::chrono::microseconds(us(random_)));
}

void SimStream::run() {
  // The kernels this thread runs use the device's share of the cores, as the replica's own
  // thread would.
  omp_set_num_threads(threads_);
  while (true) {
    Item item;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    delay();
    if (item.marker || !fault_.failed()) {
      try {
        item.work();
      } catch (...) {
        fault_.set(std::current_exception());
      }
    }
    {
      std::lock_guard lock(mutex_);
      ++done_;
    }
    changed_.notify_all();
  }
}

SimStream& sim_stream(Stream& stream) {
  auto* sim = dynamic_cast<SimStream*>(&stream);
  SS_CHECK(sim != nullptr, "work for a simulated device was given a {} stream",
           to_string(stream.device().id()));
  return *sim;
}

SimEvent::SimEvent(SimFault& fault, bool timing)
    : fault_(fault), timing_(timing), state_(std::make_shared<State>()) {}

void SimEvent::record(Stream& stream) {
  SimStream& sim = sim_stream(stream);
  uint64_t generation = 0;
  {
    std::lock_guard lock(state_->mutex);
    generation = ++state_->recorded;
  }
  sim.enqueue(
      [state = state_, generation] {
        {
          std::lock_guard lock(state->mutex);
          state->time_ns = now_ns();
          state->reached = std::max(state->reached, generation);
        }
        state->reached_cv.notify_all();
      },
      /*marker=*/true);
}

void SimEvent::wait_on(Stream& stream) const {
  SimStream& sim = sim_stream(stream);
  uint64_t generation = 0;
  {
    std::lock_guard lock(state_->mutex);
    generation = state_->recorded;
  }
  if (generation == 0) return;  // never recorded: nothing to wait for (as CUDA)
  sim.enqueue(
      [state = state_, generation] {
        std::unique_lock lock(state->mutex);
        state->reached_cv.wait(lock, [&] { return state->reached >= generation; });
      },
      /*marker=*/true);
}

void SimEvent::synchronize() const {
  {
    std::unique_lock lock(state_->mutex);
    const uint64_t generation = state_->recorded;
    state_->reached_cv.wait(lock, [&] { return state_->reached >= generation; });
  }
  if (const std::exception_ptr error = fault_.get()) std::rethrow_exception(error);
}

bool SimEvent::synchronize_for(std::chrono::milliseconds timeout) const {
  {
    std::unique_lock lock(state_->mutex);
    const uint64_t generation = state_->recorded;
    if (!state_->reached_cv.wait_for(lock, timeout,
                                     [&] { return state_->reached >= generation; })) {
      return false;
    }
  }
  if (const std::exception_ptr error = fault_.get()) std::rethrow_exception(error);
  return true;
}

bool SimEvent::query() const {
  std::lock_guard lock(state_->mutex);
  return state_->reached >= state_->recorded && !fault_.failed();
}

double SimEvent::elapsed_ms_since(const Event& start) const {
  const auto* other = dynamic_cast<const SimEvent*>(&start);
  check_elapsed(other, timing_, other != nullptr && other->timing_);
  int64_t end_ns = 0;
  int64_t start_ns = 0;
  for (const auto& [event, ns] : {std::pair{this, &end_ns}, std::pair{other, &start_ns}}) {
    std::lock_guard lock(event->state_->mutex);
    SS_CHECK(event->state_->recorded > 0 && event->state_->reached == event->state_->recorded,
             "elapsed time of an event not recorded or not reached yet");
    *ns = event->state_->time_ns;
  }
  return static_cast<double>(end_ns - start_ns) * 1e-6;
}

}  // namespace scalescope
