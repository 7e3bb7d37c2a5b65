// The communicators of a run's replicas in this process, made with the collectives of the
// replicas' device kind (collective_backends.h). CPU replicas use Gloo. GPU replicas use
// device collectives (NCCL) for device memory and a Gloo communicator of the same ranks for
// host values (barrier and all_gather), so a GPU run makes both rendezvous.
//
// Across processes (harness/trainer's rendezvous rounds) the id of the device collectives
// (NCCL's unique id) travels like the Gloo keys: the process of replica 0 creates it at
// construction (nccl_id() then returns it), every other process hands it to set_nccl_id()
// when the first round brings it, and its replicas wait for that in connect().
//
// A run that spans several nodes also gets a node-local communicator per replica (Gloo: a
// second group of the node's replicas, whose keys travel in the same rounds; device
// collectives: a split of the run's communicator), so that the trainer can time the
// all-reduce of the same buckets within the node and across all nodes: the difference is
// what crossing nodes costs.
//
// CPU replicas that all live in this process may instead reduce through shared memory
// (shared_memory.h: each sums its slice of the others' buffers, as NCCL's shared-memory
// transport does within a node) rather than over Gloo's TCP on loopback; Gloo then carries
// only the host values.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"
#include "harness/collectives/communicator.h"

namespace scalescope {

class CollectiveBackend;
class DeviceCollectiveGroup;
class SharedMemoryWorld;

// A node's replicas, of which one process's are [first, first + its local replicas), and the
// node's index (the same on all its processes). size 0: no node group.
struct NodeGroup {
  int size = 0;
  int first = 0;
  int index = 0;
};

class ReplicaComms {
 public:
  // Replicas [first, first + local) of `size` live in this process (first 0 and local ==
  // size: the whole run). `processes` > 1: the group spans processes, its Gloo devices bound
  // to `hostname` or `iface`. Throws Error when this build lacks the collectives of
  // `kind` (missing_backend_message), or its device collectives cannot create an id.
  // `node` (when node.size > 0): this node's replicas (NodeGroup). `cpu_shared_memory`: CPU
  // replicas reduce through shared memory when the whole run is in this process (ignored
  // otherwise).
  ReplicaComms(DeviceKind kind, int size, int first, int local, std::chrono::milliseconds timeout,
               int processes, const std::string& hostname, const std::string& iface,
               NodeGroup node = {}, bool cpu_shared_memory = false);
  ~ReplicaComms();
  ReplicaComms(const ReplicaComms&) = delete;
  ReplicaComms& operator=(const ReplicaComms&) = delete;

  GlooGroup& gloo() { return *gloo_; }
  // The node-local Gloo group; null when the run has no node group.
  GlooGroup* node_gloo() { return node_gloo_.get(); }
  // The id of the device collectives (NCCL's unique id) this process created for the others
  // (process of replica 0, GPU runs over several processes); empty otherwise.
  const std::vector<char>& nccl_id() const { return nccl_id_; }
  // Whether this process still waits for that id from another process.
  bool needs_nccl_id() const;
  // The id from the process of replica 0; the waiting connects then go on. Throws Error for
  // an id of the wrong size (the waiting connects then fail too). Ignored by replicas
  // without device collectives.
  void set_nccl_id(const std::vector<char>& id);

  // Connects replica `rank` (of the whole run) on `device` (GPU `device_index`): returns its
  // communicator. Call once per local replica, each from its own thread. Throws Error on
  // failure, after the timeout, or when aborted.
  std::unique_ptr<Communicator> connect(int rank, Device& device, int device_index);
  // The node-local communicator of replica `rank`, whose run communicator `global` is (from
  // connect()). Call once per local replica after connect(), each from its own thread.
  // REQUIRES: node_gloo() is not null.
  std::unique_ptr<Communicator> connect_node(int rank, Device& device, Communicator& global);
  // Replica `rank` is done with connect() (and connect_node()) or will not call them (its
  // thread failed).
  void finished(int rank);
  // Makes every connect and every wait of the device collectives, now or later, throw Error
  // with `why`.
  void abort(const std::string& why);

 private:
  // The kind's collectives when it has device collectives; null when Gloo carries all.
  const CollectiveBackend* device_;
  int size_;
  int first_;
  int local_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<GlooGroup> gloo_;
  NodeGroup node_;
  std::unique_ptr<GlooGroup> node_gloo_;
  std::shared_ptr<SharedMemoryWorld> shared_memory_;  // CPU replicas of one process; or null
  std::vector<char> nccl_id_;
  std::mutex mutex_;
  std::condition_variable group_ready_;
  std::unique_ptr<DeviceCollectiveGroup> group_;  // guarded by mutex_ until made
  std::string aborted_;                           // guarded by mutex_
};

}  // namespace scalescope
