#include "harness/collectives/replica_comms.h"

#include <fmt/format.h>

#include "core/check.h"
#include "harness/collectives/collective_backends.h"
#include "harness/collectives/shared_memory.h"

namespace scalescope {
namespace {

// The kind's collectives when they include device collectives, else null. Throws Error
// when this build lacks the kind.
const CollectiveBackend* device_collectives_of(DeviceKind kind) {
  const CollectiveBackend& backend = collective_backend(kind);
  return backend.device_collectives() != nullptr ? &backend : nullptr;
}

}  // namespace

ReplicaComms::ReplicaComms(DeviceKind kind, int size, int first, int local,
                           std::chrono::milliseconds timeout, int processes,
                           const std::string& hostname, const std::string& iface, NodeGroup node,
                           bool cpu_shared_memory)
    : device_(device_collectives_of(kind)),
      size_(size),
      first_(first),
      local_(local),
      timeout_(timeout),
      node_(node) {
  gloo_ = processes > 1 ? std::make_unique<GlooGroup>(size, first, local, timeout, hostname, iface)
                        : std::make_unique<GlooGroup>(size, timeout);
  if (node.size > 0) {
    node_gloo_ =
        std::make_unique<GlooGroup>(node.size, node.first, local, timeout, hostname, iface);
  }
  if (cpu_shared_memory && kind == DeviceKind::kCpu && processes == 1 && size > 1) {
    shared_memory_ = std::make_shared<SharedMemoryWorld>(size, timeout, kSharedMemoryLibrary);
  }
  if (device_ == nullptr) return;
  if (processes == 1) {
    group_ = device_->create_group(local, timeout);
  } else if (first == 0) {
    // This process creates the id; the rendezvous rounds carry it to the others.
    group_ = device_->create_group(
        local, timeout,
        [this](std::vector<char> mine) {
          nccl_id_ = mine;
          return mine;
        },
        first);
  }
}

ReplicaComms::~ReplicaComms() = default;

bool ReplicaComms::needs_nccl_id() const {
  return device_ != nullptr && first_ > 0 && group_ == nullptr;
}

void ReplicaComms::set_nccl_id(const std::vector<char>& id) {
  if (device_ == nullptr) return;
  std::unique_ptr<DeviceCollectiveGroup> made;
  try {
    made = device_->create_group(
        local_, timeout_, [&](std::vector<char>) { return id; }, first_);
  } catch (const Error& e) {
    abort(fmt::format("the {} id from the process of replica 0 is unusable: {}",
                      device_->device_collectives(), e.what()));
    throw;
  }
  {
    std::lock_guard lock(mutex_);
    group_ = std::move(made);
  }
  group_ready_.notify_all();
}

std::unique_ptr<Communicator> ReplicaComms::connect(int rank, Device& device, int device_index) {
  std::unique_ptr<Communicator> host = gloo_->connect(rank);
  if (shared_memory_) return make_shared_memory_communicator(shared_memory_, rank, std::move(host));
  if (device_ == nullptr) return host;
  DeviceCollectiveGroup* group = nullptr;
  {
    std::unique_lock lock(mutex_);
    const bool ready = group_ready_.wait_for(
        lock, timeout_, [&] { return group_ != nullptr || !aborted_.empty(); });
    SS_CHECK(aborted_.empty(), "replica {}: {}", rank, aborted_);
    SS_CHECK(ready, "replica {}: the {} id from the process of replica 0 did not come within {} ms",
             rank, device_->device_collectives(), timeout_.count());
    group = group_.get();
  }
  device.make_current();
  return group->connect(rank - first_, device_index, rank, size_, std::move(host));
}

std::unique_ptr<Communicator> ReplicaComms::connect_node(int rank, Device& device,
                                                         Communicator& global) {
  SS_CHECK(node_gloo_ != nullptr, "replica {}: this run has no node-local group", rank);
  const int node_rank = node_.first + (rank - first_);
  std::unique_ptr<Communicator> host = node_gloo_->connect(node_rank);
  if (device_ == nullptr) return host;
  DeviceCollectiveGroup* group = nullptr;
  {
    std::lock_guard lock(mutex_);
    group = group_.get();
  }
  SS_CHECK(group != nullptr, "replica {}: connect_node before connect", rank);
  device.make_current();
  // The node's index as the colour: the replicas of one node, ordered as on the node.
  return group->split(global, node_.index, node_rank, std::move(host));
}

void ReplicaComms::finished(int rank) {
  gloo_->finished(rank);
  if (node_gloo_) node_gloo_->finished(node_.first + (rank - first_));
}

void ReplicaComms::abort(const std::string& why) {
  gloo_->abort(why);
  if (shared_memory_) shared_memory_->abort(why);
  if (node_gloo_) node_gloo_->abort(why);
  {
    std::lock_guard lock(mutex_);
    if (aborted_.empty()) aborted_ = why.empty() ? "aborted" : why;
    if (group_ != nullptr) group_->abort(why);
  }
  group_ready_.notify_all();
}

}  // namespace scalescope
