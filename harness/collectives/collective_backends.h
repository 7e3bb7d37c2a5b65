// The collectives of each device kind, found at run time (core/backend.h explains the
// registration tables). Every kind's replicas get a Gloo group: Gloo carries all of a CPU
// run's collectives, and the host values (barrier, all_gather) of every run. A kind whose
// device memory Gloo cannot reach adds device collectives (CUDA: NCCL), made through its
// DeviceCollectiveGroup, to which each replica's Gloo communicator is handed for the host
// values.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/device.h"
#include "harness/collectives/communicator.h"

namespace scalescope {

// The device-collective rendezvous of the replica threads of one process, one device per
// thread (NCCL's NcclGroup). Across processes the group shares an id that the process of
// global rank 0 creates (see ShareGroupId).
class DeviceCollectiveGroup {
 public:
  virtual ~DeviceCollectiveGroup() = default;
  // The communicator of local rank `rank`, which is global rank `global_rank` of
  // `world_size`, on device `device_index` (made current on the calling thread, and left
  // current). `host_comm`: that rank's Gloo communicator of the same world, which carries
  // barrier() and all_gather(). Call once per local rank, each from its own thread,
  // concurrently: it returns when every rank of the world has joined. Throws Error naming the
  // rank on failure, after the group's timeout, or when the group was aborted.
  virtual std::unique_ptr<Communicator> connect(int rank, int device_index, int global_rank,
                                                int world_size,
                                                std::unique_ptr<Communicator> host_comm) = 0;
  // The communicator of the ranks of `global` (from connect()) that pass the same `color`,
  // ranked by `key`; `host_comm` carries its host values, with its rank and size. Collective
  // over global's ranks, each from its own thread. REQUIRES: the device of `global` current.
  virtual std::unique_ptr<Communicator> split(Communicator& global, int color, int key,
                                              std::unique_ptr<Communicator> host_comm) = 0;
  // Makes every wait of this group and its communicators, now or later, throw Error with
  // `why`. Thread-safe.
  virtual void abort(const std::string& why) = 0;
};

// The bootstrap of a group over several processes. Called exactly once, while the group is
// created, on the creating thread: with the bytes of a fresh id in the process of global rank
// 0, with an empty vector in every other process. It returns, in every process, the bytes
// that the process of global rank 0 passed in (a broadcast from that process). It may
// throw (a lost peer): creating the group then fails with that exception.
using ShareGroupId = std::function<std::vector<char>(std::vector<char> mine)>;

// The collectives of one device kind.
class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual DeviceKind kind() const = 0;
  // The libraries the kind's collectives run on (Gloo for all; CUDA adds NCCL). Never throws.
  virtual std::vector<LibraryVersion> library_versions() const = 0;
  // The library of the kind's device collectives, which create_group() makes ("NCCL"); null
  // when Gloo carries everything.
  virtual const char* device_collectives() const = 0;
  // The device collectives of `size` replica threads of this process. Without `share_id` the
  // group is the whole run (first_global_rank 0) and needs no id from elsewhere; with it,
  // this process hosts global ranks [first_global_rank, first_global_rank + size). `timeout`
  // bounds the creation of the communicators and every later wait. Throws Error on bad
  // arguments, for a shared id of the wrong size, or when no id can be created.
  // REQUIRES: device_collectives() is not null.
  virtual std::unique_ptr<DeviceCollectiveGroup> create_group(int size,
                                                              std::chrono::milliseconds timeout,
                                                              ShareGroupId share_id = {},
                                                              int first_global_rank = 0) const = 0;
};

// The collective backends built into this binary, CPU first.
const std::vector<CollectiveBackend*>& collective_backends();
// The collectives of `kind`; throws Error with missing_backend_message(kind) when this build
// lacks it.
CollectiveBackend& collective_backend(DeviceKind kind);

// Gloo's version: the header's, with the installed package's when known.
LibraryVersion gloo_version();

}  // namespace scalescope
