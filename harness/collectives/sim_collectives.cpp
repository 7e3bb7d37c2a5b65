#include "harness/collectives/sim_collectives.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/sim/sim_stream.h"
#include "harness/collectives/shared_memory.h"

namespace scalescope {
namespace {

// How often a host wait looks at the group's abort and the timeout.
constexpr std::chrono::milliseconds kPoll{1};

class SimCommunicator final : public Communicator {
 public:
  SimCommunicator(std::shared_ptr<SharedMemoryWorld> world, int rank,
                  std::unique_ptr<Communicator> host)
      : world_(std::move(world)), rank_(rank), host_(std::move(host)) {}
  // As NCCL's communicator closes: aborted when the run failed, so that what it left queued
  // returns before the device's streams drain.
  ~SimCommunicator() override {
    const std::string why = world_->aborted();
    if (!why.empty()) {
      abort(why);
    } else if (std::uncaught_exceptions() > 0) {
      abort(fmt::format("rank {} left", rank_));
    }
  }
  SimCommunicator(const SimCommunicator&) = delete;
  SimCommunicator& operator=(const SimCommunicator&) = delete;

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
  // Polls the stream, the group's abort and the collective timeout, as NCCL's wait() does:
  // work behind a collective whose peer is gone would never finish. Giving up aborts this
  // rank (its queued collectives return) and the group.
  void synchronize(Stream& stream, const std::string& what) override {
    const auto deadline = std::chrono::steady_clock::now() + world_->timeout();
    SimStream& s = sim_stream(stream);
    while (!s.synchronize_for(kPoll)) {
      std::string why = world_->aborted();
      if (!why.empty()) {
        why = fmt::format("{}: the group was aborted: {}", what, why);
      } else if (std::chrono::steady_clock::now() >= deadline) {
        why = fmt::format("{} did not finish within {} ms", what, world_->timeout().count());
        world_->abort(fmt::format("rank {} gave up waiting for {}", rank_, what));
      } else {
        continue;
      }
      abort(why);
      world_->fail(rank_, why);
    }
  }
  void abort(const std::string& why) noexcept override {
    try {
      world_->abandon(rank_, why);
    } catch (...) {
      world_->abandon(rank_, "");  // out of memory for the reason: still abandoned
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
      : world_(std::make_shared<SharedMemoryWorld>(size, timeout, kSimCollectivesLibrary,
                                                   SharedMemoryWaits::kDevice)) {}
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
