#include "harness/collectives/replica_comms.h"

#include <fmt/format.h>

#include "core/check.h"
#include "harness/collectives/nccl_communicator.h"

namespace scalescope {

ReplicaComms::ReplicaComms(DeviceKind kind, int size, int first, int local,
                           std::chrono::milliseconds timeout, int processes,
                           const std::string& hostname, const std::string& iface, NodeGroup node)
    : kind_(kind), size_(size), first_(first), local_(local), timeout_(timeout), node_(node) {
  gloo_ = processes > 1 ? std::make_unique<GlooGroup>(size, first, local, timeout, hostname, iface)
                        : std::make_unique<GlooGroup>(size, timeout);
  if (node.size > 0) {
    node_gloo_ =
        std::make_unique<GlooGroup>(node.size, node.first, local, timeout, hostname, iface);
  }
  if (kind != DeviceKind::kCuda) return;
#if SCALESCOPE_WITH_CUDA
  if (processes == 1) {
    nccl_ = std::make_shared<NcclGroup>(local, timeout);
  } else if (first == 0) {
    // This process creates the id; the rendezvous rounds carry it to the others.
    nccl_ = std::make_shared<NcclGroup>(
        local, timeout,
        [this](std::vector<char> mine) {
          nccl_id_ = mine;
          return mine;
        },
        first);
  }
#else
  throw_error(
      fmt::format("GPU replicas need a build with CUDA (SCALESCOPE_WITH_CUDA=ON); this "
                  "one has CPU replicas only"));
#endif
}

ReplicaComms::~ReplicaComms() = default;

bool ReplicaComms::needs_nccl_id() const {
  return kind_ == DeviceKind::kCuda && first_ > 0 && nccl_ == nullptr;
}

void ReplicaComms::set_nccl_id(const std::vector<char>& id) {
#if SCALESCOPE_WITH_CUDA
  std::shared_ptr<NcclGroup> made;
  try {
    made = std::make_shared<NcclGroup>(
        local_, timeout_, [&](std::vector<char>) { return id; }, first_);
  } catch (const Error& e) {
    abort(fmt::format("the NCCL id from the process of replica 0 is unusable: {}", e.what()));
    throw;
  }
  {
    std::lock_guard lock(mutex_);
    nccl_ = std::move(made);
  }
  nccl_ready_.notify_all();
#else
  (void)id;
#endif
}

std::unique_ptr<Communicator> ReplicaComms::connect(int rank, Device& device, int device_index) {
  std::unique_ptr<Communicator> host = gloo_->connect(rank);
  if (kind_ != DeviceKind::kCuda) return host;
#if SCALESCOPE_WITH_CUDA
  NcclGroup* nccl = nullptr;
  {
    std::unique_lock lock(mutex_);
    const bool ready =
        nccl_ready_.wait_for(lock, timeout_, [&] { return nccl_ != nullptr || !aborted_.empty(); });
    SS_CHECK(aborted_.empty(), "replica {}: {}", rank, aborted_);
    SS_CHECK(ready,
             "replica {}: the NCCL id from the process of replica 0 did not come within {} ms",
             rank, timeout_.count());
    nccl = nccl_.get();
  }
  device.make_current();
  return nccl->connect(rank - first_, device_index, rank, size_, std::move(host));
#else
  (void)device;
  (void)device_index;
  return host;
#endif
}

std::unique_ptr<Communicator> ReplicaComms::connect_node(int rank, Device& device,
                                                         Communicator& global) {
  SS_CHECK(node_gloo_ != nullptr, "replica {}: this run has no node-local group", rank);
  const int node_rank = node_.first + (rank - first_);
  std::unique_ptr<Communicator> host = node_gloo_->connect(node_rank);
  if (kind_ != DeviceKind::kCuda) return host;
#if SCALESCOPE_WITH_CUDA
  auto* nccl = dynamic_cast<NcclCommunicator*>(&global);
  SS_CHECK(nccl != nullptr, "replica {}: a GPU replica's communicator is not NCCL's", rank);
  device.make_current();
  // The node's index as the colour: the replicas of one node, ordered as on the node.
  return nccl->split(node_.index, node_rank, std::move(host));
#else
  (void)device;
  (void)global;
  return host;
#endif
}

void ReplicaComms::finished(int rank) {
  gloo_->finished(rank);
  if (node_gloo_) node_gloo_->finished(node_.first + (rank - first_));
}

void ReplicaComms::abort(const std::string& why) {
  gloo_->abort(why);
  if (node_gloo_) node_gloo_->abort(why);
  {
    std::lock_guard lock(mutex_);
    if (aborted_.empty()) aborted_ = why.empty() ? "aborted" : why;
#if SCALESCOPE_WITH_CUDA
    if (nccl_ != nullptr) nccl_->abort(why);
#endif
  }
  nccl_ready_.notify_all();
}

}  // namespace scalescope
