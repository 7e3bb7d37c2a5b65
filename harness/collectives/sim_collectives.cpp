#include "harness/collectives/sim_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/sim/sim_stream.h"

namespace scalescope {
namespace {

[[noreturn]] void fail(int rank, int size, const std::string& message) {
  throw Error(kSimCollectivesLibrary, "shared-memory collective",
              fmt::format("rank {} of {}: {}", rank, size, message));
}

// The ranks of one group, as threads of this process: each collective is a few barrier
// rounds over the ranks' buffers, which every rank's worker reads where they lie.
class SharedMemoryWorld {
 public:
  SharedMemoryWorld(int size, std::chrono::milliseconds timeout)
      : size_(size), timeout_(timeout), data_(static_cast<size_t>(size)) {}

  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Reduce-scatter then all-gather, in place: rank r sums slice r over the ranks (in rank
  // order) into its own buffer; then every rank copies every other slice from its owner.
  // Nobody writes what another reads within a round.
  void all_reduce(int rank, float* data, int64_t count, ReduceOp op) {
    const float divisor = static_cast<float>(size_);
    reduce(
        rank, data, count, "all_reduce", [](float a, float b) { return a + b; },
        // Division as the Gloo communicator does it: every rank gets the same bits.
        [&](float sum) { return op == ReduceOp::kAverage ? sum / divisor : sum; });
  }

  // The same rounds on 16-bit values, each partial sum rounded to the format.
  void all_reduce_half(int rank, uint16_t* data, int64_t count, kernel_math::HalfFormat format) {
    reduce(
        rank, data, count, "all_reduce_half",
        [format](uint16_t a, uint16_t b) { return kernel_math::half_sum(a, b, format); },
        [](uint16_t sum) { return sum; });
  }

  void broadcast(int rank, float* data, int64_t count, int root) {
    const std::vector<Buffer> all = post(rank, data, count, sizeof(float), "broadcast");
    if (rank != root) {
      std::memcpy(data, all[static_cast<size_t>(root)].data,
                  static_cast<size_t>(count) * sizeof(float));
    }
    wait_all(rank, "broadcast");
  }

  void abort(const std::string& why) {
    {
      std::lock_guard lock(mutex_);
      if (broken_.empty()) broken_ = why.empty() ? "aborted" : why;
    }
    changed_.notify_all();
  }

 private:
  struct Buffer {
    void* data = nullptr;
    int64_t count = 0;
    size_t element = 0;  // bytes per value
  };

  template <class T, class Sum, class Finish>
  void reduce(int rank, T* data, int64_t count, const char* what, Sum sum, Finish finish) {
    const std::vector<Buffer> all = post(rank, data, count, sizeof(T), what);
    const auto at = [&](int r) { return static_cast<const T*>(all[static_cast<size_t>(r)].data); };
    const auto [begin, end] = slice(rank, count);
    for (int64_t i = begin; i < end; ++i) {
      T acc = at(0)[i];
      for (int r = 1; r < size_; ++r) acc = sum(acc, at(r)[i]);
      data[i] = finish(acc);
    }
    wait_all(rank, what);
    for (int r = 0; r < size_; ++r) {
      if (r == rank) continue;
      const auto [b, e] = slice(r, count);
      std::memcpy(data + b, at(r) + b, static_cast<size_t>(e - b) * sizeof(T));
    }
    wait_all(rank, what);  // no buffer changes while another rank still reads it
  }

  std::pair<int64_t, int64_t> slice(int rank, int64_t count) const {
    return {count * rank / size_, count * (rank + 1) / size_};
  }

  // Posts this rank's buffer, waits for every rank's, and returns them all.
  std::vector<Buffer> post(int rank, void* data, int64_t count, size_t element, const char* what) {
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
        fail(rank, size_,
             fmt::format("{} of {} values of {} bytes, but rank {} gave {} of {}", what, count,
                         element, r, b.count, b.element));
      }
    }
    return all;
  }

