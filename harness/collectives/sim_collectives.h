// The collectives of simulated devices, enqueued like NCCL's: each all-reduce or broadcast
// is work on the stream it is given, run by that stream's worker when its turn comes; the
// reduction itself is shared memory between the replica threads of this process, summed in
// rank order (so every rank ends with the same bits). Host values (barrier, all_gather) go
// through the replicas' Gloo communicators. As with NCCL, a queued collective whose peer is
// gone waits on its stream until its own communicator is aborted (SharedMemoryWaits::kDevice),
// so that a device synchronized before that (freeing pinned memory, a library's handle) waits
// too; every host wait (synchronize) gives up at the collective timeout or the group's abort,
// and then aborts its communicator. (The queued waits also give up at the timeout, which a
// GPU's do not: a missing abort costs a test the timeout instead of hanging it.)
#pragma once

#include <memory>

#include "harness/collectives/collective_backends.h"

namespace scalescope {

// The library named by errors of these collectives: a peer that left or an abort.
inline constexpr const char* kSimCollectivesLibrary = "sim collectives";

std::unique_ptr<CollectiveBackend> make_sim_collective_backend();

}  // namespace scalescope
