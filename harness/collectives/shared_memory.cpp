#include "harness/collectives/shared_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/error.h"

namespace scalescope {

SharedMemoryWorld::SharedMemoryWorld(int size, std::chrono::milliseconds timeout,
                                     std::string library, SharedMemoryWaits waits)
    : size_(size),
      timeout_(timeout),
      library_(std::move(library)),
      device_(waits == SharedMemoryWaits::kDevice),
      data_(static_cast<size_t>(size)),
      left_(static_cast<size_t>(size)) {
  SS_CHECK(size >= 1, "a shared-memory group of {} ranks", size);
}

void SharedMemoryWorld::fail(int rank, const std::string& message) const {
  throw Error(library_, "shared-memory collective",
              fmt::format("rank {} of {}: {}", rank, size_, message));
}

void SharedMemoryWorld::all_reduce(int rank, float* data, int64_t count, ReduceOp op) {
  const float divisor = static_cast<float>(size_);
  reduce(
      rank, data, count, "all_reduce", [](float a, float b) { return a + b; },
      // Division as the Gloo communicator does it: every rank gets the same bits.
      [&](float sum) { return op == ReduceOp::kAverage ? sum / divisor : sum; });
}

void SharedMemoryWorld::all_reduce_half(int rank, uint16_t* data, int64_t count,
                                        kernel_math::HalfFormat format) {
  reduce(
      rank, data, count, "all_reduce_half",
      [format](uint16_t a, uint16_t b) { return kernel_math::half_sum(a, b, format); },
      [](uint16_t sum) { return sum; });
}

void SharedMemoryWorld::broadcast(int rank, float* data, int64_t count, int root) {
  const std::vector<Buffer> all = post(rank, data, count, sizeof(float), "broadcast");
  if (rank != root) {
    std::memcpy(data, all[static_cast<size_t>(root)].data,
                static_cast<size_t>(count) * sizeof(float));
  }
  wait_all(rank, "broadcast");
}

void SharedMemoryWorld::abort(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (broken_.empty()) broken_ = why.empty() ? "aborted" : why;
  }
  changed_.notify_all();
}

std::string SharedMemoryWorld::aborted() const {
  const std::lock_guard lock(mutex_);
  return broken_;
}

void SharedMemoryWorld::abandon(int rank, const std::string& why) {
  {
    const std::lock_guard lock(mutex_);
    std::string& left = left_.at(static_cast<size_t>(rank));
    if (left.empty()) left = why.empty() ? "abandoned" : why;
  }
  changed_.notify_all();
}

// Rank r reads and writes slice r of every buffer and nothing else, so nobody writes what
// another reads. The sum runs over blocks held in a local array, each rank's values added in
// rank order, so the float loops vectorise and the result does not depend on which rank
// computes it; a block is read whole from every buffer before it is written into every buffer
// (one pass: no rank copies the others' slices afterwards).
template <class T, class Sum, class Finish>
void SharedMemoryWorld::reduce(int rank, T* data, int64_t count, const char* what, Sum sum,
                               Finish finish) {
  const std::vector<Buffer> all = post(rank, data, count, sizeof(T), what);
  const auto at = [&](int r) { return static_cast<T*>(all[static_cast<size_t>(r)].data); };
  const auto [begin, end] = slice(rank, count);
  constexpr int64_t kBlock = 2048;
  T acc[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t n = std::min(kBlock, end - b);
    std::copy_n(at(0) + b, n, acc);
    for (int r = 1; r < size_; ++r) {
      const T* in = at(r) + b;
      for (int64_t k = 0; k < n; ++k) acc[k] = sum(acc[k], in[k]);
    }
    for (int64_t k = 0; k < n; ++k) acc[k] = finish(acc[k]);
    for (int r = 0; r < size_; ++r) std::copy_n(acc, n, at(r) + b);
  }
  wait_all(rank, what);  // every slice written before any rank reads its buffer again
}

std::pair<int64_t, int64_t> SharedMemoryWorld::slice(int rank, int64_t count) const {
  return {count * rank / size_, count * (rank + 1) / size_};
}

