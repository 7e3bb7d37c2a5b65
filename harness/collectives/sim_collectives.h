// The collectives of simulated devices, enqueued like NCCL's: each all-reduce or broadcast
// is work on the stream it is given, run by that stream's worker when its turn comes; the
// reduction itself is shared memory between the replica threads of this process, summed in
// rank order (so every rank ends with the same bits). Host values (barrier, all_gather) go
// through the replicas' Gloo communicators. As with NCCL, every host wait gives up at the
// collective timeout, and an abort makes every waiting collective fail at once.
#pragma once

#include <memory>

#include "harness/collectives/collective_backends.h"

namespace scalescope {

// The library named by errors of these collectives: a peer that left or an abort.
inline constexpr const char* kSimCollectivesLibrary = "sim collectives";

std::unique_ptr<CollectiveBackend> make_sim_collective_backend();

}  // namespace scalescope