  // A barrier of every rank, with the timeout; a rank that times out breaks the world, so
  // that the others fail at once instead of each waiting out its own timeout.
  void wait_all(int rank, const char* what) {
    std::unique_lock lock(mutex_);
    if (!broken_.empty()) fail(rank, size_, fmt::format("{}: {}", what, broken_));
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      lock.unlock();
      changed_.notify_all();
      return;
    }
    const bool passed = changed_.wait_for(
        lock, timeout_, [&] { return generation_ != generation || !broken_.empty(); });
    if (passed && generation_ != generation) return;
    if (broken_.empty()) {
      broken_ = fmt::format("rank {} waited {} ms in {} for the other ranks", rank,
                            timeout_.count(), what);
      changed_.notify_all();
    }
    fail(rank, size_, fmt::format("{}: {}", what, broken_));
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Buffer> data_;  // guarded by mutex_, as are the four below
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::string broken_;  // why every later collective fails
};

class SimCommunicator final : public Communicator {
 public:
  SimCommunicator(std::shared_ptr<SharedMemoryWorld> world, int rank,
                  std::unique_ptr<Communicator> host)
      : world_(std::move(world)), rank_(rank), host_(std::move(host)) {}

  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  std::string backend_name() const override { return "sim"; }
  bool enqueues() const override { return true; }

  void all_reduce(float* data, int64_t count, ReduceOp op, Stream& stream) override {
    SS_CHECK(count >= 0, "all_reduce: count must be >= 0, got {}", count);
    sim_stream(stream).enqueue([world = world_, rank = rank_, data, count, op] {
      world->all_reduce(rank, data, count, op);
    });
  }
  void all_reduce_half(uint16_t* data, int64_t count, kernel_math::HalfFormat format,
                       Stream& stream) override {
    SS_CHECK(count >= 0, "all_reduce_half: count must be >= 0, got {}", count);
    sim_stream(stream).enqueue([world = world_, rank = rank_, data, count, format] {
      world->all_reduce_half(rank, data, count, format);
    });
  }
  void broadcast(float* data, int64_t count, int root, Stream& stream) override {
    SS_CHECK(count >= 0, "broadcast: count must be >= 0, got {}", count);
    SS_CHECK(root >= 0 && root < size(), "broadcast: root {} is out of range for a group of {}",
             root, size());
    sim_stream(stream).enqueue([world = world_, rank = rank_, data, count, root] {
      world->broadcast(rank, data, count, root);
    });
  }
  void barrier() override { host_->barrier(); }
  std::vector<double> all_gather(std::span<const double> mine) override {
    return host_->all_gather(mine);
  }
  // Waits at most the collective timeout: work behind a collective whose peer is gone would
  // never finish.
  void synchronize(Stream& stream, const std::string& what) override {
    if (!sim_stream(stream).synchronize_for(world_->timeout())) {
      world_->abort(fmt::format("rank {} gave up waiting for {}", rank_, what));
      fail(rank_, size(),
           fmt::format("{} did not finish within {} ms", what, world_->timeout().count()));
    }
  }

 private:
  std::shared_ptr<SharedMemoryWorld> world_;
  int rank_;
  std::unique_ptr<Communicator> host_;
};

class SimDeviceGroup final : public DeviceCollectiveGroup {
 public:
  SimDeviceGroup(int size, std::chrono::milliseconds timeout)
      : world_(std::make_shared<SharedMemoryWorld>(size, timeout)) {}
  std::unique_ptr<Communicator> connect(int rank, int /*device_index*/, int global_rank,
                                        int world_size,
                                        std::unique_ptr<Communicator> host_comm) override {
    SS_CHECK(world_size == world_->size() && global_rank == rank,
             "rank {}: simulated devices' collectives span the replicas of one process ({} "
             "here), not {}",
             global_rank, world_->size(), world_size);
    return std::make_unique<SimCommunicator>(world_, rank, std::move(host_comm));
  }
  std::unique_ptr<Communicator> split(Communicator&, int, int,
                                      std::unique_ptr<Communicator>) override {
    throw_error("simulated devices run in one process, on one node: they have no node groups");
  }
  void abort(const std::string& why) override { world_->abort(why); }

 private:
  std::shared_ptr<SharedMemoryWorld> world_;
};

class SimCollectiveBackend final : public CollectiveBackend {
 public:
  DeviceKind kind() const override { return DeviceKind::kSim; }
  // Gloo carries the host values.
  std::vector<LibraryVersion> library_versions() const override { return {gloo_version()}; }
  const char* device_collectives() const override { return "shared memory"; }
  std::unique_ptr<DeviceCollectiveGroup> create_group(int size, std::chrono::milliseconds timeout,
                                                      ShareGroupId share_id,
                                                      int /*first_global_rank*/) const override {
    SS_CHECK(!share_id,
             "simulated devices run within one process (their collectives are shared memory "
             "between its threads): run sim devices without mpirun or srun");
    SS_CHECK(size >= 1, "a group of {} simulated devices", size);
    return std::make_unique<SimDeviceGroup>(size, timeout);
  }
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_sim_collective_backend() {
  return std::make_unique<SimCollectiveBackend>();
}

}  // namespace scalescope