// Posts this rank's buffer, waits for every rank's, and returns them all.
std::vector<SharedMemoryWorld::Buffer> SharedMemoryWorld::post(int rank, void* data, int64_t count,
                                                               size_t element, const char* what) {
  {
    std::lock_guard lock(mutex_);
    data_[static_cast<size_t>(rank)] = {data, count, element};
  }
  wait_all(rank, what);
  std::vector<Buffer> all;
  {
    std::lock_guard lock(mutex_);
    all = data_;
  }
  for (int r = 0; r < size_; ++r) {
    const Buffer& b = all[static_cast<size_t>(r)];
    if (b.count != count || b.element != element) {
      fail(rank, fmt::format("{} of {} values of {} bytes, but rank {} gave {} of {}", what, count,
                             element, r, b.count, b.element));
    }
  }
  return all;
}

bool SharedMemoryWorld::anyone_left() const {
  return std::any_of(left_.begin(), left_.end(),
                     [](const std::string& why) { return !why.empty(); });
}

// A barrier of every rank, with the timeout.
void SharedMemoryWorld::wait_all(int rank, const char* what) {
  std::unique_lock lock(mutex_);
  // Why this rank's waits end now ("" while they go on).
  const auto stop = [&]() -> const std::string& {
    return device_ ? left_[static_cast<size_t>(rank)] : broken_;
  };
  if (!stop().empty()) fail(rank, fmt::format("{}: {}", what, stop()));
  const uint64_t generation = generation_;
  if (++arrived_ == size_ && !anyone_left()) {
    arrived_ = 0;
    ++generation_;
    lock.unlock();
    changed_.notify_all();
    return;
  }
  const bool passed = changed_.wait_for(
      lock, timeout_, [&] { return generation_ != generation || !stop().empty(); });
  if (passed && generation_ != generation) return;
  if (stop().empty()) {
    const std::string why =
        fmt::format("rank {} waited {} ms in {} for the other ranks", rank, timeout_.count(), what);
    if (device_) left_[static_cast<size_t>(rank)] = why;
    if (broken_.empty()) broken_ = why;
    changed_.notify_all();
  }
  fail(rank, fmt::format("{}: {}", what, stop()));
}

namespace {

class SharedMemoryCommunicator final : public Communicator {
 public:
  SharedMemoryCommunicator(std::shared_ptr<SharedMemoryWorld> world, int rank,
                           std::unique_ptr<Communicator> host)
      : world_(std::move(world)), rank_(rank), host_(std::move(host)) {}

  // A replica that leaves (its thread unwinding after an error) must not leave its peers
  // waiting for it until the timeout.
  ~SharedMemoryCommunicator() override {
    if (std::uncaught_exceptions() > 0) world_->abort(fmt::format("rank {} left", rank_));
  }
  SharedMemoryCommunicator(const SharedMemoryCommunicator&) = delete;
  SharedMemoryCommunicator& operator=(const SharedMemoryCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  std::string backend_name() const override { return "shared memory"; }

  void all_reduce(float* data, int64_t count, ReduceOp op, Stream& stream) override {
    check(stream, count, "all_reduce");
    world_->all_reduce(rank_, data, count, op);
  }
  void all_reduce_half(uint16_t* data, int64_t count, kernel_math::HalfFormat format,
                       Stream& stream) override {
    check(stream, count, "all_reduce_half");
    world_->all_reduce_half(rank_, data, count, format);
  }
  void broadcast(float* data, int64_t count, int root, Stream& stream) override {
    check(stream, count, "broadcast");
    SS_CHECK(root >= 0 && root < size(), "broadcast: root {} is out of range for a group of {}",
             root, size());
    world_->broadcast(rank_, data, count, root);
  }
  void barrier() override { host_->barrier(); }
  std::vector<double> all_gather(std::span<const double> mine) override {
    return host_->all_gather(mine);
  }

 private:
  static void check(const Stream& stream, int64_t count, const char* collective) {
    SS_CHECK(stream.device().id().kind == DeviceKind::kCpu,
             "{}: shared-memory collectives take CPU memory (got a stream of {})", collective,
             to_string(stream.device().id()));
    SS_CHECK(count >= 0, "{}: count must be >= 0, got {}", collective, count);
  }

  std::shared_ptr<SharedMemoryWorld> world_;
  int rank_;
  std::unique_ptr<Communicator> host_;
};

}  // namespace

std::unique_ptr<Communicator> make_shared_memory_communicator(
    std::shared_ptr<SharedMemoryWorld> world, int rank, std::unique_ptr<Communicator> host) {
  SS_CHECK(rank >= 0 && rank < world->size(), "rank {} is outside a shared-memory group of {}",
           rank, world->size());
  return std::make_unique<SharedMemoryCommunicator>(std::move(world), rank, std::move(host));
}

}  // namespace scalescope
